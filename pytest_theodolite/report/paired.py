"""Pull-request mode's typed result turned into its report: the change against REF, both sides' plots, and the
notes on what REF did not run and what the paired backlog read found."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytest_theodolite.core.capacity import CapacityEstimate
from pytest_theodolite.core.cost import CostCheck
from pytest_theodolite.core.outcomes import CostStatus
from pytest_theodolite.core.paired_cost import PairedCost
from pytest_theodolite.core.scalability import DemandResult
from pytest_theodolite.judge.comparison import Comparison
from pytest_theodolite.report.notes import Calibrated, bound_notes, calibration_note, loads_text
from pytest_theodolite.report.plot import PlotDependencyMissing, capacity_plot, scalability_plot
from pytest_theodolite.report.summary import BenchmarkReport, CostFigure
from pytest_theodolite.store.baseline import Baseline
from pytest_theodolite.store.results import experiment_id


@dataclass(frozen=True)
class PairedReadResult:
    """The paired backlog read of one benchmark: both sides' time per record (inverse throughput), batch by
    batch."""

    #: each side's instance CPU, where it was limited
    instance_cores: float | None
    batch_records: int
    planned_batches: int
    figure: PairedCost | None = None
    check: CostCheck | None = None
    #: why there is no figure
    problem: str | None = None
    #: the second read, the other side asked first, where the first rose beyond the tolerance
    confirming: PairedCost | None = None
    #: the pairs after which both reads stopped, certain of a pass (None: read to the end)
    stopped_at: int | None = None
    #: side -> the batches it read, where its backlog ran out before the planned batches
    drained: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PairedModeResult:
    """What pull-request mode measured for one benchmark: the change (working tree) against REF."""

    name: str
    reference: str  # "REF origin/main (abc1234)"
    comparison: Comparison
    measured: DemandResult  # the change's
    ref_function: Baseline  # REF's demand function, as the table's reference
    results_dir: Path
    raw_results: tuple[Path, Path]  # REF's and the change's
    target_rates: Mapping[int, float]
    costs: Mapping[int, CostFigure]
    #: the change against the stored baseline, where there is one
    against_baseline: Comparison | None = None
    baseline: Baseline | None = None
    offered_share: float = 1.0
    #: per side, the capacity strategy's capacities; None for the other strategies
    capacities: Mapping[str, Mapping[int, CapacityEstimate]] | None = None
    paired_read: PairedReadResult | None = None
    #: loads where REF was not run, its demand expected from the stored baseline (shown '~N')
    ref_expected: tuple[int, ...] = ()
    #: loads where REF failed below the change's pass and was run no further ('>=N')
    ref_failed_below: tuple[int, ...] = ()
    #: loads where REF was not run at all: the change passed on the fewest instances
    ref_not_run: tuple[int, ...] = ()
    #: load -> why REF's failure below the change's pass is not certain
    ref_uncertain_below: Mapping[int, str] = field(default_factory=dict)
    paired_cost_tolerance: float | None = None
    calibration: Calibrated | None = None


def paired_read_note(read: PairedReadResult | None) -> str | None:
    """The report's line on the paired backlog read; None where none was asked for."""
    if read is None:
        return None
    cores = f" of {read.instance_cores:g} core" if read.instance_cores is not None else ""
    how = f"both sides reading a backlog at once, one instance{cores} each, {read.batch_records:,}-record batches"
    check, figure = read.check, read.figure
    if figure is None or check is None:
        return f"time per record ({how}): not measured: {read.problem or 'the run ended before the read did'}"
    if check.tolerance is None:
        verdict = "reported, not judged: paired_cost_tolerance is off"
    elif read.confirming is not None and not check.reason:
        again = f"a second read, the other side asked first ({read.confirming.text()})"
        both = f"both reads' {figure.pairs + read.confirming.pairs} pairs together"
        if check.status == CostStatus.REGRESSION:
            verdict = (
                f"a cost regression: beyond the {check.tolerance:.0%} tolerance, and so was {again}, {both} "
                f"significant (p {check.p_value:.2g}); every load whose demand passed fails"
            )
        elif read.confirming.change > check.tolerance:
            verdict = (
                f"beyond the {check.tolerance:.0%} tolerance, and so was {again}, but {both} not significant "
                f"(p {check.p_value:.2g}): passed"
            )
        else:
            verdict = f"beyond the {check.tolerance:.0%} tolerance, but {again} was not: passed"
    elif check.reason:
        verdict = check.reason
    elif check.status == CostStatus.REGRESSION:
        verdict = (
            f"a cost regression: beyond the {check.tolerance:.0%} tolerance and significant; every load "
            "whose demand passed fails"
        )
    else:
        verdict = f"within the {check.tolerance:.0%} tolerance or not significant: passed"
        if read.stopped_at is not None:
            verdict += f" (read stopped after {read.stopped_at} pairs: certainly below the tolerance)"
    for side, batches in read.drained.items():  # fewer pairs than planned: read faster than it was filled
        verdict += f"; {side}'s backlog ran out after {batches} of {read.planned_batches} batches"
    return f"{figure.text()} ({how}): {verdict}"


