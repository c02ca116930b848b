"""The scalability gates through pytester: markers, baselines, comparison, reports and exit codes.

The sub-experiments are scripted (tests/gate_fakes.py) so that every outcome can be produced in seconds;
test_example.py runs a real gate on the embedded broker and Spark.
"""

import json
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # gate_fakes

CONFTEST = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})  # gate_fakes, also in xdist's worker processes

import pytest
from gate_fakes import ScriptedSession

@pytest.fixture(scope="session")
def theodolite(tmp_path_factory):
    return ScriptedSession(tmp_path_factory.mktemp("results"))
"""

GATE = """
import pytest
from gate_fakes import BENCH

@pytest.mark.theodolite(BENCH, loads=[1000, 2000, 3000], resources=[1, 2, 3, 4], {extra})
def test_scripted_demand(theodolite_gate):
    theodolite_gate.check()
"""


@pytest.fixture
def gate_project(pytester):
    pytester.syspathinsert(Path(__file__).parent)
    pytester.makeconftest(CONFTEST)

    def make(extra: str = "duration=1", baseline: dict | str | None = None):
        pytester.makepyfile(test_gate=GATE.format(extra=extra))
        if baseline is not None:
            (pytester.path / "baselines").mkdir(exist_ok=True)
            text = baseline if isinstance(baseline, str) else json.dumps(baseline)
            (pytester.path / "baselines" / "scripted.json").write_text(text)
        return pytester

    return make


def baseline_of(
    demand: dict[int, int | None],
    cores: int | None = None,
    calibration: float | None = None,
    cost: dict[int, tuple[float, float]] | None = None,
) -> dict:
    """A baseline file's content; `cost`: load -> (CPU us per record, its interval's half width)."""
    testbed = {
        "cores": cores,
        "memory_gib": None,
        "instance_cpu": None,
        "kafka_provider": "embedded",
        "spark_master": "standalone",
        "pyspark_version": None,
        "python_version": "3.11.7",
    }
    if calibration is not None:
        testbed.update(calibration_rows_per_s=calibration, instance_cpu=0.25)
    document = {
        "benchmark": "scripted",
        "format_version": 1,
        "settings": {},
        "demand": {str(load): value for load, value in demand.items()},
        "testbed": testbed,
    }
    if cost:
        document["cost"] = {
            str(load): {
                "resources": demand[load],
                "cpu_us_per_record": us,
                "low": us - half,
                "high": us + half,
                "blocks": 5,
            }
            for load, (us, half) in cost.items()
        }
    return document


def test_each_load_is_its_own_test_with_a_stable_id(gate_project):
    result = gate_project().runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "test_gate.py::test_scripted_demand[[]load=1000[]]",
            "test_gate.py::test_scripted_demand[[]load=2000[]]",
            "test_gate.py::test_scripted_demand[[]load=3000[]]",
        ]
    )


@pytest.mark.parametrize(
    "extra, message",
    [
        ("duration=0", "*need 0 < duration <= max duration, got 0 s and 120 s*"),
        ("duration=1, warmup='soon'", "*warmup 'soon' is neither 'auto' nor a number of seconds*"),
        ("duration=1, prime='maybe'", "*prime 'maybe' is neither true nor false*"),
        ("duration=1, slope_method='guess'", "*unknown slope method 'guess'*"),
        ("duration=1, threshold='fast'", "*threshold 'fast' is neither a positive number of records/s*"),
        ("duration=1, tolerance=-1", "*tolerance -1 is not a whole number >= 0*"),
        ("duration=1, strategy='random'", "*random*"),
        ("duration=1, colour='blue'", "*unknown theodolite marker argument(s) [[]'colour'[]]*"),
        ("duration=1, paired_cost='sometimes'", "*paired_cost 'sometimes' is neither true, false nor auto*"),
        (
            "duration=1, max_late_rate='few'",
            "*max_late_rate 'few' is not a number; leave it out not to check it*",
        ),
        (
            "duration=1, max_late_rate=-1",
            "*max_late_rate -1.0 is not a rate >= 0 of records dropped as late per second*",
        ),
    ],
)
def test_bad_marker_values_are_usage_errors(gate_project, extra, message):
    result = gate_project(extra).runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*pytest-theodolite: bad theodolite marker:*", message])


def test_unsorted_loads_are_a_usage_error(pytester):
    pytester.syspathinsert(Path(__file__).parent)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_gate=GATE.replace("loads=[1000, 2000, 3000]", "loads=[3000, 1000]").format(extra="")
    )
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*loads must be ascending without repeats, got [[]3000, 1000[]]*"])


def test_a_missing_baseline_is_no_pass_it_exits_7_and_says_how_to_record_one(gate_project):
    result = gate_project().runpytest("-rs")
    result.assert_outcomes(skipped=3)
    assert result.ret == 7
    result.stdout.fnmatch_lines(
        [
            "*no baseline for scripted at *baselines/scripted.json: record one with "
            "`* -m pytest test_gate.py::test_scripted_demand --theodolite-update-baselines` and commit it*"
        ]
    )


def test_update_records_the_measured_demand_function(gate_project):
    project = gate_project()
    result = project.runpytest("--theodolite-update-baselines")
    result.assert_outcomes(passed=3)
    stored = json.loads((project.path / "baselines" / "scripted.json").read_text())
    assert stored["demand"] == {"1000": 1, "2000": 2, "3000": 3}
    assert stored["benchmark"] == "scripted"
    assert stored["settings"]["strategy"] == "baseline-guess+lower-bound"
    # and the next run compares against it and passes
    project.runpytest().assert_outcomes(passed=3)


def test_same_demand_passes_at_the_baseline_and_the_search_stops_there(gate_project):
    result = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3})).runpytest()
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "theodolite: scripted load=1000 instances=1: PASS (lag-trend pass; lag slope 0 vs 100 records/s)",
            # the default search starts at the baseline's demand; a pass there is all the gate needs
            "theodolite: scripted load=2000 instances=2: PASS (lag-trend pass; lag slope 0 vs 100 records/s)",
            "theodolite: scripted load=3000 instances=3: PASS (lag-trend pass; lag slope 0 vs 100 records/s)",
            "*  2000 |        2 |      <=2 | PASS *",
            "*<=N (loads 2000, 3000): passed at the baseline's demand, fewer instances not run*",
        ]
    )
    assert "FAIL" not in result.stdout.str()


def test_a_paired_cost_asked_for_outside_pull_request_mode_is_said_to_read_nothing(gate_project):
    project = gate_project("duration=1, paired_cost=True", baseline=baseline_of({1000: 1, 2000: 2, 3000: 3}))
    result = project.runpytest()
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["*paired_cost is read only in pull-request mode (--theodolite-compare-ref): no backlog was read*"]
    )


def test_same_demand_passes_and_each_sub_experiment_is_shown_live(gate_project):
    project = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3}))
    result = project.runpytest("--theodolite-exact-demand=true")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "theodolite: scripted load=1000 instances=1: PASS (lag-trend pass; lag slope 0 vs 100 records/s)",
            # an exact search starts at the baseline's demand and steps down to the first fail
            "theodolite: scripted load=2000 instances=2: PASS (lag-trend pass; lag slope 0 vs 100 records/s)",
            "theodolite: scripted load=2000 instances=1: FAIL (lag-trend fail; lag slope 1000 vs 100 records/s)",
            "theodolite: scripted load=3000 instances=3: PASS (lag-trend pass; lag slope 0 vs 100 records/s)",
            # ... where the lower bound (2, load 2000's demand) allows
            "theodolite: scripted load=3000 instances=2: FAIL (lag-trend fail; lag slope 1000 vs 100 records/s)",
        ]
    )
    assert "load=3000 instances=1" not in result.stdout.str()


def test_linear_search_starts_at_the_lower_bound(gate_project):
    result = gate_project(
        "duration=1, strategy='linear+lower-bound'", baseline=baseline_of({1000: 1, 2000: 2, 3000: 3})
    ).runpytest()
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "theodolite: scripted load=1000 instances=1: PASS*",
            "theodolite: scripted load=2000 instances=1: FAIL*",
            "theodolite: scripted load=2000 instances=2: PASS*",
            "theodolite: scripted load=3000 instances=2: FAIL*",
            "theodolite: scripted load=3000 instances=3: PASS*",
        ]
    )


def test_initial_guess_starts_each_load_at_the_previous_loads_demand(gate_project):
    result = gate_project(
        "duration=1, strategy='initial-guess'", baseline=baseline_of({1000: 1, 2000: 2, 3000: 3})
    ).runpytest()
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "theodolite: scripted load=1000 instances=1: PASS*",
            "theodolite: scripted load=2000 instances=1: FAIL*",  # the guess (1) fails: step up
            "theodolite: scripted load=2000 instances=2: PASS*",
            "theodolite: scripted load=3000 instances=2: FAIL*",  # the guess is 2, not 1 (linear would start at 1)
            "theodolite: scripted load=3000 instances=3: PASS*",
        ]
    )
    result.stdout.no_fnmatch_line("*load=3000 instances=1:*")


HOOKS = """

