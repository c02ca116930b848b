"""A scripted stand-in for the Spark/Kafka side of the gates, for pytester runs of the plugin's gate logic.

The demand search, baseline comparison, reports and exit codes are the real code; only the sub-experiment is
replaced by a rule: ``r`` instances pass a load iff ``load * offered share <= capacity_per_instance * r``
(the share: judge.comparison.offered_share); loads listed in ``invalid_loads`` make the generator fall short
(INVALID); ``SCRIPTED_UNCERTAIN`` (``SCRIPTED_REF_UNCERTAIN`` for REF) lists ``load:instances`` whose
verdict the point estimate decided at the measurement's bound;
``SCRIPTED_FLAKY`` (``SCRIPTED_REF_FLAKY``) those whose confirming repetition reaches the other outcome (each
certain by its own interval); elsewhere a confirmation reproduces the verdict. ``SCRIPTED_INTERRUPT_CONFIRM``
lists loads whose confirming repetition is interrupted as Ctrl-C would (KeyboardInterrupt), on either side.
``SCRIPTED_SECONDS`` makes each sub-experiment take that long, and ``SCRIPTED_LOG`` names a file that gets a
line ``sub-experiment <start> <end>`` for each. In pull-request mode both sides read a scripted backlog (the
paired read): the same time per record batch by batch, times ``SCRIPTED_PAIRED_COST`` (e.g. 1.15) for the
working tree; ``SCRIPTED_MAX_INSTANCES`` is the scripted cluster's size (4).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from pytest_theodolite.core.capacity import MicroBatch
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.records import RepetitionRecord, SubExperimentRecord
from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.core.slo import GENERATOR_RATE, LAG_TREND, SloVerdict
from pytest_theodolite.engine.backlog_read import BacklogRead
from pytest_theodolite.engine.benchmark import Benchmark
from pytest_theodolite.engine.calibration import Calibration
from pytest_theodolite.engine.experiment import BenchmarkExperiment
from pytest_theodolite.engine.runner import new_writer
from pytest_theodolite.engine.session import TheodoliteSession
from pytest_theodolite.pull_request.experiment import PairedExperiment
from pytest_theodolite.pull_request.paired import CHANGE, REF
from pytest_theodolite.pull_request.target import CompareTarget
from theodolite_generator import Workload


def _never_called(*args, **kwargs):
    raise AssertionError("the scripted benchmark never starts a Spark query")


BENCH = Benchmark("scripted", _never_called, lambda keys: Workload(keys=keys))


def log_interval(path: str, kind: str, start: float, end: float) -> None:
    with open(path, "a", encoding="utf-8") as log:  # one short append per line: lines do not interleave
        log.write(f"{kind} {start} {end}\n")


@dataclass
class ScriptedRunner:
    writer: object
    capacity_per_instance: int
    invalid_loads: frozenset[int]
    records: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    offered_share: float = 1.0

    def offer(self, share: float) -> None:
        self.offered_share = share

    def run_sub_experiment(self, load: int, resources: int) -> SubExperimentRecord:
        start = time.time()
        time.sleep(float(os.environ.get("SCRIPTED_SECONDS", "0")))
        if os.environ.get("SCRIPTED_LOG"):
            log_interval(os.environ["SCRIPTED_LOG"], "sub-experiment", start, time.time())
        record = scripted_record(
            load,
            resources,
            self.capacity_per_instance,
            self.invalid_loads,
            _points("SCRIPTED_UNCERTAIN"),
            self.offered_share,
        )
        self.writer.record_sub_experiment(record)
        self.records[(load, resources)] = record
        return record

    def confirm_sub_experiment(
        self, load: int, resources: int, *, share: float | None = None
    ) -> SubExperimentRecord:
        interrupt_confirmation(load)
        earlier = self.records[(load, resources)]
        if share is None:
            record = confirmed(earlier, _points("SCRIPTED_FLAKY"))
        else:  # by the rule at that share of the rate
            again = scripted_record(
                load, resources, self.capacity_per_instance, self.invalid_loads, offered_share=share
            ).repetitions[0]
            record = SubExperimentRecord.from_repetitions(
                load, resources, earlier.target_rate, [*earlier.repetitions, replace(again, repetition=1)]
            )
        self.writer.record_sub_experiment(record)
        self.records[(load, resources)] = record
        return record


def interrupt_confirmation(load: int) -> None:
    if load in _loads("SCRIPTED_INTERRUPT_CONFIRM"):
        raise KeyboardInterrupt(f"scripted Ctrl-C while load {load}'s FAIL is measured again")


def confirmed(record: SubExperimentRecord, flaky: frozenset[tuple[int, int]]) -> SubExperimentRecord:
    """`record` with one more repetition: the same verdict, or the other one where (load, instances) is flaky."""
    first = record.repetitions[0]
    lag = first.verdicts[0]
    if (record.load, record.resources) in flaky and lag.value is not None:
        value = -50.0 if lag.outcome is Outcome.FAIL else 300.0
        outcome = Outcome.PASS if value < 100 else Outcome.FAIL
        lag = SloVerdict(LAG_TREND, outcome, value, 100.0, "")
    again = RepetitionRecord(len(record.repetitions), (lag,), first.counters, first.protocol, first.cost)
    return SubExperimentRecord.from_repetitions(
        record.load, record.resources, record.target_rate, [*record.repetitions, again]
    )


def scripted_record(
    load: int,
    resources: int,
    capacity_per_instance: int,
    invalid_loads: frozenset[int],
    uncertain: frozenset[tuple[int, int]] = frozenset(),
    offered_share: float = 1.0,
) -> SubExperimentRecord:
    rate = load * offered_share
    if load in invalid_loads:
        verdicts = (
            SloVerdict(
                GENERATOR_RATE,
                Outcome.INVALID,
                load * 0.5,
                load * 0.98,
                "the generator reached 50 % of the target rate",
            ),
        )
    else:
        slope = rate - capacity_per_instance * resources
        outcome = Outcome.PASS if slope <= 0 else Outcome.FAIL
        # an uncertain verdict's interval straddles the threshold (100)
        interval = (
            (min(slope, 100.0) - 50, max(slope, 100.0) + 50)
            if (load, resources) in uncertain
            else (None, None)
        )
        verdicts = (SloVerdict(LAG_TREND, outcome, float(slope), 100.0, "", *interval),)
    protocol = (
        {"stop": "max-duration", "certain": False} if (load, resources) in uncertain else {"stop": "certain"}
    ) | {"offered_rate": rate}
    # a CPU cost per record that grows as the capacity per instance shrinks (pull-request mode's figure);
    # SCRIPTED_CPU_US (with SCRIPTED_CPU_HALF_WIDTH, its interval) scripts it directly
    us = (
        float(os.environ["SCRIPTED_CPU_US"])
        if os.environ.get("SCRIPTED_CPU_US")
        else 1e6 / capacity_per_instance
    )
    counters = {"instance_cpu_ms": round(us), "records_measured": 1000, "cost_window_ms": 20_000}
    # a real window's interval, +-2 % by default ("0": none, as a window too short for one gives)
    half = float(os.environ.get("SCRIPTED_CPU_HALF_WIDTH", us * 0.02))
    cost = {"cpu_us_per_record": us, "low": us - half, "high": us + half, "blocks": 5} if half else {}
    return SubExperimentRecord.from_repetitions(
        load, resources, rate, [RepetitionRecord(0, verdicts, counters, protocol, cost)]
    )


@dataclass(frozen=True)
class ScriptedSideSpec:
    """What pull-request mode reads of a side's spec (side_spec.SideSpec): its cluster, results directory and
    Kafka (the gates create their own topics)."""

    spark: FakeSpark
    results_dir: Path
    kafka: dict = field(default_factory=lambda: {"fixed_topics": {}})


#: each batch's cycle in seconds in a scripted backlog read (12 full batches, each side the same but for
#: SCRIPTED_PAIRED_COST)
SCRIPTED_BATCH_CYCLE_S = tuple(6.0 + 0.2 * (i % 3) for i in range(12))


@dataclass
class ScriptedSide:
    """One side of pull-request mode (sides.SideProcess) by the same rule; ``SCRIPTED_REF_CAPACITY`` and
    ``SCRIPTED_REF_INVALID`` script REF, the usual variables the working tree."""

    capacity_per_instance: int
    invalid_loads: frozenset[int]
    uncertain: frozenset[tuple[int, int]] = frozenset()
    flaky: frozenset[tuple[int, int]] = frozenset()
    records: dict = field(default_factory=dict)
    spec: ScriptedSideSpec | None = None
    paired_cost_factor: float = 1.0

    def start_backlog_read(self, load: int, workload: Workload, plan: object) -> None:
        pass

    def backlog_filled(self) -> None:
        pass

    def start_reading(self) -> None:
        pass

    def backlog_message(self, timeout_s: float) -> BacklogRead:
        """The whole read at once: it tells no figure on the way, so it is never stopped early."""
        cycles = tuple(c * self.paired_cost_factor for c in SCRIPTED_BATCH_CYCLE_S)
        batches = tuple(MicroBatch(i, 60.0 + 8 * i, cycle, 120_000) for i, cycle in enumerate(cycles))
        return BacklogRead(batches, (None,) * len(batches), 160.0, cycle_s=cycles)

    def stop_reading(self) -> None:
        raise AssertionError("a read that told no figure cannot be certain")

    def run(
        self, load: int, resources: int, workload: Workload, *, confirm: bool = False, share: float = 1.0
    ):
        if confirm:
            interrupt_confirmation(load)
            record = confirmed(self.records[(load, resources)], self.flaky)
        else:
            record = scripted_record(
                load, resources, self.capacity_per_instance, self.invalid_loads, self.uncertain, share
            )
        self.records[(load, resources)] = record
        return record, {}

    def close(self) -> None:
        pass


def _loads(variable: str) -> frozenset[int]:
    return frozenset(int(x) for x in os.environ.get(variable, "").split(",") if x)


def _points(variable: str) -> frozenset[tuple[int, int]]:
    """``1000:1,2000:2`` -> {(1000, 1), (2000, 2)}"""
    pairs = (x.split(":") for x in os.environ.get(variable, "").split(",") if x)
    return frozenset((int(load), int(instances)) for load, instances in pairs)


@dataclass
class FakeSpark:
    can_limit_cpu: bool = False
    #: the scripted testbed enforces its instances' share (its calibration ran limited); False: a cluster
    #: that does not (SCRIPTED_UNLIMITED_CLUSTER)
    limits_instance_cpu: bool = field(
        default_factory=lambda: not os.environ.get("SCRIPTED_UNLIMITED_CLUSTER")
    )
    master_url: str = "spark://scripted:7077"
    connector_fallback: str | None = None  # the exact Kafka connector of the installed pyspark
    max_instances: int = field(default_factory=lambda: int(os.environ.get("SCRIPTED_MAX_INSTANCES", "4")))

    @contextmanager
    def sessions_held(self) -> Iterator[None]:
        yield

    def check_executor_python(self, modules=()) -> None:
        """Scripted: no executor runs a Python worker."""


def scripted_sides(session, benchmark, settings, testbed, target):
    """Pull-request mode's experiment with scripted sides (pull_request.experiment.paired_experiments' place)."""
    sides = {
        REF: ScriptedSide(
            int(os.environ.get("SCRIPTED_REF_CAPACITY", "1000")),
            _loads("SCRIPTED_REF_INVALID"),
            _points("SCRIPTED_REF_UNCERTAIN"),
            _points("SCRIPTED_REF_FLAKY"),
            spec=ScriptedSideSpec(session.spark, session.results_dir / REF),
        ),
        CHANGE: ScriptedSide(
            int(os.environ.get("SCRIPTED_CAPACITY", "1000")),
            _loads("SCRIPTED_INVALID"),
            _points("SCRIPTED_UNCERTAIN"),
            _points("SCRIPTED_FLAKY"),
            spec=ScriptedSideSpec(session.spark, session.results_dir / CHANGE),
            paired_cost_factor=float(os.environ.get("SCRIPTED_PAIRED_COST", "1")),
        ),
    }
    return PairedExperiment(benchmark, settings, target, sides, session.on_sub_experiment)


class ScriptedSession(TheodoliteSession):
    """``SCRIPTED_CALIBRATION`` (rows/s) stands in for the testbed calibration of a real session."""

    def __init__(self, results_dir: Path, compare_ref: str | None = None) -> None:
        super().__init__(kafka=None, spark=FakeSpark(), results_dir=results_dir, testbed={})
        if compare_ref:  # pull-request mode without a worktree: the scripted sides import nothing
            target = CompareTarget(compare_ref, "0123456789abcdef" * 2 + "01234567", Path(), Path())
            self.start_experiment = lambda session, benchmark, settings, testbed: scripted_sides(
                session, benchmark, settings, testbed, target
            )
        if os.environ.get("SCRIPTED_CALIBRATION"):
            self.calibration = Calibration(float(os.environ["SCRIPTED_CALIBRATION"]), 0.05, 0.25)

    def experiment(self, benchmark, settings):
        if benchmark.name not in self.experiments and self.start_experiment is not None:
            self.experiments[benchmark.name] = self.start_experiment(self, benchmark, settings, {})
        if benchmark.name not in self.experiments:
            writer = new_writer(self.results_dir, benchmark.name, benchmark, settings, Metric.DEMAND, {})
            runner = ScriptedRunner(
                writer,
                int(os.environ.get("SCRIPTED_CAPACITY", "1000")),
                _loads("SCRIPTED_INVALID"),
            )
            self.experiments[benchmark.name] = BenchmarkExperiment(
                benchmark, settings, runner, self.on_sub_experiment
            )
        return self.experiments[benchmark.name]


#: a scripted project's conftest: its gates run on ScriptedSession (`preamble`: lines run before, at import)
SCRIPTED_CONFTEST = """
import os, sys
from pathlib import Path
sys.path.insert(0, {tests!r})  # gate_fakes

import pytest
from gate_fakes import ScriptedSession
{preamble}

@pytest.fixture(scope="session")
def theodolite(tmp_path_factory, theodolite_settings):
    return ScriptedSession(tmp_path_factory.mktemp("results"), theodolite_settings.compare_ref)
"""


def scripted_conftest(preamble: str = "") -> str:
    return SCRIPTED_CONFTEST.format(tests=str(Path(__file__).parent), preamble=preamble)


#: the job module a scripted project keeps in its repository, as pull-request mode requires (each side imports
#: its own); the scripted session never starts it
SCRIPTED_JOBS = """
def start_query(spark, **options):
    raise AssertionError("scripted: never started")
"""
