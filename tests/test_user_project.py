"""The plugin as a stranger's project gets it: built into a wheel, installed (not editable) into a fresh venv that
is not on PATH, run with that venv's interpreter by path in a project of its own -- its own git repository, a
job with a Python UDF, a module of its own named `generator` -- with nothing of this repository on sys.path:
a baseline recorded, a gate against it, and pull-request mode with a change in the working tree."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from importlib import metadata
from pathlib import Path

import pytest

# whole pytest runs that measure: under pytest-xdist nothing else may run beside them
pytestmark = [pytest.mark.integration, pytest.mark.theodolite_exclusive]

ROOT = Path(__file__).resolve().parents[1]

JOB = '''
"""The user's job: a Python UDF (the executors' Python workers import this module) over the generator's records."""
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

ROUNDS = {rounds}


@F.udf(StringType())
def label(value):
    text = str(value)
    for _ in range(ROUNDS):
        text = str(hash(text))
    return text


def start_query(spark, *, bootstrap_servers, input_topic, output_topic, checkpoint_dir,
                max_offsets_per_trigger=None, kafka_options=None, **options):
    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap_servers)
              .option("subscribe", input_topic).option("startingOffsets", "earliest"))
    for key, value in (kafka_options or {{}}).items():
        reader = reader.option(key, value)
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    labelled = reader.load().select(F.col("key"), label(F.col("value")).alias("value"))
    return (labelled.writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap_servers)
            .option("topic", output_topic).option("checkpointLocation", checkpoint_dir).start())
