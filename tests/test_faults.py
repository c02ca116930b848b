"""Runs that survive faults, on real processes: during a real sub-experiment an executor JVM is killed, the
broker is killed, the generator is starved of CPU, or pytest gets Ctrl-C. Each ends ERRORED or INVALID with its
reason (or as an interrupted session) -- never a pass, never a regression; what finished before the fault is on
disk and read back by `analyse`; every wait is bounded; no process, cgroup, topic or temp dir is left behind."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest

from pytest_theodolite.cli.analyse import main as theodolite_cli
from pytest_theodolite.core.errors import TheodoliteLeakWarning
from pytest_theodolite.core.estimators import SlopeThreshold
from pytest_theodolite.core.evaluation import SloSettings
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
from pytest_theodolite.engine.runner import ExperimentRunner, new_writer
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.kafka.embedded import EmbeddedKafka
from pytest_theodolite.infra.spark import cgroups
from pytest_theodolite.store.results import read_results, series_file_name
from theodolite_generator import Workload
from theodolite_spark_jobs import uc1

# they kill and starve processes and measure: under pytest-xdist nothing else may run beside them
pytestmark = [pytest.mark.integration, pytest.mark.theodolite_exclusive]

EXPERIMENT = "fault"
#: a sub-experiment that takes ~20 s: 3 s warm-up, 10 s measured, Theodolite's fixed protocol
SETTINGS = ExperimentSettings(
    loads=(1000,),
    resources=(1, 2),
    duration_s=10,
    sample_interval_s=1,
    slo=SloSettings(warmup_s=3, lag_trend_threshold=SlopeThreshold(relative_to_load=0.2)),
)


def uc1_benchmark() -> Benchmark:
    return Benchmark("uc1-fault", uc1.start_query, lambda keys: Workload(keys=keys), input_partitions=2)


def lag_rows(results: Path, load: int, resources: int) -> int:
    path = results / series_file_name(EXPERIMENT, load, resources, "lag-trend", 0)
    return max(0, len(path.read_text().splitlines()) - 1) if path.exists() else 0


def when_measuring(results: Path, load: int, resources: int, fault, *, rows: int = 2, timeout_s: float = 120):
    """A thread that runs ``fault()`` once the sub-experiment (load, resources) has sampled ``rows`` lags."""
    done = threading.Event()
    errors: list[BaseException] = []

    def watch() -> None:
        deadline = time.monotonic() + timeout_s
        while lag_rows(results, load, resources) < rows:
            if time.monotonic() > deadline:
                errors.append(TimeoutError(f"({load}, {resources}) sampled no {rows} lags in {timeout_s} s"))
                return
            time.sleep(0.2)
        try:
            fault()
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread, done, errors


def measure_then_fault(
    kafka: KafkaCluster, spark, results: Path, fault, *, load: int = 1000, measure_first: bool = True
):
    """One normal sub-experiment (1 instance; with `measure_first`: that what finished before a fault survives
    it is checked once, where the fault leaves the cluster to read it), then one (2 instances) during which
    ``fault`` strikes."""
    benchmark = uc1_benchmark()
    writer = new_writer(results, EXPERIMENT, benchmark, SETTINGS, Metric.DEMAND, testbed={"cores": 2})
    runner = ExperimentRunner(benchmark, SETTINGS, kafka, spark, writer)
    before = runner.run_sub_experiment(load, 1) if measure_first else None
    thread, done, errors = when_measuring(results, load, 2, fault)
    started = time.monotonic()
    faulty = runner.run_sub_experiment(load, 2)
    took = time.monotonic() - started
    thread.join(timeout=5)
    assert done.is_set() and not errors, errors
    # what a user sees of it (shown with -rP)
    first = (
        "" if before is None else f"{before.load}/{before.resources}: {before.outcome.value.upper()}; then, "
    )
    print(
        f"{first}with the fault, "
        f"{faulty.load}/{faulty.resources}: {faulty.outcome.value.upper()} after {took:.0f} s: "
        + "; ".join(f"{v.name} {v.outcome.value}: {v.detail}" for v in faulty.verdicts if not v.passed)
    )
    return runner, before, faulty, took


def assert_finished_results_survive(results: Path, load: int = 1000) -> None:
    """What finished before the fault is on disk and `analyse` reads it back."""
    recorded = read_results(results, EXPERIMENT)
    by_resources = {s.resources: s for s in recorded.sub_experiments}
    assert by_resources[1].outcome in (Outcome.PASS, Outcome.FAIL), by_resources
    out = io.StringIO()
    assert theodolite_cli(["analyse", str(results)], stdout=out) == 0
    lines = [line.split() for line in out.getvalue().splitlines()]
    assert any(
        words[:2] == [str(load), "1"] and words[-1] == by_resources[1].outcome.value.upper()
        for words in lines
    ), out.getvalue()


def executor_pids(spark_cluster) -> list[int]:
    """The executor JVMs of this cluster: children of the workers that registered with its master."""
    pids = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if "deploy.worker.Worker" in cmdline and spark_cluster.master_url in cmdline:
            for child in proc.children(recursive=True):
                try:
                    if "CoarseGrainedExecutorBackend" in " ".join(child.cmdline()):
                        pids.append(child.pid)
                except psutil.Error:  # a launcher that exited meanwhile
                    pass
    return pids


# ---- one executor JVM killed ----------------------------------------------------------------------------


def test_a_killed_executor_makes_the_sub_experiment_errored(kafka_cluster, spark_cluster, tmp_path):
    killed: list[int] = []

    def kill_one_executor() -> None:
        pids = executor_pids(spark_cluster)
        assert len(pids) >= 2, pids
        os.kill(pids[0], signal.SIGKILL)
        killed.append(pids[0])

    runner, before, faulty, took = measure_then_fault(
        kafka_cluster, spark_cluster, tmp_path, kill_one_executor
    )
    assert killed
    assert before.outcome in (Outcome.PASS, Outcome.FAIL), before
    assert faulty.outcome is Outcome.ERRORED, faulty
    assert any("an executor was lost" in v.detail for v in faulty.verdicts), faulty.verdicts
    assert took < 90  # bounded: the fault ended the measurement instead of running it out
    assert_finished_results_survive(tmp_path)
    # the cluster survives for the next test: a session gets all its instances again
    with spark_cluster.session(instances=2):
        pass
    assert not kafka_cluster.list_topics() & {f"theodolite-{run}-input" for run in runner.jobs.run_ids}


# ---- the broker killed ------------------------------------------------------------------------------------


def test_a_killed_broker_makes_the_sub_experiment_errored(spark_cluster, tmp_path):
    broker = EmbeddedKafka(work_dir=tmp_path / "broker").start()
    try:
        kafka = KafkaCluster(broker.bootstrap_servers, provider="embedded")
        try:
            # its topics are named at once, not after each request to the dead broker has timed out
            with pytest.warns(
                TheodoliteLeakWarning,
                match=r"could not be deleted and are left on \S+ \(no bootstrap address accepts connections\)",
            ):
                _, _, faulty, took = measure_then_fault(
                    kafka,
                    spark_cluster,
                    tmp_path / "results",
                    lambda: os.killpg(broker.process.pid, signal.SIGKILL),
                    measure_first=False,
                )
        finally:
            kafka.close()
    finally:
        broker.stop()
    assert faulty.outcome is Outcome.ERRORED, faulty
    assert any("broker" in v.detail or "query stopped" in v.detail for v in faulty.verdicts), faulty.verdicts
    assert took < 120, took  # bounded, and no request to the dead broker waits out its timeout
    # the errored sub-experiment is recorded, and analyse reads it back
    recorded = read_results(tmp_path / "results", EXPERIMENT)
    assert {s.resources: s.outcome for s in recorded.sub_experiments} == {2: Outcome.ERRORED}
    with spark_cluster.session(instances=2):  # the Spark side is whole again
        pass


# ---- the generator starved of CPU ------------------------------------------------------------------------


@pytest.mark.skipif(not cgroups.detect().available, reason=f"no cgroups here: {cgroups.detect().reason}")
def test_a_starved_generator_makes_the_sub_experiment_invalid(kafka_cluster, spark_cluster, tmp_path):
    support = cgroups.detect()
    assert support.root is not None and support.version is not None
    group = cgroups.CpuLimitedGroup(
        support.root / f"theodolite-test-starve-{uuid.uuid4().hex[:8]}", 0.01, support.version
    ).create()
    existing = {child.pid for child in psutil.Process().children(recursive=True)}
    starved: list[int] = []

    def starve_the_generator() -> None:
        # the generator's workers: spawned Python processes that appeared during this sub-experiment
        for child in psutil.Process().children(recursive=True):
            try:
                cmdline = " ".join(child.cmdline())
            except psutil.Error:  # exited meanwhile
                continue
            if child.pid not in existing and "spawn_main" in cmdline and "resource_tracker" not in cmdline:
                (group.path / "cgroup.procs").write_text(str(child.pid))
                starved.append(child.pid)

    try:
        _, _, faulty, took = measure_then_fault(
            kafka_cluster, spark_cluster, tmp_path, starve_the_generator, load=20_000, measure_first=False
        )
    finally:
        for pid in (group.path / "cgroup.procs").read_text().split():  # give back anything still in it
            (support.root / "cgroup.procs").write_text(pid)
        assert group.remove(timeout_s=10)
    assert starved, "no generator worker found"
    assert faulty.outcome is Outcome.INVALID, faulty
    assert took < 120, took  # a starved generator's stop is bounded too
    assert any("generator achieved only" in v.detail for v in faulty.verdicts), faulty.verdicts
    assert not group.path.exists()
    recorded = read_results(tmp_path, EXPERIMENT)
    assert {s.resources: s.outcome for s in recorded.sub_experiments}[2] is Outcome.INVALID


# ---- Ctrl-C to pytest ---------------------------------------------------------------------------------------

GATE = """
import pytest
from theodolite_generator import Workload
from pytest_theodolite.engine.runner import Benchmark
from theodolite_spark_jobs import uc1

