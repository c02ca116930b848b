"""Host limits against job limits (core/contention.py): where the host's CPU went while a sub-experiment
measured, and a FAIL of instances the host starved of their quota made INVALID -- on scripted series."""

import os
import time

import numpy as np
import pytest

from pytest_theodolite.cli.analyse import reanalyse
from pytest_theodolite.core.contention import (
    INSTANCE_QUOTA,
    SERIES_BROKER_CPU,
    SERIES_DRIVER_CPU,
    SERIES_GENERATOR_CPU,
    SERIES_HOST_BUSY,
    SERIES_LIMITED_INSTANCE_CPU,
    SERIES_QUOTA_PERIODS,
    SERIES_THROTTLED_PERIODS,
    HostUsage,
    SlowSampling,
    check_instance_quota,
    host_usage,
    instance_series,
)
from pytest_theodolite.core.estimators import SlopeThreshold, TimeSeries
from pytest_theodolite.core.evaluation import SloSettings, combine_verdicts, evaluate_repetition
from pytest_theodolite.core.outcomes import Outcome, StepStatus
from pytest_theodolite.core.records import SERIES_LAG, RepetitionRecord, SubExperimentRecord
from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.core.slo import SloVerdict
from pytest_theodolite.infra import procfs
from pytest_theodolite.judge.demand_points import demand_point
from pytest_theodolite.report.progress import progress_line
from pytest_theodolite.store.results import ResultsWriter, read_results

T0 = 1_700_000_000.0


def cumulative(per_s: float, t: np.ndarray, start: float = 100.0) -> TimeSeries:
    return TimeSeries.of(t, start + per_s * (t - t[0]))


def window_series(*, busy: float, instances: float, t: np.ndarray) -> dict[str, TimeSeries]:
    """A 2-core host `busy` cores busy; the instances take `instances` cores, broker 0.4, generator 0.3,
    driver 0.2; 1 000 quota periods a second over the groups, 900 of them throttled."""
    return {
        SERIES_HOST_BUSY: cumulative(busy, t),
        SERIES_LIMITED_INSTANCE_CPU: cumulative(instances, t, start=5.0),
        SERIES_BROKER_CPU: cumulative(0.4, t),
        SERIES_GENERATOR_CPU: cumulative(0.3, t),
        SERIES_DRIVER_CPU: cumulative(0.2, t),
        SERIES_QUOTA_PERIODS: cumulative(1000.0, t),
        SERIES_THROTTLED_PERIODS: cumulative(900.0, t),
    }


def usage_of(series: dict[str, TimeSeries], quota: float | None = 1.0, start_s: float | None = None):
    return host_usage(
        series,
        instance_cpu=series[SERIES_LIMITED_INSTANCE_CPU],
        host_cores=2,
        quota_cores=quota,
        start_s=start_s,
    )


def test_usage_is_each_role_s_cpu_over_the_window():
    t = T0 + np.arange(0.0, 40.0)
    usage = usage_of(window_series(busy=1.6, instances=0.5, t=t))
    assert usage is not None
    assert usage.window_s == pytest.approx(39.0)
    assert usage.host_busy_cores == pytest.approx(1.6) and usage.host_busy_share == pytest.approx(0.8)
    assert usage.instance_cores == pytest.approx(0.5) and usage.quota_share == pytest.approx(0.5)
    assert usage.roles == pytest.approx({"broker": 0.4, "generator": 0.3, "driver": 0.2})
    assert usage.other_cores == pytest.approx(0.2)  # 1.6 busy - 0.5 - 0.9
    assert usage.throttled_share == pytest.approx(0.9)
    text = usage.describe()
    assert "host 80% busy of 2 cores" in text and "0.50 of their 1.00-core quota (50%" in text
    assert "broker 0.40" in text and "others 0.20" in text
    again = HostUsage.from_dict(usage.to_dict())
    assert again.to_dict() == usage.to_dict() and again.describe() == text


def test_usage_counts_only_the_window_from_its_start():
    t = T0 + np.arange(0.0, 40.0)
    series = window_series(busy=1.0, instances=0.2, t=t)
    # the host was idle for the first 20 s and fully busy after
    series[SERIES_HOST_BUSY] = TimeSeries.of(t, np.where(t - T0 < 20, 0.0, 2.0 * (t - T0 - 20)))
    usage = usage_of(series, start_s=T0 + 20)
    assert usage is not None and usage.host_busy_share == pytest.approx(1.0)
    assert usage_of({SERIES_HOST_BUSY: TimeSeries.of([T0], [1.0]), SERIES_LIMITED_INSTANCE_CPU: None}) is None


