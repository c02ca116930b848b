"""A Kafka cluster as the tests see it: bootstrap address, client properties, topic and offset helpers.

The same class serves every provider (embedded, testcontainers, external); only how the cluster comes to
exist differs.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.errors import KafkaError, TopicAlreadyExistsError, UnknownTopicOrPartitionError

from pytest_theodolite.core.errors import TheodoliteSetupError
from pytest_theodolite.infra.kafka.client_properties import java_client_config, python_client_config
from pytest_theodolite.infra.waiting import wait_until


@dataclass
class KafkaCluster:
    """What a ``kafka_cluster`` fixture gives: where the cluster is and how to manage its topics."""

    bootstrap_servers: str
    provider: str = "embedded"
    #: client properties in Kafka's dotted names (security protocol, SASL, SSL) -- may hold secrets, never printed
    properties: Mapping[str, str] = field(default_factory=dict, repr=False)
    request_timeout_s: float = 30.0
    #: the broker's processes where it runs on this host as a process of ours (the embedded broker): their CPU
    #: is reported beside the instances' (core/contention.py); empty: in a container or elsewhere
    local_pids: tuple[int, ...] = ()
    #: the topics a gate creates: their names' prefix (one an ACL can allow), replication factor (None: the
    #: cluster's brokers, up to 3) and min.insync.replicas (None: the broker's default)
    topic_prefix: str = "theodolite-"
    replication_factor: int | None = None
    min_insync_replicas: int | None = None
    #: topics that exist already, by role (input, output, ...): used instead of topics the gates create and
    #: delete -- a cluster whose ACLs grant no topic creation -- their records deleted before and after each
    #: repetition (DeleteRecords: the topic's Delete permission)
    fixed_topics: Mapping[str, str] = field(default_factory=dict)
    _admin: KafkaAdminClient | None = field(default=None, init=False, repr=False)

    # -- clients -------------------------------------------------------------------------------------
    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for any kafka-python client (producer, consumer, admin) of this cluster."""
        return {
            "bootstrap_servers": self.bootstrap_servers.split(","),
            **python_client_config(self.properties),
        }

    def spark_options(self) -> dict[str, str]:
        """Options for Spark's Kafka source and sink (``kafka.``-prefixed client properties)."""
        return {
            "kafka.bootstrap.servers": self.bootstrap_servers,
            **{f"kafka.{k}": v for k, v in java_client_config(self.properties).items()},
        }

    @property
    def admin(self) -> KafkaAdminClient:
        if self._admin is None:
            self._admin = _connect(
                lambda: KafkaAdminClient(
                    **self.client_kwargs(), request_timeout_ms=int(self.request_timeout_s * 1000)
                ),
                self.bootstrap_servers,
                self.request_timeout_s,
            )
        return self._admin

    def accepts_connections(self, timeout_s: float = 2.0) -> bool:
        """Whether any bootstrap address accepts a TCP connection now. Where none does, the cluster is gone (a
        killed broker), and every request to it would only run out its timeout."""
        for address in self.bootstrap_servers.split(","):
            host, _, port = address.strip().rpartition(":")
            try:
                with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
                    return True
            except (OSError, ValueError):
                continue
        return False

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    # -- topics --------------------------------------------------------------------------------------
    def gate_topic_name(self, run_id: str, role: str) -> str:
        """The name of a repetition's topic: ``<prefix><run id>-<role>``, or the existing topic of that role."""
        if not self.fixed_topics:
            return f"{self.topic_prefix}{run_id}-{role}"
        try:
            return self.fixed_topics[role]
        except KeyError:
            raise TheodoliteSetupError(
                f"--kafka-topics names no topic for the role {role!r} (it names "
                f"{', '.join(sorted(self.fixed_topics))}): add {role}=TOPIC, a topic with the benchmark's "
                "partitions that the gates may read, write and delete records of"
            ) from None

    def broker_count(self) -> int:
        return len(self.admin.describe_cluster().get("brokers") or [])

    def gate_topic_replication(self) -> int:
        """The replication factor of a gate's topics: the one asked for, else the brokers, up to 3 (a cluster
        that enforces a minimum of 3 gets it; one broker gets 1)."""
        if self.replication_factor is not None:
            return self.replication_factor
        return max(1, min(3, self.broker_count()))

    def create_gate_topic(self, name: str, partitions: int) -> None:
        """Create a repetition's topic with the cluster's replication settings (see the fields above); a
        cluster that refuses them says why, with the option to change. An existing topic (``fixed_topics``)
        is checked and emptied instead."""
        if name in self.fixed_topics.values():
            found = self.partition_count(name)
            if found != partitions:
                raise TheodoliteSetupError(
                    f"the existing topic {name!r} (--kafka-topics) has {found} partitions, the benchmark "
                    f"{partitions}: create it with {partitions} (the lag is read from exactly those)"
                )
            self.delete_records(name)
            return
        configs = {}
        if self.min_insync_replicas is not None:
            configs["min.insync.replicas"] = str(self.min_insync_replicas)
        replication = self.gate_topic_replication()
        try:
            self.create_topic(name, partitions, replication_factor=replication, configs=configs)
        except KafkaError as exc:
            raise TheodoliteSetupError(
                f"Kafka at {self.bootstrap_servers} refused topic {name!r} ({partitions} partitions, replication "
                f"factor {replication}{', ' + str(configs) if configs else ''}): {exc}. Set "
                "--kafka-replication-factor / --kafka-min-insync-replicas to what the cluster allows, "
                "--kafka-topic-prefix to a prefix your ACLs let this client create and delete, or, where it may "
                "create none, --kafka-topics to topics that exist"
            ) from exc

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        configs: Mapping[str, str] | None = None,
        replication_factor: int = 1,
        timeout_s: float = 30.0,
    ) -> None:
        """Create ``name`` and return once every partition has a leader (so producers never see
        ``LEADER_NOT_AVAILABLE``)."""
        if partitions < 1:
            raise ValueError(f"a topic needs at least one partition, got {partitions}")
        try:
            self.admin.create_topics(
                {
                    name: {
                        "num_partitions": partitions,
                        "replication_factor": replication_factor,
                        "configs": dict(configs or {}),
                    }
                },
                timeout_ms=int(timeout_s * 1000),
            )
        except TopicAlreadyExistsError:
            pass
        self.wait_for_leaders(name, partitions, timeout_s)

    def wait_for_leaders(self, name: str, partitions: int, timeout_s: float = 30.0) -> None:
        def led() -> bool:
            [topic] = self.admin.describe_topics([name])
            parts = topic.get("partitions") or []
            return len(parts) >= partitions and all(p.get("leader_id", -1) >= 0 for p in parts)

        wait_until(
            led,
            timeout_s=timeout_s,
            transient=(KafkaError, ValueError),
            what=f"topic {name!r} has no leader for all {partitions} partitions after {timeout_s:.0f} s",
        )

    def delete_topic(self, name: str, timeout_s: float = 30.0) -> None:
        """Delete ``name`` and wait until the cluster no longer lists it (missing topics are fine). A request
        that fails on a broker that is gone is sent again, by a new client, to the brokers left."""

        def delete() -> bool:
            try:
                self.admin.delete_topics([name], timeout_ms=int(min(timeout_s, 10) * 1000))
            except UnknownTopicOrPartitionError:
                pass
            except (KafkaError, OSError):
                self.close()  # its connections may point at the dead broker: the next attempt asks anew
                raise
            return True

        wait_until(
            delete,
            timeout_s=timeout_s,
            interval_s=1.0,
            transient=(KafkaError, OSError),
            what=f"topic {name!r} could not be deleted within {timeout_s:.0f} s",
        )
        wait_until(
            lambda: name not in self.list_topics(),
            timeout_s=timeout_s,
            what=f"topic {name!r} still listed {timeout_s:.0f} s after its deletion",
        )

    def release_gate_topic(self, name: str) -> None:
        """A repetition's topic after it: deleted, or, where it existed before (``fixed_topics``), emptied."""
        if name in self.fixed_topics.values():
            self.delete_records(name)
        else:
            self.delete_topic(name)

    def delete_records(self, name: str) -> None:
        """Delete every record of `name` (its log start moves to its end): a consumer from ``earliest`` reads
        only what comes after."""
        ends = self.end_offsets(name)
        self.admin.delete_records(
            {TopicPartition(name, p): offset for p, offset in ends.items()},
            timeout_ms=int(self.request_timeout_s * 1000),
        )

    def records_in(self, name: str) -> int:
        """The records `name` holds now: end offsets minus log start offsets, over its partitions."""
        partitions = [TopicPartition(name, p) for p in range(self.partition_count(name))]
        consumer = KafkaConsumer(**self.client_kwargs(), enable_auto_commit=False)
        try:
            timeout_ms = int(self.request_timeout_s * 1000)
            ends = consumer.end_offsets(partitions, timeout_ms=timeout_ms)
            starts = consumer.beginning_offsets(partitions, timeout_ms=timeout_ms)
        finally:
            consumer.close()
        return sum(ends.values()) - sum(starts.values())

    def list_topics(self) -> set[str]:
        return set(self.admin.list_topics())

    def partition_count(self, name: str) -> int:
        [topic] = self.admin.describe_topics([name])
        return len(topic.get("partitions") or [])

    # -- offsets -------------------------------------------------------------------------------------
    def end_offsets(self, name: str) -> dict[int, int]:
        """Log-end offset of every partition of ``name`` (the count of records ever written to it)."""
        partitions = self.partition_count(name)
        if partitions == 0:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        consumer = KafkaConsumer(**self.client_kwargs(), enable_auto_commit=False)
        try:
            offsets = consumer.end_offsets(
                [TopicPartition(name, p) for p in range(partitions)],
                timeout_ms=int(self.request_timeout_s * 1000),
            )
        finally:
            consumer.close()
        return {tp.partition: offset for tp, offset in offsets.items()}

    def total_end_offset(self, name: str) -> int:
        return sum(self.end_offsets(name).values())


