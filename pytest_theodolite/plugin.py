"""pytest hooks and fixtures of pytest-theodolite; the work is done in plain modules beside this one."""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from . import KAFKA_VERSION, services
from .errors import TheodoliteSetupError
from .kafka.admin import KafkaCluster
from .settings import OPTIONS, SettingsError, TheodoliteSettings, build
from .shared import release_all
from .spark.cluster import SparkCluster

SETTINGS_KEY = pytest.StashKey[TheodoliteSettings]()
T = TypeVar("T")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("theodolite", "Theodolite scalability benchmarks")
    for flag, ini, default, help_text in OPTIONS:
        choices = ("embedded", "testcontainers", "external") if flag == "--kafka" else None
        group.addoption(flag, dest=ini, default=None, choices=choices, help=f"{help_text} [ini: {ini}]")
        parser.addini(ini, help_text, default=default)
    parser.addini("theodolite_kafka_properties", "client properties of an external cluster, one key=value a line "
                  "(put secrets in THEODOLITE_KAFKA_<NAME> environment variables instead)", type="linelist", default=[])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "theodolite: a Theodolite scalability benchmark")

    def get(flag: str):
        ini = next(i for f, i, _, _ in OPTIONS if f == flag)
        value = config.getoption(ini)
        return config.getini(ini) if value is None else value

    try:
        config.stash[SETTINGS_KEY] = build(get, config.getini("theodolite_kafka_properties"))
    except SettingsError as exc:
        raise pytest.UsageError(f"pytest-theodolite: {exc}") from None


def pytest_report_header(config: pytest.Config) -> list[str]:
    settings = config.stash[SETTINGS_KEY]
    from .spark.jars import pyspark_version

    kafka = settings.kafka_provider + (f" ({settings.kafka_bootstrap})" if settings.kafka_bootstrap else
                                       f" (Apache Kafka {KAFKA_VERSION}, KRaft)" if settings.kafka_provider == "embedded"
                                       else "")
    return [
        f"theodolite: kafka={kafka}, spark master={settings.spark_master} (pyspark {pyspark_version()}), "
        f"max instances={settings.max_instances}",
        f"theodolite: testbed {os.cpu_count()} cores, {_memory_gib():.0f} GiB, {platform.platform(terse=True)}; "
        f"instance CPU: {services.cpu_limit_note(settings)}",
    ]


def _memory_gib() -> float:
    import psutil

    return psutil.virtual_memory().total / 2**30


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _is_xdist_controller(config: pytest.Config) -> bool:
    return not _is_xdist_worker(config) and getattr(config.option, "numprocesses", None) not in (None, 0)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    if _is_xdist_controller(session.config):
        release_all(session.config._tmp_path_factory.getbasetemp())  # the services the workers shared


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
def kafka_cluster(request: pytest.FixtureRequest, theodolite_settings: TheodoliteSettings,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """The Kafka cluster of this test session: ``bootstrap_servers``, ``create_topic``, ``end_offsets``, ..."""
    if _is_xdist_worker(request.config) and theodolite_settings.kafka_provider != "testcontainers":
        cluster = _start(request, lambda: services.shared_kafka(theodolite_settings,
                                                                tmp_path_factory.getbasetemp().parent))
        yield cluster
        cluster.close()
        return
    context = services.open_kafka(theodolite_settings)
    cluster = _start(request, context.__enter__)
    try:
        yield cluster
    finally:
        context.__exit__(None, None, None)


@pytest.fixture(scope="session")
def spark_cluster(request: pytest.FixtureRequest, theodolite_settings: TheodoliteSettings,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """Spark with up to ``--theodolite-max-instances`` one-core executors: ``with spark_cluster.session(instances=r)``."""
    if _is_xdist_worker(request.config):
        yield _start(request, lambda: services.shared_spark(theodolite_settings, tmp_path_factory.getbasetemp().parent))
        return
    context = services.open_spark(theodolite_settings)
    cluster = _start(request, context.__enter__)
    try:
        yield cluster
    finally:
        context.__exit__(None, None, None)
