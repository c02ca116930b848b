"""A benchmark's typed result turned into its report: the comparison, the plots and the notes under its table.

Each experiment returns one result type (`StoredModeResult`, `PairedModeResult` in report/paired.py); `build`
turns either into the `BenchmarkReport` every format renders (report/formats.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_theodolite.core.blind_spot import BlindSpot
from pytest_theodolite.core.capacity import CapacityEstimate
from pytest_theodolite.core.cost import PointCost
from pytest_theodolite.core.scalability import DemandResult
from pytest_theodolite.judge.comparison import Comparison
from pytest_theodolite.report.notes import (
    Calibrated,
    CapacityMeasured,
    blind_spot_warning,
    bound_notes,
    calibration_note,
    capacity_note,
    offered_note,
    recording_note,
)
from pytest_theodolite.report.plot import PlotDependencyMissing, capacity_plot, scalability_plot
from pytest_theodolite.report.summary import BenchmarkReport
from pytest_theodolite.store.baseline import Baseline
from pytest_theodolite.store.results import experiment_id


@dataclass(frozen=True)
class StoredModeResult:
    """What a single-revision benchmark measured, judged against its stored baseline."""

    name: str
    comparison: Comparison
    measured: DemandResult
    baseline: Baseline | None
    results_dir: Path
    #: each load's records/s, for the capacity plot
    target_rates: Mapping[int, float]
    point_costs: Mapping[int, PointCost | None]
    blind_spots: Mapping[int, BlindSpot | None]
    #: the session records baselines (--theodolite-update-baselines)
    recording: bool = False
    offered_share: float = 1.0
    #: the share of a load's rate a FAIL was confirmed at (comparison.regression_share)
    regression_share: float | None = None
    #: the gate asked for a paired backlog read, which only pull-request mode makes
    paired_cost_asked: bool = False
    #: the capacity strategy's measurements and capacities; empty for the searches over sub-experiments
    capacity_measurements: Mapping[int, CapacityMeasured] | None = None
    capacities: Mapping[int, CapacityEstimate] | None = None
    calibration: Calibrated | None = None


def stored_mode_report(result: StoredModeResult) -> BenchmarkReport:
    """The demand function against the stored baseline, the CPU per record and the blind spots; the plots
    drawn into the results directory where matplotlib is there."""
    name, measured, baseline = result.name, result.measured, result.baseline
    plot = None
    notes: tuple[str, ...] = ()
    try:
        plot = scalability_plot(
            result.results_dir / f"{experiment_id(name)}_demand.png", name, measured, baseline
        )
    except PlotDependencyMissing as exc:
        notes = (str(exc),)
    if result.comparison.improvements and not result.recording:
        notes += ("lower the baseline with --theodolite-update-baselines",)
    if result.recording and baseline is not None:
        notes += (recording_note(baseline.testbed.instance_cpu),)
    notes += bound_notes(measured) + offered_note(result.offered_share, result.regression_share)
    if result.paired_cost_asked:
        notes += (
            "paired_cost is read only in pull-request mode (--theodolite-compare-ref): no backlog was read",
        )
    if result.capacity_measurements:
        notes += (capacity_note(result.capacity_measurements),)
        if plot is not None:  # matplotlib is there
            drawn = capacity_plot(
                result.results_dir / f"{experiment_id(name)}_capacity.png",
                name,
                result.capacities or {},
                None if baseline is None else baseline.capacity,
                result.target_rates,
            )
            notes += (f"capacity plot: {drawn}",)
    if calibrated := calibration_note(result.calibration, baseline):
        notes = (calibrated, *notes)
    spots = result.blind_spots
    if warning := blind_spot_warning(name, [spots[load] for load in measured.demand if load in spots]):
        notes += (warning,)
    return BenchmarkReport(
        name,
        result.comparison,
        measured,
        baseline,
        plot,
        notes,
        point_costs=result.point_costs,
        blind_spots=spots,
    )
