"""pytest hooks and fixtures of pytest-theodolite; the work is done in plain modules beside this one."""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import xdist

from generator import LoadGenerator, Workload
from pytest_theodolite.core.cost import RUN_TO_RUN_CV, SIGNIFICANCE, BlindSpot, PointCost
from pytest_theodolite.core.errors import TheodoliteSetupError
from pytest_theodolite.core.outcomes import UNMEASURED as UNMEASURED_DEMAND
from pytest_theodolite.core.outcomes import Verdict, count_text
from pytest_theodolite.core.search import SKIPPED, UNMEASURED
from pytest_theodolite.engine import services
from pytest_theodolite.engine.experiment import BenchmarkExperiment, SubExperimentListener
from pytest_theodolite.engine.markers import GateSpec, GateSpecError, gate_spec
from pytest_theodolite.engine.runner import experiment_settings_dict
from pytest_theodolite.engine.session import TheodoliteSession, progress_line, summarise, testbed
from pytest_theodolite.engine.settings import (
    GATE_OPTIONS,
    ISOLATION_MODES,
    KAFKA_PROVIDERS,
    OPTIONS,
    SettingsError,
    TheodoliteSettings,
    build,
)
from pytest_theodolite.infra.isolation import MeasurementLock
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.kafka.version import KAFKA_VERSION
from pytest_theodolite.infra.process import terminate_as_interrupt
from pytest_theodolite.infra.shared import release_all
from pytest_theodolite.infra.spark.cluster import SparkCluster
from pytest_theodolite.judge.demand_points import DemandPoint
from pytest_theodolite.pull_request.experiment import CompareTarget, PairedPoint
from pytest_theodolite.pull_request.paired import CHANGE, REF
from pytest_theodolite.pull_request.sides import SideError, job_reference
from pytest_theodolite.pull_request.worktree import (
    CompareRefError,
    RefWorktree,
    files_missing_at,
    repository_root,
    resolve_ref,
)
from pytest_theodolite.report.summary import (
    cost_junit_properties,
    cost_text,
    estimate_text,
    failure_table,
    junit_properties,
    lag_slopes_text,
    paired_junit_properties,
    slopes_and_outcomes,
)
from pytest_theodolite.store import host
from pytest_theodolite.store.baseline import (
    Baseline,
    BaselineError,
    PointComparison,
    baseline_from_measurement,
    baseline_path,
    compare_point,
    load_baseline,
    write_baseline,
)
from pytest_theodolite.store.results import write_atomically

