"""The measurement core end to end: a small UC1 demand function on the real broker and Spark."""

import csv
import importlib
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from udf_job_package import PACKAGE, write_job_package

from pytest_theodolite.cli import analyse as analyse_cli
from pytest_theodolite.core.contention import (
    INSTANCE_QUOTA,
    SERIES_BROKER_CPU,
    SERIES_DRIVER_CPU,
    SERIES_GENERATOR_CPU,
    SERIES_HOST_BUSY,
)
from pytest_theodolite.core.cost import cost_from_series
from pytest_theodolite.core.estimators import SlopeThreshold
from pytest_theodolite.core.evaluation import SloSettings
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
from pytest_theodolite.engine.runner import ExperimentRunner, new_writer
from pytest_theodolite.store.results import read_results, read_series
from theodolite_generator import Workload
from theodolite_spark_jobs import uc1

pytestmark = pytest.mark.integration


def uc1_benchmark(**job_options):
    return Benchmark(
        "uc1-keys",
        uc1.start_query,
        lambda keys: Workload(keys=keys),
        job_options=job_options,
        input_partitions=2,
    )


@pytest.mark.theodolite_exclusive  # it checks throughput: under pytest-xdist nothing may run beside it
def test_small_uc1_demand_function_end_to_end(kafka_cluster, spark_cluster, tmp_path, capsys):
    # one load: the search's logic is test_search.py's, on scripted runs; this is what a real run records
    settings = ExperimentSettings(
        loads=(200,),
        resources=(1, 2),
        duration_s=12,
        sample_interval_s=1,
        slo=SloSettings(warmup_s=6, lag_trend_threshold=SlopeThreshold(relative_to_load=0.1)),
        instance_cpu=0.5,  # where cgroups can limit it: a quota the instances' share is judged against
    )
    benchmark = uc1_benchmark()
    writer = new_writer(tmp_path, "1", benchmark, settings, Metric.DEMAND, testbed={"cores": 2})
    runner = ExperimentRunner(benchmark, settings, kafka_cluster, spark_cluster, writer)
    demand = runner.measure_demand()

    # which verdicts a real measurement reaches depends on the host; that the search followed them does not:
    # linear + lower bound starts at 1 instance, and demand(l) is the fewest instances whose run passed
    assert demand.sub_experiments[0].load == 200 and demand.sub_experiments[0].resources == 1
    for load in settings.loads:
        passed = [
            r for (l, r), record in runner.records.items() if l == load and record.outcome is Outcome.PASS
        ]
        assert demand.demand.get(load) == (min(passed) if passed else None), runner.records
    for record in runner.records.values():
        host_limited = [
            v for v in record.verdicts if v.name == INSTANCE_QUOTA and v.outcome is Outcome.INVALID
        ]
        # a FAIL of instances this host starved of their quota is not a measurement of the job
        assert record.outcome in (Outcome.PASS, Outcome.FAIL) or host_limited, record
        [repetition] = record.repetitions
        # where the host's CPU went while it measured: the host, the broker (a process of ours), the
        # generator's workers and the driver, each a cumulative raw series of its own
        host = repetition.protocol["host"]
        assert host["host_cores"] >= 1 and host["host_busy_cores"] > 0 and host["window_s"] > 0
        broker = {"broker"} if kafka_cluster.local_pids else set()  # none where the broker is in a container
        assert set(host["roles"]) == {"generator", "driver"} | broker, host
        assert host["roles"]["generator"] > 0 and host["roles"]["driver"] > 0
        for series in (SERIES_HOST_BUSY, SERIES_GENERATOR_CPU, SERIES_DRIVER_CPU):
            assert (tmp_path / f"exp1_{record.load}_{record.resources}_{series}_0.csv").exists(), series
        assert (
            tmp_path / f"exp1_{record.load}_{record.resources}_{SERIES_BROKER_CPU}_0.csv"
        ).exists() == bool(broker)
        quota = [v for v in record.verdicts if v.name == INSTANCE_QUOTA]
        if spark_cluster.can_limit_cpu:
            assert host["quota_cores"] == pytest.approx(settings.instance_cpu * record.resources)
            assert host["instance_cores"] > 0 and 0 <= host["throttled_share"] <= 1
            # each instance's own share too: the busiest one decides whether the host starved them
            assert host["instance_quota_cores"] == settings.instance_cpu
            assert 0 < host["busiest_instance_cores"] <= host["instance_cores"] + 1e-9
            assert len(quota) == 1 and quota[0].detail, record.verdicts
        else:
            assert host["quota_cores"] is None and not quota
        # the job's own count of what it read (its observed metrics, one row per finished micro-batch): a run
        # that kept up has it; one whose first batch under the limit never ended (a slow host) has none
        counted = "records_total" in repetition.counters
        assert counted or record.outcome is not Outcome.PASS, repetition.counters
        if counted:
            assert repetition.counters.get("records_malformed", 0) == 0
            # never more than the broker acknowledged to the generator (a failing run's only finished batches
            # may have been empty on a slow host: CI of a534f87 counted 0; a pass is held to more below)
            assert repetition.counters["records_total"] <= repetition.counters["records_in_input_topic"]
        if record.outcome is Outcome.PASS:  # and where it kept up, nearly all that was offered
            assert repetition.counters["records_total"] > 0.8 * record.load * settings.duration_s
        assert repetition.counters["setup_ms"] > 0 and repetition.counters["teardown_ms"] > 0
        if spark_cluster.can_limit_cpu:  # the instances' CPU over the measurement, per offered record
            assert repetition.counters["records_measured"] > 0.5 * record.load * settings.duration_s
            assert repetition.counters["instance_cpu_ms"] > 0
            assert record.cpu_us_per_record is not None and record.cpu_us_per_record > 0
            # the same figure, with its interval where the window held enough blocks, from the raw series
            assert repetition.cost["cpu_us_per_record"] == pytest.approx(record.cpu_us_per_record, rel=0.01)
            cpu_file = tmp_path / f"exp1_{record.load}_{record.resources}_instance-cpu_0.csv"
            records_file = tmp_path / f"exp1_{record.load}_{record.resources}_input-records_0.csv"
            assert cpu_file.exists() and records_file.exists()
            # the series begin at the CPU limit, the figure where the measurement began
            lag = read_series(tmp_path / f"exp1_{record.load}_{record.resources}_lag-trend_0.csv")
            start = float(lag.timestamps_s[0]) + repetition.protocol["warmup_s"]
            assert read_series(cpu_file).timestamps_s[0] < start
            recomputed = cost_from_series(read_series(cpu_file), read_series(records_file), start)
            assert recomputed is not None and recomputed.blocks == repetition.cost["blocks"]
            assert recomputed.cpu_us_per_record == pytest.approx(repetition.cost["cpu_us_per_record"])
        generator = next(v for v in record.verdicts if v.name == "generator-rate")
        assert generator.outcome is Outcome.PASS, generator

    assert not list(tmp_path.glob("*_state-rows_*.csv"))  # UC1 is stateless: no state sampled, no file
    assert not list(tmp_path.glob("*_late-rows_*.csv"))  # nor any record dropped as late
    lag_file = tmp_path / "exp1_200_1_lag-trend_0.csv"
    rows = list(csv.DictReader(lag_file.open()))
    assert list(rows[0]) == ["labels", "timestamp", "value"]  # Theodolite's shape
    assert len(rows) >= settings.duration_s + settings.slo.warmup_s - 2
    # the demand as measured, whichever it was (a slow host has failed 200 on one instance: CI of a534f87)
    assert (tmp_path / "exp1_demand.csv").read_text() == (
        "load,resources\n" + "".join(f"{load},{demand.status(load)}\n" for load in settings.loads)
    )

    # the checkpoints went to the cluster's own directory, removed once its executors are gone (one of them may
    # still write a state file after its run removed it), none to the system's temporary directory
    if spark_cluster.scratch_dir is not None:
        assert spark_cluster.scratch_dir.is_dir()
    for run_id in runner.jobs.run_ids:
        assert not list(Path(tempfile.gettempdir()).glob(f"theodolite-checkpoint-{run_id}-*")), run_id

    # the raw files alone give the same verdicts again
    assert analyse_cli.main(["analyse", str(tmp_path)]) == 0
    reread = read_results(tmp_path)
    assert {(s.load, s.resources): s.outcome for s in reread.sub_experiments} == {
        key: record.outcome for key, record in runner.records.items()
    }
    assert "200" in capsys.readouterr().out