'''

GATE = """
import pytest
from pytest_theodolite import Benchmark, Workload

import generator  # the user's own module of that name
import myjob

LABELS = Benchmark("labels", myjob.start_query, lambda keys: Workload(keys=keys), input_partitions=2)


@pytest.mark.theodolite(LABELS, loads=[200], resources=[1], duration=8, max_duration=30, max_warmup=40,
                        paired_cost=False)
def test_labels_scale(theodolite_gate):
    assert generator.WHOSE == "the user's"
    theodolite_gate.check()
"""


def run(args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run `args`; its exit code, wall time and summary go to this test's output (``-rP`` shows them)."""
    started = time.monotonic()
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    summary = done.stdout.partition("theodolite: scalability gates")[2].strip()
    print(
        f"$ {' '.join(args[1:])}: exit {done.returncode} after {time.monotonic() - started:.0f} s\n{summary}"
    )
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv, not on PATH, with the wheel built from this checkout and this session's pyspark (so that
    its Kafka connector resolves from the same cache); returns its interpreter."""
    work = tmp_path_factory.mktemp("wheel")
    # built as pip builds any project: in an isolated environment with the build backend pyproject.toml names --
    # from a copy of the checkout's files, since setuptools builds in the source tree (its build/)
    source = work / "source"
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (ROOT / name).is_file():  # a file deleted in the working tree is still listed as cached
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    built = run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(work), str(source)],
        work,
        {**os.environ},
        300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = work.glob("pytest_theodolite-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    pins = [f"pyspark=={metadata.version('pyspark')}", f"pyarrow=={metadata.version('pyarrow')}"]
    done = run(
        [str(python), "-m", "pip", "install", "--quiet", str(wheel), *pins], work, dict(os.environ), 900
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return python


def user_environment(python: Path) -> dict[str, str]:
    """This process's environment without this venv or checkout: PATH without either interpreter's bin, no
    PYTHONPATH, no PYSPARK_PYTHON."""
    ours = {str(Path(sys.executable).parent), sysconfig.get_path("scripts"), str(python.parent)}
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p not in ours)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "VIRTUAL_ENV")}
    return {**env, "PATH": path}


def git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(project), *args], check=True, capture_output=True, timeout=60)


def test_a_users_project_records_gates_and_compares_with_the_installed_wheel(installed, tmp_path):
    project = tmp_path / "their-project"
    project.mkdir()
    (project / "myjob.py").write_text(JOB.format(rounds=1))
    (project / "generator.py").write_text('WHOSE = "the user\'s"\n')
    (project / "test_labels_gate.py").write_text(GATE)
    git(project, "init", "-q", "-b", "main")
    git(project, "config", "user.email", "u@example.org")
    git(project, "config", "user.name", "u")
    env = user_environment(installed)
    pytest_run = [str(installed), "-m", "pytest", "-p", "no:cacheprovider", "--theodolite-results=results"]

    # nothing of this checkout reachable: the venv's plugin, generator and jobs are the installed ones
    where = run(
        [
            str(installed),
            "-c",
            "import pytest_theodolite, theodolite_generator; "
            "print(pytest_theodolite.__file__, theodolite_generator.__file__)",
        ],
        project,
        env,
        60,
    )
    assert where.returncode == 0 and str(ROOT) not in where.stdout, where.stdout + where.stderr

    recorded = run([*pytest_run, "--theodolite-update-baselines"], project, env, 900)
    assert recorded.returncode == 0, recorded.stdout[-3000:] + recorded.stderr[-3000:]
    baseline = json.loads((project / "baselines" / "labels.json").read_text())
    assert baseline["demand"], baseline
    git(project, "add", "-A")
    git(project, "commit", "-qm", "the job and its baseline")

    gated = run(pytest_run, project, env, 900)
    # a pass or a regression -- which depends on the host -- but a verdict, reported
    assert gated.returncode in (0, 1), gated.stdout[-3000:] + gated.stderr[-3000:]
    assert "theodolite: scalability gates" in gated.stdout and "labels:" in gated.stdout, gated.stdout[-3000:]

    job_file = project / "myjob.py"
    job_file.write_text(JOB.format(rounds=40))  # a dearer record, uncommitted
    compared = run(
        [
            *pytest_run,
            "--theodolite-compare-ref=main",
            # REF measured at every load even where the change's pass certifies it, and the paired read on
            # (the marker turns it off for the stored-mode runs, which do not use it): what is checked here
            "--theodolite-exact-demand=true",
            "--theodolite-paired-cost=true",
        ],
        project,
        env,
        1200,
    )
    check_pull_request_run(compared, project, job_file)


def check_pull_request_run(compared: subprocess.CompletedProcess[str], project: Path, job_file: Path) -> None:
    """Both sides measured, compared and reported, each from its own tree and the same place in it, the paired
    read reported (or why not), and the REF worktree gone afterwards -- whichever verdict the host gives."""
    output = compared.stdout
    # a pass, a regression, or no verdict (exit 7: e.g. the paired read gave no figure) -- said with its reason
    assert compared.returncode in (0, 1, 7), output[-3000:] + compared.stderr[-3000:]
    assert compared.returncode != 7 or "not comparable: " in output, output[-3000:]
    commit = subprocess.run(
        ["git", "-C", str(project), "rev-parse", "--short=7", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    label = f"REF main ({commit})"
    for line in (
        f"theodolite: labels [{label}] load=200 instances=",
        "theodolite: labels [change] load=200 instances=",
        f"load | {label} | change | verdict",
    ):
        assert line in output, f"{line!r} not in the output:\n{output[-3000:]}"
    results = project / "results"
    # both sides read their backlogs at once, and the figure was reported (or why not)
    assert "both sides reading a backlog at once" in output, output[-3000:]
    paired = json.loads((results / "labels_paired_cost.json").read_text())
    assert paired["load"] == 200 and (paired["comparison"] is None) != (paired["problem"] is None), paired
    # where both reads were stopped as a certain pass, each read at least the pairs it was stopped after
    stopped = paired["stopped_certain_after_pairs"]
    if stopped is not None:
        assert all(len(read["batches"]) >= stopped >= 6 for read in paired["sides"].values()), paired
    job_files = {}
    for side in ("ref", "change"):  # each side's raw series and results, as a single-revision run keeps them
        assert sorted((results / side).glob("explabels_200_*_lag-trend_0.csv")), side
        document = json.loads((results / side / "explabels_results.json").read_text())
        job_files[side] = Path(document["settings"]["testbed"]["job_file"])
    # each side measured its own version of the job, from the same place in its tree
    assert job_files["change"] == job_file.resolve()
    [tree] = [
        d
        for d in job_files["ref"].parents
        if d.name == "tree" and d.parent.name.startswith("theodolite-ref-")
    ]
    assert job_files["ref"].relative_to(tree) == Path("myjob.py")
    assert not job_files["ref"].exists()  # the worktree was removed
    worktrees = subprocess.run(
        ["git", "-C", str(project), "worktree", "list"], check=True, capture_output=True, text=True
    ).stdout
    assert worktrees.strip().count("\n") == 0, worktrees
    assert "ROUNDS = 40" in job_file.read_text()  # the working tree keeps its uncommitted change
