"""What the gates show people: failure tables, the terminal summary, Markdown for CI pages, JUnit properties
and the scalability plot. Pure rendering over the comparison data: no pytest, Kafka or Spark imports.

Words are the same everywhere: a load's status is PASS, IMPROVEMENT, REGRESSION, COST REGRESSION, UNMEASURED,
NOT COMPARABLE or NEW LOAD (`Verdict.label`); a sub-experiment's mark is `ok`, `FAIL`, `INVALID` or
`ERRORED`. Plain ASCII, no emoji, so tables line up in any terminal and log.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_theodolite.core.blind_spot import BlindSpot
from pytest_theodolite.core.cost import CostCheck, PointCost
from pytest_theodolite.core.outcomes import Outcome, Verdict, count_text
from pytest_theodolite.core.records import SubExperimentRecord
from pytest_theodolite.core.scalability import DemandResult
from pytest_theodolite.judge.comparison import Comparison, PointComparison
from pytest_theodolite.store.baseline import Baseline

#: (load, resources) of one sub-experiment
Point = tuple[int, int]

OUTCOME_MARKS: Mapping[Outcome, str] = {
    Outcome.PASS: "ok",
    Outcome.FAIL: "FAIL",
    Outcome.INVALID: "INVALID",
    Outcome.ERRORED: "ERRORED",
}


@dataclass(frozen=True)
class CostFigure:
    """Pull-request mode's continuous figure at one load: the CPU microseconds per record the instances spent
    on each side, at its demand, and the change's relative difference where both ran the same instances."""

    ref_us: float | None
    change_us: float | None
    relative: float | None  # 0.2: the change is 20 % dearer per record

    @property
    def text(self) -> str:
        """'41.2 -> 62.0 us (+50%)'; 'n/a' where a side has no figure."""
        if self.ref_us is None or self.change_us is None:
            return "n/a"
        relative = "" if self.relative is None else f" ({self.relative:+.0%})"
        return f"{self.ref_us:.1f} -> {self.change_us:.1f} us{relative}"


@dataclass(frozen=True)
class BenchmarkReport:
    """Everything the summaries say about one benchmark of a session."""

    name: str
    comparison: Comparison
    measured: DemandResult
    baseline: Baseline | None  # None: no baseline file yet (pull-request mode: REF's demand function)
    plot_path: Path | None = None
    notes: tuple[str, ...] = ()
    #: what `comparison` compares with: "baseline", or "REF origin/main (abc1234)" in pull-request mode
    reference: str = "baseline"
    #: pull-request mode: the CPU per record of both sides, per load
    costs: Mapping[int, CostFigure] | None = None
    #: pull-request mode with a stored baseline: the change against it too
    baseline_comparison: Comparison | None = None
    #: single-revision gates: the CPU per record at each load's demand, and how much dearer the job could
    #: become there before the demand changes
    point_costs: Mapping[int, PointCost | None] | None = None
    blind_spots: Mapping[int, BlindSpot | None] | None = None


# ------------------------------------------------------------------------------------------------------------
# Small pieces
# ------------------------------------------------------------------------------------------------------------


def slopes_and_outcomes(
    records: Iterable[SubExperimentRecord],
) -> tuple[dict[Point, float | None], dict[Point, Outcome]]:
    """The deciding lag slope and the outcome of each recorded sub-experiment, keyed by (load, resources)."""
    records = tuple(records)
    slopes = {(r.load, r.resources): r.lag_trend_slope for r in records}
    outcomes = {(r.load, r.resources): r.outcome for r in records}
    return slopes, outcomes


def format_slope(slope: float | None) -> str:
    """'+5321/s', '-12/s', '+0.4/s'; 'n/a' when no slope could be fitted."""
    if slope is None or math.isnan(slope):
        return "n/a"
    if math.isinf(slope):
        return "+inf/s" if slope > 0 else "-inf/s"
    # Whole records/s are enough next to a threshold of thousands; keep a decimal for near-zero trends.
    return f"{slope:+.0f}/s" if abs(slope) >= 10 else f"{slope:+.1f}/s"