def test_a_job_that_cannot_start_is_errored_not_failed(kafka_cluster, spark_cluster, tmp_path):
    settings = ExperimentSettings(loads=(100,), resources=(1,), duration_s=2, slo=SloSettings(warmup_s=0))
    benchmark = uc1_benchmark(sink="no-such-sink")
    writer = new_writer(tmp_path, "2", benchmark, settings, Metric.DEMAND, testbed={})
    runner = ExperimentRunner(benchmark, settings, kafka_cluster, spark_cluster, writer)
    demand = runner.measure_demand()
    assert demand.unmeasured == (100,)
    record = runner.records[(100, 1)]
    assert record.outcome is Outcome.ERRORED
    assert "the job did not start" in record.verdicts[0].detail
    assert runner.jobs.run_ids
    assert not [t for t in kafka_cluster.list_topics() if any(i in t for i in runner.jobs.run_ids)], (
        "topics left behind"
    )


def test_a_session_that_does_not_start_stops_the_generator_spawned_beside_it(
    kafka_cluster, spark_cluster, tmp_path, monkeypatch
):
    """The generator's workers start while the Spark application does (running_job): where the application
    never comes up, they are stopped without having sent a record, and the run's topics are deleted."""
    settings = ExperimentSettings(loads=(100,), resources=(1,), duration_s=2, slo=SloSettings(warmup_s=0))
    benchmark = uc1_benchmark()
    runner = ExperimentRunner(
        benchmark,
        settings,
        kafka_cluster,
        spark_cluster,
        new_writer(tmp_path, "3", benchmark, settings, Metric.DEMAND, testbed={}),
    )
    spawned = []

    def no_session(**_options):
        spawned.extend(job.generator.worker_pids)
        raise RuntimeError("no executor registered")

    monkeypatch.setattr(spark_cluster, "session", no_session)
    job = runner.jobs.new_job()
    with pytest.raises(RuntimeError, match="no executor registered"):
        with runner.jobs.running_job(job, 100, 1, benchmark.workload(100), instance_cpu=None):
            pytest.fail("the job ran without a session")
    assert spawned and job.generator.worker_pids == []
    assert not [
        p for p in spawned if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]
    assert job.counters["records_acknowledged"] == 0 and job.generator.worker_failures == {}
    assert not [t for t in kafka_cluster.list_topics() if job.run_id in t], "topics left behind"


