"""The pull-request comment's text (report/comment.py), pure: the run's verdict from its counts, what the
comment holds and where it links. test_pull_request.py writes one through pytest."""

import pytest

from pytest_theodolite.report.comment import (
    COMMENT_MARKER,
    BenchmarkSection,
    GateCounts,
    pr_comment,
    results_link,
    run_verdict,
)

SECTION = BenchmarkSection(
    "uc1-keys",
    "uc1-keys: REGRESSION (1 regression, cost tolerance 10%)",
    "### `uc1-keys`: REGRESSION\n\n| load | REF main (abc1234) | change | status |\n| 4000 | 1 | 2 | REGRESSION |\n",
)


@pytest.mark.parametrize(
    ("counts", "benchmarks", "verdict", "exit_code"),
    [
        (GateCounts(), 1, "PASS", "exit code 0"),
        (GateCounts(regressions=2, unmeasured=1), 1, "REGRESSION", "exit code 1"),
        (GateCounts(other_failures=1, unmeasured=3), 1, "ERROR", "exit code 1"),
        (GateCounts(unmeasured=3), 2, "NO VERDICT", "exit code 7"),
        (GateCounts(regressions=1, interrupted=True), 1, "INTERRUPTED", "exit code 2"),
    ],
)
def test_the_run_verdict_follows_the_exit_code(counts, benchmarks, verdict, exit_code):
    found, why = run_verdict(counts, benchmarks)
    assert found == verdict
    assert exit_code in why


def test_no_benchmark_is_said_as_such_not_as_a_pass():
    assert run_verdict(GateCounts(), 0)[0] == "NO GATE RAN"


def test_the_comment_starts_with_its_marker_and_holds_verdict_headlines_tables_and_links():
    text = pr_comment(
        [SECTION],
        GateCounts(regressions=1),
        results_link="https://ci.example/run/7",
        results_dir="results/change",
    )
    lines = text.splitlines()
    assert lines[0] == COMMENT_MARKER
    assert lines[1] == "## Scalability gates: REGRESSION"
    assert "- uc1-keys: REGRESSION (1 regression, cost tolerance 10%)" in lines
    assert "| 4000 | 1 | 2 | REGRESSION |" in lines
    assert "Raw results (lag series, demand tables, plots): https://ci.example/run/7" in lines
    assert any(
        "`python -m pytest_theodolite analyse results/change --experiment ID` (ids: uc1-keys)" in line
        for line in lines
    )


def test_without_gates_or_a_link_the_comment_says_so_and_has_no_empty_sections():
    text = pr_comment([], GateCounts())
    assert text.splitlines()[:2] == [COMMENT_MARKER, "## Scalability gates: NO GATE RAN"]
    assert "<details" not in text and "Raw results" not in text and "analyse" not in text


def test_the_results_link_is_the_given_url_else_the_github_run_else_none():
    github = {"GITHUB_SERVER_URL": "https://github.com/", "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "42"}
    assert results_link(github) == "https://github.com/o/r/actions/runs/42"
    assert results_link({**github, "THEODOLITE_RESULTS_URL": "https://x/y"}) == "https://x/y"
    assert results_link({"GITHUB_REPOSITORY": "o/r"}) is None


def test_a_section_round_trips_through_plain_data():
    assert BenchmarkSection.from_dict(SECTION.to_dict()) == SECTION
