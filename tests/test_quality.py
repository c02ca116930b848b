"""`python -m pytest_theodolite quality`: rates with exact intervals, gate points read from JUnit XML, bad
requests refused before anything runs, and whole runs of scripted gates (tests/gate_fakes.py) unchanged and
with a patch that slows the job, in both modes."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # gate_fakes, test_gates

from gate_fakes import SCRIPTED_JOBS, scripted_conftest
from test_gates import baseline_of

from pytest_theodolite.cli.quality import job_path, main
from pytest_theodolite.report.quality import GatePointResult, QualityRun, Rate, points_of, quality_report

# the scripted job's capacity is the project's capacity.txt: a patch to it is a change of the job
CONFTEST = scripted_conftest(
    'os.environ["SCRIPTED_CAPACITY"] = (Path(__file__).parent / "capacity.txt").read_text().strip()'
)
JOBS = SCRIPTED_JOBS

# the job in the repository, as pull-request mode requires (each side imports its own)
GATE = """
import pytest
from theodolite_generator import Workload
from jobs import start_query
from pytest_theodolite import Benchmark

BENCH = Benchmark("scripted", start_query, lambda keys: Workload(keys=keys))

@pytest.mark.theodolite(BENCH, loads=[1000, 2000], resources=[1, 2, 3], duration=1)
def test_scripted_demand(theodolite_gate):
    theodolite_gate.check()
