"""A real Apache Kafka 4.x broker in KRaft combined mode (broker + controller), as a child JVM."""

from __future__ import annotations

import base64
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from pytest_theodolite.core.errors import TheodoliteSetupError
from pytest_theodolite.infra import maven
from pytest_theodolite.infra.kafka.version import KAFKA_VERSION
from pytest_theodolite.infra.ports import LOOPBACK, port_or_free
from pytest_theodolite.infra.process import ManagedProcess
from pytest_theodolite.infra.waiting import wait_until

LOG4J2_VERSION = "2.24.3"


def broker_coordinates(kafka_version: str = KAFKA_VERSION) -> list[str]:
    # kafka_2.13 brings no logging backend: without one the broker logs nothing, not even its readiness line.
    return [
        f"org.apache.kafka:kafka_2.13:{kafka_version}",
        f"org.apache.logging.log4j:log4j-core:{LOG4J2_VERSION}",
        f"org.apache.logging.log4j:log4j-slf4j-impl:{LOG4J2_VERSION}",
    ]


READY_LINE = "Kafka Server started"

LOG4J2_PROPERTIES = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
logger.raftserver.name = kafka.server.KafkaRaftServer
logger.raftserver.level = INFO
logger.kafkaserver.name = kafka.server.KafkaBroker
logger.kafkaserver.level = INFO
"""


@dataclass
class EmbeddedKafka:
    """A single-node KRaft broker on 127.0.0.1, started from Maven-resolved jars.

    ``with EmbeddedKafka() as broker: broker.bootstrap_servers`` -- the log dir is a fresh temp dir, deleted
    on stop. Heap: 1 GiB max is ample for benchmark topics of a few million small records and leaves the
    rest of a 24 GiB machine to Spark's executor JVMs.
    """

    port: int = 0  # 0 = a free port
    controller_port: int = 0
    kafka_version: str = KAFKA_VERSION
    cache_dir: Path | None = None
    heap: str = "1g"
    start_timeout_s: float = 120.0
    work_dir: Path | None = None  # where log dir, config and broker.log go; default: a new temp dir
    die_with_parent: bool = True
    #: server.properties entries that replace or add to the single-node defaults (e.g. a SASL listener)
    server_properties: Mapping[str, str] = field(default_factory=dict)
    #: what a client needs to talk to it (Kafka's dotted names), used to check that it serves
    client_properties: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: one node of a cluster (EmbeddedKafkaCluster): its id, the cluster's id and its controller quorum;
    #: None: a cluster of its own
    node_id: int = 1
    cluster_id: str | None = None
    quorum_voters: str | None = None
    bootstrap_servers: str = field(default="", init=False)
    process: ManagedProcess | None = field(default=None, init=False)
    _own_work_dir: bool = field(default=False, init=False)

    def start(self) -> EmbeddedKafka:
        self.launch()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def launch(self) -> EmbeddedKafka:
        """Format the storage and start the JVM, without waiting: a node of a cluster serves only once a
        majority of its controller quorum runs."""
        java = maven.java_executable()
        port = port_or_free(self.port, "the embedded Kafka broker")
        controller_port = port_or_free(self.controller_port, "the embedded Kafka controller")
        if controller_port == port:
            raise TheodoliteSetupError("The Kafka broker and controller ports must differ.")
        jars = maven.resolve(broker_coordinates(self.kafka_version), self.cache_dir)
        if self.work_dir is None:
            self.work_dir = Path(tempfile.mkdtemp(prefix="theodolite-kafka-"))
            self._own_work_dir = True
        self.work_dir.mkdir(parents=True, exist_ok=True)
        props = self.work_dir / "server.properties"
        voters = self.quorum_voters or f"{self.node_id}@{LOOPBACK}:{controller_port}"
        props.write_text(
            _server_properties(
                port, controller_port, self.work_dir / "data", self.server_properties, self.node_id, voters
            )
        )
        log4j = self.work_dir / "log4j2.properties"
        log4j.write_text(LOG4J2_PROPERTIES)
        classpath = ":".join(str(j) for j in jars)
        jvm = [
            java,
            f"-Xmx{self.heap}",
            "-Xms256m",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            classpath,
        ]
        log_path = self.work_dir / "broker.log"
        self._format_storage(jvm, props, log_path)
        self.process = ManagedProcess(
            [*jvm, "kafka.Kafka", str(props)], log_path, die_with_parent=self.die_with_parent
        ).start()
        self.bootstrap_servers = f"{LOOPBACK}:{port}"
        return self

    def _format_storage(self, jvm: list[str], props: Path, log_path: Path) -> None:
        # Static voters (controller.quorum.voters) need no --standalone flag.
        cluster_id = self.cluster_id or new_cluster_id()
        cmd = [*jvm, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        except subprocess.TimeoutExpired as exc:
            raise TheodoliteSetupError("Formatting the Kafka log dir did not finish within 120 s.") from exc
        log_path.write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            raise TheodoliteSetupError(
                "Formatting the embedded broker's storage failed:\n" + (proc.stdout + proc.stderr)[-2000:]
            )

    def wait_ready(self) -> None:
        assert self.process is not None
        process = self.process
        deadline = time.monotonic() + self.start_timeout_s

        def still_running() -> None:
            if not process.alive():
                raise TheodoliteSetupError(
                    f"The embedded Kafka broker exited during start (exit code {process.returncode()}). "
                    f"Last lines of {process.log_path}:\n{process.log_excerpt(25)}"
                )

        wait_until(
            lambda: READY_LINE in process.log_path.read_text(errors="replace"),
            check=still_running,
            timeout_s=self.start_timeout_s,
            interval_s=0.2,
            error=TheodoliteSetupError,
            what=lambda: (
                f"The embedded Kafka broker did not log {READY_LINE!r} within "
                f"{self.start_timeout_s:.0f} s. Last lines of {process.log_path}:\n"
                f"{process.log_excerpt(25)}"
            ),
        )
        from pytest_theodolite.infra.kafka.admin import (
            wait_for_metadata,  # a metadata round trip proves the listener really serves
        )

        wait_for_metadata(
            self.bootstrap_servers, max(5.0, deadline - time.monotonic()), dict(self.client_properties)
        )

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
        if self._own_work_dir and self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def new_cluster_id() -> str:
    """A random Kafka cluster id (16 bytes, URL-safe base64). Like Kafka's own Uuid.randomUuid, never one that
    starts with '-': the storage tool would read it as an option (seen as a flaky "expected one argument")."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