def test_a_jobs_udf_from_a_tree_that_is_not_installed_runs_on_the_executors(
    kafka_cluster, spark_cluster, tmp_path, monkeypatch
):
    """The executors of a cluster started here run this Python, not this process's path: a job whose Python UDF
    lives in a module imported from the directory pytest runs in -- a user's job, not installed -- is measured,
    not errored (its workers import the UDF's module by name)."""
    tree = tmp_path / "checkout"
    write_job_package(tree)
    monkeypatch.syspath_prepend(str(tree))
    for name in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:  # imported by another test
        monkeypatch.delitem(sys.modules, name)
    job = importlib.import_module(f"{PACKAGE}.job")
    # long enough for a task's four attempts to fail and stop the query, were the module not found
    settings = ExperimentSettings(loads=(100,), resources=(1,), duration_s=20, slo=SloSettings(warmup_s=10))
    benchmark = Benchmark("udf-job", job.start_query, lambda keys: Workload(keys=keys), input_partitions=2)
    writer = new_writer(tmp_path / "results", "1", benchmark, settings, Metric.DEMAND, testbed={})
    runner = ExperimentRunner(benchmark, settings, kafka_cluster, spark_cluster, writer)
    record = runner.run_sub_experiment(100, 1)
    # unreachable, the UDF's module fails every task on the executors: the query stops, errored
    assert record.outcome.is_measured, [v.detail for v in record.verdicts]
    assert record.repetitions[0].counters["records_written"] > 0  # the UDF ran there


def test_a_confirming_repetition_is_added_to_its_sub_experiment_and_read_back(
    kafka_cluster, spark_cluster, tmp_path
):
    """Offered at a share of the load's rate, as a gate on a slower testbed does: each run has its bounds in
    seconds stretched by the share it ran at -- the first (it judges a pass) and the one that confirms a FAIL at a
    lower share."""
    settings = ExperimentSettings(
        loads=(200,),
        resources=(1,),
        duration_s=8,
        sample_interval_s=1,
        slo=SloSettings(warmup_s=3, lag_trend_threshold=SlopeThreshold(relative_to_load=0.1)),
    )
    benchmark = uc1_benchmark()
    writer = new_writer(tmp_path, "1", benchmark, settings, Metric.DEMAND, testbed={"cores": 2})
    runner = ExperimentRunner(benchmark, settings, kafka_cluster, spark_cluster, writer)
    runner.offer(0.5)
    first = runner.run_sub_experiment(200, 1)
    again = runner.confirm_sub_experiment(200, 1, share=0.25)
    assert [r.repetition for r in again.repetitions] == [0, 1]
    protocols = [r.protocol for r in again.repetitions]
    assert [(p["offered_rate"], p["offered_share"], p["bounds_share"]) for p in protocols] == [
        (100.0, 0.5, 0.5),
        (50.0, 0.25, 0.25),
    ]
    assert again.repetitions[0] == first.repetitions[0]  # the first run is kept as it was
    assert again.outcome.is_measured  # a verdict was reached (which one is the host's)
    recorded = read_results(tmp_path, "1")
    (sub_experiment,) = recorded.sub_experiments
    assert len(sub_experiment.repetitions) == 2 and sub_experiment.outcome is again.outcome
    for repetition in (0, 1):  # each repetition keeps its own raw series
        assert len(read_series(recorded.series_path(200, 1, "lag-trend", repetition))) > 3
    assert analyse_cli.main(["analyse", str(tmp_path)]) == 0