def pytest_theodolite_sub_experiment(config, benchmark, record, timings):
    with open("seen.txt", "a") as seen:
        seen.write(f"{benchmark} {record.load} {record.resources} {record.outcome.value} {len(timings)}\\n")


def pytest_theodolite_testbed(config):
    return {"runner": os.environ.get("RUNNER", "a")}
"""


def test_hooks_see_every_sub_experiment_and_add_testbed_facts(gate_project, monkeypatch):
    project = gate_project()
    project.makeconftest(CONFTEST.replace("import sys", "import os, sys") + HOOKS)
    project.runpytest("--theodolite-update-baselines").assert_outcomes(passed=3)
    assert (project.path / "seen.txt").read_text().splitlines() == [
        "scripted 1000 1 pass 0",
        "scripted 2000 1 fail 0",
        "scripted 2000 2 pass 0",
        "scripted 3000 2 fail 0",
        "scripted 3000 3 pass 0",
    ]
    stored = json.loads((project.path / "baselines" / "scripted.json").read_text())
    assert stored["testbed"]["extra"] == {"runner": "a"}
    monkeypatch.setenv("RUNNER", "b")
    result = project.runpytest()
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["*baseline recorded on runner a, this run has runner b; the comparison still runs*"]
    )


def test_a_testbed_hook_that_returns_no_dict_of_texts_is_a_usage_error(gate_project):
    project = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3}))
    project.makeconftest(CONFTEST + "\n\ndef pytest_theodolite_testbed(config):\n    return {'cores': 2}\n")
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*pytest_theodolite_testbed returned {'cores': 2}: return a dict of texts*"])
    result.stdout.no_fnmatch_line("*theodolite: scripted load=*")  # nothing was measured


def test_regression_fails_with_a_table_of_baseline_measured_and_slopes(gate_project, monkeypatch):
    monkeypatch.setenv("SCRIPTED_CAPACITY", "700")  # the job got slower: 1000/s now needs 2 instances
    result = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3})).runpytest()
    result.assert_outcomes(failed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*scripted*1000*",
            "load | baseline | measured | lag slopes",
            "*1000 |        1 |        2 | r=1: +300/s FAIL, r=2: -400/s ok*",
        ]
    )


@pytest.mark.parametrize("body", ["pass", "assert theodolite_gate.point.load > 0"])
def test_a_gate_that_never_calls_check_is_still_compared(gate_project, monkeypatch, body):
    project = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3}))
    project.makepyfile(test_gate=GATE.format(extra="duration=1").replace("theodolite_gate.check()", body))
    project.runpytest().assert_outcomes(passed=3)
    monkeypatch.setenv("SCRIPTED_CAPACITY", "700")  # slower job: every load needs one instance more
    result = project.runpytest()
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(["scripted load 1000: measured 2 instances, baseline 1 instance: regression"])


def test_tolerance_absorbs_a_one_instance_regression(gate_project, monkeypatch):
    monkeypatch.setenv("SCRIPTED_CAPACITY", "800")  # 1000 -> 2, 2000 -> 3, 3000 -> 4 instances
    project = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3}))
    project.runpytest("--theodolite-tolerance=1").assert_outcomes(passed=3)


def test_improvement_passes_and_is_reported(gate_project, monkeypatch, tmp_path):
    monkeypatch.setenv("SCRIPTED_CAPACITY", "3000")
    summary_file = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_file))
    project = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3}, cores=64))
    bounded = (
        project.runpytest()
    )  # by default a pass at the baseline's demand ends the search: no improvement
    bounded.assert_outcomes(passed=3)
    bounded.stdout.fnmatch_lines(["scripted: PASS", "*  3000 |        3 |      <=3 | PASS *"])
    summary_file.unlink()
    result = project.runpytest("--theodolite-exact-demand=true")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*theodolite: scalability gates*",
            "*scripted*IMPROVEMENT*",
            "*baseline recorded on 64 cores, this run has * cores; the comparison still runs*",
            "*lower the baseline with --theodolite-update-baselines*",
        ]
    )
    markdown = summary_file.read_text()
    assert "scripted" in markdown
    rows = [line for line in markdown.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [row.split(" | ")[:4] for row in rows] == [
        ["| 1000", "1", "1", "PASS"],
        ["| 2000", "2", "1", "IMPROVEMENT"],
        ["| 3000", "3", "1", "IMPROVEMENT"],
    ]


def test_corrupt_baseline_is_one_error_naming_the_file(gate_project):
    result = gate_project(baseline='{"benchmark": "scripted", "demand": {"1000": "two"}').runpytest()
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines(["*pytest-theodolite: *baselines/scripted.json: *"])
    assert "Traceback" not in result.stdout.str()


def test_unmeasured_load_is_an_error_with_its_own_exit_code(gate_project, monkeypatch):
    monkeypatch.setenv("SCRIPTED_INVALID", "2000")
    result = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3})).runpytest()
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*could not measure the demand of scripted at load 2000: invalid at 2 instances: "
            "the generator reached 50 % of the target rate*"
        ]
    )
    assert result.ret == 7  # pytest-theodolite's 'could not measure'


#: a scripted run for each row of the outcome table: (environment, stored demand or None, what the table
#: names at load 1000, the other loads' outcome)
OUTCOME_RUNS = {
    "PASS": ({}, {1000: 1, 2000: 2, 3000: 3}, "passed"),
    "REGRESSION": ({"SCRIPTED_CAPACITY": "700"}, {1000: 1, 2000: 2, 3000: 3}, "failed"),
    "NEW LOAD": ({}, {2000: 2, 3000: 3}, "passed"),
    "UNMEASURED": ({"SCRIPTED_INVALID": "1000"}, {1000: 1, 2000: 2, 3000: 3}, "passed"),
    "NO BASELINE": ({}, None, "skipped"),
}


@pytest.mark.parametrize("label", sorted(OUTCOME_RUNS))
def test_each_outcome_ends_its_test_and_the_run_as_the_outcome_table_says(gate_project, monkeypatch, label):
    """docs/reference/outcomes.md is rendered from glue/outcomes.py; this holds the gate to that table."""
    from pytest_theodolite.glue.outcomes import NO_BASELINE, VERDICT_OUTCOMES

    table = {verdict.label: outcome for verdict, outcome in VERDICT_OUTCOMES.items()} | {
        "NO BASELINE": NO_BASELINE
    }
    environment, demand, others = OUTCOME_RUNS[label]
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    project = gate_project(baseline=None if demand is None else baseline_of(demand))
    result = project.runpytest(f"--junitxml={project.path / 'junit.xml'}")
    outcome = table[label]
    cases = {
        case.get("name"): next(
            (child.tag for child in case if child.tag in ("failure", "error", "skipped")), ""
        )
        for case in ElementTree.parse(project.path / "junit.xml").iter("testcase")
    }
    as_junit = {"passed": "", "failed": "failure", "error": "error", "skipped": "skipped"}
    assert cases["test_scripted_demand[load=1000]"] == as_junit[outcome.test.value], cases
    assert {cases["test_scripted_demand[load=2000]"], cases["test_scripted_demand[load=3000]"]} == {
        as_junit[others]
    }, cases
    assert result.ret == outcome.exit_code


def test_regression_beside_an_unmeasured_load_exits_as_a_failure(gate_project, monkeypatch):
    monkeypatch.setenv("SCRIPTED_INVALID", "2000")
    monkeypatch.setenv("SCRIPTED_CAPACITY", "500")
    result = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3})).runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_junit_properties_carry_the_demand_values(gate_project, tmp_path):
    xml = tmp_path / "junit.xml"
    gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3})).runpytest(f"--junitxml={xml}")
    properties = {p.get("name"): p.get("value") for p in ElementTree.parse(xml).iter("property")}
    assert properties["theodolite.demand.2000"] == "2"
    assert properties["theodolite.baseline.2000"] == "2"
    assert properties["theodolite.benchmark"] == "scripted"


def results_in_the_project(project):
    """Make the scripted session write its results to the project's `results/` (to be read after the run)."""
    project.makeconftest(
        CONFTEST.replace('tmp_path_factory.mktemp("results")', 'Path("results")').replace(
            "import pytest", "import pytest\nfrom pathlib import Path"
        )
    )
    return project


