"""Pull-request mode end to end: a real gate measured at REF and in the working tree, on the embedded broker
and a local Spark cluster, each side in its own driver process importing its own version of the job."""

import json
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import NamedTuple

import pytest

# it measures (real gates inside): under pytest-xdist nothing else may run beside it
pytestmark = [pytest.mark.integration, pytest.mark.theodolite_exclusive]

JOB = '''
"""UC1 behind a module of this repository, so that each revision has its own version of it."""
from spark_jobs import uc1

VERSION = "{version}"


def start_query(spark, **options):
    return uc1.start_query(spark, **options)
'''

GATE = """
import pytest
from generator import Workload
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


class Layout(NamedTuple):
    job_dir: str  # where the repository keeps the job module
    run_dir: str  # where its gate runs pytest (the rootdir)
    pytest_ini: str | None  # the pytest.ini there, if any
    installed: bool = False  # the repository is a package installed with ``pip install -e .``


#: the layouts a pull request comes from, measured end to end: the repository root, and a package installed in
#: editable mode whose gate sits in a folder of its own with its own pytest.ini (a rootdir below the repository's
#: root), so that only the installation makes the job importable. A src/ layout and a gate in a subfolder differ
#: from these only in where the job is imported from, which test_sides checks for each without a measurement
#: (test_each_side_finds_the_job_where_the_working_tree_imports_it_from): each whole run here takes minutes
LAYOUTS = {
    "root": Layout("", "", None),
    "editable": Layout("", "gates", "[pytest]\n", installed=True),
}

PYPROJECT = """
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "myjobs"
version = "0.0.0"

[tool.setuptools]
py-modules = ["myjobs"]
"""


def editable_install(repo: Path, venv: Path) -> str:
    """The python of a new virtual environment that sees this one's packages (pytest, pyspark, the plugin) and
    has ``repo`` installed in editable mode by pip; a flat layout like this one is served by setuptools'
    import hook, not by a path entry."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    here = sysconfig.get_path("purelib")
    Path(purelib, "outer-environment.pth").write_text(f"import site; site.addsitedir({here!r})\n")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", "-e", str(repo)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return python


def imported_from(python: str, module: str, cwd: Path) -> Path | None:
    """Where ``python`` started in ``cwd`` imports ``module`` from (None where it cannot)."""
    done = subprocess.run(
        [
            python,
            "-c",
            f"import importlib.util as u; s = u.find_spec({module!r}); print(s.origin if s else '')",
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(done.stdout.strip()).resolve() if done.stdout.strip() else None


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_real_comparison_measures_both_sides_and_leaves_nothing_behind(
    pytester, monkeypatch, tmp_path_factory, layout
):
    """Which verdict is reached depends on the host; that both sides were measured, compared and reported,
    each from its own tree and the same place in it, and that the worktree is gone afterwards, does not."""
    chosen = LAYOUTS[layout]
    repo = pytester.path
    job_file, run_root = repo / chosen.job_dir / "myjobs.py", repo / chosen.run_dir
    job_file.parent.mkdir(parents=True, exist_ok=True)
    run_root.mkdir(parents=True, exist_ok=True)
    job_file.write_text(JOB.format(version="ref"))
    (run_root / "test_uc1_gate.py").write_text(GATE)
    if chosen.pytest_ini is not None:
        (run_root / "pytest.ini").write_text(chosen.pytest_ini)
    if chosen.installed:
        (repo / "pyproject.toml").write_text(PYPROJECT)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.org")
    git(repo, "config", "user.name", "t")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    job_file.write_text(JOB.format(version="change"))  # uncommitted: the working tree differs
    commit = git(repo, "rev-parse", "HEAD")

    python = sys.executable
    if chosen.installed:
        python = editable_install(repo, tmp_path_factory.mktemp("venv"))
        # only the installation makes the job importable, and from the working tree
        outside = tmp_path_factory.mktemp("elsewhere")
        assert imported_from(sys.executable, "myjobs", outside) is None
        assert imported_from(python, "myjobs", outside) == job_file.resolve()
        assert imported_from(python, "myjobs", run_root) == job_file.resolve()

    monkeypatch.chdir(run_root)  # as the user runs the gate: from its rootdir
    result = pytester.run(
        python,
        "-m",
        "pytest",
        f"--basetemp={tmp_path_factory.mktemp('inner')}",
        "-p",
        "no:cacheprovider",
        "--theodolite-results=results",
        "--theodolite-max-instances=2",
        "--theodolite-compare-ref=main",
        # the paired read is on by default; one layout runs it (it adds minutes), where its job is imported
        # from makes no difference to it. Exact demands: a certified load may leave REF unrun (a change passing
        # at one instance needs no REF run), and REF's job is what this test checks
        *(("--theodolite-exact-demand=true",) if layout == "root" else ("--theodolite-paired-cost=false",)),
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
    results = run_root / "results"
    if layout == "root":  # both sides read their backlogs at once, and the figure was reported (or why not)
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
    assert job_files["ref"].relative_to(tree) == Path(chosen.job_dir, "myjobs.py")
    assert not job_files["ref"].exists()  # the worktree was removed
    # the worktree and its entry are gone, the working tree keeps its uncommitted change
    assert git(repo, "worktree", "list").count("\n") == 0
    assert 'VERSION = "change"' in job_file.read_text()
