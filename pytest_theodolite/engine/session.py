"""Every benchmark measured in one pytest session, sharing its broker and Spark cluster.

pytest runs a gate once per load (each point of the demand function is its own test id), so an experiment is
kept per benchmark across those tests (engine.experiment). Nothing here imports pytest; the plugin turns
outcomes into test results.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_theodolite.core.cost import PointCost, point_cost
from pytest_theodolite.core.scalability import DemandResult, Metric
from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
from pytest_theodolite.engine.calibration import (
    Calibration,
    baseline_reference_cpu,
    calibrate,
    calibrate_or_reuse,
    calibration_mismatch,
    speed_ratio,
)
from pytest_theodolite.engine.experiment import BenchmarkExperiment, SubExperimentListener
from pytest_theodolite.engine.gate import GateExperiment
from pytest_theodolite.engine.runner import ExperimentRunner, new_writer
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.spark.cluster import SparkCluster
from pytest_theodolite.report.formats import render_summary
from pytest_theodolite.store.baseline import Baseline
from pytest_theodolite.store.results import experiment_id

#: starts a benchmark's experiment where the session does not measure it alone (pull-request mode):
#: (session, benchmark, settings, the testbed facts its results record) -> the experiment
ExperimentFactory = Callable[
    ["TheodoliteSession", Benchmark, ExperimentSettings, dict[str, Any]], GateExperiment
]


@dataclass
class TheodoliteSession:
    """Every benchmark measured in one pytest session, sharing its broker and Spark cluster."""

    kafka: KafkaCluster
    spark: SparkCluster
    results_dir: Path
    testbed: Mapping[str, Any]
    experiments: dict[str, GateExperiment] = field(default_factory=dict)
    #: how a benchmark's experiment starts where it is not measured alone; None: one revision, against the
    #: stored baseline (pull-request mode gives pull_request.experiment.PairedExperiments)
    start_experiment: ExperimentFactory | None = None
    #: this testbed's calibration (calibration.py), measured before the first benchmark; None: not yet
    calibration: Calibration | None = None
    #: given to every experiment (the plugin calls the pytest_theodolite_sub_experiment hook with it)
    on_sub_experiment: SubExperimentListener | None = None
    #: the package sets the executors' Python was checked for (SparkCluster.check_executor_python)
    executor_python_checked: set[tuple[str, ...]] = field(default_factory=set)
    #: where calibrations are kept between runs, and up to what age one is reused; None: calibrate here
    calibration_store: tuple[Path, float] | None = None

    def calibrate(self) -> Calibration:
        if self.calibration is None:
            if self.calibration_store is None:
                self.calibration = calibrate(self.spark)
            else:
                cache_dir, max_age_s = self.calibration_store
                self.calibration = calibrate_or_reuse(self.spark, self.testbed, cache_dir, max_age_s)
        return self.calibration

    def point_cost(self, experiment: BenchmarkExperiment, load: int) -> PointCost | None:
        """The CPU per record at `load`'s demand, with this testbed's CPU per reference row beside it."""
        point = experiment.points.get(load)
        if point is None:
            return None
        instance_cpu = experiment.settings.instance_cpu if self.spark.can_limit_cpu else None
        reference = self.calibration.cpu_us_per_row if self.calibration is not None else None
        if experiment.capacity_search is not None:
            # the capacity strategy's figure: what a record costs saturated instances, which every change of a
            # record's cost moves (the CPU per offered record does not where the instances use their quota)
            at_capacity = experiment.capacity_search.cost(point.resources, instance_cpu, reference)
            if at_capacity is not None:
                return at_capacity
        return point_cost(point.sub_experiments, point.resources, instance_cpu, reference)

    def not_comparable(self, baseline: Baseline | None) -> str | None:
        """Why `baseline` cannot be compared with what this session measures, or None: its instances were
        limited to a CPU share that this cluster does not enforce (a demand would count instances of another
        size), or its testbed ran at another speed."""
        if baseline is None:
            return None
        limited = baseline.testbed.instance_cpu
        if limited is not None and not self.spark.limits_instance_cpu:
            return (
                f"the baseline's instances were limited to {limited:g} CPU each, and "
                f"{self.spark.master_url} enforces no CPU share per instance: a demand here counts instances "
                "of another size. Compare on a cluster that enforces it (the plugin's own, or Kubernetes), or "
                "record a baseline on this one (--theodolite-update-baselines)"
            )
        return calibration_mismatch(
            baseline.testbed.calibration_rows_per_s, self.calibration, baseline_reference_cpu(baseline)
        )

    def host_speed(self, baseline: Baseline | None) -> float | None:
        """This testbed's speed over `baseline`'s by the calibrations (None: unknown, or not comparable)."""
        if baseline is None:
            return None
        return speed_ratio(
            baseline.testbed.calibration_rows_per_s, self.calibration, baseline_reference_cpu(baseline)
        )

    def judged_against(
        self, baseline: Baseline | None, *, recording: bool
    ) -> tuple[str | None, float | None]:
        """(not_comparable, host_speed) for a gate against `baseline` -- neither for a `recording`, which
        measures this testbed at its own full rates and compares nothing."""
        if recording:
            return None, None
        return self.not_comparable(baseline), self.host_speed(baseline)

    def close(self) -> None:
        """Stop what the experiments keep running (pull-request mode's driver processes)."""
        for experiment in self.experiments.values():
            experiment.close()

    def demand(self, benchmark: Benchmark, settings: ExperimentSettings) -> DemandResult:
        """Measure ``benchmark``'s whole demand function (for tests that want it in one call)."""
        experiment = self.experiment(benchmark, settings)
        for load in settings.loads:
            experiment.measure(load)
        return experiment.demand_result()

    def experiment(self, benchmark: Benchmark, settings: ExperimentSettings) -> GateExperiment:
        existing = self.experiments.get(benchmark.name)
        if existing is not None:
            if existing.settings != settings or existing.benchmark != benchmark:
                raise ValueError(
                    f"benchmark {benchmark.name!r} is declared twice with different settings; "
                    "give each declaration its own name"
                )
            return existing
        benchmark.check_job()  # before the calibration: a job that cannot run costs no minute
        packages = benchmark.job_packages()
        if packages not in self.executor_python_checked:  # a cluster not started here: its nodes' Python
            self.spark.check_executor_python(packages)
            self.executor_python_checked.add(packages)
        calibration = self.calibrate()
        testbed = {
            **self.testbed,
            "instance_cpu": settings.instance_cpu if self.spark.limits_instance_cpu else None,
            "calibration_rows_per_s": round(calibration.rows_per_s),
            "calibration_cpu_us_per_row": calibration.cpu_us_per_row,
            "calibration_instance_cpu": calibration.instance_cpu,
        }
        if self.start_experiment is not None:
            started = self.start_experiment(self, benchmark, settings, testbed)
            self.experiments[benchmark.name] = started
            return started
        writer = new_writer(
            self.results_dir, experiment_id(benchmark.name), benchmark, settings, Metric.DEMAND, testbed
        )
        runner = ExperimentRunner(
            benchmark,
            settings,
            self.kafka,
            self.spark,
            writer,
            generator_client_config=dict(self.kafka.properties),
        )
        experiment = BenchmarkExperiment(benchmark, settings, runner, self.on_sub_experiment)
        self.experiments[benchmark.name] = experiment
        return experiment


# -- what the gates report (pytest-free; plugin.py prints it) ---------------------------------------------


def summarise(
    session: TheodoliteSession,
    baselines: Mapping[str, Baseline | None],
    tolerances: Mapping[str, int],
    settings: TheodoliteSettings,
    testbed_extra: Mapping[str, str] | None = None,
    cost_tolerances: Mapping[str, float | None] | None = None,
) -> dict[str, Any]:
    """Terminal lines, Markdown and each benchmark's section of the pull-request comment, for every benchmark
    this process measured (plain data: xdist's workers send it to the controller); plots into the results dir."""
    results = [
        experiment.result(
            name,
            baselines.get(name),
            tolerances.get(name, 0),
            (cost_tolerances or {}).get(name),
            settings,
            session,
            testbed_extra,
        )
        for name, experiment in sorted(session.experiments.items())
    ]
    return render_summary(results)