def _ref_notes(result: PairedModeResult) -> tuple[str, ...]:
    """What REF's table entries rest on where it was not searched to its demand."""
    label = result.reference
    notes: tuple[str, ...] = ()
    # '<=N' says "passed at REF's demand"; where REF was not run, the '~N' note below says what it passed at
    notes += bound_notes(result.measured.without(result.ref_expected), label)
    if result.ref_failed_below:
        notes += (
            f">=N (loads {loads_text(result.ref_failed_below)}): {label} failed below the instances the change "
            "passed at, and those were not run -- the verdict needs no more, and the paired read judges the "
            "cost; exact_demand=true (or --theodolite-exact-demand=true) searches both demands",
        )
    if resting := result.ref_uncertain_below:
        notes += (
            f"not certain below the change's pass (loads {loads_text(list(resting))}): {label}'s "
            + "; ".join(f"{why} (load {load})" for load, why in resting.items())
            + " -- the pass rests on it, and a regression of one instance count there would not show; re-run "
            "it, or move the gate's load off the edge",
        )
    if result.ref_expected:
        tolerance = result.paired_cost_tolerance
        within = f"{tolerance:.0%}" if tolerance is not None else "its tolerance"
        notes += (
            f"~N (loads {loads_text(result.ref_expected)}): {label} not run -- the paired read is certain the "
            f"change costs per record within {within} of {label}'s, and the "
            "change passed at the demand the stored baseline expects where each load weighs at least what it "
            f"weighed on the baseline's host (ref_below=false). Where {label} needs fewer, a change that moves "
            "the demand without moving its cost beyond that is not seen; ref_below=true (the default) runs it "
            "one instance below",
        )
    if result.ref_not_run:
        notes += (
            f">=N (loads {loads_text(result.ref_not_run)}): {label} not run -- the change passed on the fewest "
            "instances, and no demand lies below them; the paired read judges the cost",
        )
    return notes


def paired_mode_report(result: PairedModeResult) -> BenchmarkReport:
    """The change against REF per load, both sides' CPU per record, and the change against the stored
    baseline where there is one; the plots drawn into the results directory where matplotlib is there."""
    name, label, measured = result.name, result.reference, result.measured
    ref_dir, change_dir = result.raw_results
    notes: tuple[str, ...] = (
        f"{label} measured beside the working tree, alternating (ABBA) at every load and instance count; "
        f"raw results: {ref_dir}, {change_dir}",
    )
    if result.offered_share != 1:
        notes += (
            f"both sides were offered every load at {result.offered_share:.2f}x its rate (the same keys, each "
            "sending less often): the calibration reads this testbed slower than the stored baseline's, and "
            "a single-revision run tries the baseline's demands, the searches' first guesses, at that rate; "
            f"the change is judged against {label} at it",
        )
    plot = None
    try:
        plot = scalability_plot(
            result.results_dir / f"{experiment_id(name)}_demand.png",
            name,
            measured,
            result.ref_function,
            reference=label,
            measured_label="change (working tree)",
        )
    except PlotDependencyMissing as exc:
        notes += (str(exc),)
    capacities = result.capacities
    if plot is not None and capacities is not None and any(capacities.values()):
        drawn = capacity_plot(
            result.results_dir / f"{experiment_id(name)}_capacity.png",
            name,
            capacities.get("change", {}),
            capacities.get("ref", {}),
            result.target_rates,
            reference_label=label,
            measured_label="change (working tree)",
        )
        notes += (f"capacity plot: {drawn}",)
    if paired := paired_read_note(result.paired_read):
        notes += (paired,)
    notes += _ref_notes(result)
    if calibrated := calibration_note(result.calibration, result.baseline):
        notes = (calibrated, *notes)
    return BenchmarkReport(
        name,
        result.comparison,
        measured,
        result.ref_function,
        plot,
        notes,
        reference=label,
        costs=result.costs,
        baseline_comparison=result.against_baseline,
    )
