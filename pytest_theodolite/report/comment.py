"""The pull-request comment (``--theodolite-pr-comment FILE``): one Markdown document a workflow posts on the
pull request and updates in place on the next push (it finds its own comment by `COMMENT_MARKER`).

Pure rendering over what the gates of a run reported: no pytest, Kafka or Spark imports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_theodolite.core.outcomes import count_text
from pytest_theodolite.store.results import experiment_id

#: the first line of every comment: an HTML comment GitHub does not show, by which a workflow finds the
#: comment it posted before (sticky-comment actions call it a header)
COMMENT_MARKER = "<!-- pytest-theodolite scalability comment -->"


@dataclass(frozen=True)
class GateCounts:
    """How the gate points of a run ended: the figures the exit code is made of."""

    regressions: int = 0  # points judged worse than their reference (exit 1)
    unmeasured: int = 0  # points without a verdict: unmeasured or not comparable (exit 7 when nothing else)
    other_failures: int = 0  # tests that failed without a gate verdict: a broken job or set-up (exit 1)
    interrupted: bool = False  # stopped (Ctrl-C) before every gate point ran


@dataclass(frozen=True)
class BenchmarkSection:
    """One benchmark as the summaries render it (``summary.headline`` and ``summary.markdown_benchmark``)."""

    name: str
    headline: str
    markdown: str

    @classmethod
    def from_dict(cls, data: Mapping[str, str]) -> BenchmarkSection:
        return cls(name=data["name"], headline=data["headline"], markdown=data["markdown"])

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "headline": self.headline, "markdown": self.markdown}


def run_verdict(counts: GateCounts, benchmarks: int) -> tuple[str, str]:
    """The run's verdict and why, in the words of the exit code: ('REGRESSION', 'a sentence')."""
    if counts.interrupted:
        return (
            "INTERRUPTED",
            "The run was stopped before every gate point was judged: no verdict; what was measured is below "
            "(exit code 2).",
        )
    if counts.regressions:
        return (
            "REGRESSION",
            f"{count_text(counts.regressions, 'gate point')} judged worse than the reference: a load needs more "
            "instances, or (with a cost tolerance) more CPU per record beyond its noise (exit code 1).",
        )
    if counts.other_failures:
        return (
            "ERROR",
            f"{count_text(counts.other_failures, 'test')} failed without a scalability verdict: a job or a "
            "service that did not start or run; the job's log says why (exit code 1).",
        )
    if counts.unmeasured:
        return (
            "NO VERDICT",
            f"Nothing regressed, but {count_text(counts.unmeasured, 'gate point')} could not be judged: "
            "unmeasured (a side fell short or died) or not comparable (an uncertain verdict, or a testbed "
            "of another speed than the baseline's); each reason is below (exit code 7).",
        )
    if not benchmarks:
        return ("NO GATE RAN", "No scalability gate was collected or measured in this run.")
    return ("PASS", "Every gate point is within its reference (exit code 0).")


def pr_comment(
    sections: Sequence[BenchmarkSection],
    counts: GateCounts,
    *,
    results_link: str | None = None,
    results_dir: str | None = None,
) -> str:
    """The comment: the marker, the run's verdict and why, a line per benchmark, each benchmark's table
    (both sides' demand, the CPU per record and its change), and where the raw results are."""
    verdict, why = run_verdict(counts, len(sections))
    parts = [COMMENT_MARKER, f"## Scalability gates: {verdict}", "", why, ""]
    if sections:
        parts += [f"- {_escape(section.headline)}" for section in sections] + [""]
        parts += ["<details open><summary>Per load</summary>", ""]
        parts += [section.markdown for section in sections]
        parts += ["</details>", ""]
    if results_link:
        parts += [f"Raw results (lag series, demand tables, plots): {results_link}", ""]
    if results_dir and sections:
        ids = ", ".join(experiment_id(section.name) for section in sections)
        parts += [
            f"Re-judge a benchmark from them: `python -m pytest_theodolite analyse {results_dir} --experiment ID`"
            f" (ids: {ids}).",
            "",
        ]
    return "\n".join(parts)


def results_link(environment: Mapping[str, str]) -> str | None:
    """Where a reviewer finds the raw results: ``THEODOLITE_RESULTS_URL`` where set, else the GitHub Actions
    run (whose artifacts hold them), else None."""
    if environment.get("THEODOLITE_RESULTS_URL"):
        return environment["THEODOLITE_RESULTS_URL"]
    keys = ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")
    if all(environment.get(key) for key in keys):
        server, repository, run = (environment[key] for key in keys)
        return f"{server.rstrip('/')}/{repository}/actions/runs/{run}"
    return None


def _escape(text: str) -> str:
    return text.replace("|", "\\|")
