"""A scripted stand-in for the Spark/Kafka side of the gates, for pytester runs of the plugin's gate logic.

The demand search, baseline comparison, reports and exit codes are the real code; only the sub-experiment is
replaced by a rule: ``r`` instances pass a load iff ``load <= capacity_per_instance * r``; loads listed in
``invalid_loads`` make the generator fall short (INVALID). ``SCRIPTED_SECONDS`` makes each sub-experiment
take that long, and ``SCRIPTED_LOG`` names a file that gets a line ``sub-experiment <start> <end>`` for each.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from generator import Workload
from pytest_theodolite.calibration import Calibration
from pytest_theodolite.gates import BenchmarkExperiment, TheodoliteSession
from pytest_theodolite.metrics import Metric
from pytest_theodolite.results import RepetitionRecord, SubExperimentRecord
from pytest_theodolite.runner import Benchmark, new_writer
from pytest_theodolite.slo import GENERATOR_RATE, LAG_TREND, Outcome, SloVerdict


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

    def run_sub_experiment(self, load: int, resources: int) -> SubExperimentRecord:
        start = time.time()
        time.sleep(float(os.environ.get("SCRIPTED_SECONDS", "0")))
        if os.environ.get("SCRIPTED_LOG"):
            log_interval(os.environ["SCRIPTED_LOG"], "sub-experiment", start, time.time())
        if load in self.invalid_loads:
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
            slope = load - self.capacity_per_instance * resources
            outcome = Outcome.PASS if slope <= 0 else Outcome.FAIL
            verdicts = (SloVerdict(LAG_TREND, outcome, float(slope), 100.0),)
        record = SubExperimentRecord.from_repetitions(
            load, resources, float(load), [RepetitionRecord(0, verdicts)]
        )
        self.writer.record_sub_experiment(record)
        self.records[(load, resources)] = record
        return record


@dataclass
class FakeSpark:
    can_limit_cpu: bool = False


class ScriptedSession(TheodoliteSession):
    """``SCRIPTED_CALIBRATION`` (rows/s) stands in for the testbed calibration of a real session."""

    def __init__(self, results_dir: Path) -> None:
        super().__init__(kafka=None, spark=FakeSpark(), results_dir=results_dir, testbed={})
        if os.environ.get("SCRIPTED_CALIBRATION"):
            self.calibration = Calibration(float(os.environ["SCRIPTED_CALIBRATION"]), 0.05, 0.25)

    def experiment(self, benchmark, settings):
        if benchmark.name not in self.experiments:
            writer = new_writer(self.results_dir, benchmark.name, benchmark, settings, Metric.DEMAND, {})
            runner = ScriptedRunner(
                writer,
                int(os.environ.get("SCRIPTED_CAPACITY", "1000")),
                frozenset(int(x) for x in os.environ.get("SCRIPTED_INVALID", "").split(",") if x),
            )
            self.experiments[benchmark.name] = BenchmarkExperiment(
                benchmark, settings, runner, self.on_sub_experiment
            )
        return self.experiments[benchmark.name]