SETTINGS_KEY = pytest.StashKey[TheodoliteSettings]()
STATE_KEY = pytest.StashKey["GateState"]()
#: exit code of a run in which nothing regressed but some demand could not be measured (invalid or errored
#: sub-experiments): CI can tell "regressed" (1) from "could not measure" (7; pytest itself uses 0-6)
EXIT_UNMEASURED = 7
#: set on the items that are points of a gate (a ``theodolite`` marker and the ``theodolite_load`` parameter)
GATE_POINT_KEY = pytest.StashKey[bool]()
#: under pytest-xdist each worker lists its gate points' node ids in a file of this name in the directory the
#: run's workers share, because the controller's scheduler sees node ids and not items
GATE_POINTS_FILE = "theodolite-gate-points-{worker}.txt"
T = TypeVar("T")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_theodolite import hookspec

    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("theodolite", "Theodolite scalability benchmarks")
    for flag, ini, default, help_text in OPTIONS:
        choices = {"--kafka": KAFKA_PROVIDERS, "--theodolite-isolation": ISOLATION_MODES}.get(flag)
        group.addoption(flag, dest=ini, default=None, choices=choices, help=f"{help_text} [ini: {ini}]")
        parser.addini(ini, help_text, default=default)
    for flag, key, help_text in GATE_OPTIONS:
        group.addoption(
            flag,
            dest=f"theodolite_gate_{key}",
            default=None,
            help=f"{help_text} [ini: theodolite_{key}; overrides the marker]",
        )
        parser.addini(f"theodolite_{key}", help_text, default="")
    group.addoption(
        "--theodolite-job-option",
        dest="theodolite_job_options",
        action="append",
        default=[],
        metavar="BENCHMARK:KEY=VALUE",
        help="override a job option of one benchmark, e.g. "
        "uc1-keys:extra_hash_rounds=2 (repeatable); recorded in the results",
    )
    group.addoption(
        "--theodolite-update-baselines",
        action="store_true",
        default=False,
        help="record the measured demand functions as the new baselines instead of comparing",
    )
    parser.addini(
        "theodolite_kafka_properties",
        "client properties of an external cluster, one key=value a line "
        "(put secrets in THEODOLITE_KAFKA_<NAME> environment variables instead)",
        type="linelist",
        default=[],
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "theodolite(benchmark, *, loads, resources=(1, 2, 3, 4), duration=60, warmup=30, threshold=2000, "
        "strategy='baseline-guess+lower-bound', repetitions=1, tolerance=0, cost_tolerance=None, sample_interval=1, "
        "spark_conf=None, instance_cpu=None): a "
        "scalability gate; a test with this marker that uses the theodolite_gate fixture runs once per load",
    )
    config.addinivalue_line(
        "markers",
        "theodolite_exclusive: under pytest-xdist, run this test alone, as a gate point runs (for tests "
        "that measure something themselves)",
    )

    def get(flag: str):
        ini = next(i for f, i, _, _ in OPTIONS if f == flag)
        value = config.getoption(ini)
        return config.getini(ini) if value is None else value

    overrides = {
        key: config.getoption(f"theodolite_gate_{key}") or config.getini(f"theodolite_{key}")
        for _, key, _ in GATE_OPTIONS
    }
    try:
        config.stash[SETTINGS_KEY] = build(
            get,
            config.getini("theodolite_kafka_properties"),
            gate_overrides=overrides,
            update_baselines=config.getoption("theodolite_update_baselines"),
            rootdir=config.rootpath,
            job_options=config.getoption("theodolite_job_options"),
        )
    except SettingsError as exc:
        raise pytest.UsageError(f"pytest-theodolite: {exc}") from None
    config.stash[STATE_KEY] = GateState()
    config.pluginmanager.register(config.stash[STATE_KEY], "theodolite-gate-state")
    # a cancelled CI job gets SIGTERM: clean up as after Ctrl-C instead of leaving JVMs and temp dirs
    config.add_cleanup(terminate_as_interrupt())


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Benchmarks must never run two sub-experiments at once: with ``-n`` (dist load or loadgroup) every gate
    goes to one worker, other tests spread as usual. (xdist's own loadgroup relies on rewriting node ids on
    the workers, which pytest >= 9.2 no longer allows; a scheduler sees the ids as they are.)"""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    shared_dir = config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    gate_points: set[str] = set()

    class GatesOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            # called once every worker has collected, so every worker's list is on disk by now
            if not gate_points:
                gate_points.update(_read_gate_points(shared_dir))
            if nodeid in gate_points:
                return "theodolite-gates"
            if "@" in nodeid:  # an xdist_group suffix, where the pytest version lets xdist add it
                return nodeid.rsplit("@", 1)[-1]
            return nodeid  # every other test its own scope: spread as with --dist load

    return GatesOnOneWorker(config, log)


def pytest_report_header(config: pytest.Config) -> list[str]:
    settings = config.stash[SETTINGS_KEY]
    from pytest_theodolite.infra.kafka.image import kafka_tag
    from pytest_theodolite.infra.spark.jars import pyspark_version

    kafka = settings.kafka_provider + (
        f" ({settings.kafka_bootstrap})"
        if settings.kafka_bootstrap
        else f" (Apache Kafka {KAFKA_VERSION}, KRaft)"
        if settings.kafka_provider == "embedded"
        else f" ({settings.kafka_image or kafka_tag()})"
    )
    lines = [
        f"theodolite: kafka={kafka}, spark master={settings.spark_master} (pyspark {pyspark_version()}), "
        f"max instances={settings.max_instances}",
        f"theodolite: testbed {host.usable_cores()} cores, {host.memory_gib() or 0:.0f} GiB, "
        f"{platform.platform(terse=True)}; "
        f"instance CPU: {services.cpu_limit_note(settings)}",
    ]
    # pytest registers the session as a plugin named "session"; xdist's checks take a session or a request
    if xdist.is_xdist_controller(config.pluginmanager.get_plugin("session")):
        lines.append(
            "theodolite: pytest-xdist: "
            + (
                "other tests wait while a gate point measures (--theodolite-isolation exclusive)"
                if settings.isolation == "exclusive"
                else "other tests run beside measurements (--theodolite-isolation none): verdicts are noisier"
            )
        )
    return lines


def _read_gate_points(shared_dir: Path) -> set[str]:
    points: set[str] = set()
    for path in shared_dir.glob(GATE_POINTS_FILE.format(worker="*")):
        points.update(line for line in path.read_text(encoding="utf-8").splitlines() if line)
    return points


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash[STATE_KEY]
    if state.session is not None:
        state.summary = summarise(
            state.session,
            state.baselines,
            state.tolerances,
            session.config.stash[SETTINGS_KEY],
            _testbed_extra(session.config),
            state.cost_tolerances,
        )
        if xdist.is_xdist_worker(session):
            session.config.workeroutput["theodolite_summary"] = state.summary  # type: ignore[attr-defined]
    if xdist.is_xdist_controller(session):
        # the services the workers shared
        release_all(session.config._tmp_path_factory.getbasetemp())  # type: ignore[attr-defined]
    if (
        state.unmeasured
        and not state.regressions
        and not state.other_failures
        and session.exitstatus == pytest.ExitCode.TESTS_FAILED
    ):
        session.exitstatus = EXIT_UNMEASURED


def _start(request: pytest.FixtureRequest, start: Callable[[], T]) -> T:
    """Run ``start``; a missing or broken part (Java, Maven, broker, cluster) is reported once, without a
    traceback, and stops the run instead of failing every later test the same way."""
    try:
        return start()
    except TheodoliteSetupError as exc:
        message = str(exc)
    # outside the except block, so that pytest shows the message alone and not an exception chain
    request.session.shouldstop = f"pytest-theodolite: {message.splitlines()[0]}"
    pytest.fail(f"pytest-theodolite: {message}", pytrace=False)


@pytest.fixture(scope="session")
def theodolite_settings(pytestconfig: pytest.Config) -> TheodoliteSettings:
    return pytestconfig.stash[SETTINGS_KEY]


@pytest.fixture(scope="session")
def kafka_cluster(
    request: pytest.FixtureRequest,
    theodolite_settings: TheodoliteSettings,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[KafkaCluster]:
    """The Kafka cluster of this test session: ``bootstrap_servers``, ``create_topic``, ``end_offsets``, ..."""
    if xdist.is_xdist_worker(request):
        cluster = _start(
            request, lambda: services.shared_kafka(theodolite_settings, tmp_path_factory.getbasetemp().parent)
        )
        yield cluster
        cluster.close()
        return
    yield from _served(request, services.open_kafka(theodolite_settings))


@pytest.fixture(scope="session")
def spark_cluster(
    request: pytest.FixtureRequest,
    theodolite_settings: TheodoliteSettings,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[SparkCluster]:
    """Spark with up to ``--theodolite-max-instances`` one-core executors:
    ``with spark_cluster.session(instances=r)``."""
    if xdist.is_xdist_worker(request):
        yield _start(
            request, lambda: services.shared_spark(theodolite_settings, tmp_path_factory.getbasetemp().parent)
        )
        return
    yield from _served(request, services.open_spark(theodolite_settings))


@pytest.fixture
def load_generator(kafka_cluster: KafkaCluster) -> Iterator[Callable[..., LoadGenerator]]:
    """Start a workload against a topic of the session's cluster, stopped again after the test:
    ``generator = load_generator("clicks", Workload(keys=1000, records=JsonTemplate({...})))``; then
    ``generator.achieved_rates()`` (records acknowledged per second), ``generator.summary()``, ``generator.stop()``.
    Keyword arguments go to ``generator.LoadGenerator`` (``processes``, ``config_topic``, ...); the cluster's
    client settings (e.g. SASL) are passed on."""
    started: list[LoadGenerator] = []

    def start(topic: str, workload: Workload, **options: Any) -> LoadGenerator:
        options.setdefault("client_config", dict(kafka_cluster.properties))
        generator = LoadGenerator(kafka_cluster.bootstrap_servers, topic, workload, **options)
        started.append(generator)
        return generator.start()

    yield start
    for generator in started:
        generator.stop()  # idempotent: one the test stopped is left as it is


def _served(request: pytest.FixtureRequest, context: AbstractContextManager[T]) -> Iterator[T]:
    """Enter ``context`` (a setup error stops the run, see _start) and keep it open until the session ends."""
    value = _start(request, context.__enter__)
    try:
        yield value
    finally:
        context.__exit__(None, None, None)


# -- scalability gates ---------------------------------------------------------------------------------------


@dataclass(eq=False)  # registered as a plugin: pluggy needs it hashable (by identity)
class GateState:
    """What the gates of this pytest process measured, and how their tests ended."""

    session: TheodoliteSession | None = None
    baselines: dict[str, Baseline | None] = field(default_factory=dict)
    tolerances: dict[str, int] = field(default_factory=dict)
    cost_tolerances: dict[str, float | None] = field(default_factory=dict)
    spec_errors: list[str] = field(default_factory=list)
    summary: dict[str, Any] | None = None  # rendered summaries; from xdist workers via workeroutput
    worker_summaries: list[dict[str, Any]] = field(default_factory=list)
    #: under pytest-xdist with --theodolite-isolation exclusive (see isolation.py); made on first use
    measurement_lock: MeasurementLock | None = None
    unmeasured: int = 0
    regressions: int = 0
    other_failures: int = 0
    #: the merged answers of the pytest_theodolite_testbed hook; None: not asked yet
    testbed_extra: dict[str, str] | None = None

    # hooks of this object, registered per config (the report hooks get no config to find the state in)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.failed:
            return
        properties = {name for name, _ in report.user_properties}
        if "theodolite.unmeasured" in properties:
            self.unmeasured += 1
        elif "theodolite.regression" in properties:
            self.regressions += 1
        else:
            self.other_failures += 1

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        summary = getattr(node, "workeroutput", {}).get("theodolite_summary")
        if summary:
            self.worker_summaries.append(summary)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("theodolite")
    if marker is None or "theodolite_load" not in metafunc.fixturenames:
        return
    settings = metafunc.config.stash[SETTINGS_KEY]
    try:
        spec = gate_spec(marker.args, marker.kwargs, settings.gate_overrides, settings.job_options)
    except GateSpecError as exc:
        metafunc.config.stash[STATE_KEY].spec_errors.append(f"{metafunc.definition.nodeid}: {exc}")
        return
    metafunc.parametrize(
        "theodolite_load", spec.settings.loads, ids=[f"load={load}" for load in spec.settings.loads]
    )


@pytest.hookimpl(tryfirst=True)  # before xdist's worker turns xdist_group marks into node ids
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    errors = config.stash[STATE_KEY].spec_errors
    if errors:
        raise pytest.UsageError("pytest-theodolite: bad theodolite marker:\n  " + "\n  ".join(errors))
    for item in items:
        callspec = getattr(item, "callspec", None)
        if (
            item.get_closest_marker("theodolite") is not None
            and callspec
            and "theodolite_load" in callspec.params
        ):
            item.stash[GATE_POINT_KEY] = True
            item.add_marker(pytest.mark.xdist_group("theodolite"))
    gate_items = [item for item in items if item.stash.get(GATE_POINT_KEY, False)]
    if gate_items:
        _testbed_extra(
            config
        )  # a broken pytest_theodolite_testbed is a usage error before anything is measured
        if config.stash[SETTINGS_KEY].compare_ref:
            _check_compare_ref(config, gate_items)
    if xdist.is_xdist_worker(session):
        shared_dir = config._tmp_path_factory.getbasetemp().parent  # type: ignore[attr-defined]
        worker = config.workerinput["workerid"]  # type: ignore[attr-defined]
        write_atomically(
            shared_dir / GATE_POINTS_FILE.format(worker=worker),
            "".join(f"{item.nodeid}\n" for item in items if item.stash.get(GATE_POINT_KEY, False)),
        )


def _check_compare_ref(config: pytest.Config, gate_items: list[pytest.Item]) -> None:
    """Pull-request mode: REF must exist and hold every gate's job module, or nothing is measured."""
    ref = config.stash[SETTINGS_KEY].compare_ref
    assert ref is not None
    files: dict[Path, str] = {}
    for item in gate_items:
        marker = item.get_closest_marker("theodolite")
        assert marker is not None  # a gate point
        benchmark = marker.args[0]
        try:
            module, _ = job_reference(benchmark)
        except SideError as exc:
            raise pytest.UsageError(f"pytest-theodolite: {exc}") from None
        path = Path(getattr(sys.modules.get(module), "__file__", None) or "")
        if not path.is_file():
            raise pytest.UsageError(
                f"pytest-theodolite: {benchmark.name}: its job module {module} has no file"
            )
        files[path] = f"{benchmark.name} ({module})"
    try:
        commit = resolve_ref(config.rootpath, ref)
        outside = [
            p for p in files if not p.resolve().is_relative_to(repository_root(config.rootpath).resolve())
        ]
        if outside:
            raise CompareRefError(
                "--theodolite-compare-ref compares the jobs of this repository, but "
                + ", ".join(f"{files[p]} is imported from {p}" for p in outside)
                + ": install the project in editable mode (pip install -e .)"
            )
        missing = files_missing_at(config.rootpath, commit, list(files))
    except CompareRefError as exc:
        raise pytest.UsageError(f"pytest-theodolite: {exc}") from None
    if missing:
        raise pytest.UsageError(
            f"pytest-theodolite: --theodolite-compare-ref {ref} ({commit[:12]}) lacks the job of "
            + ", ".join(f"{files[p]}: {p.name}" for p in missing)
            + ": a benchmark new in this change has nothing to be compared with; deselect it (-k) for this run"
        )


