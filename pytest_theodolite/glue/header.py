"""The lines pytest-theodolite adds to pytest's header: where Kafka and Spark come from, and the testbed."""

from __future__ import annotations

import platform

import pytest
import xdist

from pytest_theodolite.engine import services
from pytest_theodolite.engine.kafka_providers import kafka_provider
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.infra.kafka.version import KAFKA_VERSION
from pytest_theodolite.store import host


def report_header(config: pytest.Config, settings: TheodoliteSettings) -> list[str]:
    from pytest_theodolite.infra.kafka.image import kafka_tag
    from pytest_theodolite.infra.spark.jars import cached_connector_version, pyspark_version

    kafka = settings.kafka_provider + (
        f" ({settings.kafka_bootstrap})"
        if settings.kafka_bootstrap
        else f" (Apache Kafka {KAFKA_VERSION}, KRaft)"
        if settings.kafka_provider == "embedded"
        else f" ({settings.kafka_image or kafka_tag()})"
    )
    spark = f"pyspark {pyspark_version()}"
    connector = cached_connector_version(settings.cache_dir)
    if connector is not None and connector != pyspark_version():
        # known from the jar cache only (no Maven at the header): the run's warning says it again where it resolves
        spark += f" with the Kafka connector {connector}, the nearest release Maven resolved"
    lines = [
        f"theodolite: kafka={kafka}, spark master={settings.spark_master} ({spark}), "
        f"max instances={settings.max_instances}",
        f"theodolite: testbed {host.usable_cores()} cores, {host.memory_gib() or 0:.0f} GiB, "
        f"{platform.platform(terse=True)}; "
        f"instance CPU: {services.cpu_limit_note(settings)}",
    ]
    if not settings.spark_kind.started_here or not kafka_provider(settings).starts_broker:
        lines.append(f"theodolite: cluster: {cluster_note(settings)}")
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


def cluster_note(settings: TheodoliteSettings) -> str:
    """Where a cluster the plugin did not start gets the gates' topics, checkpoints and driver address."""
    replication = settings.kafka_replication_factor or "the brokers' count, up to 3"
    isr = settings.kafka_min_insync_replicas or "the broker's"
    parts = [
        "existing topics "
        + ", ".join(f"{role}={name}" for role, name in settings.kafka_topics.items())
        + " (emptied before and after each repetition)"
        if settings.kafka_topics
        else f"topics {settings.kafka_topic_prefix}*, replication {replication}, min.insync.replicas {isr}",
    ]
    if not settings.spark_kind.started_here:
        parts.append(f"checkpoints under {settings.checkpoint_root}")
        parts.append(f"driver address {settings.spark_access.driver_host or 'chosen by Spark'}")
        parts.append("the job's package shipped to the executors")
    return "; ".join(parts)
