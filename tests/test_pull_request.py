"""Pull-request mode (--theodolite-compare-ref) through pytester, with scripted sides (tests/gate_fakes.py):
the checks before anything runs, ABBA order, verdicts against REF, exit codes and what the reports show."""

import json
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # gate_fakes, test_gates

from gate_fakes import SCRIPTED_JOBS, scripted_conftest
from test_gates import baseline_of

CONFTEST = scripted_conftest()
JOBS = SCRIPTED_JOBS

GATE = """
import pytest
from theodolite_generator import Workload
from jobs import start_query
from pytest_theodolite.engine.runner import Benchmark

BENCH = Benchmark("scripted", start_query, lambda keys: Workload(keys=keys))

@pytest.mark.theodolite(BENCH, loads=[1000, 2000, 3000], resources=[1, 2, 3, 4], duration=1)
def test_scripted_demand(theodolite_gate):
    theodolite_gate.check()
"""


def git(path: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True, text=True)
    return done.stdout.strip()


@pytest.fixture
def project(pytester):
    """A git repository with the gate and its job committed on `main`."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(jobs=JOBS, test_gate=GATE)
    git(pytester.path, "init", "-q", "-b", "main")
    git(pytester.path, "config", "user.email", "t@example.org")
    git(pytester.path, "config", "user.name", "t")
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-qm", "gate")
    return pytester


def live_lines(result) -> list[str]:
    return [line for line in result.outlines if line.startswith("theodolite: scripted [")]


def test_same_demand_on_both_sides_passes_without_a_stored_baseline(project, monkeypatch):
    monkeypatch.setenv("SCRIPTED_CAPACITY", "1000")
    monkeypatch.setenv("SCRIPTED_REF_CAPACITY", "1000")
    # without the paired read, both demands are searched and the CPU per record at them compared
    result = project.runpytest("--theodolite-compare-ref", "main", "--theodolite-paired-cost=false")
    result.assert_outcomes(passed=3)
    lines = live_lines(result)
    # both sides run every (load, instances) the other runs, adjacent, in ABBA order
    assert [line.split(":")[1].strip() for line in lines[:4]] == [
        "scripted [REF main (0123456)] load=1000 instances=1",
        "scripted [change] load=1000 instances=1",
        "scripted [change] load=2000 instances=1",
        "scripted [REF main (0123456)] load=2000 instances=1",
    ]
    result.stdout.fnmatch_lines(
        [
            "scripted: PASS (cost tolerance 10%)",  # judged by default in this mode
            "*load | REF main (0123456) | change | verdict | CPU per record",
            "*1000 |                  1 |      1 | PASS    | 1000.0 -> 1000.0 us (+0%)",
            "*3000 |                  3 |      3 | PASS    | 1000.0 -> 1000.0 us (+0%)",
        ]
    )


def test_where_the_paired_read_judged_the_cost_each_load_is_certified_not_searched(
    project, monkeypatch, tmp_path
):
    monkeypatch.setenv("SCRIPTED_CAPACITY", "1000")  # 1000 / 2000 / 3000 need 1 / 2 / 3 on both sides
    monkeypatch.setenv("SCRIPTED_REF_CAPACITY", "1000")
    xml = tmp_path / "junit.xml"
    result = project.runpytest("--theodolite-compare-ref", "main", f"--junitxml={xml}")
    result.assert_outcomes(passed=3)
    runs = [line.split(":")[1].strip() for line in live_lines(result)]
    # 1000: the change passing at 1 is the verdict; 2000 starts at 1000's demand: both fail at 1, the change
    # passes at 2, and REF's FAIL at 1 certifies it; 3000 the same one up: 7 runs, where the searches take 10
    assert runs == [
        "scripted [change] load=1000 instances=1",
        "scripted [change] load=2000 instances=1",
        "scripted [REF main (0123456)] load=2000 instances=1",
        "scripted [change] load=2000 instances=2",
        "scripted [change] load=3000 instances=2",
        "scripted [REF main (0123456)] load=3000 instances=2",
        "scripted [change] load=3000 instances=3",
    ]
    result.stdout.fnmatch_lines(
        [
            "*load | REF main (0123456) | change | verdict | CPU per record",
            "*2000 |                >=2 |      2 | PASS    | n/a",
            "*>=N (loads 2000, 3000): REF main (0123456) failed below the instances the change passed at*",
            "*>=N (loads 1000): REF main (0123456) not run -- the change passed on the fewest instances*",
        ]
    )
    properties = {p.get("name"): p.get("value") for p in ElementTree.parse(xml).iter("property")}
    assert properties["theodolite.ref.2000"] == "2" and properties["theodolite.ref_at_least.2000"] == "true"
    assert properties["theodolite.demand.2000"] == "2" and properties["theodolite.verdict.2000"] == "pass"


def test_a_certified_pass_resting_on_an_uncertain_ref_fail_says_so(project, monkeypatch):
    monkeypatch.setenv("SCRIPTED_CAPACITY", "1000")  # 1000 / 2000 / 3000 need 1 / 2 / 3 on both sides
    monkeypatch.setenv("SCRIPTED_REF_CAPACITY", "1000")
    monkeypatch.setenv("SCRIPTED_REF_UNCERTAIN", "3000:2")  # REF's FAIL below the change's pass at 3000
    result = project.runpytest("--theodolite-compare-ref", "main")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*3000 |                >=3 |      3 | PASS*",
            # REF's FAIL at 1 below the change's pass at 2000 was certain: only 3000 is named
            "*not certain below the change's pass (loads 3000): REF main (0123456)'s FAIL at 2 instances*(load "
            "3000) -- the pass rests "
            "on it, and a regression of one instance count there would not show*",
        ]
    )


def test_a_change_that_needs_more_instances_than_ref_fails_with_both_sides_shown(
    project, monkeypatch, tmp_path
):
    monkeypatch.setenv("SCRIPTED_CAPACITY", "700")  # 1000 / 2000 / 3000 need 2 / 3 / none (REF: 1 / 2 / 3)
    monkeypatch.setenv("SCRIPTED_REF_CAPACITY", "1000")
    xml = tmp_path / "junit.xml"
    result = project.runpytest("--theodolite-compare-ref", "main", f"--junitxml={xml}")
    result.assert_outcomes(failed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*scripted load 2000: measured 3 instances, REF main (0123456) 2 instances: regression",
            "*REF main (0123456): r=1: +1000/s FAIL, r=2: +0.0/s ok",
            # no relative figure where the two sides' demands differ: not the same instances
            "*CPU per record: 1000.0 -> 1429.0 us",
        ]
    )
    properties = {p.get("name"): p.get("value") for p in ElementTree.parse(xml).iter("property")}
    assert properties["theodolite.ref.2000"] == "2"
    assert properties["theodolite.demand.2000"] == "3"
    assert properties["theodolite.verdict.2000"] == "regression"
    assert properties["theodolite.baseline.2000"] == "missing"  # no stored baseline
    assert properties["theodolite.cpu_us_per_record.ref.1000"] == "1000.000"
    assert properties["theodolite.cpu_us_per_record.change.1000"] == "1429.000"
    assert "theodolite.cpu_change.1000" not in properties
    assert properties["theodolite.compare_ref"] == "REF main (0123456)"


def test_a_slowdown_that_costs_no_instance_shows_in_the_cpu_figure(project, monkeypatch, tmp_path):
    monkeypatch.setenv("SCRIPTED_CAPACITY", "1000")
    monkeypatch.setenv("SCRIPTED_REF_CAPACITY", "1200")  # REF cheaper, same demand at every load
    xml = tmp_path / "junit.xml"
    result = project.runpytest(
        "--theodolite-compare-ref",
        "main",
        "--theodolite-cost-tolerance=off",
        "--theodolite-paired-cost=false",  # else REF is not run at the change's demand (certified)
        f"--junitxml={xml}",
    )
    result.assert_outcomes(passed=3)  # turned off: reported, not judged
    result.stdout.fnmatch_lines(["*2000 | * |      2 | PASS    | 833.0 -> 1000.0 us (+20%)"])
    for case in ElementTree.parse(xml).iter("testcase"):
        names = [p.get("name") for p in case.iter("property")]
        assert len(names) == len(set(names)), names  # one value per property, as JUnit readers expect
        load = case.get("name").split("load=")[1].rstrip("]")
        values = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert values[f"theodolite.cpu_change.{load}"] == "+0.200"  # the change against REF


def test_the_paired_read_runs_by_default_and_a_dearer_change_fails_every_load_whose_demand_passed(
    project, monkeypatch
):
    monkeypatch.setenv("SCRIPTED_PAIRED_COST", "1.15")  # the same demand everywhere, each batch 15 % dearer
    result = project.runpytest("--theodolite-compare-ref", "main")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [
            "*scripted load 1000: *cost regression: time per record (inverse throughput), batch by batch +15% "
            "(tolerance 7%, p *",
            "scripted: COST REGRESSION (3 cost regressions by time per record (inverse throughput), batch by batch, "
            "beyond 7%*",
            "*time per record, change over REF batch by batch: +15.0% over 12 batches*: a cost regression*",
        ]
    )
    # the scripted session keeps its results under the run's basetemp (pytester puts it beside the project)
    written = json.loads(
        next(project.path.parent.joinpath("basetemp").rglob("*scripted_paired_cost.json")).read_text()
    )
    assert written["comparison"]["pairs"] == 12 and written["problem"] is None

    off = project.runpytest("--theodolite-compare-ref", "main", "--theodolite-paired-cost=false")
    off.assert_outcomes(passed=3)  # not read: the demand and the CPU per record at it are equal
    assert "time per record, change over REF" not in off.stdout.str()


def test_a_paired_read_that_gave_no_figure_is_no_pass_and_says_what_to_change(project, monkeypatch):
    """Never green without the mode's sensitive reading: a cluster of one instance reads no backlog, and the
    demands that passed are not comparable (exit 7) with the reason; paired_cost=false judges the demand alone."""
    monkeypatch.setenv("SCRIPTED_PAIRED_COST", "1.15")
    monkeypatch.setenv("SCRIPTED_MAX_INSTANCES", "1")
    result = project.runpytest("--theodolite-compare-ref", "main")
    result.assert_outcomes(skipped=3)
    assert result.ret == 7
    result.stdout.fnmatch_lines(
        [
            "*the paired read gave no figure to judge (it needs two instances at once*raise "
            "--theodolite-max-instances to 2 or more), and a pass needs it*paired_cost=false*",
            "*time per record (*): not measured: it needs two instances at once, one per side*",
        ]
    )
    demand_alone = project.runpytest("--theodolite-compare-ref", "main", "--theodolite-paired-cost=false")
    demand_alone.assert_outcomes(passed=3)
    assert demand_alone.ret == 0


def test_that_slowdown_fails_against_ref_by_default_where_no_paired_read_judges_the_cost(
    project, monkeypatch
):
    monkeypatch.setenv("SCRIPTED_CAPACITY", "1000")
    monkeypatch.setenv("SCRIPTED_REF_CAPACITY", "1200")
    off = "--theodolite-paired-cost=false"
    result = project.runpytest("--theodolite-compare-ref", "main", off)  # 10 %: this mode's default
    result.assert_outcomes(failed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*scripted load 2000: measured 2 instances, REF main (*) 2 instances: cost regression: CPU per "
            "record +20% (tolerance 10%, p *)",
            "CPU per record at 2 instances: REF main (*) 833.3 us [[]*[]], measured 1000.0 us [[]*[]] (+20%)*",
            "*2000 | * |      2 | COST REGRESSION | 833.0 -> 1000.0 us (+20%)",
        ]
    )
    # within the tolerance: passes, and the figure is still shown
    project.runpytest(
        "--theodolite-compare-ref", "main", off, "--theodolite-cost-tolerance=25%"
    ).assert_outcomes(passed=3)


@pytest.mark.parametrize("read", [[], ["--theodolite-paired-cost=false"]], ids=["certified", "searched"])
def test_a_regression_that_rests_on_an_uncertain_verdict_is_not_comparable_never_a_regression(
    project, monkeypatch, read
):
    monkeypatch.setenv("SCRIPTED_CAPACITY", "700")  # 1000 / 2000 / 3000 need 2 / 3 / none (REF: 1 / 2 / 3)
    # 1000: REF's PASS at 1 was not certain; 2000: the change's FAIL at 2 was not; 3000: both certain
    monkeypatch.setenv("SCRIPTED_REF_UNCERTAIN", "1000:1")
    monkeypatch.setenv("SCRIPTED_UNCERTAIN", "2000:2")
    result = project.runpytest("--theodolite-compare-ref", "main", "-rs", *read)
    result.assert_outcomes(failed=1, skipped=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # 3000 is a regression
    result.stdout.fnmatch_lines(
        [
            "*scripted load 3000: measured none*: regression",
            "SKIPPED*scripted load 1000: measured 2 instances, REF main (0123456) 1 instance: not comparable: "
            "the verdicts that would make this a regression were not certain (REF's PASS at 1 instance: lag "
            "slope +0 ?-50, +150? vs 100 records/s, the interval still across the threshold when the "
            "measurement's bound ended it): this load is at the edge of what this host's instances take*",
            "SKIPPED*scripted load 2000: measured 3 instances, REF main (0123456) 2 instances: not comparable: "
            "the verdicts that would make this a regression were not certain (the change's FAIL at 2 "
            "instances: *",
        ]
    )
    # uncertain everywhere a searched regression would rest: nothing is a regression, exit 7. Certified, REF's
    # demand at 3000 is known only to be at most 4 (it failed at 2, passed at 4): the change's FAIL at 4, certain,
    # is what that regression rests on
    monkeypatch.setenv("SCRIPTED_UNCERTAIN", "2000:2,3000:3")
    result = project.runpytest("--theodolite-compare-ref", "main", *read)
    if read:
        result.assert_outcomes(skipped=3)
        assert result.ret == 7
        assert "REGRESSION" not in result.stdout.str()
    else:
        result.assert_outcomes(failed=1, skipped=2)
        result.stdout.fnmatch_lines(["*scripted load 3000: measured none*, REF main (0123456) 4 instances*"])
    # an uncertain verdict that decides nothing changes nothing: REF's FAIL below its demand
    monkeypatch.setenv("SCRIPTED_CAPACITY", "1000")
    monkeypatch.setenv("SCRIPTED_REF_UNCERTAIN", "2000:1")
    monkeypatch.delenv("SCRIPTED_UNCERTAIN")
    project.runpytest("--theodolite-compare-ref", "main", *read).assert_outcomes(passed=3)


def test_a_load_ref_could_not_measure_is_not_comparable_with_exit_7(project, monkeypatch):
    monkeypatch.setenv("SCRIPTED_REF_INVALID", "2000")
    result = project.runpytest("--theodolite-compare-ref", "main", "-rs")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*not comparable: REF could not be measured at this load*"])
    assert result.ret == 7


def test_the_pr_comment_file_holds_the_verdict_both_sides_and_the_run_link(project, monkeypatch, tmp_path):
    monkeypatch.setenv("SCRIPTED_CAPACITY", "700")  # the change needs more instances at every load
    monkeypatch.setenv("SCRIPTED_REF_CAPACITY", "1000")
    for key, value in (("GITHUB_SERVER_URL", "https://github.com"), ("GITHUB_REPOSITORY", "o/r")):
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("GITHUB_RUN_ID", "42")
    comment = tmp_path / "out" / "comment.md"
    result = project.runpytest("--theodolite-compare-ref", "main", f"--theodolite-pr-comment={comment}")
    result.assert_outcomes(failed=3)
    lines = comment.read_text().splitlines()
    assert lines[0] == "<!-- pytest-theodolite scalability comment -->"
    assert lines[1] == "## Scalability gates: REGRESSION"
    assert "- scripted: REGRESSION (3 regressions, cost tolerance 10%)" in lines
    assert "| load | REF main (0123456) | change | status | CPU per record |" in lines
    assert any(line.startswith("| 2000 | 2 | 3 | REGRESSION |") for line in lines)
    assert "Raw results (lag series, demand tables, plots): https://github.com/o/r/actions/runs/42" in lines
    assert any("analyse theodolite-results/change --experiment ID` (ids: scripted)" in line for line in lines)


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_the_pr_comment_of_a_run_without_a_verdict_says_so(project, monkeypatch, tmp_path, workers):
    monkeypatch.setenv("SCRIPTED_REF_INVALID", "2000")
    comment = tmp_path / "comment.md"
    result = project.runpytest(
        "--theodolite-compare-ref", "main", f"--theodolite-pr-comment={comment}", *workers
    )
    assert result.ret == 7
    text = comment.read_text()
    assert "## Scalability gates: NO VERDICT" in text
    assert "1 gate point could not be judged" in text
    assert "| 2000 | none | 2 | NOT COMPARABLE | n/a |" in text
    assert "- not comparable: load 2000: REF could not be measured at this load" in text


def test_with_a_stored_baseline_both_comparisons_are_reported(project, monkeypatch):
    monkeypatch.setenv("SCRIPTED_CAPACITY", "1000")
    monkeypatch.setenv("SCRIPTED_REF_CAPACITY", "1000")
    (project.path / "baselines").mkdir()
    # 2000 regressed against the stored baseline only
    (project.path / "baselines" / "scripted.json").write_text(
        json.dumps(baseline_of({1000: 1, 2000: 1, 3000: 3}))
    )
    result = project.runpytest("--theodolite-compare-ref", "main")
    result.assert_outcomes(passed=3)  # the verdict is against REF
    result.stdout.fnmatch_lines(
        ["*against the stored baseline: REGRESSION (1000 PASS, 2000 REGRESSION, 3000 PASS)"]
    )


def test_without_ref_below_a_certain_paired_read_leaves_ref_unrun_where_the_change_meets_the_baseline(
    project, monkeypatch, tmp_path
):
    monkeypatch.setenv("SCRIPTED_CAPACITY", "1000")  # 1000 / 2000 / 3000 need 1 / 2 / 3 on both sides
    monkeypatch.setenv("SCRIPTED_REF_CAPACITY", "1000")
    # 0.75x the baseline's host: each load offered at 0.86x its rate, weighing at least the baseline's even if
    # the host were 15 % faster than read -- REF is expected to need the baseline's demands
    monkeypatch.setenv("SCRIPTED_CALIBRATION", "300000")
    (project.path / "baselines").mkdir()
    (project.path / "baselines" / "scripted.json").write_text(
        json.dumps(baseline_of({1000: 1, 2000: 2, 3000: 3}, calibration=400000))
    )
    xml = tmp_path / "junit.xml"
    result = project.runpytest(
        "--theodolite-compare-ref", "main", "--theodolite-ref-below=false", f"--junitxml={xml}"
    )
    result.assert_outcomes(passed=3)
    # the scripted read is certain within 7 %: the change at the baseline's demands, REF's FAILs below not run
    assert [line.split(":")[1].strip() for line in live_lines(result)] == [
        "scripted [change] load=1000 instances=1",
        "scripted [change] load=2000 instances=2",
        "scripted [change] load=3000 instances=3",
    ]
    result.stdout.fnmatch_lines(
        [
            "*2000 |                 ~2 |    <=2 | PASS*",
            "*~N (loads 2000, 3000): REF main (0123456) not run -- the paired read is certain the change costs "
            "per record within 7% of REF main (0123456)'s*ref_below=true (the default) runs it one instance below",
        ]
    )
    assert "<=N (loads" not in result.stdout.str()  # its text says "passed at REF's demand": not here
    properties = {p.get("name"): p.get("value") for p in ElementTree.parse(xml).iter("property")}
    assert properties["theodolite.ref.2000"] == "2" and properties["theodolite.ref_expected.2000"] == "true"
    assert "theodolite.ref_at_least.2000" not in properties

    # on a testbed as fast as the baseline's host each load is offered at its full rate, which may weigh less
    # than on the baseline's host (the calibration allows 15 % either way): REF may need fewer, its FAILs below
    # are run
    for as_fast in ("400000", "360000"):  # 1.0x; 0.9x, offered the full rate, which 1.15 x 0.9 exceeds
        monkeypatch.setenv("SCRIPTED_CALIBRATION", as_fast)
        faster = project.runpytest("--theodolite-compare-ref", "main", "--theodolite-ref-below=false")
        faster.assert_outcomes(passed=3)
        assert any("[REF main (0123456)] load=2000 instances=1" in line for line in live_lines(faster))
        assert "~N (loads" not in faster.stdout.str()

    # a read that is not certain (a rise beyond the tolerance, read twice) leaves REF's FAILs below in
    monkeypatch.setenv("SCRIPTED_CALIBRATION", "300000")
    monkeypatch.setenv("SCRIPTED_PAIRED_COST", "1.15")
    dearer = project.runpytest("--theodolite-compare-ref", "main", "--theodolite-ref-below=false")
    dearer.assert_outcomes(failed=3)
    assert any("[REF main (0123456)] load=2000 instances=1" in line for line in live_lines(dearer))


def test_where_ref_needed_fewer_instances_than_the_baseline_the_next_load_starts_that_much_lower(
    project, monkeypatch
):
    """UC4 on a host faster than its baseline's: REF needed half the baseline's instances at one load, so the
    next load's certified pair starts at half the baseline's demand there instead of walking down to it."""
    monkeypatch.setenv("SCRIPTED_CAPACITY", "2000")  # 1000 / 2000 / 3000 need 1 / 1 / 2 on both sides
    monkeypatch.setenv("SCRIPTED_REF_CAPACITY", "2000")
    (project.path / "baselines").mkdir()
    (project.path / "baselines" / "scripted.json").write_text(
        json.dumps(baseline_of({1000: 1, 2000: 2, 3000: 4}))
    )
    result = project.runpytest("--theodolite-compare-ref", "main")
    result.assert_outcomes(passed=3)
    ref = "REF main (0123456)"
    # 2000 starts at the baseline's 2 and walks down to 1; 3000 then starts at 4 x 1/2 = 2, not at 4 (from
    # which the pair would have run 4, 3 and 2 on the change's side and 3, 2 and 1 on REF's)
    assert [line.split(":")[1].strip() for line in live_lines(result)] == [
        "scripted [change] load=1000 instances=1",
        "scripted [change] load=2000 instances=2",
        f"scripted [{ref}] load=2000 instances=1",
        "scripted [change] load=2000 instances=1",
        "scripted [change] load=3000 instances=2",
        f"scripted [{ref}] load=3000 instances=1",
    ]
    result.stdout.fnmatch_lines(["*3000 |                >=2 |    <=2 | PASS    | n/a"])


def test_on_a_testbed_slower_than_the_stored_baselines_both_sides_are_offered_its_speed(project, monkeypatch):
    """Where the calibration reads this testbed slower than the stored baseline's (here 0.57x), both sides are
    offered each load at the share a single-revision run offers (0.66x): there the baseline's demands hold and
    certify each load, where at the full rate 3000 would need more instances than the cluster has."""
    monkeypatch.setenv("SCRIPTED_CALIBRATION", "228000")
    monkeypatch.setenv("SCRIPTED_CAPACITY", "700")  # 656 / 1311 / 1967 records/s: 1 / 2 / 3 instances
    monkeypatch.setenv("SCRIPTED_REF_CAPACITY", "700")
    (project.path / "baselines").mkdir()
    (project.path / "baselines" / "scripted.json").write_text(
        json.dumps(baseline_of({1000: 1, 2000: 2, 3000: 3}, calibration=400000))
    )
    result = project.runpytest("--theodolite-compare-ref", "main")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*against the stored baseline: PASS (1000 PASS, 2000 PASS, 3000 PASS)",
            "*both sides were offered every load at 0.66x its rate (the same keys, each sending less often)*",
        ]
    )
    # certified at the baseline's demands: the change where the baseline's demand is, REF one below it
    ref = "REF main (0123456)"
    assert sorted(line.split(":")[1].strip() for line in live_lines(result)) == sorted(
        [
            "scripted [change] load=1000 instances=1",
            "scripted [change] load=2000 instances=2",
            f"scripted [{ref}] load=2000 instances=1",
            "scripted [change] load=3000 instances=3",
            f"scripted [{ref}] load=3000 instances=2",
        ]
    )
    assert [line.split(": ")[2].split()[0] for line in live_lines(result)].count("FAIL") == 2

    # of unknown speed (no calibration): the full rate, where 3000 needs more than four instances
    monkeypatch.delenv("SCRIPTED_CALIBRATION")
    full = project.runpytest("--theodolite-compare-ref", "main")
    assert "were offered every load at" not in full.stdout.str()
    full.stdout.fnmatch_lines(["*3000 |*none |*none |*"])


def test_an_unknown_ref_is_a_usage_error_before_anything_runs(project):
    result = project.runpytest("--theodolite-compare-ref", "origin/nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown revision 'origin/nope'*git fetch origin nope*"])
    assert "theodolite: scripted [" not in result.stdout.str()


def test_a_ref_without_the_benchmark_job_is_a_usage_error(project):
    git(project.path, "checkout", "-qb", "feature")
    project.makepyfile(other_jobs=JOBS)
    project.makepyfile(test_gate=GATE.replace("from jobs import", "from other_jobs import"))
    result = project.runpytest("--theodolite-compare-ref", "main")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*main (*) lacks the job of scripted (other_jobs): other_jobs.py*deselect it*"]
    )


def test_update_baselines_and_compare_ref_are_refused_together(project):
    result = project.runpytest("--theodolite-compare-ref", "main", "--theodolite-update-baselines")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*use one at a time*"])


def test_a_regression_is_measured_once_more_on_both_sides_in_the_reverse_order(project, monkeypatch):
    monkeypatch.setenv("SCRIPTED_CAPACITY", "700")  # 1000 / 2000 / 3000 need 2 / 3 / none (REF: 1 / 2 / 3)
    monkeypatch.setenv("SCRIPTED_REF_FLAKY", "2000:2")  # REF's certain PASS at 2 fails when run again
    # the searched demands' order (a certified load runs other pairs, confirmed the same way)
    result = project.runpytest("--theodolite-compare-ref", "main", "-rs", "--theodolite-paired-cost=false")
    result.assert_outcomes(failed=2, skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # 1000 and 3000 reproduced
    lines = [line.split(": ", 1)[1] for line in live_lines(result)]
    # 1000: REF ran first at 1 instance, the change second; the confirmation runs the change first
    assert lines[3:5] == [
        "scripted [change] load=1000 instances=1: FAIL (lag-trend fail; lag slope 300 (median) vs 100 "
        "records/s; 2 repetitions: FAIL, FAIL)",
        "scripted [REF main (0123456)] load=1000 instances=1: PASS (lag-trend pass; lag slope 0 (median) vs "
        "100 records/s; 2 repetitions: PASS, PASS)",
    ]
    # 2000: the change ran first at 2 instances, so REF goes first now
    assert lines[9].startswith("scripted [REF main (0123456)] load=2000 instances=2: FAIL")
    assert lines[9].endswith("2 repetitions: PASS, FAIL)")
    assert lines[10].startswith("scripted [change] load=2000 instances=2: FAIL")
    result.stdout.fnmatch_lines(
        [
            "scripted load 1000: measured 2 instances, REF main (0123456) 1 instance: regression",
            "scripted load 3000: measured none*: regression",
            "scripted: REGRESSION (2 regressions, 1 load not comparable, cost tolerance 10%)",
            "SKIPPED*scripted load 2000: measured 3 instances, REF main (0123456) 2 instances: not comparable: "
            "the verdicts that would make this a regression were not certain (REF's FAIL at 2 instances: its 2 "
            "repetitions disagreed (PASS, lag slope +0; FAIL, lag slope +300))*",
        ]
    )
    # equal demands: nothing is measured twice
    monkeypatch.setenv("SCRIPTED_CAPACITY", "1000")
    result = project.runpytest("--theodolite-compare-ref", "main")
    result.assert_outcomes(passed=3)
    assert "repetitions" not in result.stdout.str()


def test_a_load_interrupted_while_its_regression_is_confirmed_is_unfinished_in_both_comparisons(
    project, monkeypatch
):
    monkeypatch.setenv("SCRIPTED_CAPACITY", "700")  # 1000 needs 2 (REF: 1): measured once more on both sides
    monkeypatch.setenv("SCRIPTED_INTERRUPT_CONFIRM", "1000")
    (project.path / "baselines").mkdir()
    (project.path / "baselines" / "scripted.json").write_text(json.dumps(baseline_of({1000: 1, 2000: 2})))
    result = project.runpytest(
        "--theodolite-compare-ref", "main", "--theodolite-paired-cost=false", no_reraise_ctrlc=True
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.assert_outcomes()
    result.stdout.fnmatch_lines(
        [
            "scripted: UNFINISHED (1 unfinished load, cost tolerance 10%)",
            "  unfinished: load 1000 -- the run stopped (interrupted, or an error) before its verdict*",
            "  against the stored baseline: UNFINISHED (no load)",
        ]
    )
    assert "REGRESSION" not in result.stdout.str()