def lag_slopes_text(
    load: int, slopes: Mapping[Point, float | None], outcomes: Mapping[Point, Outcome] | None = None
) -> str:
    """'r=1: +5321/s FAIL, r=2: -12/s ok' for the sub-experiments run at `load`; '-' when none ran."""
    outcomes = outcomes or {}
    at_load = sorted(
        resources for (point_load, resources) in set(slopes) | set(outcomes) if point_load == load
    )
    if not at_load:
        return "-"
    parts = []
    for resources in at_load:
        part = f"r={resources}: {format_slope(slopes.get((load, resources)))}"
        outcome = outcomes.get((load, resources))
        if outcome is not None:
            part += f" {OUTCOME_MARKS[outcome]}"
        parts.append(part)
    return ", ".join(parts)


#: a benchmark's status where some load's measurement began and did not end (Comparison.unfinished)
UNFINISHED = "UNFINISHED"


def benchmark_status(comparison: Comparison) -> str:
    """One word for a benchmark: REGRESSION > COST REGRESSION > NOT COMPARABLE > UNMEASURED > UNFINISHED >
    IMPROVEMENT > NEW LOAD > PASS; UNMEASURED where no load was measured at all (a run interrupted before its
    first point): nothing passed."""
    if not comparison.points:
        return UNFINISHED if comparison.unfinished else Verdict.UNMEASURED.label
    for verdict in (
        Verdict.REGRESSION,
        Verdict.COST_REGRESSION,
        Verdict.NOT_COMPARABLE,
        Verdict.UNMEASURED,
    ):
        if any(p.verdict is verdict for p in comparison.points):
            return verdict.label
    if comparison.unfinished:
        return UNFINISHED
    for verdict in (Verdict.IMPROVEMENT, Verdict.NEW_LOAD):
        if any(p.verdict is verdict for p in comparison.points):
            return verdict.label
    return Verdict.PASS.label


def points_of(comparison: Comparison | PointComparison) -> tuple[PointComparison, ...]:
    return (comparison,) if isinstance(comparison, PointComparison) else comparison.points


def _fixed_width_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]
) -> list[str]:
    """Columns separated by ' | ', a '-+-' rule under the header; numbers right-aligned, no trailing spaces."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        padded = [
            cell.rjust(width) if align_right else cell.ljust(width)
            for cell, width, align_right in zip(cells, widths, right, strict=True)
        ]
        return " | ".join(padded).rstrip()

    return [line(headers), "-+-".join("-" * width for width in widths), *(line(row) for row in rows)]


def _loads_text(points: Sequence[PointComparison]) -> str:
    return ", ".join(str(p.load) for p in points)


def _grouped(
    points: Iterable[PointComparison], reason: Callable[[PointComparison], str]
) -> dict[str, list[PointComparison]]:
    """The points by their reason, in order: one sentence per reason (a testbed's speed makes every load not
    comparable alike, uncertain verdicts each load for its own)."""
    grouped: dict[str, list[PointComparison]] = {}
    for point in points:
        grouped.setdefault(reason(point), []).append(point)
    return grouped


def _improvement_sentence(points: Sequence[PointComparison], reference: str = "baseline") -> str:
    changes = ", ".join(
        f"load {p.load} needs {p.measured_text} ({reference} {p.baseline_text})" for p in points
    )
    return f"improvement: {changes}" + ("; the baseline could be lowered" if reference == "baseline" else "")


def _commentary(report: BenchmarkReport) -> list[str]:
    """Sentences under a benchmark's table: what did not fail but is worth knowing."""
    comparison = report.comparison
    sentences = []
    if not comparison.has_baseline:
        sentences.append("no baseline stored yet: record one to gate this benchmark")
    elif comparison.new_loads:
        sentences.append(
            f"no baseline value for load {_loads_text(comparison.new_loads)}: record one to gate it"
        )
    if comparison.unmeasured:
        sentences.append(
            f"unmeasured: load {_loads_text(comparison.unmeasured)} (an invalid or errored sub-experiment)"
        )
    if comparison.unfinished:
        sentences.append(
            f"unfinished: load {', '.join(map(str, comparison.unfinished))} -- the run stopped (interrupted, or "
            "an error) before its verdict; its sub-experiments so far are in the results directory"
        )
    for reason, points in _grouped(comparison.not_comparable, lambda p: p.reason).items():
        sentences.append(f"not comparable: load {_loads_text(points)}: {reason}")
    one_sided = [p for p in comparison.points if p.verdict is not Verdict.NOT_COMPARABLE and p.reason]
    for reason, points in _grouped(one_sided, lambda p: p.reason).items():
        sentences.append(f"load {_loads_text(points)}: {reason}")
    blind = [p for p in comparison.points if p.cost is not None and p.cost.ceiling is not None]
    if blind:
        sentences.append(
            f"cost not judged at load {_loads_text(blind)}: the reference's instances spent nearly all their CPU "
            "quota there, so the CPU per record could not rise by the cost tolerance whatever a record costs "
            "(a dearer record makes the micro-batches bigger instead); strategy=capacity measures what a record "
            "costs at capacity"
        )
    unsure = [p for p in comparison.points if p.cost and p.cost.not_judged and p.cost.ceiling is None]
    for reason, points in _grouped(
        unsure, lambda p: p.cost.reason.removeprefix("not judged: ") if p.cost else ""
    ).items():
        sentences.append(f"cost not judged at load {_loads_text(points)}: {reason}")
    if comparison.improvements:
        sentences.append(_improvement_sentence(comparison.improvements, report.reference))
    if report.baseline_comparison is not None:
        against = report.baseline_comparison
        verdicts = ", ".join(f"{p.load} {p.verdict.label}" for p in against.points) or "no load"
        sentences.append(f"against the stored baseline: {benchmark_status(against)} ({verdicts})")
    if comparison.testbed_differs:
        sentences.append(f"testbed: {comparison.testbed_sentence}")
    if comparison.not_run:
        sentences.append(f"not run this time: baseline load {', '.join(map(str, comparison.not_run))}")
    if report.plot_path is not None:
        sentences.append(f"plot: {report.plot_path}")
    sentences.extend(report.notes)
    return sentences


