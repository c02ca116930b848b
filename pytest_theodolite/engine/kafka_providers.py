"""The Kafka providers behind one small interface, chosen in one place (testcontainers-python's one small class
per provider is the model): a broker this process starts (``embedded``), one in a container (``testcontainers``),
or a cluster that exists (``external``). Each opens its cluster for one pytest process, or for the workers of a
pytest-xdist run together (infra/shared.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.infra.kafka.admin import KafkaCluster, wait_for_metadata
from pytest_theodolite.infra.kafka.containers import kafka_container, start_kafka_container
from pytest_theodolite.infra.kafka.embedded import EmbeddedKafka
from pytest_theodolite.infra.shared import SharedRecord, acquire


class KafkaProvider(Protocol):
    #: the name ``--kafka`` takes
    name: ClassVar[str]
    #: whether its broker runs on this machine, started by this run
    starts_broker: ClassVar[bool]

    def open(self, settings: TheodoliteSettings) -> AbstractContextManager[KafkaCluster]:
        """The cluster for this pytest process, stopped (where started) on exit."""
        ...

    def shared(self, settings: TheodoliteSettings, root: Path) -> KafkaCluster:
        """The cluster the workers of one pytest-xdist run share (started once, stopped by the last)."""
        ...


def gate_topics(cluster: KafkaCluster, settings: TheodoliteSettings) -> KafkaCluster:
    """The cluster with the gate topics' prefix and replication settings of `settings`."""
    cluster.topic_prefix = settings.kafka_topic_prefix
    cluster.replication_factor = settings.kafka_replication_factor
    cluster.min_insync_replicas = settings.kafka_min_insync_replicas
    cluster.fixed_topics = dict(settings.kafka_topics)
    return cluster


@dataclass(frozen=True)
class EmbeddedProvider:
    """A Kafka 4 broker (KRaft) as a child JVM from jars Maven resolves (infra/kafka/embedded.py)."""

    name: ClassVar[str] = "embedded"
    starts_broker: ClassVar[bool] = True

    @contextmanager
    def open(self, settings: TheodoliteSettings) -> Iterator[KafkaCluster]:
        broker = EmbeddedKafka(
            port=settings.kafka_port,
            cache_dir=settings.cache_dir,
            start_timeout_s=max(120.0, settings.kafka_timeout_s),
        )
        broker.start()
        try:
            assert broker.process is not None
            cluster = KafkaCluster(
                broker.bootstrap_servers, provider=self.name, local_pids=(broker.process.pid,)
            )
            cluster.broker = broker  # type: ignore[attr-defined]  # lets tests see the broker process
            try:
                yield gate_topics(cluster, settings)
            finally:
                cluster.close()
        finally:
            broker.stop()

    def shared(self, settings: TheodoliteSettings, root: Path) -> KafkaCluster:
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
            record.info["bootstrap_servers"], provider=self.name, local_pids=tuple(record.process_groups)
        )
        return gate_topics(cluster, settings)


@dataclass(frozen=True)
class ContainerProvider:
    """A broker in a container where a Docker engine answers (infra/kafka/containers.py)."""

    name: ClassVar[str] = "testcontainers"
    starts_broker: ClassVar[bool] = True

    @contextmanager
    def open(self, settings: TheodoliteSettings) -> Iterator[KafkaCluster]:
        with kafka_container(
            settings.kafka_image, settings.cache_dir, max(120.0, settings.kafka_timeout_s)
        ) as cluster:
            yield gate_topics(cluster, settings)

    def shared(self, settings: TheodoliteSettings, root: Path) -> KafkaCluster:
        def start() -> SharedRecord:
            container, bootstrap = start_kafka_container(
                settings.kafka_image, settings.cache_dir, max(120.0, settings.kafka_timeout_s)
            )
            return SharedRecord(
                info={"bootstrap_servers": bootstrap}, containers=[container.get_container_id()]
            )

        record = acquire(root, "kafka", start)
        return gate_topics(KafkaCluster(record.info["bootstrap_servers"], provider=self.name), settings)


@dataclass(frozen=True)
class ExternalProvider:
    """A cluster that exists, reached with ``--kafka-bootstrap`` (and its client properties)."""

    name: ClassVar[str] = "external"
    starts_broker: ClassVar[bool] = False

    def connect(self, settings: TheodoliteSettings) -> KafkaCluster:
        assert settings.kafka_bootstrap, "settings.build() checks that external has a bootstrap address"
        wait_for_metadata(settings.kafka_bootstrap, settings.kafka_timeout_s, settings.kafka_properties)
        return gate_topics(
            KafkaCluster(settings.kafka_bootstrap, provider=self.name, properties=settings.kafka_properties),
            settings,
        )

    @contextmanager
    def open(self, settings: TheodoliteSettings) -> Iterator[KafkaCluster]:
        cluster = self.connect(settings)
        try:
            yield cluster
        finally:
            cluster.close()

    def shared(self, settings: TheodoliteSettings, root: Path) -> KafkaCluster:
        return self.connect(settings)  # nothing of ours to share: each worker reaches it itself


#: every provider by the name ``--kafka`` takes: the one place a provider is chosen
PROVIDERS: dict[str, KafkaProvider] = {
    provider.name: provider for provider in (EmbeddedProvider(), ContainerProvider(), ExternalProvider())
}


def kafka_provider(settings: TheodoliteSettings) -> KafkaProvider:
    """The provider `settings` ask for (settings.build() has checked the name)."""
    return PROVIDERS[settings.kafka_provider]