def test_a_plot_and_the_raw_demand_table_land_in_the_results_dir(gate_project):
    project = results_in_the_project(gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3})))
    project.runpytest("--theodolite-results=results").assert_outcomes(passed=3)
    png = project.path / "results" / "scripted_demand.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (project.path / "results" / "expscripted_demand.csv").read_text().splitlines() == [
        "load,resources",
        "1000,1",
        "2000,<=2",
        "3000,<=3",
    ]


@pytest.mark.integration  # pytest-xdist's worker processes
@pytest.mark.parametrize("variants", [0, 2])
def test_gates_under_xdist_run_on_one_worker_beside_other_tests(gate_project, variants):
    project = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3}))
    if variants:  # a gate with a parametrization of its own: ids like [load=1000-x], found all the same
        project.makepyfile(
            test_gate=GATE.format(extra="duration=1").replace(
                "def test_scripted_demand(",
                f"@pytest.mark.parametrize('variant', ['x', 'y'][:{variants}])\n"
                "def test_scripted_demand(variant, ",
            )
        )
    project.makepyfile(
        test_other="import pytest\n@pytest.mark.parametrize('i', range(4))\ndef test_other(i): pass"
    )
    result = project.runpytest("-n", "2", "-v")
    gates = 3 * max(variants, 1)
    result.assert_outcomes(passed=4 + gates)
    gate_lines = [line for line in result.stdout.lines if "test_scripted_demand" in line and "PASSED" in line]
    assert len(gate_lines) == gates, result.stdout.lines
    gate_workers = {line.split("]")[0] for line in gate_lines}
    assert len(gate_workers) == 1, gate_workers
    result.stdout.fnmatch_lines(["*theodolite: scalability gates*"])


OTHER_TESTS_LOGGING_THEIR_TIME = """
import os, time
import pytest
from gate_fakes import log_interval

@pytest.mark.parametrize('i', range(6))
def test_other(i):
    start = time.time()
    time.sleep(0.3)
    log_interval(os.environ["SCRIPTED_LOG"], "test", start, time.time())

@pytest.mark.theodolite_exclusive
def test_that_measures_itself():
    start = time.time()
    time.sleep(0.5)
    log_interval(os.environ["SCRIPTED_LOG"], "exclusive", start, time.time())
"""