def test_a_fail_of_starved_instances_on_a_saturated_host_is_invalid_not_a_fail():
    t = T0 + np.arange(0.0, 40.0)
    starved = usage_of(window_series(busy=1.98, instances=0.6, t=t))  # 60 % of a 1-core quota
    verdict = check_instance_quota(starved, Outcome.FAIL)
    assert verdict is not None and verdict.name == INSTANCE_QUOTA
    assert verdict.outcome is Outcome.INVALID and verdict.value == pytest.approx(0.6)
    assert "host-limited" in verdict.detail and "99% busy" in verdict.detail
    # the same host, but the job kept up: a pass with less than its quota is still a pass
    kept_up = check_instance_quota(starved, Outcome.PASS)
    assert kept_up is not None and kept_up.outcome is Outcome.PASS and "kept up" in kept_up.detail


def test_a_fail_with_idle_host_cpu_or_the_full_quota_is_the_job_s_own():
    t = T0 + np.arange(0.0, 40.0)
    idle_host = check_instance_quota(usage_of(window_series(busy=1.5, instances=0.6, t=t)), Outcome.FAIL)
    assert idle_host is not None and idle_host.outcome is Outcome.PASS and "idle CPU" in idle_host.detail
    full_quota = check_instance_quota(usage_of(window_series(busy=2.0, instances=0.97, t=t)), Outcome.FAIL)
    assert (
        full_quota is not None
        and full_quota.outcome is Outcome.PASS
        and "got their quota" in full_quota.detail
    )


def three_quarter_core_instances(series: dict[str, TimeSeries]):
    """Three instances of a quarter core each on the 2-core host."""
    return host_usage(
        series,
        instance_cpu=series[SERIES_LIMITED_INSTANCE_CPU],
        host_cores=2,
        quota_cores=0.75,
        instance_quota_cores=0.25,
    )


def test_a_fail_whose_busiest_instance_was_held_at_its_quota_is_the_job_s_own():
    """Four partitions over three instances: one reads two and is held at its quota while the others wait --
    together they used 74 % of their quota (UC1 at 20 000 on three, a quiet host), yet the job was limited by
    its busiest instance's quota, not by the host."""
    t = T0 + np.arange(0.0, 40.0)
    series = window_series(busy=2.0, instances=0.555, t=t)
    for index, cores in enumerate((0.245, 0.155, 0.155)):
        series[instance_series(index)] = cumulative(cores, t, start=1.0)
    usage = three_quarter_core_instances(series)
    assert usage is not None and usage.quota_share == pytest.approx(0.74)
    assert usage.busiest_instance_cores == pytest.approx(0.245) and usage.busiest_share == pytest.approx(0.98)
    assert "the busiest 98% of its 0.25" in usage.describe()
    verdict = check_instance_quota(usage, Outcome.FAIL)
    assert verdict is not None and verdict.outcome is Outcome.PASS and verdict.value == pytest.approx(0.98)
    # the same instances each starved below their quota: the host's doing
    for index in range(3):
        series[instance_series(index)] = cumulative(0.185, t, start=1.0)
    starved = three_quarter_core_instances(series)
    assert starved is not None
    verdict = check_instance_quota(starved, Outcome.FAIL)
    assert verdict is not None and verdict.outcome is Outcome.INVALID and verdict.value == pytest.approx(0.74)
    assert HostUsage.from_dict(starved.to_dict()).busiest_share == pytest.approx(0.74)


def test_instances_without_a_quota_are_reported_never_judged():
    t = T0 + np.arange(0.0, 40.0)
    usage = usage_of(window_series(busy=2.0, instances=0.3, t=t), quota=None)
    assert usage is not None and usage.quota_share is None and "no quota" in usage.describe()
    assert check_instance_quota(usage, Outcome.FAIL) is None


def growing_lag(t: np.ndarray) -> TimeSeries:
    return TimeSeries.of(t, 1000.0 + 500.0 * (t - t[0]))


def test_a_starved_fail_leaves_its_load_unmeasured_with_the_reason():
    t = T0 + np.arange(0.0, 60.0)
    settings = SloSettings(warmup_s=10, lag_trend_threshold=SlopeThreshold(relative_to_load=0.05))
    usage = usage_of(window_series(busy=2.0, instances=0.5, t=t))
    verdicts = evaluate_repetition(settings, lag=growing_lag(t), target_rate=1000.0, host_usage=usage)
    assert combine_verdicts(verdicts) is Outcome.INVALID
    assert next(v for v in verdicts if v.name == "lag-trend").outcome is Outcome.FAIL  # what was measured
    record = SubExperimentRecord.from_repetitions(1000, 1, 1000.0, [RepetitionRecord(0, verdicts)])
    from pytest_theodolite.core.search import Step

    point = demand_point(Step(1000, None, StepStatus.UNMEASURED, (1,)), (record,), None)
    assert point.status == StepStatus.UNMEASURED and "invalid at 1 instances: host-limited" in point.reason
    # without the host's series nothing changes: the lag trend alone decides
    assert (
        combine_verdicts(evaluate_repetition(settings, lag=growing_lag(t), target_rate=1000.0))
        is Outcome.FAIL
    )


