"""How far a gate can be trusted, from repeated runs (``python -m pytest_theodolite quality``): each run's gate
points read from its JUnit XML, and the false-alarm and detection rates with Clopper-Pearson intervals.

Pure: over JUnit files and the runs' exit codes; running pytest is cli/quality.py's.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scipy import stats

#: a session that ran to its end: gates passed (0), failed (1) or were not judged (7); 2-5 measured a part
COMPLETE_EXIT_CODES = (0, 1, 7)
REGRESSION_VERDICTS = ("regression", "cost-regression")
#: a test case's outcome where its point has no verdict property (points_of)
UNJUDGED_OUTCOMES = ("error", "failure", "?")


@dataclass(frozen=True)
class GatePointResult:
    """One gate point of one run, from the ``theodolite.*`` properties of its JUnit test case."""

    test: str
    load: str
    reference: str  # the stored baseline's demand, or REF's in pull-request mode
    measured: str  # "<=2" where fewer instances were not run
    verdict: str  # pass, improvement, regression, cost-regression, not-comparable, ...; error/skipped/failure
    cpu_change: str = ""  # the CPU per record relative to the reference's, as JUnit gives it ("+0.150")


@dataclass(frozen=True)
class QualityRun:
    kind: str  # "clean" or "injected"
    index: int
    wall_s: float
    exit_code: int
    points: tuple[GatePointResult, ...]

    @property
    def complete(self) -> bool:
        return self.exit_code in COMPLETE_EXIT_CODES

    @property
    def broken(self) -> tuple[GatePointResult, ...]:
        """Points that ended without a gate verdict (an error, a failure outside the comparison)."""
        return tuple(point for point in self.points if point.verdict in UNJUDGED_OUTCOMES)

    @property
    def counted(self) -> bool:
        """Whether the run counts for a rate: it ran to its end and every point reached the comparison (a
        point not comparable counts: the gate said it could not judge, and flagged nothing)."""
        return self.complete and bool(self.points) and not self.broken

    @property
    def why_not_counted(self) -> str:
        if not self.complete:
            return f"exit {self.exit_code}: did not run to its end"
        if not self.points:
            return "no gate point in its JUnit XML"
        kinds = ", ".join(sorted({point.verdict for point in self.broken}))
        return f"{len(self.broken)} point{'s' if len(self.broken) != 1 else ''} without a verdict: {kinds}"

    @property
    def flagged(self) -> bool:
        """The run failed the gate: some point regressed (in demand or, judged, in CPU per record)."""
        return any(point.verdict in REGRESSION_VERDICTS for point in self.points)

    @property
    def label(self) -> str:
        return f"{self.kind[0]}{self.index}"


@dataclass(frozen=True)
class Rate:
    """k of n runs, with the exact (Clopper-Pearson) interval of the underlying rate."""

    count: int
    runs: int
    low: float
    high: float

    @classmethod
    def of(cls, count: int, runs: int, confidence: float = 0.95) -> Rate:
        if runs <= 0:
            return cls(count, runs, 0.0, 1.0)
        interval = stats.binomtest(count, runs).proportion_ci(confidence_level=confidence, method="exact")
        return cls(count, runs, float(interval.low), float(interval.high))

    @property
    def text(self) -> str:
        if not self.runs:
            return "no complete run"
        return f"{self.count} of {self.runs} ({self.count / self.runs:.0%}; 95% CI {self.low:.0%}-{self.high:.0%})"


def points_of(junit: Path) -> tuple[GatePointResult, ...]:
    """Every gate point of a JUnit XML file; a point that ended before its comparison (an error, a skip)
    keeps its test case's outcome as its verdict. A missing file: none (the run did not get that far)."""
    if not junit.exists():
        return ()
    points = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "?")
        properties = {p.get("name"): p.get("value") or "" for p in case.iter("property")}
        loads = [key.rsplit(".", 1)[1] for key in properties if key and key.startswith("theodolite.verdict.")]
        for load in loads:
            reference = properties.get(
                f"theodolite.ref.{load}", properties.get(f"theodolite.baseline.{load}", "?")
            )
            if properties.get(f"theodolite.ref_at_least.{load}") == "true":
                reference = f">={reference}"
            elif properties.get(f"theodolite.ref_expected.{load}") == "true":
                reference = f"~{reference}"
            at_most = "<=" if properties.get(f"theodolite.demand_at_most.{load}") == "true" else ""
            points.append(
                GatePointResult(
                    name,
                    load,
                    reference,
                    at_most + properties.get(f"theodolite.demand.{load}", "?"),
                    properties[f"theodolite.verdict.{load}"],
                    properties.get(f"theodolite.cpu_change.{load}", ""),
                )
            )
        if not loads and "load=" in name:
            outcome = next(
                (tag for tag in ("error", "failure", "skipped") if case.find(tag) is not None), "?"
            )
            points.append(GatePointResult(name, name.rpartition("load=")[2].rstrip("]"), "?", "-", outcome))
    return tuple(points)


def _cell(point: GatePointResult, pull_request: bool) -> str:
    mark = {"pass": "", "improvement": " (better)", "regression": " REGRESSION"}.get(point.verdict)
    if mark is None:
        mark = f" {point.verdict.upper()}" if point.verdict == "cost-regression" else f" {point.verdict}"
    cpu = f" cpu {float(point.cpu_change):+.0%}" if point.cpu_change else ""
    demands = f"{point.reference} -> {point.measured}" if pull_request else point.measured
    return f"{demands}{mark}{cpu}"


def quality_report(runs: Sequence[QualityRun], pull_request: bool) -> str:
    """Every run's points side by side (in pull-request mode each cell shows that run's REF demand beside the
    change's), then the false-alarm and detection rates and each run's wall time."""
    table: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    references: dict[tuple[str, str], str] = {}
    for run in runs:
        for point in run.points:
            key = (point.test.split("[")[0], point.load)
            references[key] = point.reference
            table[key][run.label] = _cell(point, pull_request)
    columns = [run.label for run in runs]
    lines = [
        ("| gate | load | " if pull_request else "| gate | load | baseline | ") + " | ".join(columns) + " |",
        "|---|---|" + ("" if pull_request else "---|") + "---|" * len(columns),
    ]

    def order(item: tuple[tuple[str, str], dict[str, str]]) -> tuple[str, int, str]:
        test, load = item[0]
        return (test, int(load) if load.isdigit() else 0, load)

    for (test, load), cells in sorted(table.items(), key=order):
        reference = "" if pull_request else f"{references[(test, load)]} | "
        lines.append(
            f"| {test} | {load} | {reference}" + " | ".join(cells.get(c, "-") for c in columns) + " |"
        )
    for kind, label in (
        ("clean", "false alarms (unchanged code: runs that failed the gate)"),
        ("injected", "detections (injected regression: runs that failed the gate)"),
    ):
        counted = [run for run in runs if run.kind == kind and run.counted]
        left_out = [run for run in runs if run.kind == kind and not run.counted]
        if counted:
            rate = Rate.of(sum(run.flagged for run in counted), len(counted))
            times = ", ".join(f"{run.wall_s / 60:.1f}" for run in counted)
            lines += ["", f"{label}: {rate.text}; wall time per run (min): {times}"]
        if left_out:
            lines.append(
                f"not counted ({kind}): "
                + ", ".join(f"{run.label} ({run.why_not_counted})" for run in left_out)
            )
    return "\n".join(lines)
