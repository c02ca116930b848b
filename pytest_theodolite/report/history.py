"""Runs lined up by commit (``python -m pytest_theodolite history``): each benchmark's figures per run, in
time order, as a table and as the CSV and configuration Apache Otava reads to mark change points.

Otava (E-divisive means over each series) runs as its own program: it pins numpy and scipy to exact
releases, so it is not a dependency of the plugin. Pure: over results read back with
``store.results.read_results``.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pytest_theodolite.report.export import MEASURES, Figure

#: the CSV's time and revision columns, before one column per figure
TIME_COLUMN, COMMIT_COLUMN = "time", "commit"


class HistoryError(ValueError):
    """Runs that cannot be lined up."""


@dataclass(frozen=True)
class Run:
    """One results directory's experiment: when it started, the commit it measured, and its figures."""

    source: Path
    started: datetime
    commit: str | None  # None: not measured in a git checkout, or recorded before revisions were
    dirty: bool  # the working tree differed from the commit (a pull request's change, uncommitted)
    figures: tuple[Figure, ...]

    @property
    def label(self) -> str:
        if self.commit is None:
            return "unknown"
        return self.commit[:7] + ("+" if self.dirty else "")


@dataclass(frozen=True)
class BenchmarkHistory:
    """One benchmark's runs in time order and every figure name any of them has."""

    benchmark: str
    runs: tuple[Run, ...]
    columns: tuple[str, ...]  # "load=4000/demand", in the runs' order of appearance

    def value(self, run: Run, column: str) -> float | None:
        for figure in run.figures:
            if figure.benchmark == self.benchmark and f"{figure.point}/{figure.measure}" == column:
                return figure.value
        return None

    def complete_columns(self) -> tuple[str, ...]:
        """The columns every run has a number for: the series a change-point analysis can take."""
        return tuple(c for c in self.columns if all(self.value(run, c) is not None for run in self.runs))


def histories(runs: Sequence[Run]) -> list[BenchmarkHistory]:
    """Per benchmark, the runs that measured it, oldest first (ties: by commit, then source)."""
    names = sorted({f.benchmark for run in runs for f in run.figures})
    found = []
    for name in names:
        own = sorted(
            (run for run in runs if any(f.benchmark == name for f in run.figures)),
            key=lambda run: (run.started, run.commit or "", str(run.source)),
        )
        columns: dict[str, None] = {}
        for run in own:
            for figure in run.figures:
                if figure.benchmark == name:
                    columns.setdefault(f"{figure.point}/{figure.measure}", None)
        found.append(BenchmarkHistory(name, tuple(own), tuple(columns)))
    return found


def _number(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.6g}"


def history_csv(history: BenchmarkHistory) -> str:
    """Time (ISO 8601, as Otava's CSV source parses it), commit, then one column per figure; a run without a
    figure leaves its cell empty."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([TIME_COLUMN, COMMIT_COLUMN, *history.columns])
    for run in history.runs:
        writer.writerow(
            [run.started.isoformat(), run.label, *(_number(history.value(run, c)) for c in history.columns)]
        )
    return out.getvalue()


def csv_file_name(benchmark: str) -> str:
    return f"{benchmark}.csv"


def otava_config(histories_: Sequence[BenchmarkHistory], directory: Path) -> str:
    """Otava's configuration: one CSV test per benchmark over its complete columns, each metric's direction
    (-1: less is better, demand and CPU per record; 1: more, capacity). JSON, which YAML parsers read."""
    tests = {}
    for history in histories_:
        metrics = {
            column: {"column": column, "direction": -1 if MEASURES[column.rsplit("/", 1)[1]] else 1}
            for column in history.complete_columns()
        }
        if not metrics:
            continue
        tests[history.benchmark] = {
            "type": "csv",
            "file": str(directory / csv_file_name(history.benchmark)),
            "time_column": TIME_COLUMN,
            "attributes": [COMMIT_COLUMN],
            "metrics": metrics,
        }
    return json.dumps({"tests": tests}, indent=2) + "\n"


def history_table(history: BenchmarkHistory) -> str:
    """A Markdown table: a row per run (time, commit, source), a column per figure."""
    header = ["started", "commit", *history.columns, "results"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for run in history.runs:
        cells = [run.started.strftime("%Y-%m-%d %H:%M"), run.label]
        cells += [_number(history.value(run, c)) or "-" for c in history.columns]
        cells.append(str(run.source))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def check_lined_up(runs: Sequence[Run]) -> None:
    if not runs:
        raise HistoryError("no runs to line up: give the results directories of gate runs")
    if not any(run.figures for run in runs):
        raise HistoryError(
            "none of the runs has a figure (a demand that is a number, a CPU per record or a capacity): "
            "nothing to line up"
        )
