"""Each side of pull-request mode imports its own version of the job, in its own process, and is stopped."""

import json
import multiprocessing
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.spark.cluster import SparkCluster
from pytest_theodolite.pull_request.side_spec import SideError, job_import_root, job_reference, spec_for
from pytest_theodolite.pull_request.sides import SideProcess, close_sides
from pytest_theodolite.pull_request.worktree import RefWorktree
from pytest_theodolite.report.paired import paired_read_note
from theodolite_generator import Workload


def git(path: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    """A repository whose job module `tjobs.job` says VERSION = 'ref' at HEAD and 'change' in the tree."""
    path = tmp_path / "repo"
    (path / "tjobs").mkdir(parents=True)
    (path / "tjobs" / "__init__.py").write_text("")
    git(tmp_path, "init", "-q", str(path))
    git(path, "config", "user.email", "t@example.org")
    git(path, "config", "user.name", "t")
    (path / "tjobs" / "job.py").write_text(
        "VERSION = 'ref'\n\ndef start_query(spark, **options):\n    pass\n"
    )
    git(path, "add", "-A")
    git(path, "commit", "-qm", "ref")
    (path / "tjobs" / "job.py").write_text(
        "VERSION = 'change'\n\ndef start_query(spark, **options):\n    pass\n"
    )
    return path


def benchmark_of(module: str, name: str = "start_query") -> Benchmark:
    def job(spark, **options):
        raise AssertionError("only its name travels")

    job.__module__, job.__qualname__ = module, name
    return Benchmark("t", job, lambda keys: Workload(keys=keys))


def spec(side: str, root: Path, tmp_path: Path, benchmark: Benchmark):
    return spec_for(
        side,
        root,
        benchmark,
        ExperimentSettings(loads=(1,), resources=(1,)),
        KafkaCluster("127.0.0.1:9"),  # never connected to: no sub-experiment runs here
        SparkCluster(master_url="local", max_instances=1, jars=[]),
        tmp_path / "results" / side,
        "t",
        {},
    )


@pytest.mark.integration  # each side a driver process of its own
def test_each_side_imports_the_job_from_its_own_tree_in_its_own_process(repo, tmp_path):
    benchmark = benchmark_of("tjobs.job")
    with RefWorktree(repo, "HEAD") as ref:
        assert ref.path is not None
        with (
            SideProcess(spec("ref", ref.path, tmp_path, benchmark)) as ref_side,
            SideProcess(spec("change", repo, tmp_path, benchmark)) as change_side,
        ):
            assert Path(ref_side.job_file) == (ref.path / "tjobs" / "job.py").resolve()
            assert Path(change_side.job_file) == (repo / "tjobs" / "job.py").resolve()
            assert "VERSION = 'ref'" in Path(ref_side.job_file).read_text()
            assert "VERSION = 'change'" in Path(change_side.job_file).read_text()
            assert len(multiprocessing.active_children()) == 2
    assert multiprocessing.active_children() == []  # both driver processes stopped


@pytest.mark.integration  # each side a driver process of its own
def test_a_tree_without_the_job_is_a_clear_error_and_leaves_no_process(repo, tmp_path):
    with pytest.raises(
        SideError, match=r"the job module tjobs.missing cannot be imported from .*ModuleNotFoundError"
    ):
        SideProcess(spec("ref", repo, tmp_path, benchmark_of("tjobs.missing"))).__enter__()
    assert multiprocessing.active_children() == []


@pytest.mark.integration  # each side a driver process of its own
def test_a_job_without_the_named_function_is_a_clear_error(repo, tmp_path):
    with pytest.raises(SideError, match="has no other_name"):
        SideProcess(spec("ref", repo, tmp_path, benchmark_of("tjobs.job", "other_name"))).__enter__()


def test_a_lambda_job_cannot_be_imported_by_name():
    with pytest.raises(SideError, match="module-level function"):
        job_reference(Benchmark("t", lambda spark, **o: None, lambda keys: Workload(keys=keys)))


@pytest.mark.integration  # each side a driver process of its own
def test_a_side_not_started_or_closed_refuses_every_request_saying_so(repo, tmp_path):
    side = SideProcess(spec("ref", repo, tmp_path, benchmark_of("tjobs.job")))
    requests = [
        lambda: side.run(1, 1, Workload(keys=1)),
        lambda: side.measure_capacity(1, 1, Workload(keys=1), plan=None),  # type: ignore[arg-type]
        lambda: side.start_backlog_read(1, Workload(keys=1), plan=None),  # type: ignore[arg-type]
        side.backlog_filled,
        side.start_reading,
        lambda: side.backlog_message(0.1),
        side.stop_reading,
    ]
    for request in requests:
        with pytest.raises(SideError, match=r"^ref: not started$"):
            request()
    with side:
        pass
    for request in requests:
        with pytest.raises(SideError, match=r"^ref: not started$"):
            request()
    assert multiprocessing.active_children() == []


def test_a_reading_side_tells_its_figures_and_stops_when_told_and_a_late_stop_is_ignored():
    from pytest_theodolite.pull_request.sides import _read_so_far

    parent, child = multiprocessing.Pipe()
    assert _read_so_far(child, [1.0e-5]) is False
    assert parent.recv() == ("batches", [1.0e-5])
    assert _read_so_far(child, None) is False and not parent.poll(0)  # nothing new: nothing sent
    parent.send(("stop_read",))
    assert _read_so_far(child, [1.0e-5, 1.1e-5]) is True
    assert parent.recv() == ("batches", [1.0e-5, 1.1e-5])
    parent.send(("run", 1))  # anything else during a read is a broken exchange, said so
    with pytest.raises(RuntimeError, match=r"waited for \('stop_read',\) during the read"):
        _read_so_far(child, [])


def busy_side(connection, marker: str) -> None:
    """A side driver in the middle of a sub-experiment: busy until interrupted, then it cleans up."""
    from pytest_theodolite.infra.process import interruptible_child

    interruptible_child()
    connection.send(("ready", "busy"))
    try:
        time.sleep(600)
    except KeyboardInterrupt as interrupt:
        Path(marker).write_text(f"cleaned up after {interrupt!s}")  # SIGINT: empty, SIGTERM: its name


@pytest.mark.integration  # each side a driver process of its own
def test_a_side_busy_with_a_sub_experiment_is_interrupted_as_by_ctrl_c(tmp_path):
    """close() on a side that is running a sub-experiment (Ctrl-C in the parent, or the other side failed)
    interrupts it with SIGINT, so that its runner stops what it started; a SIGINT the parent ignores (a
    background job's) does not reach into the side."""
    marker = tmp_path / "marker"
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # inherited by the spawned interpreter
    try:
        process = context.Process(target=busy_side, args=(child, str(marker)))
        process.start()
    finally:
        signal.signal(signal.SIGINT, previous)
    child.close()
    assert parent.poll(60) and parent.recv() == ("ready", "busy")
    side = SideProcess(spec=None, stop_timeout_s=120)  # type: ignore[arg-type]
    side._process, side._connection = process, parent
    side.close()  # joins and closes the process
    assert marker.read_text() == "cleaned up after ", (
        "interrupted by SIGINT, not terminated after the timeout"
    )


def side_reading_beside_the_other(connection, mine: str, other: str) -> None:
    """A side busy with a paired read: interrupted, it cleans up, then waits (30 s at most) for the other side to
    have been interrupted too, and says whether it was."""
    from pytest_theodolite.infra.process import interruptible_child

    interruptible_child()
    connection.send(("ready", "busy"))
    try:
        time.sleep(600)
    except KeyboardInterrupt:
        Path(mine).write_text("interrupted")
        deadline = time.monotonic() + 30
        while not Path(other).exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        Path(mine).write_text("interrupted, the other side " + ("too" if Path(other).exists() else "not yet"))


@pytest.mark.integration  # each side a driver process of its own
def test_sides_busy_with_a_paired_read_are_interrupted_together_not_one_after_the_other(tmp_path):
    """close_sides (a PairedExperiment's close, Ctrl-C or SIGTERM in the parent) interrupts every busy side
    before it waits for any: closed one by one, the first would stop while the second still read, and their
    stops would add up."""
    context = multiprocessing.get_context("spawn")
    markers = {side: tmp_path / side for side in ("ref", "change")}
    sides = []
    for side, other in (("ref", "change"), ("change", "ref")):
        parent, child = context.Pipe()
        process = context.Process(
            target=side_reading_beside_the_other, args=(child, str(markers[side]), str(markers[other]))
        )
        process.start()
        child.close()
        assert parent.poll(60) and parent.recv() == ("ready", "busy")
        closing = SideProcess(spec=None, stop_timeout_s=120)  # type: ignore[arg-type]
        closing._process, closing._connection = process, parent
        sides.append(closing)
    close_sides(sides)
    assert {side: marker.read_text() for side, marker in markers.items()} == {
        "ref": "interrupted, the other side too",
        "change": "interrupted, the other side too",
    }
    assert multiprocessing.active_children() == []


@pytest.mark.integration  # each side a driver process of its own
def test_a_ref_whose_job_cannot_take_the_runners_keywords_is_refused_before_it_runs(repo, tmp_path):
    """The base revision may predate a keyword of the contract: its side refuses it at the start, naming
    what it cannot take and the signature to write."""
    (repo / "tjobs" / "old.py").write_text(
        "def start_query(spark, *, bootstrap_servers, input_topic, output_topic, checkpoint_dir):\n    pass\n"
    )
    with pytest.raises(
        SideError, match=r"ref: benchmark t: .*cannot take kafka_options, max_offsets_per_trigger"
    ):
        SideProcess(spec("ref", repo, tmp_path, benchmark_of("tjobs.old"))).__enter__()
    assert multiprocessing.active_children() == []


def layout_repo(tmp_path: Path, package_dir: str) -> Path:
    """A repository whose job `ljobs.job` lives under `package_dir` ('' the root, 'src', a subfolder), saying
    VERSION = 'ref' at HEAD and 'change' in the working tree."""
    path = tmp_path / "layout"
    package = path / package_dir / "ljobs" if package_dir else path / "ljobs"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    git(tmp_path, "init", "-q", str(path))
    git(path, "config", "user.email", "t@example.org")
    git(path, "config", "user.name", "t")
    (package / "job.py").write_text("VERSION = 'ref'\n\ndef start_query(spark, **options):\n    pass\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "ref")
    (package / "job.py").write_text("VERSION = 'change'\n\ndef start_query(spark, **options):\n    pass\n")
    return path


@pytest.mark.integration  # each side a driver process of its own
@pytest.mark.parametrize("package_dir", ["", "src", "examples/own"])
def test_each_side_finds_the_job_where_the_working_tree_imports_it_from(tmp_path, package_dir, monkeypatch):
    """A src/ layout, or a gate whose pytest rootdir is a subfolder of the repository: REF's job is imported
    from the same place in its worktree as the change's is in the working tree."""
    import importlib

    from pytest_theodolite.pull_request.target import CompareTarget

    repo = layout_repo(tmp_path, package_dir)
    import_root = repo / package_dir if package_dir else repo
    monkeypatch.syspath_prepend(str(import_root))  # as the gate's conftest or an editable install would
    for name in [m for m in sys.modules if m == "ljobs" or m.startswith("ljobs.")]:
        monkeypatch.delitem(sys.modules, name)
    job = importlib.import_module("ljobs.job")
    try:
        benchmark = Benchmark("t", job.start_query, lambda keys: Workload(keys=keys))
        rootdir = import_root if package_dir.startswith("examples") else repo  # where pytest.ini would be
        with RefWorktree(rootdir, "HEAD") as ref:
            target = CompareTarget.of(ref, rootdir)
            roots = target.job_roots(benchmark)
            assert ref.path is not None
            with (
                SideProcess(spec("ref", roots["ref"], tmp_path, benchmark)) as ref_side,
                SideProcess(spec("change", roots["change"], tmp_path, benchmark)) as change_side,
            ):
                assert "VERSION = 'ref'" in Path(ref_side.job_file).read_text()
                assert "VERSION = 'change'" in Path(change_side.job_file).read_text()
                assert Path(ref_side.job_file).is_relative_to(ref.path.resolve())
                assert Path(change_side.job_file) == (import_root / "ljobs" / "job.py").resolve()
        assert (
            job_import_root("ljobs") == job_import_root("ljobs.job") == import_root.resolve()
        )  # a package too
        assert job_import_root("ljobs.not_imported") is None
    finally:
        for name in [m for m in sys.modules if m == "ljobs" or m.startswith("ljobs.")]:
            del sys.modules[name]


PYPROJECT = """
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "ejobs"
version = "0.0.0"

[tool.setuptools]
py-modules = ["ejobs"]
"""

#: run by the editable environment's python in the gate's folder: each side's job file, as pull-request mode
#: resolves them, with this interpreter's import machinery (setuptools' editable finder among it)
SIDES_OF_AN_EDITABLE_INSTALL = """
import json, sys
from pathlib import Path
from theodolite_generator import Workload
from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.spark.cluster import SparkCluster
from pytest_theodolite.pull_request.target import CompareTarget
from pytest_theodolite.pull_request.side_spec import spec_for
from pytest_theodolite.pull_request.sides import SideProcess
from pytest_theodolite.pull_request.worktree import RefWorktree
from ejobs import start_query

if __name__ == "__main__":
    rootdir, results = Path.cwd(), Path(sys.argv[1])
    benchmark = Benchmark("t", start_query, lambda keys: Workload(keys=keys))
    files = {}
    with RefWorktree(rootdir, "HEAD") as ref:
        roots = CompareTarget.of(ref, rootdir).job_roots(benchmark)
        for side, root in roots.items():
            spec = spec_for(side, root, benchmark, ExperimentSettings(loads=(1,), resources=(1,)),
                            KafkaCluster("127.0.0.1:9"), SparkCluster(master_url="local", max_instances=1, jars=[]),
                            results / side, "t", {})
            with SideProcess(spec) as process:
                files[side] = [process.job_file, Path(process.job_file).read_text(), str(ref.path.resolve())]
    print(json.dumps(files))
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


@pytest.mark.integration  # each side a driver process of its own
def test_a_job_installed_in_editable_mode_is_imported_from_each_side_s_tree(tmp_path):
    """A repository installed with ``pip install -e .`` whose gate has a folder and pytest.ini of its own: only
    setuptools' editable finder makes the job importable, and it would hand REF's side the working tree's job;
    REF's side imports REF's from its worktree all the same, the change's side the working tree's."""
    repo = tmp_path / "repo"
    gates = repo / "gates"
    gates.mkdir(parents=True)
    job_file = repo / "ejobs.py"
    job_file.write_text("VERSION = 'ref'\n\ndef start_query(spark, **options):\n    pass\n")
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (gates / "pytest.ini").write_text("[pytest]\n")
    git(tmp_path, "init", "-q", str(repo))
    git(repo, "config", "user.email", "t@example.org")
    git(repo, "config", "user.name", "t")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "ref")
    job_file.write_text("VERSION = 'change'\n\ndef start_query(spark, **options):\n    pass\n")

    python = editable_install(repo, tmp_path / "venv")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert imported_from(sys.executable, "ejobs", outside) is None
    assert imported_from(python, "ejobs", outside) == job_file.resolve()  # the finder, not a path entry
    assert imported_from(python, "ejobs", gates) == job_file.resolve()

    (tmp_path / "sides.py").write_text(SIDES_OF_AN_EDITABLE_INSTALL)
    done = subprocess.run(
        [python, str(tmp_path / "sides.py"), str(tmp_path / "results")],
        cwd=gates,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    files = json.loads(done.stdout.strip().splitlines()[-1])
    ref_file, ref_text, ref_tree = files["ref"]
    assert "VERSION = 'ref'" in ref_text
    assert Path(ref_file).relative_to(ref_tree) == Path("ejobs.py")
    assert not Path(ref_file).exists()  # the worktree was removed
    change_file, change_text, _ = files["change"]
    assert Path(change_file) == job_file.resolve() and "VERSION = 'change'" in change_text
    assert "VERSION = 'change'" in job_file.read_text()


@pytest.mark.integration
@pytest.mark.theodolite_exclusive  # two CPU-limited instances at once: nothing else may run beside them
def test_both_sides_read_a_backlog_at_the_same_time_and_their_cycles_are_compared(
    kafka_cluster, spark_cluster, tmp_path
):
    from pytest_theodolite.engine.backlog_read import BacklogPlan
    from pytest_theodolite.pull_request.experiment import PairedExperiment
    from pytest_theodolite.pull_request.target import CompareTarget
    from theodolite_spark_jobs import uc1

    if spark_cluster.max_instances < 2:
        pytest.skip("needs two instances at once (--theodolite-max-instances >= 2)")
    project = Path(uc1.__file__).resolve().parents[1]
    benchmark = Benchmark("uc1-paired", uc1.start_query, lambda keys: Workload(keys=keys), input_partitions=2)
    settings = ExperimentSettings(loads=(500,), resources=(1,), instance_cpu=0.5, paired_cost=True)
    specs = {
        side: spec_for(
            side, project, benchmark, settings, kafka_cluster, spark_cluster, tmp_path / side, "t", {}
        )
        for side in ("ref", "change")
    }
    with SideProcess(specs["ref"]) as ref_side, SideProcess(specs["change"]) as change_side:
        experiment = PairedExperiment(
            benchmark,
            settings,
            CompareTarget("HEAD", "0123456789", project, project),
            {"ref": ref_side, "change": change_side},
        )
        experiment.paired_read.plan = BacklogPlan(
            batch_records=2_000, fill_factor=30.0, fill_s=6.0, warm_batches=1, batches=8, max_read_s=90
        )
        experiment.paired_read.read()
    # which figure unchanged code reads, and whether it is certain before the eighth pair, depends on the host;
    # that both sides read, were compared and the batches kept does not
    assert experiment.paired_read.problem is None, experiment.paired_read.problem
    pairs = experiment.paired_read.figure.pairs if experiment.paired_read.figure is not None else 0
    stopped = experiment.paired_read.stopped_at
    assert pairs == 8 if stopped is None else pairs >= stopped >= 6, (pairs, stopped)
    for side, read in experiment.paired_read.first.reads.items():
        # what each side told while it read, as its batches came in, is what the finished read says
        told = experiment.paired_read.first.told[side]
        assert told, side
        told_flat = [figure for leg in told for figure in leg]
        finished = [figure for leg in read.cycle_per_record_by_leg() for figure in leg]
        assert told_flat == pytest.approx(finished[: len(told_flat)], rel=1e-9), side
    reads = experiment.paired_read.first.reads
    # the same minutes: each side's first measured batch started within the other's fill
    assert abs(reads["ref"].batches[0].start_s - reads["change"].batches[0].start_s) < 30, reads
    # and both reads began together, once both had filled (the gap: each stopping its generator after the word)
    assert abs(reads["ref"].read_from_s - reads["change"].read_from_s) < 10, reads
    written = json.loads((tmp_path / "uc1-paired_paired_cost.json").read_text())
    assert written["comparison"]["pairs"] == pairs
    assert all(len(written["sides"][side]["cycle_s"]) >= pairs for side in ("ref", "change"))
    assert written["stopped_certain_after_pairs"] == stopped
    assert paired_read_note(experiment.paired_read.result()).startswith(
        "time per record, change over REF batch by batch: "
    )
    assert multiprocessing.active_children() == []