def headline(report: BenchmarkReport) -> str:
    """'uc1-keys: REGRESSION (1 regression, cost tolerance 10%)': a benchmark's status and why, in a line."""
    comparison = report.comparison
    problems = [
        count_text(len(points), noun) + suffix
        for points, noun, suffix in (
            (comparison.regressions, "regression", ""),
            (comparison.cost_regressions, "cost regression", _judged_by(comparison.cost_regressions)),
            (comparison.unmeasured, "unmeasured load", ""),
            (comparison.not_comparable, "load", " not comparable"),
            (comparison.unfinished, "unfinished load", ""),
        )
        if points
    ]
    details = problems + ([f"tolerance +{comparison.tolerance}"] if comparison.tolerance else [])
    if comparison.cost_tolerance is not None:
        details.append(f"cost tolerance {comparison.cost_tolerance:.0%}")
    return f"{report.name}: {benchmark_status(comparison)}" + (f" ({', '.join(details)})" if details else "")


def _judged_by(points: Sequence[PointComparison]) -> str:
    """' by task CPU per record, batch by batch, beyond 7%' where every cost regression was judged by a figure other
    than the CPU per record at the demand (pull-request mode's paired read); '' otherwise."""
    checks = {(p.cost.figure, p.cost.tolerance) for p in points if p.cost is not None}
    if len(checks) != 1:
        return ""
    ((figure, tolerance),) = checks
    if figure == CostCheck.figure or tolerance is None:
        return ""
    return f" by {figure}, beyond {tolerance:.0%}"


# ------------------------------------------------------------------------------------------------------------
# Renderers
# ------------------------------------------------------------------------------------------------------------


def failure_table(
    comparison: Comparison | PointComparison,
    slopes: Mapping[Point, float | None],
    outcomes: Mapping[Point, Outcome] | None = None,
    reference: str = "baseline",
) -> str:
    """A fixed-width table for a failing gate's message: load | baseline | measured | lag slopes.

    `slopes` (and `outcomes`, for the ok/FAIL marks) are keyed by (load, resources); see `slopes_and_outcomes`.
    """
    rows = [
        (str(p.load), p.baseline_text, p.measured_text, lag_slopes_text(p.load, slopes, outcomes))
        for p in points_of(comparison)
    ]
    headers = ("load", reference, "measured", "lag slopes")
    return "\n".join(_fixed_width_table(headers, rows, right=(True, True, True, False)))


