"""pytest hooks and fixtures of pytest-theodolite: options, hooks and fixture wiring. The work is done in
the subpackages: glue/ (the gate's test side), engine/ (measuring), pull_request/, report/ and store/."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import replace
from typing import Any

import pytest
import xdist

from pytest_theodolite.engine import services
from pytest_theodolite.engine.markers import GateSpecError, gate_spec
from pytest_theodolite.engine.session import TheodoliteSession
from pytest_theodolite.engine.settings import SettingsError, TheodoliteSettings, build
from pytest_theodolite.engine.testbed import testbed
from pytest_theodolite.glue.gate import (
    SETTINGS_KEY,
    STATE_KEY,
    GateState,
    TheodoliteGate,
    finish_session,
    instances_needed,
    mark_gate_points,
    measure_gate_point,
    measurement_lock,
    report_progress,
    sub_experiment_hook,
    testbed_extra,
    write_summaries,
)
from pytest_theodolite.glue.header import report_header
from pytest_theodolite.glue.options import add_options, gate_overrides, marker_lines, option_getter
from pytest_theodolite.glue.scheduler import gates_on_one_worker
from pytest_theodolite.glue.setup import served, start_or_stop
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.process import terminate_as_interrupt
from pytest_theodolite.infra.spark.cluster import SparkCluster
from pytest_theodolite.pull_request.experiment import paired_experiments
from pytest_theodolite.pull_request.target import CompareTarget
from pytest_theodolite.pull_request.worktree import RefWorktree
from theodolite_generator import LoadGenerator, Workload


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
            spark_conf=[
                *config.getini("theodolite_spark_conf"),
                *config.getoption("theodolite_spark_conf_options"),
            ],
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
    return report_header(config, config.stash[SETTINGS_KEY])


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    finish_session(session)


@pytest.fixture(scope="session")
def theodolite_settings(pytestconfig: pytest.Config) -> TheodoliteSettings:
    """The resolved settings (command line > ini file > defaults), a typed ``TheodoliteSettings``."""
    return pytestconfig.stash[SETTINGS_KEY]


@pytest.fixture(scope="session")
def kafka_cluster(
    request: pytest.FixtureRequest,
    theodolite_settings: TheodoliteSettings,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[KafkaCluster]:
    """The Kafka cluster of this test session (``--kafka``): ``bootstrap_servers``, ``create_topic(name,
    partitions)`` (waits for its leaders), ``delete_topic``, ``end_offsets(topic)``, ``client_kwargs()``,
    ``spark_options()``. Under pytest-xdist every worker shares one, started once and stopped once."""
    if xdist.is_xdist_worker(request):
        cluster = start_or_stop(
            request, lambda: services.shared_kafka(theodolite_settings, tmp_path_factory.getbasetemp().parent)
        )
        yield cluster
        cluster.close()
        return
    yield from served(request, services.open_kafka(theodolite_settings))


@pytest.fixture(scope="session")
def spark_cluster(
    request: pytest.FixtureRequest,
    theodolite_settings: TheodoliteSettings,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[SparkCluster]:
    """Spark with up to ``--theodolite-max-instances`` one-core executors: ``with spark_cluster.session(instances=r)
    as spark:`` gives a SparkSession with exactly ``r`` registered executors and the Kafka connector."""
    # as many workers as the session's gates ask for (the most instances of any), not the maximum
    needed = request.config.stash[STATE_KEY].instances_needed
    settings = theodolite_settings if needed is None else replace(theodolite_settings, max_instances=needed)
    if xdist.is_xdist_worker(request):
        yield start_or_stop(
            request, lambda: services.shared_spark(settings, tmp_path_factory.getbasetemp().parent)
        )
        return
    yield from served(request, services.open_spark(settings))


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
    mark_gate_points(session, config, items)


def pytest_collection_finish(session: pytest.Session) -> None:
    state = session.config.stash[STATE_KEY]
    state.instances_needed = instances_needed(session.items, session.config.stash[SETTINGS_KEY])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    lock = measurement_lock(item.session)
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


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    write_summaries(terminalreporter, config, interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)


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
            worktree = start_or_stop(request, lambda: stack.enter_context(checkout))
            start_experiment = paired_experiments(CompareTarget.of(worktree, request.config.rootpath))
        extra = testbed_extra(request.config)
        session = TheodoliteSession(
            kafka_cluster,
            spark_cluster,
            theodolite_settings.results_dir,
            testbed(theodolite_settings, spark_cluster, None, extra=extra).to_dict(),
            on_sub_experiment=sub_experiment_hook(request.config),
            start_experiment=start_experiment,
            calibration_store=(theodolite_settings.cache_dir, theodolite_settings.calibration_max_age_s),
        )
        stack.callback(session.close)
        state.session = session
        yield session


@pytest.fixture
def theodolite_load() -> int:
    """The load of one gate point; the ``theodolite`` marker parametrizes it with the marker's ``loads``."""
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
        lambda start: start_or_stop(request, start),
        record_property,
    )


def pytest_theodolite_sub_experiment(
    config: pytest.Config, benchmark: str, record: Any, timings: Any
) -> None:
    report_progress(config, benchmark, record, timings)
