"""The capacity strategy's demand: derived from scripted capacities, with lag-trend runs only where they cannot
tell (engine/capacity_search.py), without a broker or Spark."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_theodolite.core.capacity import CapacityEstimate
from pytest_theodolite.core.evaluation import SloSettings
from pytest_theodolite.core.measurement_plan import MeasurementPlan
from pytest_theodolite.core.outcomes import CapacityStatus, Outcome, StepStatus
from pytest_theodolite.core.records import RepetitionRecord, SubExperimentRecord
from pytest_theodolite.core.search import Strategy, search_demand
from pytest_theodolite.core.slo import LAG_TREND, SloVerdict
from pytest_theodolite.engine.capacity_probe import CapacityMeasurement, ProbePlan
from pytest_theodolite.engine.capacity_search import (
    PER_BATCH_GROWTH,
    PER_BATCH_RETRIES,
    UNSATURATED_RATE_FACTOR,
    UNSATURATED_RETRIES,
    CapacityPlan,
    CapacitySearch,
    measure_saturated,
    offered_workload,
)
from pytest_theodolite.engine.markers import parse_threshold
from pytest_theodolite.report.notes import capacity_note
from theodolite_generator import Workload


def fake_runner(resources=(1, 2, 3, 4), loads=(4000, 12000, 20000), max_duration_s=120.0):
    settings = SimpleNamespace(
        loads=loads,
        resources=resources,
        slo=SloSettings(lag_trend_threshold=parse_threshold("5%")),
        measurement_plan=MeasurementPlan(max_duration_s=max_duration_s),
    )
    benchmark = SimpleNamespace(workload=lambda keys: Workload(keys=keys))
    return SimpleNamespace(settings=settings, benchmark=benchmark)


def measured(r: int, mu: float, half: float = 300.0, *, saturated: bool = True) -> CapacityMeasurement:
    estimate = CapacityEstimate(r, mu, mu - half, mu + half, 8, 20.0, saturated, 20_000)
    return CapacityMeasurement(
        r, 25_000, 25_000.0, 20_000, estimate, CapacityStatus.CERTAIN, timings={"measure_s": 30.0}
    )


def search_with(*capacities: CapacityMeasurement) -> CapacitySearch:
    search = CapacitySearch(fake_runner())  # type: ignore[arg-type]
    search.measurements = {m.instances: m for m in capacities}
    return search


class Runs:
    """The lag-trend sub-experiments a search asked for, with scripted outcomes by instance count."""

    def __init__(self, outcomes: dict[int, Outcome]) -> None:
        self.outcomes, self.asked = outcomes, []

    def __call__(self, load: int, resources: int) -> SubExperimentRecord:
        self.asked.append((load, resources))
        outcome = self.outcomes[resources]
        verdict = SloVerdict(LAG_TREND, outcome, 0.0, 100.0, "scripted")
        return SubExperimentRecord.from_repetitions(load, resources, load, [RepetitionRecord(0, (verdict,))])


CAPACITIES = (measured(1, 7_000), measured(2, 13_000, 600), measured(3, 12_500, 600), measured(4, 21_000))


def test_a_load_far_from_every_capacity_runs_nothing():
    runs = Runs({})
    step, ran = search_with(*CAPACITIES).demand(4000, runs)
    assert (step.optimum, step.status, ran, runs.asked) == (1, StepStatus.MEASURED, (), [])


def test_a_load_within_the_guard_band_is_certified_by_the_lag_trend():
    # 12 000: its bar, 11 400, lies within the band of two instances (12 400 - 13 600, widened by 10 %)
    runs = Runs({2: Outcome.PASS})
    step, ran = search_with(*CAPACITIES).demand(12000, runs)
    assert runs.asked == [(12000, 2)]
    assert (step.optimum, step.status) == (2, StepStatus.MEASURED)
    assert [r.resources for r in ran] == [2]
    # a FAIL moves the demand on: three instances are within the band too, four pass outside it
    runs = Runs({2: Outcome.FAIL, 3: Outcome.FAIL})
    step, _ = search_with(*CAPACITIES).demand(12000, runs)
    assert runs.asked == [(12000, 2), (12000, 3)]
    assert step.optimum == 4


def test_a_demand_above_the_baselines_rests_on_a_lag_trend_fail_at_the_baselines_demand():
    # 9 000: its bar 8 550 lies above one instance's band (7 300 + 10 %), two predicted; the baseline said 1
    assert search_with(*CAPACITIES).demand(9000, Runs({}))[0].optimum == 2
    runs = Runs({1: Outcome.PASS})
    step, _ = search_with(*CAPACITIES).demand(9000, runs, baseline_demand=1)
    assert runs.asked == [(9000, 1)]
    assert step.optimum == 1  # the lag trend, not the prediction, decides a regression
    runs = Runs({1: Outcome.FAIL})
    step, _ = search_with(*CAPACITIES).demand(9000, runs, baseline_demand=1)
    assert (step.optimum, runs.asked) == (2, [(9000, 1)])


def test_a_load_no_instance_count_takes_is_none_and_a_broken_run_unmeasured():
    step, _ = search_with(*CAPACITIES).demand(40000, Runs({}))
    assert (step.optimum, step.status) == (None, StepStatus.NONE)
    step, ran = search_with(*CAPACITIES).demand(12000, Runs({2: Outcome.ERRORED}))
    assert (step.optimum, step.status, len(ran)) == (None, StepStatus.UNMEASURED, 1)


def test_instance_counts_above_a_broken_probe_are_searched_by_the_lag_trend():
    broken = CapacityMeasurement(
        3, 25_000, 25_000.0, 20_000, None, CapacityStatus.ERRORED, "the query stopped"
    )
    search = search_with(measured(1, 7_000), measured(2, 13_000), broken)
    runs = Runs({3: Outcome.FAIL, 4: Outcome.PASS})
    step, _ = search.demand(20000, runs)
    assert runs.asked == [(20000, 3), (20000, 4)]
    assert step.optimum == 4


def test_an_instance_count_without_a_capacity_below_the_derived_demand_is_run_first():
    # one instance gave no estimate (its measurement was bounded first): two are predicted at 2 000, but the
    # lag trend decides whether one takes it
    uncertain = CapacityMeasurement(
        1, 20_000, 25_000.0, 20_000, None, CapacityStatus.UNCERTAIN, "not certain after 60 s"
    )
    search = search_with(uncertain, measured(2, 13_000), measured(3, 16_000))
    runs = Runs({1: Outcome.PASS})
    step, _ = search.demand(2000, runs)
    assert (step.optimum, runs.asked) == (1, [(2000, 1)])
    runs = Runs({1: Outcome.FAIL})
    step, _ = search.demand(2000, runs)
    assert (step.optimum, runs.asked) == (2, [(2000, 1)])


def test_the_offered_workload_sends_the_highest_loads_keys_more_often():
    offered = offered_workload(lambda keys: Workload(keys=keys), 20000, 1.25)
    assert offered.keys == 20000 and offered.target_rate == pytest.approx(25_000)
    hierarchy = offered_workload(lambda n: Workload.for_hierarchy(children=n, depth=3), 26, 1.25)
    assert hierarchy.keys == 26**3 and hierarchy.target_rate == pytest.approx(1.25 * 26**3)


def test_the_report_line_names_each_capacity_and_the_seconds():
    note = capacity_note({m.instances: m for m in CAPACITIES[:2]})
    assert note.startswith("capacity per instance count, measured directly (60 s): 1: 7,000 [6,700, 7,300]")
    assert "task CPU" not in note  # none was read


def test_the_task_cpu_per_record_is_reported_beside_the_capacity_and_kept_in_the_results():
    from dataclasses import replace

    from pytest_theodolite.core.task_cpu import TaskCpuPerRecord

    task_cpu = TaskCpuPerRecord(44.85, 41.92, 46.85, 9)
    measurement = replace(CAPACITIES[0], task_cpu=task_cpu)
    note = capacity_note({1: measurement, 2: CAPACITIES[1]})
    assert "1: 7,000 [6,700, 7,300]" in note
    assert f"certain, {task_cpu.text()}" in measurement.progress_text()
    assert note.count("task CPU 44.85 us/record") == 1  # the second count has no figure
    assert TaskCpuPerRecord.from_dict(measurement.to_dict()["task_cpu"]) == task_cpu
    assert CAPACITIES[1].to_dict()["task_cpu"] is None


def test_a_plain_search_refuses_the_capacity_strategy_with_what_to_use():
    with pytest.raises(ValueError, match="runs in a gate against a running job"):
        search_demand(lambda load, r: Outcome.PASS, [1], [1], Strategy.CAPACITY)


class ScriptedSide:
    """One side of pull-request mode with scripted capacities (by instance count) and lag-trend outcomes."""

    def __init__(
        self, name: str, log: list, capacities: dict[int, float], outcomes: dict[int, Outcome]
    ) -> None:
        self.name, self.log, self.capacities, self.runs = name, log, capacities, Runs(outcomes)
        self.offered: list[tuple[float, int, int]] = []

    def measure_capacity(self, load, resources, workload, plan, *, attempt=0):
        self.log.append((self.name, resources))
        self.offered.append((workload.target_rate, plan.batch_records, attempt))
        mu = self.capacities[resources]
        if workload.target_rate < mu:  # it takes all it is offered: a lower bound
            return measured(resources, workload.target_rate, saturated=False)
        return measured(resources, mu, mu * 0.03)

    def run(self, load, resources, workload, *, confirm=False, share=1.0):
        self.log.append((self.name, "run", load, resources))
        return self.runs(load, resources), {}

    def close(self):
        pass


def paired(ref_capacities, change_capacities, outcomes=None, loads=(4000, 12000, 20000)):
    from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
    from pytest_theodolite.pull_request.experiment import PairedExperiment
    from pytest_theodolite.pull_request.target import CompareTarget

    log: list = []
    settings = ExperimentSettings(
        loads=loads,
        resources=(1, 2, 3, 4),
        slo=SloSettings(lag_trend_threshold=parse_threshold("5%")),
        strategy=Strategy.CAPACITY,
        instance_cpu=0.25,
    )
    benchmark = Benchmark("scripted", lambda *a, **k: None, lambda keys: Workload(keys=keys))
    sides = {
        "ref": ScriptedSide("ref", log, ref_capacities, dict(outcomes or {})),
        "change": ScriptedSide("change", log, change_capacities, dict(outcomes or {})),
    }
    target = CompareTarget("main", "0123456789", Path("."), Path("."))
    return PairedExperiment(benchmark, settings, target, sides), log


def test_pull_request_mode_measures_both_sides_capacities_in_abba_order():
    capacities = {1: 7_000, 2: 15_000, 3: 16_000, 4: 24_000}
    experiment, log = paired(capacities, capacities)
    point = experiment.measure(4000)
    # REF first at the 1st and 3rd instance count, the change first at the 2nd and 4th; four instances take
    # the highest load, 20 000, outside the guard band on both sides: nothing above them is measured
    assert log == [
        ("ref", 1),
        ("change", 1),
        ("change", 2),
        ("ref", 2),
        ("ref", 3),
        ("change", 3),
        ("change", 4),
        ("ref", 4),
    ]
    assert point.demand("ref") == point.demand("change") == 1
    comparison = point.comparison("scripted", 0, cost_tolerance=0.10)
    assert comparison.verdict.value == "pass"


def test_pull_request_mode_fails_a_change_whose_records_cost_15_percent_more():
    ref = {1: 7_000, 2: 15_000, 3: 16_000, 4: 24_000}
    change = {r: mu / 1.15 for r, mu in ref.items()}
    experiment, _ = paired(ref, change)
    point = experiment.measure(4000)
    assert point.demand("ref") == point.demand("change") == 1
    comparison = point.comparison("scripted", 0, cost_tolerance=0.10)
    assert comparison.verdict.value == "cost-regression"
    assert point.cost_figure().relative == pytest.approx(0.15, abs=0.005)


def test_cost_figures_of_another_strategy_are_not_compared():
    from pytest_theodolite.core.cost import CostEstimate, PointCost
    from pytest_theodolite.engine.capacity_search import same_cost_figure
    from pytest_theodolite.store.baseline import Baseline
    from pytest_theodolite.store.testbed import Testbed

    testbed = Testbed(2, 24.0, 0.25, "embedded", "standalone", "4.0.0", "3.11")
    cost = {4000: PointCost(1, CostEstimate(50.0, 48.0, 52.0, 5))}
    searched = Baseline("b", {4000: 1}, {"strategy": "baseline-guess+lower-bound"}, testbed, cost=cost)
    at_capacity = Baseline("b", {4000: 1}, {"strategy": "capacity"}, testbed, cost=cost)
    assert same_cost_figure(searched, Strategy.CAPACITY).cost == {}
    assert same_cost_figure(searched, Strategy.BASELINE_GUESS) is searched
    assert same_cost_figure(at_capacity, Strategy.CAPACITY) is at_capacity
    assert same_cost_figure(at_capacity, Strategy.LINEAR).cost == {}
    assert same_cost_figure(None, Strategy.CAPACITY) is None


def test_a_regression_derived_in_pull_request_mode_is_confirmed_in_the_reverse_order():
    # REF takes 12 000 on two instances (certified: within the band); the change's capacities predict four,
    # so it runs two under the lag trend (REF's demand): a FAIL, then both are measured once more
    ref = {1: 7_000, 2: 12_400, 3: 13_000, 4: 21_000}
    change = {1: 5_000, 2: 8_000, 3: 8_500, 4: 17_000}
    experiment, log = paired(
        ref, change, {1: Outcome.FAIL, 2: Outcome.PASS, 3: Outcome.FAIL, 4: Outcome.PASS}
    )
    experiment.sides["change"].runs.outcomes[2] = Outcome.FAIL
    point = experiment.measure(12000, tolerance=0)
    runs = [entry for entry in log if entry[1] == "run"]
    assert runs[:2] == [("ref", "run", 12000, 2), ("change", "run", 12000, 2)]
    assert runs[2:] == [("change", "run", 12000, 2), ("ref", "run", 12000, 2)]  # the confirmation, reversed
    assert (point.demand("ref"), point.demand("change")) == (2, 4)
    assert point.comparison("scripted", 0, cost_tolerance=0.10).verdict.value == "regression"


def test_capacities_are_measured_upwards_past_one_without_an_estimate_and_stop_where_one_breaks(monkeypatch):
    import pytest_theodolite.engine.capacity_search as capacity_search

    outcomes = {
        1: CapacityMeasurement(
            1, 20000, 25_000.0, 40_000, None, CapacityStatus.UNCERTAIN, "not certain after 60 s"
        ),
        2: measured(2, 13_000),
        3: CapacityMeasurement(3, 20000, 25_000.0, 40_000, None, CapacityStatus.ERRORED, "the query stopped"),
    }
    asked = []

    def scripted_measurement(runner, r, load, plan, *, workload, attempt):
        asked.append(r)
        return outcomes[r]

    monkeypatch.setattr(capacity_search, "measure_capacity", scripted_measurement)
    runner = fake_runner()
    runner.writer = SimpleNamespace(record_capacity_measurement=lambda entry: None)
    search = CapacitySearch(runner)  # type: ignore[arg-type]
    search.measure_capacities()
    assert asked == [1, 2, 3]  # on past the uncertain one; not past the broken one
    assert set(search.capacities) == {2}


@pytest.mark.parametrize(("max_duration_s", "phase_bound_s"), [(120.0, 60.0), (20.0, 20.0)])
def test_a_capacity_phase_measures_no_longer_than_the_gates_max_duration(
    monkeypatch, max_duration_s, phase_bound_s
):
    import pytest_theodolite.engine.capacity_search as capacity_search

    bounds = []

    def scripted_measurement(runner, r, load, plan, *, workload, attempt):
        bounds.append(plan.max_measure_s)
        return measured(r, 30_000)

    monkeypatch.setattr(capacity_search, "measure_capacity", scripted_measurement)
    runner = fake_runner(resources=(1,), max_duration_s=max_duration_s)
    runner.writer = SimpleNamespace(record_capacity_measurement=lambda entry: None)
    CapacitySearch(runner).measure_capacities()  # type: ignore[arg-type]
    assert bounds == [phase_bound_s]


def test_instances_that_took_all_they_were_offered_are_measured_again_at_a_higher_rate():
    # loads far below the capacity (a user's guess): the first measurement is a lower bound without a CPU per
    # record at capacity, so the instances are offered three times what they took, in batches to match
    offered, asked = Workload(keys=5000, period_ms=800), []

    def measure(workload, plan, attempt):
        asked.append((workload.target_rate, plan.batch_records, attempt))
        if workload.target_rate < 9_000:
            return measured(1, workload.target_rate, saturated=False)
        return measured(1, 9_000)

    plan = CapacityPlan()
    measurements, workload, used = measure_saturated(measure, offered, ProbePlan(10_000), plan)
    assert [m.estimate.saturated for m in measurements] == [False, True]
    assert asked[0] == (6_250, 10_000, 0)
    rate, batch, attempt = asked[1]
    assert rate == pytest.approx(UNSATURATED_RATE_FACTOR * 6_250, rel=0.01) and attempt == 1
    assert workload.keys == 5000 and workload.target_rate == rate
    assert batch == used.batch_records == round(rate / plan.probe_factor * plan.batch_s)
    # never saturated: measured UNSATURATED_RETRIES times more, each at three times the rate, then left a bound
    asked.clear()
    measurements, _, _ = measure_saturated(
        lambda w, p, a: measured(1, w.target_rate, saturated=False), offered, ProbePlan(10_000), plan
    )
    assert len(measurements) == 1 + UNSATURATED_RETRIES
    assert measurements[-1].estimate.records_per_s == pytest.approx(6_250 * 9, rel=0.02)
    # saturated at once: measured once, certain or not
    measurements, workload, used = measure_saturated(
        lambda w, p, a: measured(1, 5_000, 1_000), offered, ProbePlan(10_000), plan
    )
    assert len(measurements) == 1 and workload is offered and used.batch_records == 10_000


def per_batch_bound(cap: int, c0: float = 2.0, mu: float = 25_000.0) -> CapacityMeasurement:
    """A job whose micro-batch of n records takes c0 + n / mu seconds (the click-stream example on a quarter
    core: about 2 s and 25 000 records/s), measured at cap `cap` and a quarter of it."""

    def phase(n: int) -> CapacityEstimate:
        cycle = c0 + n / mu
        return CapacityEstimate(1, n / cycle, n / cycle * 0.95, n / cycle * 1.05, 6, 6 * cycle, True, n)

    large = phase(cap)
    combined = CapacityEstimate(1, mu, mu * 0.7, mu * 1.3, 12, 20.0, True, cap, per_batch_s=c0)
    return CapacityMeasurement(
        1,
        5000,
        6_250.0,
        cap,
        combined,
        CapacityStatus.CERTAIN,
        phases={"large": large, "small": phase(cap // 4)},
    )


def test_batches_mostly_spent_on_the_per_batch_cost_are_grown_until_a_record_s_cost_shows():
    # 10 000-record batches take 2.4 s, 2 of them the per-batch cost: a dearer record moves them by a few
    # percent. The measurement is repeated in batches four times larger, offered what those can take
    offered, asked = Workload(keys=5000, period_ms=800), []

    def measure(workload, plan, attempt):
        asked.append((workload.target_rate, plan.batch_records, attempt))
        return per_batch_bound(plan.batch_records)

    plan = CapacityPlan()
    measurements, workload, used = measure_saturated(
        measure, offered, ProbePlan(10_000, max_measure_s=90), plan
    )
    # 40 000: 3.6 s, 56 % per-batch -> again; 160 000: 8.4 s, 24 % -> done
    assert [cap for _, cap, _ in asked] == [10_000, 10_000 * PER_BATCH_GROWTH, 10_000 * PER_BATCH_GROWTH**2]
    assert [attempt for _, _, attempt in asked] == [0, 1, 2] and len(asked) == 1 + PER_BATCH_RETRIES
    # offered: 4 x the 10 000-batches' 4 167 records/s, then the capacity without the per-batch cost, x 1.25
    assert [rate for rate, _, _ in asked] == pytest.approx([6_250, 20_833, 31_250], rel=0.01)
    assert used.batch_records == 160_000 and workload.target_rate == pytest.approx(31_250, rel=0.01)
    # a 60 s bound stretches for them (8 x 8.4 s = 67 s, core/capacity.phase_bound_s): grown as within 90 s
    asked.clear()
    measure_saturated(measure, offered, ProbePlan(10_000, max_measure_s=60), plan)
    assert [cap for _, cap, _ in asked][-1] == 160_000
    # within a 30 s bound, stretched to 60 s, 160 000-record batches leave no room for 2 settling + 5 counted
    # + 1: not grown
    asked.clear()
    measurements, _, used = measure_saturated(measure, offered, ProbePlan(10_000, max_measure_s=30), plan)
    assert [cap for _, cap, _ in asked] == [10_000, 40_000] and used.batch_records == 40_000
    # pull-request mode's second side is measured at the batches it is given, not grown again
    asked.clear()
    measurements, _, _ = measure_saturated(measure, offered, ProbePlan(10_000), plan, grow_batches=False)
    assert len(measurements) == 1 and asked == [(offered.target_rate, 10_000, 0)]


def test_batches_whose_per_batch_cost_is_small_or_unknown_are_not_grown():
    measurements, _, _ = measure_saturated(
        lambda w, p, a: per_batch_bound(p.batch_records, c0=0.25, mu=7_000),  # UC1 on a quarter core
        Workload(keys=20_000),
        ProbePlan(40_000),
        CapacityPlan(),
    )
    assert len(measurements) == 1
    measurements, _, _ = measure_saturated(
        lambda w, p, a: measured(1, 9_000), Workload(keys=20_000), ProbePlan(40_000), CapacityPlan()
    )
    assert len(measurements) == 1  # one batch size only: no per-batch cost to go by


def test_pull_request_mode_measures_a_capacity_far_above_the_loads_and_judges_the_cost_there():
    # a user's loads far below one instance's capacity: both sides are measured again at a higher rate, the
    # second side offered what the first ended with, and a 15 % dearer record fails by its cost
    ref = {1: 15_000, 2: 28_000, 3: 40_000, 4: 52_000}
    change = {r: mu / 1.15 for r, mu in ref.items()}
    experiment, log = paired(ref, change, loads=(2000, 5000))
    point = experiment.measure(2000)
    assert log == [("ref", 1), ("ref", 1), ("change", 1)]
    ref_offers, change_offers = experiment.sides["ref"].offered, experiment.sides["change"].offered
    assert [attempt for _, _, attempt in ref_offers] == [0, 1]
    assert change_offers == [(*ref_offers[-1][:2], 0)]
    assert point.demand("ref") == point.demand("change") == 1
    comparison = point.comparison("scripted", 0, cost_tolerance=0.10)
    assert comparison.verdict.value == "cost-regression"


def test_a_job_that_refuses_the_batch_cap_gets_no_capacity_and_is_told_how_to_take_it():
    from contextlib import contextmanager
    from urllib.parse import urlparse

    from pytest_theodolite.engine.capacity_probe import BATCH_CAP_OPTION, measure_capacity
    from pytest_theodolite.engine.job import RunAborted, RunningJob

    series: list[tuple[int, int, str, int]] = []
    event_logs: list[Path] = []

    @contextmanager
    def refusing_job(job, load, resources, workload, *, instance_cpu, query_options, spark_conf):
        assert query_options == {BATCH_CAP_OPTION: 10_000}
        # the probe's session keeps an event log (each batch's task CPU) in a directory of the measurement's
        assert spark_conf["spark.eventLog.enabled"] == "true"
        event_logs.append(Path(urlparse(spark_conf["spark.eventLog.dir"]).path))
        assert event_logs[-1].is_dir()
        job.teardown_started = 0.0
        raise RunAborted(
            Outcome.ERRORED, f"the job did not start: TypeError: unknown option(s) ['{BATCH_CAP_OPTION}']"
        )
        yield job  # never reached

    class Writer:
        def open_series(self, load, resources, name, attempt):
            series.append((load, resources, name, attempt))
            return SimpleNamespace(append=lambda *a: None, close=lambda: None)

    runner = fake_runner()
    runner.settings.measurement_plan = SimpleNamespace(prime_unlimited=False)
    runner.settings.instance_cpu = 0.25
    runner.spark = SimpleNamespace(can_limit_cpu=True)
    runner.jobs = SimpleNamespace(
        new_job=lambda: RunningJob("r1", {"input": "i", "output": "o"}), running_job=refusing_job
    )
    runner.writer = Writer()
    runner.settings.spark_conf = {}
    measurement = measure_capacity(runner, 1, 5000, ProbePlan(10_000), attempt=1)  # type: ignore[arg-type]
    assert (measurement.status, measurement.estimate, measurement.task_cpu) == ("errored", None, None)
    assert len(event_logs) == 1 and not event_logs[0].exists()  # removed with the measurement
    assert "unknown option(s)" in measurement.reason
    assert "pass it to the Kafka source as maxOffsetsPerTrigger" in measurement.reason
    assert {attempt for *_, attempt in series} == {
        1
    }  # a repeated measurement's series do not overwrite the first


def test_a_gate_that_keeps_its_own_event_log_is_not_given_another(tmp_path):
    from pytest_theodolite.engine.capacity_probe import event_log_conf

    settings = event_log_conf(tmp_path, {"spark.sql.shuffle.partitions": "8"})
    assert settings["spark.eventLog.enabled"] == "true"
    assert settings["spark.eventLog.dir"] == tmp_path.resolve().as_uri()
    assert settings["spark.eventLog.compress"] == "false"  # read line by line; Spark 4 compresses by default
    assert (
        event_log_conf(tmp_path, {"spark.eventLog.enabled": "True", "spark.eventLog.dir": "s3a://logs"}) == {}
    )


def test_batches_above_the_cap_mean_the_job_ignores_it():
    from pytest_theodolite.core.capacity import MicroBatch
    from pytest_theodolite.engine.capacity_probe import check_capped
    from pytest_theodolite.engine.job import RunAborted

    capped = [MicroBatch(i, 100.0 + i, 1.0, 10_000 + 3) for i in range(5)]
    check_capped(capped, 10_000, 100.0)  # a few records over: the cap split over the partitions
    # a batch of the priming, before the phase, is not this phase's to judge
    check_capped([MicroBatch(0, 50.0, 1.0, 40_000), *capped], 10_000, 100.0)
    with pytest.raises(RunAborted, match="read 25000 records, above the cap of 10000: the job ignores"):
        check_capped([*capped, MicroBatch(9, 110.0, 3.0, 25_000)], 10_000, 100.0)


def test_an_instance_count_without_a_capacity_below_one_that_fails_the_load_is_not_run():
    # UC3's gate: one instance gave no estimate; two and three were predicted to fail 16 000, four to pass it.
    # Fewer instances take no more: the lag-trend FAIL of one instance (195 s) said nothing new
    uncertain = CapacityMeasurement(
        1, 20_000, 25_000.0, 20_000, None, CapacityStatus.UNCERTAIN, "not certain after 60 s"
    )
    search = search_with(
        uncertain, measured(2, 5_277, 220), measured(3, 6_552, 280), measured(4, 18_548, 880)
    )
    runs = Runs({})
    step, ran = search.demand(16000, runs)
    assert (step.optimum, step.status, ran, runs.asked) == (4, StepStatus.MEASURED, (), [])
    # where the count above it passes, the lag trend still decides whether one instance does too
    runs = Runs({1: Outcome.FAIL})
    assert search.demand(2000, runs)[0].optimum == 2 and runs.asked == [(2000, 1)]
    # a lag-trend FAIL above it says so as well as a prediction: 6 000 lies within two and three instances' bands
    runs = Runs({2: Outcome.FAIL, 3: Outcome.PASS})
    step, _ = search.demand(6000, runs)
    assert (step.optimum, runs.asked) == (3, [(6000, 2), (6000, 3)])


class FakeClock:
    """time.monotonic and time.sleep for a measurement loop: sleeping moves the clock, nothing waits."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_phase_of_long_batches_measures_until_its_rule_s_batches_fit_then_stops_uncertain(monkeypatch):
    # 40 000-record batches of 9-14 s (median 11.5 s), too uneven ever to be certain: the phase may measure the
    # time of 8 of them (92 s) instead of 60 s, and stops then with the estimate it has
    from pytest_theodolite.core.capacity import CapacityRule, MicroBatch
    from pytest_theodolite.engine import capacity_probe

    clock, durations = FakeClock(), [9.0, 14.0, 11.5, 10.0, 13.0]
    script, t = [], 0.0
    for i in range(40):
        script.append(MicroBatch(i, t, durations[i % len(durations)], 40_000))
        t += durations[i % len(durations)]
    monkeypatch.setattr(capacity_probe, "time", clock)
    monkeypatch.setattr(capacity_probe, "check_running", lambda job, executors: None)
    monkeypatch.setattr(capacity_probe.monitor, "all_progress", lambda query: None)
    monkeypatch.setattr(
        capacity_probe,
        "batches_of",
        lambda progress, topic: {b.batch_id: b for b in script if b.end_s <= clock.now},
    )
    job = SimpleNamespace(query=None, topics={"input": "input"})
    batches: dict = {}
    estimate, certain, measured_s = capacity_probe._measure_phase(
        job, 1, frozenset(), batches, 40_000, CapacityRule(), 0.0, 60.0, 1.0
    )
    assert not certain and estimate is not None and estimate.batches >= 5
    assert measured_s == pytest.approx(8 * 11.5, abs=1.5)
    # batches of 2 s keep the bound: the same loop stops after 60 s
    clock.now, script[:] = 0.0, [MicroBatch(i, 2.0 * i, (1.5, 2.5)[i % 2], 4_000) for i in range(60)]
    _, certain, measured_s = capacity_probe._measure_phase(
        job, 1, frozenset(), {}, 4_000, CapacityRule(precision=0.001), 0.0, 60.0, 1.0
    )
    assert not certain and measured_s == pytest.approx(60.0, abs=1.5)