UC1 = Benchmark("uc1-ctrl-c", uc1.start_query, lambda keys: Workload(keys=keys), input_partitions=2)

@pytest.mark.theodolite(UC1, loads=[300, 600], resources=[1, 2], warmup=3, duration=10, max_duration=10,
                        prime=False, slope_method="ols", threshold="20%")
def test_uc1(theodolite_gate):
    theodolite_gate.check()
"""


def test_ctrl_c_during_a_sub_experiment_keeps_what_finished_and_leaves_nothing(pytester, tmp_path):
    """Ctrl-C while a gate measures. SIGTERM (a cancelled CI job, ``timeout``) raises the same interrupt, through
    the same finalizers: test_lifecycle.py sends both to a session with a broker, at a fraction of this cost."""
    pytester.makepyfile(test_uc1_gate=GATE)
    (pytester.path / "baselines").mkdir()
    temp = tmp_path / "inner-tmp"  # where the inner session's own temp dirs go (checkpoints, broker, Spark)
    temp.mkdir()
    results = pytester.path / "results"
    # the code under test, however it is installed (as pytester's subprocess runs do)
    root = str(Path(__file__).resolve().parents[1])
    env = {
        **os.environ,
        "TMPDIR": str(temp),
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    # the default SIGINT disposition, as a terminal's Ctrl-C finds it (see test_lifecycle.py)
    log = (tmp_path / "inner.log").open("wb")
    inner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            f"--basetemp={tmp_path / 'basetemp'}",
            f"--theodolite-results={results}",
            "--theodolite-update-baselines",
            str(pytester.path),
        ],
        cwd=pytester.path,
        env=env,
        # a file, not a pipe: nobody reads a pipe while the run goes on, and a full one blocks the JVMs' logging
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    started: dict[int, str] = {}
    results_json = results / "expuc1-ctrl-c_results.json"
    try:
        deadline = time.monotonic() + 300
        finished: set[tuple[int, int]] = set()
        while inner.poll() is None and time.monotonic() < deadline:
            for child in psutil.Process(inner.pid).children(recursive=True):
                try:
                    started.setdefault(child.pid, " ".join(child.cmdline())[:160])
                except psutil.Error:
                    pass
            if results_json.exists():  # written atomically: always whole
                finished = {
                    (sub["load"], sub["resources"])
                    for sub in json.loads(results_json.read_text()).get("sub_experiments", [])
                }
            # interrupt while the next sub-experiment samples its lag
            if finished and running_lag_rows(results, finished) >= 3:
                break
            time.sleep(0.3)
        assert inner.poll() is None, (tmp_path / "inner.log").read_text(errors="replace")
        assert finished, "no sub-experiment finished within 300 s"
        inner.send_signal(signal.SIGINT)
        inner.wait(timeout=180)  # bounded: a hang fails here
    finally:
        if inner.poll() is None:
            inner.kill()
        log.close()
    output = (tmp_path / "inner.log").read_text(errors="replace")
    assert inner.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "KeyboardInterrupt" in output
    # what finished is on disk and analyse reads it back
    document = json.loads(results_json.read_text())
    assert document["sub_experiments"], document
    out = io.StringIO()
    assert theodolite_cli(["analyse", str(results)], stdout=out) == 0
    first = document["sub_experiments"][0]
    rows = [line.split() for line in out.getvalue().splitlines()]
    assert any(
        words[:2] == [str(first["load"]), str(first["resources"])] and words[-1] == first["outcome"].upper()
        for words in rows
    ), out.getvalue()
    # the interrupted one is not judged on its partial series
    assert "unfinished: raw series without a record" in out.getvalue(), out.getvalue()
    # nothing left: no process the session started, no cgroup, no temp dir
    deadline = time.monotonic() + 30
    while (
        alive := [cmd for pid, cmd in started.items() if psutil.pid_exists(pid) and _not_zombie(pid)]
    ) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert alive == [], alive
    support = cgroups.detect()
    if support.root is not None:
        assert not list(support.root.glob(f"theodolite-{inner.pid}-*")), "cgroups left behind"
    assert sorted(p.name for p in temp.iterdir()) == [], "temp dirs left behind"


def running_lag_rows(results: Path, finished: set[tuple[int, int]]) -> int:
    """Lag samples of the sub-experiment being measured now: one with a lag file and no record yet."""
    rows = 0
    for path in results.glob("expuc1-ctrl-c_*_lag-trend_0.csv"):
        _, load, resources, _, _ = path.stem.split("_")
        if (int(load), int(resources)) not in finished:
            rows = max(rows, len(path.read_text().splitlines()) - 1)
    return rows


def _not_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
