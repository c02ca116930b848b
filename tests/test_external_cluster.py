"""A gate against clusters that pytest did not start: a Kafka broker with a SASL/PLAIN listener and a Spark
standalone master with two workers, each its own process, started here as an operator would, before the gate
runs and still running after it. The gate reaches them with ``--kafka external`` (credentials from
``THEODOLITE_KAFKA_*`` variables) and ``--spark-master spark://...``."""

import json
import secrets

import pytest

from pytest_theodolite.core.errors import TheodoliteSetupError
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.kafka.embedded import EmbeddedKafka
from pytest_theodolite.infra.ports import LOOPBACK, free_port
from pytest_theodolite.infra.spark.cluster import StandaloneCluster

pytestmark = pytest.mark.integration

GATE = """
import pytest
from theodolite_generator import Workload
from pytest_theodolite.engine.runner import Benchmark
from theodolite_spark_jobs import uc1

UC1 = Benchmark("uc1-external", uc1.start_query, lambda keys: Workload(keys=keys), input_partitions=2)

@pytest.mark.theodolite(UC1, loads=[300], resources=[1, 2], threshold="20%", max_duration=60)
def test_uc1(theodolite_gate):
    theodolite_gate.check()
"""

UC1_BASELINE = {
    "benchmark": "uc1-external",
    "format_version": 1,
    "settings": {},
    "demand": {"300": 1},
    "testbed": {
        "cores": None,
        "memory_gib": None,
        "instance_cpu": None,
        "kafka_provider": "external",
        "spark_master": "external",
        "pyspark_version": None,
        "python_version": "3.11",
    },
}


def _sasl_broker(work_dir, authorizer: bool = False) -> tuple[EmbeddedKafka, str, dict, str]:
    """A single-node broker whose clients must log in (SASL/PLAIN as user 'gate'); its own internal listener
    needs no login (and, with `authorizer`, is the only super user: 'gate' may do what ACLs grant it, nothing
    more). Returns the broker, the password, the client properties and the internal listener's address."""
    password = "pw-" + secrets.token_hex(12)
    port = free_port()
    login = "org.apache.kafka.common.security.plain.PlainLoginModule required"
    jaas = f'{login} user_gate="{password}";'  # the broker's side: user 'gate' and its password
    client = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{login} username="gate" password="{password}";',
    }
    internal, controller = free_port(), free_port()
    acl_settings = (
        {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",  # the internal and controller listeners' principal
        }
        if authorizer
        else {}
    )
    broker = EmbeddedKafka(
        port=port,
        controller_port=controller,
        work_dir=work_dir,
        server_properties={
            "listeners": f"SASL_PLAINTEXT://{LOOPBACK}:{port},INTERNAL://{LOOPBACK}:{internal},"
            f"CONTROLLER://{LOOPBACK}:{controller}",
            "advertised.listeners": f"SASL_PLAINTEXT://{LOOPBACK}:{port},INTERNAL://{LOOPBACK}:{internal}",
            "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,INTERNAL:PLAINTEXT,"
            "CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
            **acl_settings,
        },
        client_properties=client,
    )
    return broker, password, client, f"{LOOPBACK}:{internal}"


@pytest.fixture
def sasl_broker(tmp_path):
    broker, password, client, _ = _sasl_broker(tmp_path / "operator-kafka")
    with broker:
        yield broker, password, client