def _measurement_lock(session: pytest.Session) -> MeasurementLock | None:
    """The lock that keeps other tests from running beside a measurement; only xdist workers need one."""
    config = session.config
    state = config.stash[STATE_KEY]
    if (
        state.measurement_lock is None
        and xdist.is_xdist_worker(session)
        and config.stash[SETTINGS_KEY].isolation == "exclusive"
    ):
        # the directory all workers of this run share (as for the shared broker)
        state.measurement_lock = MeasurementLock(
            config._tmp_path_factory.getbasetemp().parent  # type: ignore[attr-defined]
        )
    return state.measurement_lock


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    lock = _measurement_lock(item.session)
    if lock is None:
        return (yield)
    # a test that measures (a gate point: its sub-experiments run in setup) runs alone, every other test beside
    # other tests; the whole protocol, because a session fixture may start a broker in any test's setup
    measures = (
        bool({"theodolite", "theodolite_gate"} & set(getattr(item, "fixturenames", ())))
        or item.get_closest_marker("theodolite_exclusive") is not None
    )
    with lock.exclusive() if measures else lock.shared():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """A gate is compared with its baseline even when its body never calls ``check()`` (as pytest-benchmark
    compares whatever the test body does): a regression must not pass silently."""
    result = yield
    gate = getattr(item, "funcargs", {}).get("theodolite_gate")
    if isinstance(gate, TheodoliteGate) and not gate.checked:
        gate.check()
    return result


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash[STATE_KEY]
    summaries = [s for s in [state.summary, *state.worker_summaries] if s]
    if not summaries:
        return
    terminalreporter.section("theodolite: scalability gates")
    for summary in summaries:
        for line in summary["lines"]:
            terminalreporter.write_line(line)
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary and not xdist.is_xdist_worker(terminalreporter):  # it has the .config xdist looks at
        with open(step_summary, "a", encoding="utf-8") as out:
            out.write("\n".join(s["markdown"] for s in summaries) + "\n")