def _table(report: BenchmarkReport) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """Headers and rows of a benchmark's table: load | baseline (or REF) | measured | verdict [| CPU/record]."""
    paired = report.costs is not None
    headers: tuple[str, ...] = ("load", report.reference, "change" if paired else "measured", "verdict")
    rows: list[tuple[str, ...]] = [
        (str(p.load), p.baseline_text, p.measured_text, p.verdict.label) for p in report.comparison.points
    ]
    if report.costs is not None:
        costs = report.costs
        headers += ("CPU per record",)
        rows = [(*row, costs[int(row[0])].text if int(row[0]) in costs else "n/a") for row in rows]
    elif report.point_costs is not None:
        spots = report.blind_spots or {}
        headers += ("CPU per record", "blind spot")
        rows = [
            (
                *row,
                cost_text(p, report.point_costs.get(p.load)),
                spot.text if (spot := spots.get(p.load)) else "n/a",
            )
            for row, p in zip(rows, report.comparison.points, strict=True)
        ]
    return headers, rows


def estimate_text(cost: PointCost) -> str:
    """'52.1 us [50.3, 53.9]': the CPU per record and its interval (where the window allowed one)."""
    estimate = cost.estimate
    text = f"{estimate.cpu_us_per_record:.1f} us"
    if estimate.low is not None and estimate.high is not None:
        text += f" [{estimate.low:.1f}, {estimate.high:.1f}]"
    return text


def cost_text(point: PointComparison, cost: PointCost | None) -> str:
    """'52.1 us [50.3, 53.9] (+3% vs 50.6)': the CPU per record at the demand, its interval, and the change
    against the baseline's figure where both ran the same instances; 'n/a' without a figure."""
    if cost is None:
        return "n/a"
    text = estimate_text(cost)
    check = point.cost
    if check is not None and check.relative is not None:
        text += f" ({check.relative:+.0%}{' normalised' if check.normalised else ''}"
        text += f"; {check.divided:+.0%} divided)" if check.divided is not None else ")"
    return text


def terminal_summary(benchmarks: Sequence[BenchmarkReport]) -> list[str]:
    """Lines for pytest's terminal summary: per benchmark a headline, a table, and what is worth knowing."""
    lines: list[str] = []
    for report in benchmarks:
        if lines:
            lines.append("")
        lines.append(headline(report))
        headers, rows = _table(report)
        if rows:
            table = _fixed_width_table(
                headers, rows, right=(True, True, True) + (False,) * (len(headers) - 3)
            )
            lines.extend(f"  {line}" for line in table)
        else:
            lines.append("  no load was measured")
        lines.extend(f"  {sentence}" for sentence in _commentary(report))
    return lines


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|")


SUMMARY_HEADING = "## Scalability gates (pytest-theodolite)"


def markdown_benchmark(report: BenchmarkReport) -> str:
    """One benchmark's Markdown: a heading with its status, its table and what is worth knowing."""
    parts = [f"### `{report.name}`: {benchmark_status(report.comparison)}", ""]
    headers, rows = _table(report)
    headers = tuple("status" if header == "verdict" else header for header in headers)
    if rows:
        parts += [
            "| " + " | ".join(_markdown_cell(h) for h in headers) + " |",
            "| ---: | ---: | ---: |" + " :--- |" * (len(headers) - 3),
        ]
        parts += ["| " + " | ".join(_markdown_cell(cell) for cell in row) + " |" for row in rows]
    else:
        parts.append("No load was measured.")
    parts.append("")
    # a local path
    commentary = [s for s in _commentary(report) if not s.startswith(("plot: ", "capacity plot: "))]
    if report.comparison.tolerance:
        commentary.insert(0, f"tolerance: +{count_text(report.comparison.tolerance, 'instance')}")
    if report.comparison.cost_tolerance is not None:
        commentary.insert(0, f"cost tolerance: {report.comparison.cost_tolerance:.0%} CPU per record")
    if commentary:
        parts += [f"- {_markdown_cell(sentence)}" for sentence in commentary] + [""]
    return "\n".join(parts)


def markdown_summary(benchmarks: Sequence[BenchmarkReport]) -> str:
    """GitHub-flavoured Markdown for `$GITHUB_STEP_SUMMARY`: a heading and a table per benchmark."""
    if not benchmarks:
        return f"{SUMMARY_HEADING}\n\nNo benchmark ran.\n"
    return "\n".join([SUMMARY_HEADING, "", *(markdown_benchmark(report) for report in benchmarks)])


# ------------------------------------------------------------------------------------------------------------
# Plot
# ------------------------------------------------------------------------------------------------------------
