"""Start (or reach) the Kafka cluster and the Spark cluster that the settings ask for.

``open_kafka`` / ``open_spark`` are context managers for a single pytest process; ``shared_kafka`` /
``shared_spark`` start the same services detached for pytest-xdist (see shared.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.infra.kafka.admin import KafkaCluster, wait_for_metadata
from pytest_theodolite.infra.kafka.containers import kafka_container, start_kafka_container
from pytest_theodolite.infra.kafka.embedded import EmbeddedKafka
from pytest_theodolite.infra.shared import SharedRecord, acquire
from pytest_theodolite.infra.spark import cgroups
from pytest_theodolite.infra.spark.cluster import SparkCluster, StandaloneCluster, standalone_session_conf
from pytest_theodolite.infra.spark.jars import connector_jars
from pytest_theodolite.infra.spark.masters import MasterKind


def _gate_topics(cluster: KafkaCluster, settings: TheodoliteSettings) -> KafkaCluster:
    """The cluster with the gate topics' prefix and replication settings of `settings`."""
    cluster.topic_prefix = settings.kafka_topic_prefix
    cluster.replication_factor = settings.kafka_replication_factor
    cluster.min_insync_replicas = settings.kafka_min_insync_replicas
    cluster.fixed_topics = dict(settings.kafka_topics)
    return cluster


@contextmanager
def open_kafka(settings: TheodoliteSettings) -> Iterator[KafkaCluster]:
    if settings.kafka_provider == "testcontainers":
        with kafka_container(
            settings.kafka_image, settings.cache_dir, max(120.0, settings.kafka_timeout_s)
        ) as cluster:
            yield _gate_topics(cluster, settings)
        return
    if settings.kafka_provider == "external":
        cluster = external_kafka(settings)
    else:
        broker = EmbeddedKafka(
            port=settings.kafka_port,
            cache_dir=settings.cache_dir,
            start_timeout_s=max(120.0, settings.kafka_timeout_s),
        )
        broker.start()
        assert broker.process is not None
        cluster = KafkaCluster(
            broker.bootstrap_servers, provider="embedded", local_pids=(broker.process.pid,)
        )
        cluster.broker = broker  # type: ignore[attr-defined]  # lets tests see the broker process
    try:
        yield _gate_topics(cluster, settings)
    finally:
        cluster.close()
        if settings.kafka_provider == "embedded":
            broker.stop()


def external_kafka(settings: TheodoliteSettings) -> KafkaCluster:
    assert settings.kafka_bootstrap, "settings.build() checks that external has a bootstrap address"
    wait_for_metadata(settings.kafka_bootstrap, settings.kafka_timeout_s, settings.kafka_properties)
    return _gate_topics(
        KafkaCluster(settings.kafka_bootstrap, provider="external", properties=settings.kafka_properties),
        settings,
    )


def shared_kafka(settings: TheodoliteSettings, root: Path) -> KafkaCluster:
    if settings.kafka_provider == "external":  # nothing of ours to share: each worker reaches it itself
        return external_kafka(settings)
    if settings.kafka_provider == "testcontainers":
        return _shared_kafka_container(settings, root)

    def start() -> SharedRecord:
        broker = EmbeddedKafka(
            port=settings.kafka_port,
            cache_dir=settings.cache_dir,
            work_dir=root / "kafka",
            die_with_parent=False,
        ).start()
        assert broker.process is not None
        return SharedRecord(
            info={"bootstrap_servers": broker.bootstrap_servers},
            process_groups=[broker.process.pid],
            paths=[str(root / "kafka")],
        )

    record = acquire(root, "kafka", start)
    cluster = KafkaCluster(
        record.info["bootstrap_servers"], provider="embedded", local_pids=tuple(record.process_groups)
    )
    return _gate_topics(cluster, settings)


def _shared_kafka_container(settings: TheodoliteSettings, root: Path) -> KafkaCluster:
    def start() -> SharedRecord:
        container, bootstrap = start_kafka_container(
            settings.kafka_image, settings.cache_dir, max(120.0, settings.kafka_timeout_s)
        )
        return SharedRecord(info={"bootstrap_servers": bootstrap}, containers=[container.get_container_id()])

    record = acquire(root, "kafka", start)
    return _gate_topics(KafkaCluster(record.info["bootstrap_servers"], provider="testcontainers"), settings)


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
    return SparkCluster(
        master_url=master_url,
        max_instances=settings.max_instances,
        jars=connector_jars(settings.cache_dir),
        instance_cpu=settings.instance_cpu,
        instance_groups=list(groups or []),  # a copy: the cluster's own list is cleared on stop
        # only where the plugin started the workers (in `work_dir`): a remote cluster's Python may not have
        # the plugin
        base_conf=standalone_session_conf(work_dir) if work_dir is not None else {},
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