#: what one node that is broker and controller at once needs, whatever its listeners (the container provider
#: passes the same settings as KAFKA_* environment variables)
SINGLE_NODE_SETTINGS = {
    # one node: every internal topic must fit on it
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "group.initial.rebalance.delay.ms": "0",
    # benchmarks create their topics explicitly with a partition count
    "auto.create.topics.enable": "false",
    "num.network.threads": "2",
    "num.io.threads": "4",
    # keep records until their topic is deleted: time retention would drop records whose event time lies in
    # the past (replayed or test data) while a benchmark still reads them
    "log.retention.ms": "-1",
    "log.segment.bytes": str(256 * 1024 * 1024),
}


def _server_properties(
    port: int,
    controller_port: int,
    data_dir: Path,
    overrides: Mapping[str, str] | None = None,
    node_id: int = 1,
    voters: str | None = None,
) -> str:
    settings = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": voters or f"{node_id}@{LOOPBACK}:{controller_port}",
        "listeners": f"PLAINTEXT://{LOOPBACK}:{port},CONTROLLER://{LOOPBACK}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir),
        **SINGLE_NODE_SETTINGS,
        **(overrides or {}),
    }
    # a .properties file reads a backslash as an escape (a JAAS password may hold one)
    return "".join(f"{k}={v.replace(chr(92), chr(92) * 2)}\n" for k, v in settings.items())


@dataclass
class EmbeddedKafkaCluster:
    """A Kafka cluster of ``nodes`` KRaft nodes (each broker and controller, its own JVM) on 127.0.0.1, from
    the embedded broker's jars: what a replicated production cluster does when a broker dies, on one machine.

    Internal topics are replicated ``min(3, nodes)`` times; topics get ``default.replication.factor`` 1
    unless created with more. ``with EmbeddedKafkaCluster(3) as cluster: cluster.bootstrap_servers``."""

    nodes: int = 3
    cache_dir: Path | None = None
    heap: str = "512m"
    start_timeout_s: float = 180.0
    work_dir: Path | None = None
    #: server.properties entries every node gets besides the cluster's own (e.g. how soon a replica that
    #: lags leaves the ISR)
    server_properties: Mapping[str, str] = field(default_factory=dict)
    brokers: list[EmbeddedKafka] = field(default_factory=list, init=False)
    _own_work_dir: bool = field(default=False, init=False)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers)

    def start(self) -> EmbeddedKafkaCluster:
        if self.nodes < 1:
            raise ValueError(f"a cluster needs at least one node, got {self.nodes}")
        if self.work_dir is None:
            self.work_dir = Path(tempfile.mkdtemp(prefix="theodolite-kafka-cluster-"))
            self._own_work_dir = True
        ports = [
            (port_or_free(0, "a Kafka broker"), port_or_free(0, "a Kafka controller"))
            for _ in range(self.nodes)
        ]
        voters = ",".join(f"{i + 1}@{LOOPBACK}:{controller}" for i, (_, controller) in enumerate(ports))
        replicas = str(min(3, self.nodes))
        cluster_id = new_cluster_id()
        try:
            for index, (port, controller) in enumerate(ports):
                broker = EmbeddedKafka(
                    port=port,
                    controller_port=controller,
                    cache_dir=self.cache_dir,
                    heap=self.heap,
                    start_timeout_s=self.start_timeout_s,
                    work_dir=self.work_dir / f"node-{index + 1}",
                    node_id=index + 1,
                    cluster_id=cluster_id,
                    quorum_voters=voters,
                    server_properties={
                        "offsets.topic.replication.factor": replicas,
                        "transaction.state.log.replication.factor": replicas,
                        "transaction.state.log.min.isr": "1",
                        "share.coordinator.state.topic.replication.factor": replicas,
                        **self.server_properties,
                    },
                )
                self.brokers.append(broker)
                broker.launch()
            for broker in self.brokers:
                broker.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        # all at once: a node stopped after the others has no controller quorum left for its controlled
        # shutdown and waits out its whole stop timeout
        with ThreadPoolExecutor(max_workers=max(1, len(self.brokers))) as pool:
            list(pool.map(EmbeddedKafka.stop, self.brokers))
        if self._own_work_dir and self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedKafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