@pytest.mark.theodolite_exclusive  # it limits the instances' CPU: under pytest-xdist nothing may run beside it
def test_a_backlog_is_read_in_full_capped_batches_each_with_its_cycle_and_task_cpu(
    kafka_cluster, spark_cluster, tmp_path, monkeypatch
):
    from pytest_theodolite.engine.backlog_read import BacklogPlan, read_backlog

    limits: list = []
    limit = spark_cluster.limit_instances
    monkeypatch.setattr(spark_cluster, "limit_instances", lambda cpus: (limits.append(cpus), limit(cpus))[1])
    settings = ExperimentSettings(loads=(500,), resources=(1,), instance_cpu=0.25)
    benchmark = uc1_benchmark()
    writer = new_writer(tmp_path, "1", benchmark, settings, Metric.DEMAND, testbed={"cores": 2})
    runner = ExperimentRunner(benchmark, settings, kafka_cluster, spark_cluster, writer)
    # the fill outpaces what the unlimited instance reads meanwhile (at 10 times it once kept pace, 2 batches left)
    # and ends once the topic holds 1.25 times the 8 000 records the read takes beyond the running batch: in
    # seconds, long before fill_s
    plan = BacklogPlan(
        batch_records=2_000,
        fill_factor=40.0,
        fill_s=120.0,
        min_fill_s=2.0,
        warm_batches=1,
        batches=3,
        max_read_s=90,
    )
    logs_before = set(Path(tempfile.gettempdir()).glob("theodolite-event-log-*"))
    filled: list = []  # when the fill ended, the generator still sending and the instance unlimited
    read = read_backlog(runner, 500, plan, filled=lambda: filled.append((time.time(), list(limits))))
    # read in batches of 2 000: the first full one after the fill is left to warm up, the next three measured
    assert len(read.batches) == 3, read
    assert all(b.input_rows >= 0.95 * 2_000 for b in read.batches), read
    assert [b.batch_id for b in read.batches] == sorted(b.batch_id for b in read.batches)
    # each batch's tasks' CPU, from the session's event log, which is gone with the read
    assert len(read.task_cpu_per_record_s()) == 3 and all(c > 0 for c in read.task_cpu_per_record_s()), read
    # each batch's cycle runs to the next batch's start: no shorter than the batch; the last may have no next
    cycles = [(b, c) for b, c in zip(read.batches, read.cycle_s, strict=True) if c is not None]
    assert len(cycles) >= 2 and all(c >= b.duration_s for b, c in cycles), read
    assert set(Path(tempfile.gettempdir()).glob("theodolite-event-log-*")) == logs_before
    # filled without a limit, read on the plan's half core rather than the gate's quarter
    assert limits == ([0.5] if spark_cluster.can_limit_cpu else []), limits
    # told once that the backlog was filled, before the limit and the read: the batches read began after it
    assert len(filled) == 1 and filled[0][1] == [], filled
    assert read.read_from_s is not None and read.read_from_s >= filled[0][0], (read.read_from_s, filled)
    assert all(b.start_s >= read.read_from_s for b in read.batches), read
    # the fill ended on its backlog, which the read found there
    assert read.fill_s is not None and 2.0 <= read.fill_s < 60.0, read
    assert read.backlog_records is not None and read.backlog_records >= 1.25 * 8_000 - 2_000, read