def _connect(factory, bootstrap_servers: str, timeout_s: float):
    return wait_until(
        factory,
        timeout_s=timeout_s,
        interval_s=0.5,
        transient=(KafkaError, OSError),
        error=TheodoliteSetupError,
        what=f"No Kafka broker answered at {bootstrap_servers} within {timeout_s:.0f} s. Check the "
        "address and the client security settings, or use `--kafka embedded` to start a broker "
        "on this machine.",
    )


def wait_for_metadata(
    bootstrap_servers: str, timeout_s: float, properties: Mapping[str, str] | None = None
) -> None:
    """Return once a metadata request to ``bootstrap_servers`` succeeds, else raise a setup error."""
    deadline = time.monotonic() + timeout_s
    admin = _connect(
        lambda: KafkaAdminClient(
            bootstrap_servers=bootstrap_servers.split(","),
            request_timeout_ms=int(min(timeout_s, 30) * 1000),
            # the client's own wait for a first broker (30 s by default), else a short timeout is not kept
            bootstrap_timeout_ms=int(min(timeout_s, 30) * 1000),
            **python_client_config(properties or {}),
        ),
        bootstrap_servers,
        timeout_s,
    )
    try:
        # the request may go to another broker of the cluster that does not listen yet (a cluster's brokers
        # start one after the other): asked again until the time is up
        _connect(
            lambda: admin.list_topics() is not None, bootstrap_servers, max(1.0, deadline - time.monotonic())
        )
    finally:
        admin.close()
