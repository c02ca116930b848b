"""`python -m pytest_theodolite history`: runs written by the results writer, lined up by their recorded start
and commit, as a table, CSVs and the configuration Apache Otava reads (report/history.py, cli/history.py)."""

import csv
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap

import pytest
from test_export import capacity_measurement, record

from pytest_theodolite.__main__ import main as module_main
from pytest_theodolite.cli.history import main
from pytest_theodolite.core.evaluation import SloSettings
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.scalability import DemandResult, Metric
from pytest_theodolite.store.environment import environment_info, source_revision
from pytest_theodolite.store.results import ResultsWriter


def write_run(directory, started, commit, demand_1000, capacity_1=None, dirty=False):
    """One uc1-keys run: load 1000 needs `demand_1000` instances (CPU per record 50 us); the capacity of one
    instance where given. `started`/`commit` None: a run recorded before they were."""
    environment = {}
    if started is not None:
        environment["started"] = started
    if commit is not None:
        environment["revision"] = {"commit": commit, "dirty": dirty}
    writer = ResultsWriter(
        directory,
        "uc1-keys",
        metric=Metric.DEMAND,
        slo_settings=SloSettings(),
        loads=[1000],
        resources=[1, 2],
        environment=environment,
    )
    if demand_1000 == 2:
        writer.record_sub_experiment(record(1000, 1, Outcome.FAIL))
    writer.record_sub_experiment(record(1000, demand_1000, Outcome.PASS, (50.0, 48.0, 52.0)))
    writer.write_demand(DemandResult({1000: demand_1000}, loads=(1000,), resources=(1, 2)))
    if capacity_1 is not None:
        writer.record_capacity_measurement(capacity_measurement(1, capacity_1))
    return directory


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def three_runs(tmp_path):
    """Given newest first: the history orders them by start. The oldest has no capacity."""
    newest = write_run(tmp_path / "c", "2026-11-27T12:00:00+00:00", "cccccccccc", 2, 1400.0, dirty=True)
    middle = write_run(tmp_path / "b", "2026-11-26T12:00:00+00:00", "bbbbbbbbbb", 1, 2100.0)
    oldest = write_run(tmp_path / "a", "2026-11-25T12:00:00+00:00", "aaaaaaaaaa", 1)
    return [newest, middle, oldest]


def test_runs_are_lined_up_by_start_with_their_commits(three_runs, tmp_path):
    out_dir = tmp_path / "history"
    code, out, err = run(*map(str, three_runs), "--out", str(out_dir), "--otava", "none")
    assert code == 0, err
    rows = list(csv.DictReader((out_dir / "uc1-keys.csv").open()))
    assert [r["commit"] for r in rows] == ["aaaaaaa", "bbbbbbb", "ccccccc+"]  # +: the tree differed
    assert rows[0]["time"] == "2026-11-25T12:00:00+00:00"
    assert [r["load=1000/demand"] for r in rows] == ["1", "1", "2"]
    assert [r["load=1000/cpu-per-record"] for r in rows] == ["50", "50", "50"]
    assert [r["instances=1/capacity"] for r in rows] == ["", "2100", "1400"]
    assert "| 2026-11-25 12:00 | aaaaaaa | 1 | 50 | - |" in out
    assert "not in every run, so not analysed for change points: instances=1/capacity" in out


def test_otava_is_configured_for_the_complete_series_with_their_directions(three_runs, tmp_path):
    out_dir = tmp_path / "history"
    assert run(*map(str, three_runs), "--out", str(out_dir), "--otava", "none")[0] == 0
    config = json.loads((out_dir / "otava.yaml").read_text())  # JSON is YAML
    test = config["tests"]["uc1-keys"]
    assert test["type"] == "csv" and test["time_column"] == "time" and test["attributes"] == ["commit"]
    assert test["file"] == str((out_dir / "uc1-keys.csv").resolve())
    # less is better for both; the capacity, missing from the oldest run, is left out
    assert test["metrics"] == {
        "load=1000/demand": {"column": "load=1000/demand", "direction": -1},
        "load=1000/cpu-per-record": {"column": "load=1000/cpu-per-record", "direction": -1},
    }


def test_where_otava_is_missing_the_command_to_run_is_printed(three_runs, tmp_path):
    code, _, err = run(
        *map(str, three_runs), "--out", str(tmp_path / "h"), "--otava", "no-such-otava-program"
    )
    assert code == 0
    assert "pipx install apache-otava" in err
    assert f"no-such-otava-program analyze --config-file {tmp_path / 'h' / 'otava.yaml'} uc1-keys" in err


@pytest.fixture
def fake_otava(tmp_path):
    """A stand-in for the otava program: prints what it was asked and the metrics of the config it was given;
    exits 3 when told to by FAKE_OTAVA_EXIT."""
    program = tmp_path / "bin" / "fake-otava"
    program.parent.mkdir()
    program.write_text(
        textwrap.dedent(
            f"""\
            #!{sys.executable}
            import json, os, sys
            args = sys.argv[1:]
            config = json.load(open(args[args.index("--config-file") + 1]))
            print("asked:", " ".join(a for a in args if not a.startswith("/")))
            for name, test in config["tests"].items():
                print(name, sorted(test["metrics"]), open(test["file"]).read().count("\\n") - 1, "rows")
            sys.stderr.write("otava complains\\n")
            sys.exit(int(os.environ.get("FAKE_OTAVA_EXIT", "0")))
            """
        )
    )
    program.chmod(program.stat().st_mode | stat.S_IEXEC)
    return program