def test_a_gate_runs_on_a_locked_down_external_sasl_broker_and_spark_cluster(pytester, tmp_path, monkeypatch):
    """Clusters pytest did not start, locked down as operators run them: the broker's clients log in (SASL/PLAIN
    as user 'gate', from CI secrets), 'gate' may read, write and delete records of two topics an operator made
    and create nothing, and a Spark standalone master with two workers. With --kafka-topics the gate runs there:
    its topics stay, emptied; records written before the gate are not read by it; the secret is in no output or
    file; nothing of the clusters is stopped; each checkpoint is deleted under the shared root."""
    from kafka import KafkaProducer
    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePattern,
        ResourceType,
    )

    broker, password, client, internal = _sasl_broker(tmp_path / "locked-kafka", authorizer=True)
    with broker:
        operator = KafkaCluster(internal, provider="external")  # the super user
        for name in ("gates.in", "gates.out"):
            operator.create_topic(name, partitions=2)
        operator.create_topic("operator-data", partitions=1)  # the cluster's own: the gate must leave it
        gate_user = "User:gate"
        grants = [
            ResourcePattern(ResourceType.TOPIC, name, ACLResourcePatternType.LITERAL)
            for name in ("gates.in", "gates.out")
        ]
        acls = [
            ACL(gate_user, "*", operation, ACLPermissionType.ALLOW, pattern)
            for pattern in grants
            for operation in (
                ACLOperation.READ,
                ACLOperation.WRITE,
                ACLOperation.DESCRIBE,
                ACLOperation.DELETE,
            )
        ]
        # Spark's Kafka source reads in consumer groups of its own naming
        groups = ResourcePattern(ResourceType.GROUP, "spark-kafka-source", ACLResourcePatternType.PREFIXED)
        acls.append(ACL(gate_user, "*", ACLOperation.READ, ACLPermissionType.ALLOW, groups))
        created = operator.admin.create_acls(acls)
        assert not created["failed"], created
        producer = KafkaProducer(bootstrap_servers=[internal])
        for i in range(500):  # written before the gate: not part of its load
            producer.send("gates.in", key=b"old-%d" % i, value=b"{}")
        producer.flush()
        producer.close()
        assert operator.records_in("gates.in") == 500

        # without the existing topics the gate cannot create its own
        locked = KafkaCluster(broker.bootstrap_servers, provider="external", properties=client)
        with pytest.raises(
            TheodoliteSetupError, match=r"refused topic .*--kafka-topics to topics that exist"
        ):
            locked.create_gate_topic("theodolite-x-input", 2)
        locked.close()

        with StandaloneCluster(workers=2, work_dir=tmp_path / "operator-spark") as spark:
            _uc1_gate_logging_in_as_gate(pytester, monkeypatch, password)
            checkpoints = tmp_path / "operator-checkpoints"  # a mount all the cluster's hosts share
            checkpoints.mkdir()
            result = pytester.runpytest_subprocess(
                "-p",
                "no:cacheprovider",
                "--kafka=external",
                f"--kafka-bootstrap={broker.bootstrap_servers}",
                "--kafka-topics=input=gates.in,output=gates.out",
                f"--spark-master={spark.master_url}",
                # the cluster's executors reach the driver here (its workers listen on 127.0.0.1 only)
                f"--spark-driver-host={LOOPBACK}",
                f"--theodolite-checkpoint-root={checkpoints}",
                "--theodolite-max-instances=2",
                "--theodolite-results=results",
                "--junitxml=junit.xml",
            )
            output = result.stdout.str() + result.stderr.str()
            print(output)  # what the user sees (pytest -rP shows it)
            outcomes = result.parseoutcomes()
            assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 1 and "errors" not in outcomes, (
                output
            )
            result.stdout.fnmatch_lines(
                [
                    f"theodolite: kafka=external ({broker.bootstrap_servers}*",
                    f"*instance CPU: unlimited ({spark.master_url}: this cluster manager enforces no CPU share*",
                    "theodolite: cluster: existing topics input=gates.in, output=gates.out (emptied before and "
                    "after*checkpoints under *",
                    "*theodolite: uc1-external load=300 instances=1: *",
                    "uc1-external: *",
                ]
            )
            # the secret is in no output, no results file, no JUnit file
            assert password not in output
            written = [p for p in pytester.path.rglob("*") if p.is_file() and "baselines" not in p.parts]
            assert any(p.name.endswith("_results.json") for p in written), written
            leaked = [str(p) for p in written if password.encode() in p.read_bytes()]
            assert leaked == []
            # nothing of the clusters was stopped or deleted
            assert all(process.alive() for process in spark.processes)
            assert spark.master_state()["aliveworkers"] == 2
        assert broker.process is not None and broker.process.alive()
        recorded = json.loads(next((pytester.path / "results").glob("*_results.json")).read_text())
        for sub in recorded["sub_experiments"]:
            for repetition in sub["repetitions"]:
                counters = repetition["counters"]
                # this repetition's records only: the 500 old ones were deleted before it began
                acknowledged, in_topic = counters["records_acknowledged"], counters["records_in_input_topic"]
                assert 0 < acknowledged <= in_topic < acknowledged + 500, counters
                assert counters["records_total"] <= in_topic, counters
        # each repetition's checkpoint was written under the root, and deleted with its repetition
        assert list(checkpoints.iterdir()) == []
        topics = operator.list_topics()
        assert {"gates.in", "gates.out", "operator-data"} <= topics  # the operator's topics stay ...
        assert not [t for t in topics if t.startswith("theodolite-")], topics  # ... and no other was made
        assert operator.records_in("gates.in") == 0 and operator.records_in("gates.out") == 0  # ... emptied
        operator.close()


def test_the_broker_refuses_clients_without_the_login(sasl_broker):
    """The SASL listener is real: without credentials no metadata comes back."""
    from pytest_theodolite.infra.kafka.admin import wait_for_metadata

    broker, _, _ = sasl_broker
    with pytest.raises(TheodoliteSetupError):
        wait_for_metadata(broker.bootstrap_servers, 5.0)


def _uc1_gate_logging_in_as_gate(pytester, monkeypatch, password: str) -> None:
    """The UC1 gate and its baseline in the test project; the SASL login of user `gate` as a CI secret would
    give it: environment variables, no file."""
    pytester.makepyfile(test_uc1_external=GATE)
    (pytester.path / "baselines").mkdir()
    (pytester.path / "baselines" / "uc1-external.json").write_text(json.dumps(UC1_BASELINE))
    monkeypatch.setenv("THEODOLITE_KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("THEODOLITE_KAFKA_SASL_MECHANISM", "PLAIN")
    monkeypatch.setenv("THEODOLITE_KAFKA_SASL_USERNAME", "gate")
    monkeypatch.setenv("THEODOLITE_KAFKA_SASL_PASSWORD", password)