@pytest.mark.integration  # pytest-xdist's worker processes
def test_under_xdist_no_other_test_runs_while_a_gate_or_an_exclusive_test_measures(
    gate_project, monkeypatch, tmp_path
):
    log = tmp_path / "intervals.log"
    monkeypatch.setenv("SCRIPTED_LOG", str(log))
    monkeypatch.setenv("SCRIPTED_SECONDS", "0.2")
    project = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3}))
    project.makepyfile(test_other=OTHER_TESTS_LOGGING_THEIR_TIME)
    result = project.runpytest("-n", "2", "-p", "no:randomly")
    result.assert_outcomes(passed=10)
    result.stdout.fnmatch_lines(["*pytest-xdist: other tests wait while a gate point measures*"])
    intervals = [
        (kind, float(start), float(end))
        for kind, start, end in (line.split() for line in log.read_text().splitlines())
    ]
    measured = [(s, e) for kind, s, e in intervals if kind == "sub-experiment"]
    exclusive = [(s, e) for kind, s, e in intervals if kind == "exclusive"]
    tests = [(s, e) for kind, s, e in intervals if kind == "test"]
    assert len(measured) >= 3 and len(exclusive) == 1 and len(tests) == 6  # >= 1 sub-experiment per load
    measured += exclusive
    overlapping = [(m, t) for m in measured for t in tests if t[0] < m[1] and m[0] < t[1]]
    assert overlapping == []


def test_gates_beside_another_directory_with_its_own_conftest(gate_project):
    # pytest then asks pluggy for per-directory hook subsets, which needs every plugin hashable
    project = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3}))
    other = project.mkpydir("other")
    (other / "conftest.py").write_text("import pytest\n")
    (other / "test_other.py").write_text("def test_other():\n    pass\n")
    project.runpytest(".", "other").assert_outcomes(passed=4)


def test_a_baseline_from_a_testbed_of_another_speed_is_not_comparable_where_the_calibration_leaves_it_open(
    gate_project, monkeypatch
):
    # on a host at half the baseline's speed by the calibration (0.43-0.57x with its uncertainty), the job takes
    # 450 records/s per instance here: each load fails at 0.57x its rate and passes at 0.43x
    monkeypatch.setenv("SCRIPTED_CAPACITY", "450")
    monkeypatch.setenv("SCRIPTED_CALIBRATION", "200000")
    result = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3}, calibration=400000)).runpytest(
        "-rs"
    )
    result.assert_outcomes(skipped=3)  # no verdict: skipped with the reason, never FAILED
    assert result.ret == 7
    result.stdout.fnmatch_lines(
        [
            "scripted: NOT COMPARABLE (3 loads not comparable)",
            "*testbed calibration: 200,000 rows/s on one 0.25 CPU instance*; baseline's: 400,000 rows/s "
            "(this testbed at 0.50x)*",
            "SKIPPED*scripted load 1000: measured more than 1 instance (more not run), baseline 1 instance: not "
            "comparable: the verdicts that would make this a regression were not certain (the change's * at 1 "
            "instance: its 2 repetitions disagreed (FAIL at 575 records/s*; PASS at 425 records/s*",
        ]
    )
    assert "REGRESSION" not in result.stdout.str()


def test_a_baseline_of_limited_instances_is_not_comparable_on_a_cluster_that_enforces_no_share(
    gate_project, monkeypatch
):
    """A remote standalone or YARN cluster gives its executors whole cores: a baseline recorded with quarter-core
    instances cannot judge what it measures, whatever the demands (equal ones too)."""
    monkeypatch.setenv("SCRIPTED_UNLIMITED_CLUSTER", "1")
    monkeypatch.setenv("SCRIPTED_CALIBRATION", "400000")  # the same speed: only the instances' size differs
    result = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3}, calibration=400000)).runpytest(
        "-rs"
    )
    result.assert_outcomes(skipped=3)
    assert result.ret == 7
    result.stdout.fnmatch_lines(
        [
            "scripted: NOT COMPARABLE (3 loads not comparable)",
            "SKIPPED*scripted load 1000: *not comparable: the baseline's instances were limited to 0.25 CPU each, "
            "and spark://scripted:7077 enforces no CPU share per instance*",
        ]
    )
    assert "REGRESSION" not in result.stdout.str()


def test_on_a_slower_testbed_loads_are_offered_at_its_speed_and_a_demand_no_higher_than_the_baseline_passes(
    gate_project, monkeypatch
):
    monkeypatch.setenv("SCRIPTED_CALIBRATION", "228000")  # the fresh machine: 0.57x
    project = results_in_the_project(
        gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 4}, calibration=400000))
    )
    # each load offered at 0.57 x 1.15 = 0.66x its rate: 656 / 1311 / 1967 records/s, which 500 per instance
    # meet on 2 / 3 / 4 instances -- 1000 and 2000 above the baseline
    monkeypatch.setenv("SCRIPTED_CAPACITY", "500")
    result = project.runpytest("-rs", "--theodolite-results=results")
    result.assert_outcomes(passed=1, skipped=2)
    assert result.ret == 7  # two loads without a verdict
    result.stdout.fnmatch_lines(
        [
            "scripted: NOT COMPARABLE (2 loads not comparable)",
            "*not comparable: load 1000: the verdicts that would make this a regression were not certain*its 2 "
            "repetitions disagreed (FAIL at 655 records/s*; PASS at 484 records/s*",
            "*not comparable: load 2000: *",
            "*load 3000: judged at 0.66x each load's rate: this testbed is slower (0.57x the baseline's, at most "
            "0.66x), so the rate offered here weighs at least the baseline's",
            "*every load was offered at 0.66x its rate (the same keys, each sending less often)*",
        ]
    )
    # the results say what was offered
    results = json.loads((project.path / "results" / "expscripted_results.json").read_text())
    assert [(s["load"], s["target_rate"]) for s in results["sub_experiments"]] == [
        (1000, pytest.approx(655.5)),
        (2000, pytest.approx(1311)),
        (3000, pytest.approx(1966.5)),
    ]
    # a FAIL at the baseline's demand was measured once more at 0.57 x 0.85 = 0.48x its rate, where it passed
    # (not comparable), and no more instances were run: they are reported above it
    assert [
        [r["protocol"]["offered_rate"] for r in s["repetitions"]] for s in results["sub_experiments"]
    ] == [
        [pytest.approx(655.5), pytest.approx(484.5)],
        [pytest.approx(1311), pytest.approx(969)],
        [pytest.approx(1966.5)],
    ]
    ran = [line for line in result.stdout.lines if line.startswith("theodolite: scripted load=")]
    assert [line.split(":")[1].strip() for line in ran] == [
        "scripted load=1000 instances=1",
        "scripted load=1000 instances=1",
        "scripted load=2000 instances=2",
        "scripted load=2000 instances=2",
        "scripted load=3000 instances=4",
    ]
    result.stdout.fnmatch_lines(
        [
            "*>1*",
            "*>N (loads 1000, 2000): failed at the baseline's demand*",
            "*a FAIL at the baseline's demand was measured once more at 0.48x*",
        ]
    )


