"""Pull-request mode end to end: a real gate measured at REF and in the working tree, on the embedded broker
and a local Spark cluster, each side in its own driver process importing its own version of the job."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

# it measures (real gates inside): under pytest-xdist nothing else may run beside it
pytestmark = [pytest.mark.integration, pytest.mark.theodolite_exclusive]

JOB = '''
"""UC1 behind a module of this repository, so that each revision has its own version of it."""
from theodolite_spark_jobs import uc1

VERSION = "{version}"


def start_query(spark, **options):
    return uc1.start_query(spark, **options)
'''

GATE = """
import pytest
from theodolite_generator import Workload
from pytest_theodolite.engine.runner import Benchmark
from myjobs import start_query

UC1 = Benchmark("uc1-pr", start_query, lambda keys: Workload(keys=keys), input_partitions=2)

@pytest.mark.theodolite(UC1, loads=[300], resources=[1, 2], duration=8, max_duration=30, max_warmup=40,
                        threshold="20%")
def test_uc1(theodolite_gate):
    theodolite_gate.check()
"""


def git(path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True, text=True)
    return done.stdout.strip()


#: a pull request from the repository's root, measured end to end. Other layouts -- a src/ layout, a gate in a
#: subfolder with its own rootdir, a job installed in editable mode -- differ from it only in where each side
#: imports the job from, which test_sides checks for each without a measurement: each whole run here takes minutes


def test_a_real_comparison_measures_both_sides_and_leaves_nothing_behind(pytester, tmp_path_factory):
    """Which verdict is reached depends on the host; that both sides were measured, compared and reported,
    each from its own tree and the same place in it, and that the worktree is gone afterwards, does not."""
    repo = pytester.path
    job_file = repo / "myjobs.py"
    job_file.write_text(JOB.format(version="ref"))
    (repo / "test_uc1_gate.py").write_text(GATE)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.org")
    git(repo, "config", "user.name", "t")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    job_file.write_text(JOB.format(version="change"))  # uncommitted: the working tree differs
    commit = git(repo, "rev-parse", "HEAD")

    result = pytester.run(
        sys.executable,
        "-m",
        "pytest",
        f"--basetemp={tmp_path_factory.mktemp('inner')}",
        "-p",
        "no:cacheprovider",
        "--theodolite-results=results",
        "--theodolite-max-instances=2",
        "--theodolite-compare-ref=main",
        # exact demands: a certified load may leave REF unrun (a change passing at one instance needs no REF
        # run), and REF's job is what this test checks; the paired read is on by default
        "--theodolite-exact-demand=true",
    )
    outcomes = result.parseoutcomes()
    # a pass, a regression, or not comparable (exit 7) -- but measured and reported, never a crash
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 1 and "errors" not in outcomes, outcomes
    label = f"REF main ({commit[:7]})"
    result.stdout.fnmatch_lines(
        [
            f"*theodolite: uc1-pr [[]{label}[]] load=300 instances=*: *",
            "*theodolite: uc1-pr [[]change[]] load=300 instances=*: *",
            "*theodolite: scalability gates*",
            "uc1-pr: *",
            # the verdict column is as wide as its longest word (PASS, COST REGRESSION, ...)
            f"*load | {label} | change | verdict*| CPU per record",
            "*300 | * | * | * | *",
        ]
    )
    results = repo / "results"
    # both sides read their backlogs at once, and the figure was reported (or why not)
    result.stdout.fnmatch_lines(["*task CPU per record*both sides reading a backlog at once*: *"])
    paired = json.loads((results / "uc1-pr_paired_cost.json").read_text())
    assert paired["load"] == 300 and (paired["comparison"] is None) != (paired["problem"] is None), paired
    # where both reads were stopped as a certain pass, each read at least the pairs it was stopped after
    stopped = paired["stopped_certain_after_pairs"]
    if stopped is not None:
        assert all(len(read["batches"]) >= stopped >= 6 for read in paired["sides"].values()), paired
    job_files = {}
    for side in ("ref", "change"):  # each side's raw series and results, as a single-revision run keeps them
        assert sorted((results / side).glob("expuc1-pr_300_*_lag-trend_0.csv")), side
        document = json.loads((results / side / "expuc1-pr_results.json").read_text())
        job_files[side] = Path(document["settings"]["testbed"]["job_file"])
    # each side measured its own version of the job, from the same place in its tree
    assert job_files["change"] == job_file.resolve()
    [tree] = [
        d
        for d in job_files["ref"].parents
        if d.name == "tree" and d.parent.name.startswith("theodolite-ref-")
    ]
    assert job_files["ref"].relative_to(tree) == Path("myjobs.py")
    assert not job_files["ref"].exists()  # the worktree was removed
    # the worktree and its entry are gone, the working tree keeps its uncommitted change
    assert git(repo, "worktree", "list").count("\n") == 0
    assert 'VERSION = "change"' in job_file.read_text()
