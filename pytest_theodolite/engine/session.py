"""The experiments behind the scalability gates: one demand search per benchmark, measured a load at a time.

pytest runs a gate once per load (each point of the demand function is its own test id), so the search is
kept per benchmark across those tests: with the lower-bound restriction a load starts at the demand of the
previous load measured in this session, and a load after one that no instance count could handle is "none"
without running, as in Theodolite. Nothing here imports pytest; plugin.py turns outcomes into test results.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_theodolite.core.cost import (
    PointCost,
    blind_spot_warning,
    point_cost,
)
from pytest_theodolite.core.scalability import DemandResult, Metric
from pytest_theodolite.core.slo import LAG_TREND, LATE_RECORDS
from pytest_theodolite.engine.calibration import REFERENCE_CPU, Calibration, calibrate, calibration_mismatch
from pytest_theodolite.engine.experiment import BenchmarkExperiment, SubExperimentListener
from pytest_theodolite.engine.runner import Benchmark, ExperimentRunner, ExperimentSettings, new_writer
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.spark.cluster import SparkCluster
from pytest_theodolite.pull_request.experiment import CompareTarget, PairedExperiment, start_paired_experiment
from pytest_theodolite.pull_request.paired import CHANGE, REF, SAME_TESTBED, SIDES
from pytest_theodolite.pull_request.sides import spec_for
from pytest_theodolite.report.summary import (
    BenchmarkReport,
    PlotDependencyMissing,
    markdown_summary,
    scalability_plot,
    terminal_summary,
)
from pytest_theodolite.store.baseline import Baseline, Comparison, Testbed, compare


@dataclass
class TheodoliteSession:
    """Every benchmark measured in one pytest session, sharing its broker and Spark cluster."""

    kafka: KafkaCluster
    spark: SparkCluster
    results_dir: Path
    testbed: Mapping[str, Any]
    experiments: dict[str, BenchmarkExperiment | PairedExperiment] = field(default_factory=dict)
    #: pull-request mode (``--theodolite-compare-ref``): REF's worktree and the working tree; None: off
    compare: CompareTarget | None = None
    #: this testbed's calibration (calibration.py), measured before the first benchmark; None: not yet
    calibration: Calibration | None = None
    #: given to every experiment (the plugin calls the pytest_theodolite_sub_experiment hook with it)
    on_sub_experiment: SubExperimentListener | None = None

    def calibrate(self) -> Calibration:
        if self.calibration is None:
            self.calibration = calibrate(self.spark)
        return self.calibration

    def point_cost(self, experiment: BenchmarkExperiment, load: int) -> PointCost | None:
        """The CPU per record at `load`'s demand, with this testbed's CPU per reference row beside it."""
        point = experiment.points.get(load)
        if point is None:
            return None
        instance_cpu = experiment.settings.instance_cpu if self.spark.can_limit_cpu else None
        reference = self.calibration.cpu_us_per_row if self.calibration is not None else None
        return point_cost(point.sub_experiments, point.resources, instance_cpu, reference)

    def not_comparable(self, baseline: Baseline | None) -> str | None:
        """Why `baseline` cannot be compared with what this session measures, or None."""
        if baseline is None:
            return None
        reference_cpu = REFERENCE_CPU if baseline.testbed.instance_cpu is not None else None
        return calibration_mismatch(baseline.testbed.calibration_rows_per_s, self.calibration, reference_cpu)

    def close(self) -> None:
        """Stop what the experiments keep running (pull-request mode's driver processes)."""
        for experiment in self.experiments.values():
            if isinstance(experiment, PairedExperiment):
                experiment.close()

    def demand(self, benchmark: Benchmark, settings: ExperimentSettings) -> DemandResult:
        """Measure ``benchmark``'s whole demand function (for tests that want it in one call)."""
        experiment = self.experiment(benchmark, settings)
        for load in settings.loads:
            experiment.measure(load)
        return experiment.demand_result()

    def experiment(
        self, benchmark: Benchmark, settings: ExperimentSettings
    ) -> BenchmarkExperiment | PairedExperiment:
        existing = self.experiments.get(benchmark.name)
        if existing is not None:
            if existing.settings != settings or existing.benchmark != benchmark:
                raise ValueError(
                    f"benchmark {benchmark.name!r} is declared twice with different settings; "
                    "give each declaration its own name"
                )
            return existing
        calibration = self.calibrate()
        testbed = {
            **self.testbed,
            "instance_cpu": settings.instance_cpu if self.spark.can_limit_cpu else None,
            "calibration_rows_per_s": round(calibration.rows_per_s),
            "calibration_cpu_us_per_row": calibration.cpu_us_per_row,
        }
        if self.compare is not None:
            paired = start_paired_experiment(
                benchmark,
                settings,
                self.compare,
                {
                    side: spec_for(
                        side,
                        self.compare.ref_root if side == REF else self.compare.change_root,
                        benchmark,
                        settings,
                        self.kafka,
                        self.spark,
                        self.results_dir / side,
                        experiment_id(benchmark.name),
                        {**testbed, "revision": self.compare.commit if side == REF else "working tree"},
                    )
                    for side in SIDES
                },
                self.on_sub_experiment,
            )
            self.experiments[benchmark.name] = paired
            return paired
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


def experiment_id(benchmark_name: str) -> str:
    """Results file names are ``exp<id>_<load>_...``: the id may not contain ``_``."""
    return re.sub(r"[^A-Za-z0-9.-]+", "-", benchmark_name).strip("-") or "benchmark"


# -- what the gates report (pytest-free; plugin.py prints it) ---------------------------------------------


def progress_line(record: Any, timings: Mapping[Any, Any]) -> str:
    """One finished sub-experiment, for users watching a CI log: verdicts, the lag slope with its interval,
    and how it was measured (priming, the warm-up really used, measurement length and why it stopped)."""
    slos = ", ".join(f"{v.name} {v.outcome.value}" for v in record.verdicts)
    lag = next((v for v in record.verdicts if v.name == LAG_TREND), None)
    trend = ""
    if lag is not None and lag.value is not None and lag.threshold is not None:
        interval = "" if lag.low is None or lag.high is None else f" [{lag.low:.0f}, {lag.high:.0f}]"
        median = " (median)" if len(record.repetitions) > 1 else ""
        # a median over a FAIL without a slope (falling behind, no steady state) is an unbounded lag
        slope = f"{lag.value:.0f}" if math.isfinite(lag.value) else "unbounded"
        trend = f"; lag slope {slope}{interval}{median} vs {lag.threshold:.0f} records/s"
    late = next((v for v in record.verdicts if v.name == LATE_RECORDS), None)
    if late is not None:  # how many, beside the lag: a job can keep up by dropping what comes too late
        trend += f"; {late.detail}"
    if len(record.repetitions) > 1:  # e.g. a regression's deciding verdict, measured once more
        each = ", ".join(r.outcome.value.upper() for r in record.repetitions)
        trend += f"; {len(record.repetitions)} repetitions: {each}"
    last_repetition = record.repetitions[-1] if record.repetitions else None
    protocol = last_repetition.protocol if last_repetition is not None else {}
    last = timings.get((record.load, record.resources, len(record.repetitions) - 1))
    phases = ""
    if last is not None:
        primed = protocol.get("primed_s")
        primed_text = "" if primed is None else f" (primed {primed:.0f} s unlimited)"
        stop = protocol.get("stop")
        phases = (
            f" [setup {last.setup_s:.0f} s, warm-up {last.warmup_s:.0f} s{primed_text}, "
            f"measured {last.measurement_s:.0f} s{'' if stop is None else f' until {stop}'}, "
            f"teardown {last.teardown_s:.0f} s]"
        )
    return (
        f"load={record.load} instances={record.resources}: {record.outcome.value.upper()} ({slos}{trend})"
        f"{phases}"
    )


def testbed(
    settings: TheodoliteSettings,
    spark: SparkCluster,
    instance_cpu: float | None,
    calibration: Calibration | None = None,
    extra: Mapping[str, str] | None = None,
) -> Testbed:
    """This machine and setup; the instance CPU is the one a benchmark really ran with; ``extra``: the facts
    of the pytest_theodolite_testbed hook."""
    current = Testbed.current(
        kafka_provider=settings.kafka_provider,
        spark_master=settings.spark_master,
        instance_cpu=instance_cpu if spark.can_limit_cpu else None,
    )
    current = replace(current, extra=dict(extra or {}))
    if calibration is None:
        return current
    return replace(
        current,
        calibration_rows_per_s=float(round(calibration.rows_per_s)),
        calibration_cpu_us_per_row=None
        if calibration.cpu_us_per_row is None
        else round(calibration.cpu_us_per_row, 4),
    )


def calibration_note(session: TheodoliteSession, baseline: Baseline | None) -> str | None:
    """'testbed calibration: ... (baseline: ..., ratio ...)' for the summary, or None before any calibration."""
    if session.calibration is None:
        return None
    note = f"testbed calibration: {session.calibration.describe()}"
    recorded = baseline.testbed.calibration_rows_per_s if baseline is not None else None
    if recorded:
        ratio = session.calibration.rows_per_s / recorded
        note += f"; baseline's: {recorded:,.0f} rows/s (this testbed at {ratio:.2f}x)"
    elif baseline is not None:
        note += "; the baseline has none (recorded before calibration: re-record it to compare testbeds)"
    return note


def summarise(
    session: TheodoliteSession,
    baselines: Mapping[str, Baseline | None],
    tolerances: Mapping[str, int],
    settings: TheodoliteSettings,
    testbed_extra: Mapping[str, str] | None = None,
    cost_tolerances: Mapping[str, float | None] | None = None,
) -> dict[str, Any]:
    """Terminal lines and Markdown for every benchmark this process measured; plots into the results dir."""
    reports = []
    for name, experiment in sorted(session.experiments.items()):
        if isinstance(experiment, PairedExperiment):
            reports.append(
                _paired_report(
                    name,
                    experiment,
                    baselines.get(name),
                    tolerances.get(name, 0),
                    settings,
                    session,
                    (cost_tolerances or {}).get(name),
                )
            )
            continue
        measured = experiment.demand_result()
        baseline = baselines.get(name)
        measured_testbed = testbed(
            settings, session.spark, experiment.settings.instance_cpu, session.calibration, testbed_extra
        )
        costs = {load: session.point_cost(experiment, load) for load in sorted(experiment.points)}
        comparison = compare(
            measured,
            baseline,
            tolerances.get(name, 0),
            measured_testbed=measured_testbed,
            benchmark=name,
            not_comparable=None if settings.update_baselines else session.not_comparable(baseline),
            costs=costs,
            cost_tolerance=(cost_tolerances or {}).get(name),
            uncertain={
                load: point.uncertain_against(baseline, tolerances.get(name, 0))
                for load, point in experiment.points.items()
            },
        )
        blind_spots = experiment.blind_spots(costs)
        plot = None
        try:
            plot = scalability_plot(
                settings.results_dir / f"{experiment_id(name)}_demand.png", name, measured, baseline
            )
        except PlotDependencyMissing as exc:
            notes: tuple[str, ...] = (str(exc),)
        else:
            notes = ()
        if comparison.improvements and not settings.update_baselines:
            notes += ("lower the baseline with --theodolite-update-baselines",)
        calibrated = calibration_note(session, baseline)
        if calibrated:
            notes = (calibrated, *notes)
        warning = blind_spot_warning(
            name, [blind_spots[load] for load in measured.demand if load in blind_spots]
        )
        if warning:
            notes += (warning,)
        reports.append(
            BenchmarkReport(
                name, comparison, measured, baseline, plot, notes, point_costs=costs, blind_spots=blind_spots
            )
        )
    return {"lines": terminal_summary(reports), "markdown": markdown_summary(reports)}


def _paired_report(
    name: str,
    experiment: PairedExperiment,
    baseline: Baseline | None,
    tolerance: int,
    settings: TheodoliteSettings,
    session: TheodoliteSession,
    cost_tolerance: float | None = None,
) -> BenchmarkReport:
    """Pull-request mode: the change against REF per load, both sides' CPU per record, and the change
    against the stored baseline where there is one."""
    label = experiment.target.label
    measured, ref = experiment.demand_result(CHANGE), experiment.demand_result(REF)
    points = [experiment.points[load] for load in sorted(experiment.points)]
    comparison = Comparison(
        benchmark=name,
        points=tuple(p.comparison(name, tolerance, cost_tolerance) for p in points),
        tolerance=tolerance,
        cost_tolerance=cost_tolerance,
    )
    against = (
        compare(
            measured,
            baseline,
            tolerance,
            measured_testbed=None,
            benchmark=name,
            not_comparable=session.not_comparable(baseline),
            uncertain={
                load: point.sides[CHANGE].uncertain_against(baseline, tolerance)
                for load, point in experiment.points.items()
            },
        )
        if baseline is not None
        else None
    )
    ref_function = Baseline(
        name,
        {load: value for load, value in ref.demand.items() if load not in ref.unmeasured},
        {},
        SAME_TESTBED,
    )
    notes: tuple[str, ...] = (
        f"{label} measured beside the working tree, alternating (ABBA) at every load and instance count; "
        f"raw results: {settings.results_dir / REF}, {settings.results_dir / CHANGE}",
    )
    plot = None
    try:
        plot = scalability_plot(
            settings.results_dir / f"{experiment_id(name)}_demand.png",
            name,
            measured,
            ref_function,
            reference=label,
            measured_label="change (working tree)",
        )
    except PlotDependencyMissing as exc:
        notes += (str(exc),)
    calibrated = calibration_note(session, baseline)
    if calibrated:
        notes = (calibrated, *notes)
    return BenchmarkReport(
        name,
        comparison,
        measured,
        ref_function,
        plot,
        notes,
        reference=label,
        costs={p.load: p.cost_figure() for p in points},
        baseline_comparison=against,
    )