def test_on_a_slower_testbed_a_fail_at_both_ends_of_its_calibration_is_a_regression(
    gate_project, monkeypatch
):
    # 0.57x: loads offered at 0.66x, FAILs measured again at 0.48x
    monkeypatch.setenv("SCRIPTED_CALIBRATION", "228000")
    project = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 4}, calibration=400000))
    monkeypatch.setenv("SCRIPTED_CAPACITY", "300")  # 485 / 969 / 1453 records/s fail on 1 / 2 / 4 instances
    result = project.runpytest("--junitxml=junit.xml")
    result.assert_outcomes(failed=3)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "theodolite: scripted load=1000 instances=1: FAIL*2 repetitions: FAIL, FAIL)",
            "*load 1000, 2000, 3000: judged at 0.48x each load's rate: this testbed is slower (0.57x the "
            "baseline's, at least 0.48x), so the rate offered here weighs at most the baseline's",
        ]
    )
    xml = ElementTree.parse(project.path / "junit.xml")
    properties = {p.get("name"): p.get("value") for p in xml.iter("property")}
    assert properties["theodolite.verdict.1000"] == "regression"
    assert properties["theodolite.demand_above.1000"] == "1"


def test_on_a_testbed_inside_the_margin_but_read_slower_loads_are_offered_at_its_speed_and_a_fail_measured_again(
    gate_project, monkeypatch
):
    """0.75x the baseline's host: within the 35 % margin, but slower than the calibration's 15 % uncertainty
    allows for an equal host. Each load is offered at 0.75 x 1.15 = 0.86x its rate, where a pass at the
    baseline's demand is judged; a FAIL there may be the host's, so it is measured once more at 0.75 x 0.85 =
    0.64x, and only a FAIL there too is a regression."""
    monkeypatch.setenv("SCRIPTED_CALIBRATION", "300000")
    project = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3}, calibration=400000))
    # 900 records/s per instance: every load would fail at its baseline's demand at the full rate (1 000 on
    # one instance), and passes at the 0.86x offered
    monkeypatch.setenv("SCRIPTED_CAPACITY", "900")
    result = project.runpytest()
    result.assert_outcomes(passed=3)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "theodolite: scripted load=1000 instances=1: PASS*",
            "*every load was offered at 0.86x its rate (the same keys, each sending less often): the calibration "
            "reads this testbed slower than the baseline's*",
        ]
    )
    # 700: FAILs at 0.86x, passes at 0.64x -- the host's doing or the job's, this testbed cannot tell
    monkeypatch.setenv("SCRIPTED_CAPACITY", "700")
    result = project.runpytest("-rs")
    result.assert_outcomes(skipped=3)
    assert result.ret == 7
    result.stdout.fnmatch_lines(
        [
            "*not comparable: load 1000: the verdicts that would make this a regression were not certain*its 2 "
            "repetitions disagreed (FAIL at 86? records/s*; PASS at 638 records/s*",
            "*a FAIL at the baseline's demand was measured once more at 0.64x, the slowest speed it allows*",
        ]
    )
    assert "REGRESSION" not in result.stdout.str()
    # 500 per instance: FAILs at 0.64x too -- regressions
    monkeypatch.setenv("SCRIPTED_CAPACITY", "500")
    result = project.runpytest()
    result.assert_outcomes(failed=3)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["theodolite: scripted load=1000 instances=1: FAIL*2 repetitions: FAIL, FAIL)"]
    )


@pytest.mark.parametrize(
    "calibration, first, headline",
    [
        # 0.75x the baseline's host: within the margin, loads offered at 0.86x, the search measures the FAIL
        # again at 0.64x
        pytest.param(
            "300000", "failed", "scripted: REGRESSION (1 regression, 1 unfinished load)", id="in-the-search"
        ),
        # 0.57x: loads offered at 0.66x, the gate measures the FAIL again at 0.48x (1000 passes there)
        pytest.param(
            "228000",
            "skipped",
            "scripted: NOT COMPARABLE (1 load not comparable, 1 unfinished load)",
            id="by-the-gate",
        ),
    ],
)
def test_a_point_interrupted_while_its_fail_is_measured_again_is_unfinished_never_a_regression(
    gate_project, monkeypatch, calibration, first, headline
):
    """Ctrl-C (or SIGTERM) while a FAIL at the baseline's demand is measured once more: the search has found a
    demand above the baseline's, but the point was not judged. The summary printed after the interrupt names it
    unfinished and gives it no verdict."""
    monkeypatch.setenv("SCRIPTED_CALIBRATION", calibration)
    monkeypatch.setenv("SCRIPTED_CAPACITY", "500")  # fails at the baseline's demand at the rate offered
    monkeypatch.setenv("SCRIPTED_INTERRUPT_CONFIRM", "2000")
    project = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3}, calibration=400000))
    result = project.runpytest(no_reraise_ctrlc=True)  # the scripted Ctrl-C is the run's own
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.assert_outcomes(**{first: 1})  # load 1000, judged before the interrupt
    result.stdout.fnmatch_lines(
        [
            headline,
            "  unfinished: load 2000 -- the run stopped (interrupted, or an error) before its verdict; its "
            "sub-experiments so far are in the results directory",
        ]
    )
    summary = result.outlines[result.outlines.index(headline) :]
    assert [line for line in summary if line.startswith("  2000 |")] == []
    # interrupted at the first load: nothing was judged, and nothing is called a regression
    monkeypatch.setenv("SCRIPTED_INTERRUPT_CONFIRM", "1000")
    result = project.runpytest(no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.assert_outcomes()
    result.stdout.fnmatch_lines(["scripted: UNFINISHED (1 unfinished load)", "  unfinished: load 1000 -- *"])
    assert "REGRESSION" not in result.stdout.str()


def test_on_a_faster_testbed_a_demand_above_the_baseline_is_a_regression(gate_project, monkeypatch):
    monkeypatch.setenv("SCRIPTED_CALIBRATION", "800000")
    project = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3}, calibration=400000))
    monkeypatch.setenv("SCRIPTED_CAPACITY", "1000")  # 1 / 2 / 3: as the baseline, which may be this host's
    project.runpytest().assert_outcomes(skipped=3)
    monkeypatch.setenv("SCRIPTED_CAPACITY", "700")  # 2 / 3 / none
    result = project.runpytest("--junitxml=junit.xml")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(["*load 1000, 2000, 3000: judged one-sided: this testbed is faster (2.00x*"])
    # a regression judged one-sided rests on a FAIL measured twice, as on a comparable testbed
    result.stdout.fnmatch_lines(
        ["theodolite: scripted load=1000 instances=1: FAIL*2 repetitions: FAIL, FAIL)"]
    )
    xml = ElementTree.parse(project.path / "junit.xml")
    properties = {p.get("name"): p.get("value") for p in xml.iter("property")}
    assert properties["theodolite.verdict.1000"] == "regression"
    assert "faster (2.00x" in properties["theodolite.one_sided.1000"]