def test_analyse_judges_the_host_again_from_the_raw_series(tmp_path):
    settings = SloSettings(warmup_s=10, lag_trend_threshold=SlopeThreshold(relative_to_load=0.05))
    writer = ResultsWriter(
        tmp_path, "h", metric=Metric.DEMAND, slo_settings=settings, loads=[1000], resources=[1]
    )
    t = T0 + np.arange(0.0, 60.0)
    measured = t[t - T0 >= 10]
    series = window_series(busy=2.0, instances=0.15, t=measured)
    usage = usage_of(series, quota=0.25)
    lag = growing_lag(t)
    writer.write_series(1000, 1, SERIES_LAG, 0, lag)
    for name, values in series.items():
        writer.write_series(1000, 1, name, 0, values)
    verdicts = evaluate_repetition(settings, lag=lag, target_rate=1000.0, host_usage=usage)
    assert usage is not None
    repetition = RepetitionRecord(0, verdicts, protocol={"warmup_s": 10.0, "host": usage.to_dict()})
    writer.record_sub_experiment(SubExperimentRecord.from_repetitions(1000, 1, 1000.0, [repetition]))
    results = read_results(tmp_path)
    [again] = reanalyse(results, results.slo_settings).sub_experiments
    quota = next(v for v in again.verdicts if v.name == INSTANCE_QUOTA)
    assert again.outcome is Outcome.INVALID and quota.value == pytest.approx(0.6)
    # the progress line says where the CPU went
    line = progress_line(again, {})
    assert "host 100% busy of 2 cores" in line and "generator 0.30" in line


def test_a_sampler_that_could_not_keep_its_pace_says_so_and_one_that_did_says_nothing():
    steady = [1000.0 + i * 1.02 for i in range(30)]
    assert SlowSampling.of(steady, 1.0) is None
    assert SlowSampling.of(steady[:2], 1.0) is None  # too few samples to tell
    # a host (or a link to a remote cluster) that takes 2-3 s per sample, with one stall of 9 s
    slow = [0.0, *np.cumsum([2.0, 2.5, 3.0, 2.2, 9.0, 2.4, 2.6])]
    note = SlowSampling.of(slow, 1.0)
    assert note is not None and note.median_gap_s == 2.5 and note.max_gap_s == 9.0
    assert SlowSampling.from_dict(note.to_dict()) == note
    verdict = SloVerdict("lag-trend", Outcome.PASS, 1.0, 100.0, "")
    repetition = RepetitionRecord(0, (verdict,), protocol={"sampling": note.to_dict()})
    line = progress_line(SubExperimentRecord.from_repetitions(1000, 1, 1000.0, [repetition]), {})
    assert line.endswith(
        "[lag sampled every 2.5 s (longest gap 9 s), not every 1 s: this host, or its link to the cluster, is slow]"
    ), line


def test_procfs_reads_the_host_and_this_process():
    if not os.path.exists("/proc/stat"):
        pytest.skip("no /proc on this system")
    before_host, before_self = procfs.host_cpu_times(), procfs.cpu_seconds([os.getpid()])
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:  # spend CPU in this process
        pass
    after_host, after_self = procfs.host_cpu_times(), procfs.cpu_seconds([os.getpid()])
    assert before_host is not None and after_host is not None
    assert after_host.cores == before_host.cores >= 1
    assert after_host.busy_s - before_host.busy_s >= 0.2 and after_host.total_s > after_host.busy_s
    assert after_self - before_self >= 0.2
    assert procfs.cpu_seconds([2**22 + 12345]) == 0  # a pid that does not exist counts nothing
    assert os.getpid() in procfs.descendants([os.getppid()], procfs.parents())


def test_descendants_follow_the_tree_and_leave_out_excluded_subtrees():
    parent_of = {1: 0, 10: 1, 11: 10, 12: 10, 20: 1, 21: 20}
    assert procfs.descendants([10], parent_of) == {10, 11, 12}
    assert procfs.descendants([1], parent_of, exclude={20}) == {1, 10, 11, 12}
    assert procfs.descendants([20], parent_of, exclude={20}) == set()