def test_otava_runs_over_the_written_files_and_its_output_is_shown(three_runs, tmp_path, fake_otava):
    code, out, _ = run(*map(str, three_runs), "--out", str(tmp_path / "h"), "--otava", str(fake_otava))
    assert code == 0
    assert "asked: analyze --config-file uc1-keys" in out
    assert "uc1-keys ['load=1000/cpu-per-record', 'load=1000/demand'] 3 rows" in out


def test_otava_failing_is_the_exit_code_with_its_error(three_runs, tmp_path, fake_otava, monkeypatch):
    monkeypatch.setenv("FAKE_OTAVA_EXIT", "3")
    code, _, err = run(*map(str, three_runs), "--out", str(tmp_path / "h"), "--otava", str(fake_otava))
    assert code == 3
    assert "exited 3" in err and "otava complains" in err


def real_otava() -> str:
    """Apache Otava itself: the program THEODOLITE_OTAVA names (CI installs it there: .ci/run), else `otava` on
    PATH; the test skips where neither is."""
    program = os.environ.get("THEODOLITE_OTAVA") or shutil.which("otava")
    if not program:
        pytest.skip("Apache Otava is not installed (`pipx install apache-otava`; CI installs it: .ci/run)")
    return program


def ten_runs(directory, change_at):
    """Ten daily runs of one benchmark; from run `change_at` on, load 1000 needs two instances and one
    instance's capacity falls by 30 % (None: no change). Capacities jitter by 0-26 records/s."""
    runs = []
    for i in range(10):
        changed = change_at is not None and i >= change_at
        capacity = (1400.0 if changed else 2000.0) + (i % 3) * 13
        started = f"2026-11-{10 + i:02d}T12:00:00+00:00"
        runs.append(write_run(directory / f"run{i}", started, f"{i:x}" * 10, 2 if changed else 1, capacity))
    return runs


def test_apache_otava_marks_the_commit_where_the_demand_rose(tmp_path):
    program = real_otava()
    code, out, err = run(*map(str, ten_runs(tmp_path, 6)), "--out", str(tmp_path / "h"), "--otava", program)
    assert code == 0, err
    report = out[out.index("written:") :].splitlines()  # Otava's own table follows the files' line
    last_before = next(i for i, line in enumerate(report) if " 5555555 " in line)
    first_after = next(i for i, line in enumerate(report) if " 6666666 " in line)
    marks = "\n".join(report[last_before + 1 : first_after])
    assert "+100.0%" in marks and "-30.0%" in marks  # the demand and the capacity, between those commits
    assert "%" not in "\n".join(report[:last_before] + report[first_after:])


def test_apache_otava_marks_nothing_in_runs_that_did_not_change(tmp_path):
    program = real_otava()
    code, out, err = run(
        *map(str, ten_runs(tmp_path, None)), "--out", str(tmp_path / "h"), "--otava", program
    )
    assert code == 0, err
    report = out[out.index("written:") :]
    assert " 9999999 " in report  # Otava printed every run
    assert "%" not in report


def test_a_run_recorded_before_revisions_counts_by_its_file_time_and_an_unknown_commit(tmp_path):
    old = write_run(tmp_path / "old", None, None, 1)
    new = write_run(tmp_path / "new", "2099-01-01T00:00:00+00:00", "dddddddddd", 2)
    code, _, err = run(str(new), str(old), "--out", str(tmp_path / "h"), "--otava", "none")
    assert code == 0, err
    rows = list(csv.DictReader((tmp_path / "h" / "uc1-keys.csv").open()))
    assert [r["commit"] for r in rows] == ["unknown", "ddddddd"]


def test_a_pull_request_run_counts_as_its_change(tmp_path):
    write_run(tmp_path / "pr" / "ref", "2026-11-27T10:00:00+00:00", "eeeeeeeeee", 1)
    write_run(tmp_path / "pr" / "change", "2026-11-27T10:00:00+00:00", "eeeeeeeeee", 2, dirty=True)
    code, out, err = run(str(tmp_path / "pr"), "--out", str(tmp_path / "h"), "--otava", "none")
    assert code == 0, err
    assert "pull-request run's results" in err
    assert "| eeeeeee+ | 2 |" in out


def test_one_run_is_lined_up_but_not_analysed(tmp_path, fake_otava):
    one = write_run(tmp_path / "one", "2026-11-27T10:00:00+00:00", "ffffffffff", 1)
    code, out, err = run(str(one), "--out", str(tmp_path / "h"), "--otava", str(fake_otava))
    assert code == 0
    assert "asked:" not in out
    assert "needs two runs" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["/no/such/dir"], "does not exist"),
        (["{empty}"], "no results in"),
    ],
    ids=["missing directory", "no results"],
)
def test_bad_input_exits_2_and_says_what_to_give(tmp_path, argv, message):
    (tmp_path / "empty").mkdir()
    argv = [a.format(empty=tmp_path / "empty") for a in argv]
    code, _, err = run(*argv, "--out", str(tmp_path / "h"), "--otava", "none")
    assert code == 2
    assert message in err


def test_history_is_a_subcommand(three_runs, tmp_path, capsys):
    assert (
        module_main(["history", *map(str, three_runs), "--out", str(tmp_path / "h"), "--otava", "none"]) == 0
    )
    assert "uc1-keys: 3 runs" in capsys.readouterr().out


def test_results_record_the_git_revision_and_whether_the_tree_differed(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    assert source_revision(tmp_path) is None  # not a checkout
    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "one")
    (tmp_path / "job.py").write_text("x = 1\n")
    git("add", "job.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "two")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert source_revision(tmp_path) == {"commit": head.strip(), "dirty": False}
    (tmp_path / "job.py").write_text("x = 2\n")
    assert source_revision(tmp_path) == {"commit": head.strip(), "dirty": True}
    environment = environment_info(tmp_path)
    assert environment["revision"]["dirty"] is True
    assert environment["started"].endswith("+00:00")