@pytest.fixture(scope="session")
def theodolite(
    request: pytest.FixtureRequest,
    kafka_cluster: KafkaCluster,
    spark_cluster: SparkCluster,
    theodolite_settings: TheodoliteSettings,
) -> Iterator[TheodoliteSession]:
    """Runs benchmarks on this session's broker and Spark cluster: ``theodolite.demand(benchmark, settings)``.
    With ``--theodolite-compare-ref`` REF is checked out into a temporary worktree for the session, and each
    benchmark runs on both sides (pull-request mode); worktree and driver processes go when it ends."""
    state = request.config.stash[STATE_KEY]
    if state.session is not None:  # a session a conftest made
        yield state.session
        return
    with ExitStack() as stack:
        compare = None
        if theodolite_settings.compare_ref:
            checkout = RefWorktree(request.config.rootpath, theodolite_settings.compare_ref)
            worktree = _start(request, lambda: stack.enter_context(checkout))
            compare = CompareTarget.of(worktree, request.config.rootpath)
        extra = _testbed_extra(request.config)
        session = TheodoliteSession(
            kafka_cluster,
            spark_cluster,
            theodolite_settings.results_dir,
            testbed(theodolite_settings, spark_cluster, None, extra=extra).to_dict(),
            on_sub_experiment=_sub_experiment_hook(request.config),
            compare=compare,
        )
        stack.callback(session.close)
        state.session = session
        yield session