@pytest.mark.theodolite_exclusive  # it limits the instances' CPU: under pytest-xdist nothing may run beside it
def test_a_job_that_ignores_the_batch_cap_stops_the_read_at_once_and_is_told_how_to_take_it(
    kafka_cluster, spark_cluster, tmp_path
):
    """A job that takes max_offsets_per_trigger and never applies it reads its backlog in one batch: the read
    stops at that batch, saying how to apply the cap, instead of ending with nothing measured."""
    from pytest_theodolite.engine.backlog_read import BacklogPlan, read_backlog
    from pytest_theodolite.engine.job import RunAborted

    def uncapped(spark, *, max_offsets_per_trigger=None, **options):
        return uc1.start_query(spark, **options)  # the cap taken, never passed on

    settings = ExperimentSettings(loads=(500,), resources=(1,), instance_cpu=0.25)
    benchmark = Benchmark("uc1-uncapped", uncapped, lambda keys: Workload(keys=keys), input_partitions=2)
    writer = new_writer(tmp_path, "1", benchmark, settings, Metric.DEMAND, testbed={"cores": 2})
    runner = ExperimentRunner(benchmark, settings, kafka_cluster, spark_cluster, writer)
    plan = BacklogPlan(
        batch_records=500, fill_factor=40.0, fill_s=6.0, min_fill_s=2.0, warm_batches=1, batches=3
    )
    started = time.monotonic()
    with pytest.raises(
        RunAborted,
        match=r"above the cap of 500: the job ignores max_offsets_per_trigger.*"
        r"pass it to the Kafka source as maxOffsetsPerTrigger",
    ):
        read_backlog(runner, 500, plan)
    assert time.monotonic() - started < 90  # at its first batches, not after the read's max_read_s


@pytest.mark.theodolite_exclusive  # it limits the instances' CPU: under pytest-xdist nothing may run beside it
def test_a_backlog_read_whose_backlog_runs_out_ends_then_and_says_so(kafka_cluster, spark_cluster, tmp_path):
    from pytest_theodolite.engine.backlog_read import BacklogPlan, read_backlog

    settings = ExperimentSettings(loads=(500,), resources=(1,), instance_cpu=0.25)
    benchmark = uc1_benchmark()
    writer = new_writer(tmp_path, "1", benchmark, settings, Metric.DEMAND, testbed={"cores": 2})
    runner = ExperimentRunner(benchmark, settings, kafka_cluster, spark_cluster, writer)
    # 2 000 records sent at the load's own rate: not the four full batches of 2 000 the plan reads
    plan = BacklogPlan(
        batch_records=2_000,
        fill_factor=1.0,
        fill_s=4.0,
        warm_batches=1,
        batches=3,
        max_warm_s=600,
        max_read_s=600,
    )
    read = read_backlog(runner, 500, plan)
    assert read.drained and len(read.batches) < 3, read
    assert read.wall_s < 300, (
        read
    )  # it did not wait out max_warm_s or max_read_s for batches that cannot come


@pytest.mark.theodolite_exclusive  # it limits the instances' CPU: under pytest-xdist nothing may run beside it
def test_a_backlog_read_in_legs_reads_each_on_a_new_executor_after_its_own_warm_batches(
    kafka_cluster, spark_cluster, tmp_path, monkeypatch
):
    from pytest_theodolite.engine import backlog_read
    from pytest_theodolite.infra.spark.executors import executor_ids

    replaced: list = []  # each replacement's executor ids before and after
    replace = backlog_read.replace_executor

    def recording_replace(spark):
        before = executor_ids(spark)
        replace(spark)
        replaced.append((before, executor_ids(spark)))

    monkeypatch.setattr(backlog_read, "replace_executor", recording_replace)
    settings = ExperimentSettings(loads=(500,), resources=(1,), instance_cpu=0.25)
    benchmark = uc1_benchmark()
    writer = new_writer(tmp_path, "1", benchmark, settings, Metric.DEMAND, testbed={"cores": 2})
    runner = ExperimentRunner(benchmark, settings, kafka_cluster, spark_cluster, writer)
    plan = backlog_read.BacklogPlan(
        batch_records=2_000, fill_factor=40.0, fill_s=4.0, warm_batches=1, batches=4, legs=2, max_read_s=120
    )
    read = backlog_read.read_backlog(runner, 500, plan)
    # one new JVM between the legs, two measured batches in each
    assert len(replaced) == 1 and replaced[0][0] != replaced[0][1] and len(replaced[0][1]) == 1, replaced
    assert read.legs == (0, 0, 1, 1), read
    ids = [b.batch_id for b in read.batches]
    # the batch running when the executor was replaced, and the new one's first, are neither leg's
    assert ids[2] >= ids[1] + 2, ids
    assert [len(leg) for leg in read.task_cpu_per_record_by_leg()] == [2, 2], read