def test_a_regression_whose_fail_was_not_certain_is_not_comparable_never_a_regression(
    gate_project, monkeypatch
):
    monkeypatch.setenv("SCRIPTED_CAPACITY", "700")  # 1000 / 2000 / 3000 now need 2 / 3 / none
    monkeypatch.setenv("SCRIPTED_UNCERTAIN", "1000:1,2000:2,3000:3")  # each FAIL at the baseline's demand
    result = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3})).runpytest("-rs")
    result.assert_outcomes(skipped=3)
    assert result.ret == 7
    result.stdout.fnmatch_lines(
        [
            "scripted: NOT COMPARABLE (3 loads not comparable)",
            "SKIPPED*scripted load 1000: measured 2 instances, baseline 1 instance: not comparable: the verdicts "
            "that would make this a regression were not certain (the change's FAIL at 1 instance: lag slope +300 "
            "?+50, +350? vs 100 records/s, *",
        ]
    )
    assert "REGRESSION" not in result.stdout.str()
    # certain where it decides (the FAIL at the baseline's demand + tolerance): a regression again
    monkeypatch.setenv("SCRIPTED_UNCERTAIN", "1000:2,2000:1")
    result = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3})).runpytest()
    result.assert_outcomes(failed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["scripted: REGRESSION (3 regressions)"])


def test_a_baseline_within_the_calibration_margin_is_compared(gate_project, monkeypatch):
    monkeypatch.setenv("SCRIPTED_CAPACITY", "700")
    monkeypatch.setenv("SCRIPTED_CALIBRATION", "380000")
    result = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3}, calibration=400000)).runpytest()
    result.assert_outcomes(failed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["scripted: REGRESSION (3 regressions)"])


def test_recording_stores_the_calibration_in_the_baseline(gate_project, monkeypatch):
    monkeypatch.setenv("SCRIPTED_CALIBRATION", "123456")
    project = gate_project()
    project.runpytest("--theodolite-update-baselines").assert_outcomes(passed=3)
    stored = json.loads((project.path / "baselines" / "scripted.json").read_text())
    assert stored["testbed"]["calibration_rows_per_s"] == 123456


def test_recording_on_a_testbed_read_slower_than_the_old_baseline_measures_the_full_rates(
    gate_project, monkeypatch
):
    """A recording measures this testbed as it is: the old baseline's calibration (a host read at 0.75x of it)
    offers no share of the rates, and a FAIL above the old demand is measured again at the full rate too."""
    monkeypatch.setenv("SCRIPTED_CALIBRATION", "300000")
    monkeypatch.setenv("SCRIPTED_CAPACITY", "900")  # at the full rates 1000 / 2000 / 3000 need 2 / 3 / 4
    project = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3}, calibration=400000))
    result = project.runpytest("--theodolite-update-baselines")
    result.assert_outcomes(passed=3)
    assert "offered at" not in result.stdout.str()
    # at 0.64x (the old baseline's slowest speed) 1000 would pass on one instance
    result.stdout.fnmatch_lines(
        ["theodolite: scripted load=1000 instances=1: FAIL*vs 100 records/s; 2 repetitions: FAIL, FAIL)"]
    )
    stored = json.loads((project.path / "baselines" / "scripted.json").read_text())
    assert stored["demand"] == {"1000": 2, "2000": 3, "3000": 4}
    assert stored["testbed"]["calibration_rows_per_s"] == 300000


def test_a_job_option_from_the_command_line_reaches_that_benchmark_only():
    from gate_fakes import BENCH

    from pytest_theodolite.engine.markers import gate_spec
    from pytest_theodolite.engine.settings import parse_job_options

    options = parse_job_options(["scripted:extra_hash_rounds=12", "scripted:sink=noop", "other:colour=blue"])
    assert options == {"scripted": {"extra_hash_rounds": 12, "sink": "noop"}, "other": {"colour": "blue"}}
    spec = gate_spec((BENCH,), {"loads": [1000]}, {}, options)
    assert dict(spec.benchmark.job_options) == {"extra_hash_rounds": 12, "sink": "noop"}
    assert spec.benchmark.name == "scripted"  # the same baseline still applies
    assert dict(gate_spec((BENCH,), {"loads": [1000]}, {}, {}).benchmark.job_options) == {}


@pytest.mark.parametrize("entry", ["uc1-keys", "uc1-keys:rounds", ":rounds=1", "uc1-keys:=1"])
def test_a_malformed_job_option_is_a_usage_error(gate_project, entry):
    result = gate_project().runpytest(f"--theodolite-job-option={entry}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--theodolite-job-option {entry!r} is not BENCHMARK:KEY=VALUE*"])


def literal(pattern: str) -> str:
    """An fnmatch pattern whose square brackets are text (the CPU figure's interval), not a character set."""
    return pattern.replace("[", "[[]")