"""

SLOWER = """--- a/capacity.txt
+++ b/capacity.txt
@@ -1 +1 @@
-1000
+700
"""


def git(path: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def project(tmp_path):
    """A git repository with a scripted gate and its baseline (1000 -> 1 instance, 2000 -> 2) on main."""
    root = tmp_path / "project"
    (root / "baselines").mkdir(parents=True)
    (root / "conftest.py").write_text(CONFTEST)
    (root / "test_gate.py").write_text(GATE)
    (root / "jobs.py").write_text(JOBS)
    (root / "capacity.txt").write_text("1000\n")
    (root / ".gitignore").write_text("__pycache__/\n")  # as a project has: the gate imports its modules here
    (root / "baselines" / "scripted.json").write_text(json.dumps(baseline_of({1000: 1, 2000: 2})))
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.org")
    git(root, "config", "user.name", "t")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "gate")
    (tmp_path / "slower.diff").write_text(SLOWER)
    return root


def quality(project: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest_theodolite", "quality", *argv],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_rates_carry_exact_intervals():
    none = Rate.of(0, 5)
    assert (none.low, round(none.high, 3)) == (0.0, 0.522)
    every = Rate.of(5, 5)
    assert (round(every.low, 3), every.high) == (0.478, 1.0)
    assert Rate.of(4, 5).text == "4 of 5 (80%; 95% CI 28%-99%)"
    assert Rate.of(0, 0).text == "no complete run"


def test_points_come_from_the_junit_properties(tmp_path):
    junit = tmp_path / "run.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase name="test_gate[load=1000]"><properties>'
        '<property name="theodolite.verdict.1000" value="regression"/>'
        '<property name="theodolite.ref.1000" value="1"/><property name="theodolite.demand.1000" value="2"/>'
        '<property name="theodolite.cpu_change.1000" value="+0.150"/></properties><failure message="x"/></testcase>'
        '<testcase name="test_gate[load=2000]"><error message="broker died"/></testcase>'
        "</testsuite></testsuites>"
    )
    assert points_of(junit) == (
        GatePointResult("test_gate[load=1000]", "1000", "1", "2", "regression", "+0.150"),
        GatePointResult("test_gate[load=2000]", "2000", "?", "-", "error"),
    )
    assert points_of(tmp_path / "missing.xml") == ()


def test_a_demand_at_most_shows_as_a_bound(tmp_path):
    junit = tmp_path / "run.xml"
    junit.write_text(
        '<testsuites><testsuite><testcase name="test_uc1[load=12000]"><properties>'
        '<property name="theodolite.demand.12000" value="2"/>'
        '<property name="theodolite.demand_at_most.12000" value="true"/>'
        '<property name="theodolite.baseline.12000" value="2"/>'
        '<property name="theodolite.verdict.12000" value="pass"/>'
        "</properties></testcase></testsuite></testsuites>"
    )
    (point,) = points_of(junit)
    assert (point.reference, point.measured, point.verdict) == ("2", "<=2", "pass")


def test_pull_request_mode_shows_each_runs_ref_beside_the_change():
    test = "test_uc1[load=12000]"
    runs = [
        QualityRun("clean", 1, 60.0, 1, (GatePointResult(test, "12000", "2", "3", "regression"),)),
        QualityRun("clean", 2, 60.0, 0, (GatePointResult(test, "12000", "3", "3", "pass", "+0.010"),)),
    ]
    text = quality_report(runs, pull_request=True)
    assert "| gate | load | c1 | c2 |" in text
    assert "| test_uc1 | 12000 | 2 -> 3 REGRESSION | 3 -> 3 cpu +1% |" in text
    # against a stored baseline: one column for it
    assert "| test_uc1 | 12000 | 3 | 3 REGRESSION | 3 cpu +1% |" in quality_report(runs, pull_request=False)


def test_the_report_counts_only_complete_runs():
    regression = GatePointResult("test_gate[load=1000]", "1000", "1", "2", "regression")
    passing = GatePointResult("test_gate[load=1000]", "1000", "1", "1", "pass")
    runs = [
        QualityRun("clean", 1, 60.0, 0, (passing,)),
        QualityRun("clean", 2, 60.0, 2, ()),  # interrupted: not counted
        QualityRun("injected", 1, 120.0, 1, (regression,)),
    ]
    text = quality_report(runs, pull_request=False)
    assert "| test_gate | 1000 | 1 | 1 | - | 2 REGRESSION |" in text
    assert "false alarms (unchanged code: runs that failed the gate): 0 of 1 (0%; 95% CI 0%-98%)" in text
    assert "detections (injected regression: runs that failed the gate): 1 of 1" in text
    assert "not counted (clean): c2 (exit 2: did not run to its end)" in text


def test_a_run_whose_points_errored_is_not_counted_as_a_pass():
    errored = GatePointResult("test_gate[load=1000]", "1000", "?", "-", "error")
    text = quality_report([QualityRun("clean", 1, 60.0, 1, (errored,))], pull_request=False)
    assert "false alarms" not in text
    assert "not counted (clean): c1 (1 point without a verdict: error)" in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--injected", "1"], "the injected runs need a regression"),
        (["--clean", "0", "--injected", "0"], "at least one run"),
        (["--job-option", "uc1-keys:x=1", "--patch", "p.diff"], "not both"),
        (["--job-option", "uc1-keys=1"], "expected BENCHMARK:KEY=VALUE"),
        (["--job-option", "uc1-keys:x=1", "--compare-ref", "HEAD"], "give the regression as --patch"),
        (["--patch", "missing.diff"], "no such file"),
    ],
)
def test_bad_requests_exit_2_before_anything_runs(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    assert main(["--out", "out", *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_patch_that_does_not_apply_stops_before_the_clean_runs(project, tmp_path):
    (tmp_path / "wrong.diff").write_text(SLOWER.replace("-1000", "-999"))
    done = quality(project, "--clean", "1", "--injected", "1", "--patch", str(tmp_path / "wrong.diff"))
    assert done.returncode == 2
    assert "git apply" in done.stderr and "## clean run" not in done.stdout
    assert git(project, "worktree", "list").count("\n") == 1  # the scratch worktree is gone


def test_the_patched_worktree_comes_first_on_the_python_path(tmp_path, monkeypatch):
    (tmp_path / "src").mkdir()
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    assert job_path(tmp_path).split(":") == [str(tmp_path), str(tmp_path / "src"), "/elsewhere"]


@pytest.mark.integration  # whole pytest runs, one after the other
@pytest.mark.parametrize("mode", [[], ["--compare-ref", "HEAD"]], ids=["stored baseline", "pull request"])
def test_clean_and_patched_runs_give_the_rates(project, tmp_path, mode):
    out = tmp_path / "out"
    done = quality(
        project,
        "--clean",
        "2",
        "--injected",
        "1",
        "--patch",
        str(tmp_path / "slower.diff"),
        "--out",
        str(out),
        *mode,
        "--",
        "-p",
        "no:randomly",
    )
    assert done.returncode == 0, done.stderr
    assert "false alarms (unchanged code: runs that failed the gate): 0 of 2" in done.stdout
    assert "detections (injected regression: runs that failed the gate): 1 of 1" in done.stdout
    assert (out / "quality.md").read_text().strip() in done.stdout
    assert sorted(p.name for p in out.glob("*.xml")) == ["clean-1.xml", "clean-2.xml", "injected-1.xml"]
    assert git(project, "status", "--porcelain") == ""  # the working tree was not touched
    assert git(project, "worktree", "list").count("\n") == 1
