"""Every format a session's report is written in, behind one interface.

An experiment returns a typed result (report/benchmark.py, report/paired.py); `build_report` turns it into a
`BenchmarkReport`, and each `SummaryFormat` renders all of a session's reports as plain data (xdist's workers
send it to the controller, which prints and writes it). A new format is one class with a `key` and `render`,
added to `SUMMARY_FORMATS`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from pytest_theodolite.report.benchmark import StoredModeResult, stored_mode_report
from pytest_theodolite.report.comment import BenchmarkSection
from pytest_theodolite.report.paired import PairedModeResult, paired_mode_report
from pytest_theodolite.report.summary import (
    BenchmarkReport,
    headline,
    markdown_benchmark,
    markdown_summary,
    terminal_summary,
)

BenchmarkResult = StoredModeResult | PairedModeResult


class SummaryFormat(Protocol):
    """One way of showing a session's benchmarks; `key` names its part of the rendered summary."""

    key: str

    def render(self, reports: Sequence[BenchmarkReport]) -> Any: ...


class TerminalTable:
    """The lines of the terminal summary (a table per benchmark, its notes under it)."""

    key = "lines"

    def render(self, reports: Sequence[BenchmarkReport]) -> list[str]:
        return terminal_summary(reports)


class MarkdownSummary:
    """The Markdown for CI pages (``--theodolite-markdown``, ``$GITHUB_STEP_SUMMARY``)."""

    key = "markdown"

    def render(self, reports: Sequence[BenchmarkReport]) -> str:
        return markdown_summary(reports)


class CommentSections:
    """Each benchmark's section of the pull-request comment (report/comment.py joins them)."""

    key = "benchmarks"

    def render(self, reports: Sequence[BenchmarkReport]) -> list[dict[str, str]]:
        return [BenchmarkSection(r.name, headline(r), markdown_benchmark(r)).to_dict() for r in reports]


SUMMARY_FORMATS: tuple[SummaryFormat, ...] = (TerminalTable(), MarkdownSummary(), CommentSections())


def build_report(result: BenchmarkResult) -> BenchmarkReport:
    """The report of one benchmark's result, whichever mode measured it."""
    if isinstance(result, PairedModeResult):
        return paired_mode_report(result)
    return stored_mode_report(result)


def render_summary(
    results: Iterable[BenchmarkResult], formats: Sequence[SummaryFormat] = SUMMARY_FORMATS
) -> dict[str, Any]:
    """Every format's rendering of the session's benchmarks, by the format's key."""
    reports = [build_report(result) for result in results]
    return {fmt.key: fmt.render(reports) for fmt in formats}