@pytest.fixture
def theodolite_load() -> int:
    raise pytest.UsageError(
        "theodolite_load is set by the theodolite marker: mark the test with "
        "@pytest.mark.theodolite(benchmark, loads=[...])"
    )


@dataclass
class TheodoliteGate:
    """One point of a gate: demand(load) measured in setup; ``check()`` compares it with the baseline."""

    spec: GateSpec
    point: DemandPoint
    baseline: Baseline | None
    record_property: Callable[[str, object], None]

    not_comparable: str | None = None  # why the baseline's testbed cannot be compared with this one
    checked: bool = False  # check() ran; if the test body did not call it, the plugin does after the body
    #: pull-request mode: this load on both sides; the change is judged against REF, not the baseline
    paired: PairedPoint | None = None
    reference: str = "baseline"  # what the verdict compares with, for messages
    #: the CPU per record at the demand (cost.py) and how much dearer the job could become before it changes
    cost: PointCost | None = None
    blind_spot: BlindSpot | None = None

    @property
    def comparison(self) -> PointComparison:
        if self.paired is not None:
            return self.paired.comparison(
                self.spec.benchmark.name, self.spec.tolerance, self.spec.cost_tolerance
            )
        return self.baseline_comparison

    @property
    def baseline_comparison(self) -> PointComparison:
        """The change against the stored baseline (the verdict outside pull-request mode)."""
        measured = UNMEASURED_DEMAND if self.point.status == UNMEASURED else self.point.resources
        return compare_point(
            self.point.load,
            measured,
            self.baseline,
            self.spec.tolerance,
            skipped=self.point.status == SKIPPED,
            not_comparable=self.not_comparable,
            measured_cost=self.cost,
            cost_tolerance=self.spec.cost_tolerance,
            uncertain=self.point.uncertain_against(self.baseline, self.spec.tolerance),
        )

    def check(self) -> PointComparison:
        self.checked = True
        comparison = self.comparison
        name = self.spec.benchmark.name
        properties = junit_properties(name, comparison)
        if self.paired is not None:
            against = self.baseline_comparison if self.baseline is not None else None
            stored = against.baseline_text if against is not None and against.in_baseline else "missing"
            # theodolite.baseline.<load> is the stored baseline's; the CPU change against REF comes once, with
            # REF's figures below
            properties = [
                (key, stored if key.startswith("theodolite.baseline.") else value)
                for key, value in properties
                if not key.startswith("theodolite.cpu_change.")
            ]
            properties += paired_junit_properties(
                self.point.load, self.reference, comparison.baseline_text, self.paired.cost_figure(), against
            )
        else:
            properties += cost_junit_properties(
                self.point.load,
                self.cost,
                self.baseline.cost.get(self.point.load) if self.baseline is not None else None,
                self.blind_spot,
                self.spec.cost_tolerance,
            )
        for key, value in properties:
            self.record_property(key, value)
        if comparison.verdict is Verdict.NOT_COMPARABLE:
            # neither a pass nor a regression: counted with the unmeasured loads (exit code 7)
            self.record_property("theodolite.unmeasured", self.point.load)
            pytest.fail(comparison.describe(name, self.reference), pytrace=False)
        if comparison.verdict is Verdict.REGRESSION:
            self.record_property("theodolite.regression", self.point.load)
            slopes, outcomes = slopes_and_outcomes(self.point.sub_experiments)
            message = f"{comparison.describe(name, self.reference)}\n"
            message += failure_table(comparison, slopes, outcomes, self.reference)
            if self.paired is not None:
                ref_slopes, ref_outcomes = slopes_and_outcomes(self.paired.sides[REF].sub_experiments)
                message += f"\n{self.reference}: {lag_slopes_text(self.point.load, ref_slopes, ref_outcomes)}"
                message += f"\nCPU per record: {self.paired.cost_figure().text}"
            pytest.fail(message, pytrace=False)
        if comparison.verdict is Verdict.COST_REGRESSION:
            self.record_property("theodolite.regression", self.point.load)
            if self.paired is not None:
                before, after = self.paired.point_cost(REF), self.paired.point_cost(CHANGE)
            else:
                assert self.baseline is not None  # a cost regression needs the baseline's figure
                before, after = self.baseline.cost[self.point.load], self.cost
            assert before is not None
            pytest.fail(
                f"{comparison.describe(name, self.reference)}\n"
                f"CPU per record at {count_text(before.resources, 'instance')}: {self.reference} "
                f"{estimate_text(before)}, measured {cost_text(comparison, after)}; "
                "a regression needs the rise beyond the tolerance and beyond the figures' noise (one-sided "
                f"p < {SIGNIFICANCE:g}, with {RUN_TO_RUN_CV:.0%} from run to run beside each run's own)",
                pytrace=False,
            )
        return comparison


