"""Start (or reach) the Kafka cluster and the Spark cluster that the settings ask for.

``open_kafka`` / ``open_spark`` are context managers for a single pytest process; ``shared_kafka`` /
``shared_spark`` start the same services detached for pytest-xdist (see shared.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pytest_theodolite.engine.kafka_providers import kafka_provider
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.shared import SharedRecord, acquire
from pytest_theodolite.infra.spark import cgroups
from pytest_theodolite.infra.spark.cluster import SparkCluster, StandaloneCluster, standalone_session_conf
from pytest_theodolite.infra.spark.jars import kafka_connector
from pytest_theodolite.infra.spark.masters import MasterKind


@contextmanager
def open_kafka(settings: TheodoliteSettings) -> Iterator[KafkaCluster]:
    """The Kafka cluster `settings` ask for, for this pytest process (engine/kafka_providers.py)."""
    with kafka_provider(settings).open(settings) as cluster:
        yield cluster


def shared_kafka(settings: TheodoliteSettings, root: Path) -> KafkaCluster:
    """The Kafka cluster the workers of one pytest-xdist run share."""
    return kafka_provider(settings).shared(settings, root)


def cpu_limit_note(settings: TheodoliteSettings) -> str:
    kind = settings.spark_kind
    if kind is MasterKind.KUBERNETES:
        if settings.instance_cpu is None:
            return "unlimited by default (k8s: --theodolite-instance-cpu sets the executor pods' CPU limit)"
        return f"{settings.instance_cpu:g} CPU per instance by default (the executor pods' CPU limit)"
    if kind is not MasterKind.MANAGED:
        return (
            f"unlimited ({settings.spark_master}: this cluster manager enforces no CPU share per executor; "
            "per-instance cgroups need the plugin's standalone cluster)"
        )
    support = cgroups.detect()
    if not support.available:
        return f"unlimited, cgroups unavailable ({support.reason})"
    default = "unlimited" if settings.instance_cpu is None else f"{settings.instance_cpu:g} CPU"
    return f"{default} per instance by default, settable per benchmark (cgroup v{support.version})"


def _spark_cluster(
    settings: TheodoliteSettings,
    master_url: str,
    groups: list[cgroups.CpuLimitedGroup] | None = None,
    work_dir: Path | None = None,
) -> SparkCluster:
    connector = kafka_connector(settings.cache_dir)
    return SparkCluster(
        master_url=master_url,
        max_instances=settings.max_instances,
        jars=connector.jars,
        connector_fallback=None if connector.exact else connector.version,
        instance_cpu=settings.instance_cpu,
        instance_groups=list(groups or []),  # a copy: the cluster's own list is cleared on stop
        # only where the plugin started the workers (in `work_dir`): a remote cluster's Python may not have
        # the plugin
        base_conf={
            **(standalone_session_conf(work_dir) if work_dir is not None else {}),
            **settings.spark_conf,
        },
        register_timeout_s=settings.spark_register_timeout_s,
        kind=settings.spark_kind,
        access=settings.spark_access,
        checkpoint_root=settings.checkpoint_root,
        scratch_dir=work_dir / "scratch" if work_dir is not None else None,
    )


def prepare_driver_environment(settings: TheodoliteSettings) -> None:
    # pyspark reads these when it launches the driver JVM; without SPARK_LOCAL_IP Spark binds to the
    # machine's first non-loopback address, which a sandboxed CI machine may not route. A remote cluster's
    # executors must reach the driver on an address of theirs: there Spark (or --spark-driver-host) chooses.
    if settings.spark_kind.started_here:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@contextmanager
def open_spark(settings: TheodoliteSettings) -> Iterator[SparkCluster]:
    prepare_driver_environment(settings)
    if settings.spark_master != "standalone":
        yield _spark_cluster(settings, settings.spark_master)
        return
    with StandaloneCluster(workers=settings.max_instances, instance_cpu=settings.instance_cpu) as standalone:
        groups = standalone.instance_groups.groups if standalone.instance_groups else []
        assert standalone.work_dir is not None  # made by start()
        yield _spark_cluster(settings, standalone.master_url, groups, standalone.work_dir)


def shared_spark(settings: TheodoliteSettings, root: Path) -> SparkCluster:
    prepare_driver_environment(settings)
    if settings.spark_master != "standalone":
        return _spark_cluster(settings, settings.spark_master)

    def start() -> SharedRecord:
        standalone = StandaloneCluster(
            workers=settings.max_instances,
            instance_cpu=settings.instance_cpu,
            work_dir=root / "spark",
            die_with_parent=False,
        ).start()
        groups = standalone.instance_groups
        return SharedRecord(
            info={"master_url": standalone.master_url},
            process_groups=[p.pid for p in standalone.processes],
            paths=[str(root / "spark")],
            cgroups=[str(g.path) for g in groups.groups] + [str(groups.parent)] if groups else [],
        )

    record = acquire(root, "spark", start)
    support = cgroups.detect()
    groups = [
        cgroups.CpuLimitedGroup(Path(path), settings.instance_cpu, support.version or 1)
        for path in record.cgroups
        if Path(path).name.startswith("instance-")
    ]
    cluster = _spark_cluster(settings, record.info["master_url"], groups, root / "spark")
    cluster.session_lock = root / "theodolite-spark-session.lock"
    return cluster