def test_a_cpu_per_record_beyond_the_cost_tolerance_fails_at_an_unchanged_demand(gate_project, monkeypatch):
    # capacity 1000 per instance: demand {1000: 1, 2000: 2, 3000: 3} as in the baseline; the job now spends
    # 130 us per record where the baseline spent 100 (both +-2)
    monkeypatch.setenv("SCRIPTED_CPU_US", "130")
    monkeypatch.setenv("SCRIPTED_CPU_HALF_WIDTH", "2")
    baseline = baseline_of({1000: 1, 2000: 2, 3000: 3}, cost={1000: (100.0, 2.0), 2000: (125.0, 2.0)})
    project = gate_project(extra="duration=1, cost_tolerance='20%'", baseline=baseline)
    result = project.runpytest("--junitxml=junit.xml")
    # 1000: +30 % > 20 % -> cost regression; 2000: +4 %; 3000: no baseline figure, reported only
    result.assert_outcomes(passed=2, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*scripted load 1000: measured 1 instance, baseline 1 instance: cost regression: CPU per record "
            "+30% (tolerance 20%, p *)",
            literal(
                "CPU per record at 1 instance: baseline 100.0 us [98.0, 102.0], measured 130.0 us [128.0, 132.0]*"
            ),
            "*scripted: COST REGRESSION (1 cost regression, cost tolerance 20%)",
            # (no blind spot: the capacities it is read from come from failing runs, and none was needed)
            literal("  1000 |*1 |*1 | COST REGRESSION | 130.0 us [128.0, 132.0] (+30%) | n/a"),
            literal("  2000 |*2 |*<=2 | PASS            | 130.0 us [128.0, 132.0] (+4%)  | n/a"),
            literal("  3000 |*3 |*<=3 | PASS            | 130.0 us [128.0, 132.0]        | n/a"),
        ]
    )
    junit = (project.path / "junit.xml").read_text()
    assert "record_property is incompatible" not in result.stdout.str()  # no warning under xunit2
    for prop in (
        'name="theodolite.verdict.1000" value="cost-regression"',
        'name="theodolite.cpu_us_per_record.1000" value="130.000"',
        'name="theodolite.baseline_cpu_us_per_record.1000" value="100.000"',
        'name="theodolite.cpu_change.1000" value="+0.300"',
        'name="theodolite.cost_tolerance" value="0.200"',
    ):
        assert prop in junit, prop


def test_a_rise_within_its_noise_passes_and_without_a_tolerance_the_figure_is_only_reported(
    gate_project, monkeypatch
):
    monkeypatch.setenv("SCRIPTED_CPU_US", "130")
    monkeypatch.setenv("SCRIPTED_CPU_HALF_WIDTH", "60")  # +30 %, but [70, 190] is too wide to call it a rise
    baseline = baseline_of({1000: 1, 2000: 2, 3000: 3}, cost={1000: (100.0, 10.0)})
    gate_project(extra="duration=1, cost_tolerance='20%'", baseline=baseline).runpytest().assert_outcomes(
        passed=3
    )
    monkeypatch.setenv("SCRIPTED_CPU_HALF_WIDTH", "2")
    result = gate_project(extra="duration=1", baseline=baseline).runpytest()
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([literal("  1000 |*1 |*1 | PASS    | 130.0 us [128.0, 132.0] (+30%) | *")])


def test_the_cost_tolerance_from_the_command_line_and_a_bad_one(gate_project, monkeypatch):
    monkeypatch.setenv("SCRIPTED_CPU_US", "130")
    baseline = baseline_of({1000: 1, 2000: 2, 3000: 3}, cost={1000: (100.0, 0.0)})
    project = gate_project(baseline=baseline)
    project.runpytest("--theodolite-cost-tolerance=10%").assert_outcomes(passed=2, failed=1)
    result = project.runpytest("--theodolite-cost-tolerance=10")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*cost_tolerance '10' is not a percentage: write e.g. cost_tolerance='20%'*"]
    )


def test_updating_a_baseline_records_the_cpu_per_record_at_each_demand(gate_project, monkeypatch):
    monkeypatch.setenv("SCRIPTED_CPU_US", "80")
    monkeypatch.setenv("SCRIPTED_CPU_HALF_WIDTH", "3")
    project = gate_project()
    project.runpytest("--theodolite-update-baselines").assert_outcomes(passed=3)
    stored = json.loads((project.path / "baselines" / "scripted.json").read_text())
    assert stored["demand"] == {"1000": 1, "2000": 2, "3000": 3}
    assert stored["cost"] == {
        str(load): {
            "blocks": 5,
            "cpu_us_per_record": 80.0,
            "cpu_utilisation": None,  # the scripted cluster cannot limit CPU
            "high": 83.0,
            "low": 77.0,
            "reference_us_per_row": None,
            "resources": resources,
        }
        for load, resources in ((1000, 1), (2000, 2), (3000, 3))
    }
    # and the next run compares with it
    monkeypatch.setenv("SCRIPTED_CPU_US", "120")
    project.runpytest("--theodolite-cost-tolerance=20%").assert_outcomes(failed=3)