@pytest.fixture
def theodolite_gate(
    request: pytest.FixtureRequest,
    theodolite_load: int,
    theodolite_settings: TheodoliteSettings,
) -> TheodoliteGate:
    """Measures demand(load) for the test's ``theodolite`` marker during setup, so that a load that could not
    be measured is a test error, and a regression found by ``check()`` a failure."""

    def record_property(name: str, value: object) -> None:
        # what pytest's record_property fixture does, without its warning under the default junit_family
        # (xunit2), which every gate point of a CI run with --junitxml would print
        request.node.user_properties.append((name, value))

    marker = request.node.get_closest_marker("theodolite")
    spec = gate_spec(
        marker.args, marker.kwargs, theodolite_settings.gate_overrides, theodolite_settings.job_options
    )
    name = spec.benchmark.name
    state = request.config.stash[STATE_KEY]
    if name not in state.baselines:
        path = baseline_path(theodolite_settings.baselines_dir, name)
        try:
            state.baselines[name] = load_baseline(path, name)
        except BaselineError as exc:
            pytest.fail(f"pytest-theodolite: {exc}", pytrace=False)
    baseline = state.baselines[name]
    state.tolerances[name] = spec.tolerance
    state.cost_tolerances[name] = spec.cost_tolerance
    if baseline is None and not theodolite_settings.update_baselines and not theodolite_settings.compare_ref:
        pytest.skip(
            f"no baseline for {name} at {baseline_path(theodolite_settings.baselines_dir, name)}: "
            "record one with --theodolite-update-baselines"
        )
    session = request.getfixturevalue("theodolite")
    if session.on_sub_experiment is None:  # a session a conftest made: its gates report through the hook too
        session.on_sub_experiment = _sub_experiment_hook(request.config)
    state.session = session
    experiment = _start(request, lambda: session.experiment(spec.benchmark, spec.settings))
    measured = _start(request, lambda: experiment.measure(theodolite_load, baseline, spec.tolerance))
    paired = measured if isinstance(measured, PairedPoint) else None
    point = measured.sides[CHANGE] if isinstance(measured, PairedPoint) else measured
    cost = spot = None
    if paired is None and isinstance(experiment, BenchmarkExperiment):
        cost = session.point_cost(experiment, theodolite_load)
        spot = experiment.blind_spots({theodolite_load: cost})[theodolite_load]
    if point.status == UNMEASURED:
        request.node.user_properties.append(("theodolite.unmeasured", theodolite_load))
        pytest.fail(
            f"pytest-theodolite: could not measure the demand of {name} at load {theodolite_load}: "
            f"{point.reason}",
            pytrace=False,
        )
    if theodolite_settings.update_baselines:
        current = testbed(
            theodolite_settings,
            session.spark,
            spec.settings.instance_cpu,
            session.calibration,
            _testbed_extra(request.config),
        )
        updated = baseline_from_measurement(
            name,
            experiment.demand_result(),
            {
                **experiment_settings_dict(spec.benchmark, spec.settings, current.to_dict()),
                "tolerance": spec.tolerance,
            },
            current,
            previous=baseline,
            loads=spec.settings.loads,
            # every load measured so far: each update rewrites the whole file
            cost={load: session.point_cost(experiment, load) for load in experiment.points}
            if isinstance(experiment, BenchmarkExperiment)
            else None,
        )
        write_baseline(baseline_path(theodolite_settings.baselines_dir, name), updated)
        state.baselines[name] = baseline = updated
    return TheodoliteGate(
        spec,
        point,
        baseline,
        record_property,
        None if theodolite_settings.update_baselines else session.not_comparable(baseline),
        paired=paired,
        reference=session.compare.label if session.compare is not None else "baseline",
        cost=cost,
        blind_spot=spot,
    )


