"""pytest hooks and fixtures of pytest-theodolite: options, hooks and fixture wiring. The work is done in
the subpackages: glue/ (the gate's test side), engine/ (measuring), pull_request/, report/ and store/."""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack
from typing import Any, TypeVar

import pytest
import xdist

from generator import LoadGenerator, Workload
from pytest_theodolite.core.errors import TheodoliteSetupError
from pytest_theodolite.engine import services
from pytest_theodolite.engine.markers import GateSpecError, gate_spec
from pytest_theodolite.engine.session import TheodoliteSession, summarise
from pytest_theodolite.engine.settings import SettingsError, TheodoliteSettings, build
from pytest_theodolite.engine.testbed import testbed
from pytest_theodolite.glue.gate import (
    SETTINGS_KEY,
    STATE_KEY,
    GateState,
    TheodoliteGate,
    check_compare_ref,
    measure_gate_point,
    report_progress,
    sub_experiment_hook,
    testbed_extra,
)
from pytest_theodolite.glue.options import add_options, gate_overrides, marker_lines, option_getter
from pytest_theodolite.glue.scheduler import gates_on_one_worker, write_gate_points
from pytest_theodolite.infra.isolation import MeasurementLock
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.kafka.version import KAFKA_VERSION
from pytest_theodolite.infra.process import terminate_as_interrupt
from pytest_theodolite.infra.shared import release_all
from pytest_theodolite.infra.spark.cluster import SparkCluster
from pytest_theodolite.pull_request.experiment import CompareTarget, paired_experiments
from pytest_theodolite.pull_request.worktree import RefWorktree
from pytest_theodolite.store import host

#: exit code of a run in which nothing regressed but some demand could not be measured (invalid or errored
#: sub-experiments, or a reference not comparable): CI can tell "regressed" (1) from "could not measure" (7)
EXIT_UNMEASURED = 7
#: set on the items that are points of a gate (a ``theodolite`` marker and the ``theodolite_load`` parameter)
GATE_POINT_KEY = pytest.StashKey[bool]()
T = TypeVar("T")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_theodolite import hookspec

    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    for line in marker_lines():
        config.addinivalue_line("markers", line)
    try:
        config.stash[SETTINGS_KEY] = build(
            option_getter(config),
            config.getini("theodolite_kafka_properties"),
            gate_overrides=gate_overrides(config),
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
    goes to one worker, other tests spread as usual."""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    return gates_on_one_worker(config, log)


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


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash[STATE_KEY]
    if state.session is not None:
        state.summary = summarise(
            state.session,
            state.baselines,
            state.tolerances,
            session.config.stash[SETTINGS_KEY],
            testbed_extra(session.config),
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
        testbed_extra(
            config
        )  # a broken pytest_theodolite_testbed is a usage error before anything is measured
        if config.stash[SETTINGS_KEY].compare_ref:
            check_compare_ref(config, gate_items)
    if xdist.is_xdist_worker(session):
        write_gate_points(
            config._tmp_path_factory.getbasetemp().parent,  # type: ignore[attr-defined]
            config.workerinput["workerid"],  # type: ignore[attr-defined]
            [item.nodeid for item in gate_items],
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
        start_experiment = None  # one revision against the stored baselines
        if theodolite_settings.compare_ref:
            checkout = RefWorktree(request.config.rootpath, theodolite_settings.compare_ref)
            worktree = _start(request, lambda: stack.enter_context(checkout))
            start_experiment = paired_experiments(CompareTarget.of(worktree, request.config.rootpath))
        extra = testbed_extra(request.config)
        session = TheodoliteSession(
            kafka_cluster,
            spark_cluster,
            theodolite_settings.results_dir,
            testbed(theodolite_settings, spark_cluster, None, extra=extra).to_dict(),
            on_sub_experiment=sub_experiment_hook(request.config),
            start_experiment=start_experiment,
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

    return measure_gate_point(
        request,
        theodolite_load,
        theodolite_settings,
        request.config.stash[STATE_KEY],
        lambda start: _start(request, start),
        record_property,
    )


def pytest_theodolite_sub_experiment(
    config: pytest.Config, benchmark: str, record: Any, timings: Any
) -> None:
    report_progress(config, benchmark, record, timings)