def test_a_regression_is_measured_once_more_and_one_that_does_not_reproduce_is_not_comparable(
    gate_project, monkeypatch
):
    monkeypatch.setenv("SCRIPTED_CAPACITY", "700")  # 1000 / 2000 / 3000 need 2 / 3 / none against 1 / 2 / 3
    monkeypatch.setenv("SCRIPTED_FLAKY", "1000:1")  # its certain FAIL at 1 instance passes when run again
    project = gate_project(baseline=baseline_of({1000: 1, 2000: 2, 3000: 3}))
    result = project.runpytest("-rs")
    result.assert_outcomes(failed=2, skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # 2000 and 3000 reproduced
    result.stdout.fnmatch_lines(
        [
            "theodolite: scripted load=1000 instances=1: FAIL (lag-trend fail; lag slope 300 vs 100 records/s)",
            "theodolite: scripted load=1000 instances=1: FAIL (lag-trend fail; lag slope 125 (median) vs 100 "
            "records/s; 2 repetitions: FAIL, PASS)",
            "*scripted load 2000: measured 3 instances, baseline 2 instances: regression*",
            "scripted: REGRESSION (2 regressions, 1 load not comparable)",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "SKIPPED*scripted load 1000: measured 2 instances, baseline 1 instance: not comparable: the verdicts "
            "that would make this a regression were not certain (the change's * at 1 instance: its 2 "
            "repetitions disagreed (FAIL, lag slope +300; PASS, lag slope -50))*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "theodolite: scripted load=2000 instances=2: FAIL (lag-trend fail; lag slope 600 vs 100 records/s)",
            "theodolite: scripted load=2000 instances=2: FAIL (lag-trend fail; lag slope 600 (median) vs 100 "
            "records/s; 2 repetitions: FAIL, FAIL)",
        ]
    )
    # nothing to confirm where the demand meets the baseline
    monkeypatch.setenv("SCRIPTED_CAPACITY", "1000")
    result = project.runpytest()
    result.assert_outcomes(passed=3)
    assert "repetitions" not in result.stdout.str()


def test_a_progress_line_over_repetitions_names_each_and_an_unbounded_median():
    from pytest_theodolite.core.outcomes import Outcome
    from pytest_theodolite.core.records import RepetitionRecord, SubExperimentRecord
    from pytest_theodolite.core.slo import LAG_TREND, SloVerdict
    from pytest_theodolite.report.progress import progress_line

    falling = RepetitionRecord(0, (SloVerdict(LAG_TREND, Outcome.FAIL, None, 200.0, "falls behind"),))
    fitted = RepetitionRecord(1, (SloVerdict(LAG_TREND, Outcome.FAIL, 949.0, 200.0, "", 540.0, 1359.0),))
    record = SubExperimentRecord.from_repetitions(4000, 1, 4000.0, [fitted, falling])
    assert progress_line(record, {}) == (
        "load=4000 instances=1: FAIL (lag-trend fail; lag slope unbounded (median) vs 200 records/s; "
        "2 repetitions: FAIL, FAIL)"
    )


def test_the_late_records_bound_comes_from_the_marker_or_the_command_line():
    from gate_fakes import BENCH

    from pytest_theodolite.engine.markers import gate_spec

    assert gate_spec((BENCH,), {"loads": [1000]}, {}, {}).settings.slo.max_late_rate is None
    assert (
        gate_spec((BENCH,), {"loads": [1000], "max_late_rate": 0}, {}, {}).settings.slo.max_late_rate == 0.0
    )
    # the command line's text overrides the marker; empty there means "not checked"
    overridden = gate_spec((BENCH,), {"loads": [1000], "max_late_rate": 0}, {"max_late_rate": "2.5"}, {})
    assert overridden.settings.slo.max_late_rate == 2.5
    assert (
        gate_spec((BENCH,), {"loads": [1000]}, {"max_late_rate": ""}, {}).settings.slo.max_late_rate is None
    )


def test_a_progress_line_says_how_many_records_were_dropped_as_late_where_that_is_checked():
    from pytest_theodolite.core.estimators import TimeSeries
    from pytest_theodolite.core.outcomes import Outcome
    from pytest_theodolite.core.records import RepetitionRecord, SubExperimentRecord
    from pytest_theodolite.core.slo import LAG_TREND, SloVerdict, check_late_records
    from pytest_theodolite.report.progress import progress_line

    late = check_late_records(TimeSeries.of([30.0], [90]), max_rate=0.0, from_s=0.0, to_s=60.0)
    lag = SloVerdict(LAG_TREND, Outcome.PASS, -5.0, 200.0, "", -20.0, 10.0)
    record = SubExperimentRecord.from_repetitions(6, 2, 600.0, [RepetitionRecord(0, (lag, late))])
    assert progress_line(record, {}) == (
        "load=6 instances=2: FAIL (lag-trend pass, late-records fail; lag slope -5 [-20, 10] vs 200 records/s; "
        "90 records dropped as late in 60 s: 1.5/s > 0/s)"
    )


def test_pull_request_mode_judges_the_cost_by_default_unless_the_gate_names_a_tolerance():
    from gate_fakes import BENCH

    from pytest_theodolite.engine.markers import JUDGED_COST_TOLERANCE, gate_spec

    def tolerance(kwargs, overrides=None, *, pull_request):
        spec = gate_spec(
            (BENCH,), {"loads": [1000], **kwargs}, overrides or {}, {}, pull_request=pull_request
        )
        return spec.cost_tolerance

    assert tolerance({}, pull_request=False) is None  # stored baselines: another host, reported only
    assert tolerance({}, pull_request=True) == JUDGED_COST_TOLERANCE == 0.10
    assert tolerance({"cost_tolerance": "25%"}, pull_request=True) == 0.25
    assert tolerance({"cost_tolerance": "off"}, pull_request=True) is None
    assert tolerance({}, {"cost_tolerance": "off"}, pull_request=True) is None
    assert tolerance({"strategy": "capacity"}, pull_request=False) == JUDGED_COST_TOLERANCE


def test_the_paired_reads_tolerance_is_its_own_whatever_the_gates_cost_tolerance_says():
    from gate_fakes import BENCH

    from pytest_theodolite.core.paired_cost import PAIRED_COST_TOLERANCE
    from pytest_theodolite.engine.markers import GateSpecError, gate_spec

    def paired_tolerance(kwargs, overrides=None):
        spec = gate_spec((BENCH,), {"loads": [1000], **kwargs}, overrides or {}, {}, pull_request=True)
        return spec.settings.paired_cost_tolerance

    assert paired_tolerance({}) == PAIRED_COST_TOLERANCE == 0.07  # not the 10 % the other figures get
    # a loose tolerance for the noisy CPU per offered record (UC3's and UC4's 30 %) leaves the paired read's alone
    assert paired_tolerance({"cost_tolerance": "30%"}) == 0.07
    assert paired_tolerance({}, {"cost_tolerance": "off"}) == 0.07
    assert paired_tolerance({"paired_cost_tolerance": "12%"}) == 0.12
    assert paired_tolerance({"paired_cost_tolerance": "12%"}, {"paired_cost_tolerance": "5%"}) == 0.05
    assert paired_tolerance({}, {"paired_cost_tolerance": "off"}) is None  # reported, never judged
    with pytest.raises(
        GateSpecError, match=r"paired_cost_tolerance '7' is not a percentage.*paired_cost_tolerance="
    ):
        paired_tolerance({"paired_cost_tolerance": "7"})


def test_the_paired_read_is_on_in_pull_request_mode_unless_the_gate_or_the_command_line_turns_it_off():
    from gate_fakes import BENCH

    from pytest_theodolite.engine.markers import gate_spec

    def reads(kwargs, overrides=None, *, pull_request=True):
        spec = gate_spec(
            (BENCH,), {"loads": [1000], **kwargs}, overrides or {}, {}, pull_request=pull_request
        )
        return spec.settings.paired_cost

    assert reads({}) is True  # auto
    assert reads({}, pull_request=False) is False  # one revision: nothing to pair
    assert reads({"paired_cost": "auto"}, pull_request=False) is False
    assert reads({"paired_cost": False}) is False
    assert reads({}, {"paired_cost": "false"}) is False
    assert reads({"paired_cost": False}, {"paired_cost": "auto"}) is True  # the command line wins
    assert reads({"paired_cost": True}, pull_request=False) is True  # the report then says nothing was read


def test_a_gate_stops_at_its_reference_unless_asked_for_exact_demands_and_a_recording_always_is_exact():
    from gate_fakes import BENCH

    from pytest_theodolite.engine.markers import GateSpecError, gate_spec

    assert not gate_spec((BENCH,), {"loads": [1000]}, {}, {}).settings.exact_demand
    assert gate_spec((BENCH,), {"loads": [1000], "exact_demand": True}, {}, {}).settings.exact_demand
    assert gate_spec((BENCH,), {"loads": [1000]}, {"exact_demand": "true"}, {}).settings.exact_demand
    assert gate_spec((BENCH,), {"loads": [1000]}, {}, {}, update_baselines=True).settings.exact_demand
    with pytest.raises(GateSpecError, match="exact_demand 'maybe' is neither true nor false"):
        gate_spec((BENCH,), {"loads": [1000]}, {"exact_demand": "maybe"}, {})