def _sub_experiment_hook(config: pytest.Config) -> SubExperimentListener:
    def call(benchmark: str, record: Any, timings: Any) -> None:
        config.hook.pytest_theodolite_sub_experiment(
            config=config, benchmark=benchmark, record=record, timings=timings
        )

    return call


def pytest_theodolite_sub_experiment(
    config: pytest.Config, benchmark: str, record: Any, timings: Any
) -> None:
    """The plugin's own implementation: a progress line as each sub-experiment ends."""
    _live(config, f"theodolite: {benchmark} {progress_line(record, timings)}")


def _testbed_extra(config: pytest.Config) -> dict[str, str]:
    """The merged answers of pytest_theodolite_testbed (asked once, when first needed: conftests are loaded)."""
    state = config.stash[STATE_KEY]
    if state.testbed_extra is None:
        extra: dict[str, str] = {}
        for answer in config.hook.pytest_theodolite_testbed(config=config):
            if not isinstance(answer, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in answer.items()
            ):
                raise pytest.UsageError(
                    f"pytest-theodolite: pytest_theodolite_testbed returned {answer!r}: "
                    "return a dict of texts, e.g. {'runner': 'ubuntu-24.04-2core'}"
                )
            extra.update(answer)
        state.testbed_extra = extra
    return state.testbed_extra


def _live(config: pytest.Config, line: str) -> None:
    """Write a line to the terminal now, past pytest's output capturing (as live logging does)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(line)
