"""One set of SSL settings -- PEM files, as librdkafka names them -- against a real broker that speaks only mutual
TLS on its client listener: the admin client and the lag sampler (kafka-python), the load generator (librdkafka)
and Spark's Kafka connector on an executor (Java) each reach it from the same properties, translated by
infra/kafka/client_properties.py. The client's key is encrypted, so its password reaches all three too: with
PBES1 (PBE-SHA1-3DES), because Java 17's PEM store cannot decrypt PBES2, OpenSSL's default (see
docs/kafka-providers.md)."""

import datetime
import ipaddress
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from pytest_theodolite.core.errors import TheodoliteSetupError
from pytest_theodolite.infra.kafka.admin import KafkaCluster, wait_for_metadata
from pytest_theodolite.infra.kafka.embedded import EmbeddedKafka
from pytest_theodolite.infra.ports import LOOPBACK, free_port
from theodolite_generator import LoadGenerator, Workload

pytestmark = pytest.mark.integration

KEY_PASSWORD = "client-key-pw"


def _certificates(folder: Path) -> dict[str, Path]:
    """A CA, the broker's certificate (for 127.0.0.1, so that the host-name check holds) and a client's: each
    key and certificate in one PEM file, the client's key encrypted as docs/kafka-providers.md says (PKCS#8,
    PBES1: `openssl pkcs8 -topk8 -v1 PBE-SHA1-3DES`)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def issue(name, key, issuer_name, issuer_key, *, ca=False, ip=None):
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(issuer_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if ip:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.IPAddress(ipaddress.ip_address(ip)), x509.DNSName("localhost")]
                ),
                critical=False,
            )
        return builder.sign(issuer_key, hashes.SHA256())

    def new_key():
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def pem(certificate) -> bytes:
        return certificate.public_bytes(serialization.Encoding.PEM)

    ca_key = new_key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "theodolite test CA")])
    ca = issue("theodolite test CA", ca_key, ca_name, ca_key, ca=True)
    server_key, client_key = new_key(), new_key()
    server = issue(LOOPBACK, server_key, ca_name, ca_key, ip=LOOPBACK)
    client = issue("gate", client_key, ca_name, ca_key)

    def pkcs8(key) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    encrypted_client_key = subprocess.run(
        ["openssl", "pkcs8", "-topk8", "-v1", "PBE-SHA1-3DES", "-passout", f"pass:{KEY_PASSWORD}"],
        input=pkcs8(client_key),
        capture_output=True,
        check=True,
    ).stdout
    files = {
        "ca": pem(ca),
        "server": pkcs8(server_key) + pem(server),
        "client": encrypted_client_key + pem(client),
    }
    paths = {}
    for name, content in files.items():
        paths[name] = folder / f"{name}.pem"
        paths[name].write_bytes(content)
    return paths


@pytest.fixture
def tls_broker(tmp_path):
    """A broker whose client listener is SSL with client authentication required; its own inter-broker and
    controller listeners are plaintext. Yields the broker, the client's properties and the CA file."""
    pems = _certificates(tmp_path)
    port, internal, controller = free_port(), free_port(), free_port()
    client = {
        "security.protocol": "SSL",
        "ssl.ca.location": str(pems["ca"]),
        "ssl.certificate.location": str(pems["client"]),
        "ssl.key.location": str(pems["client"]),
        "ssl.key.password": KEY_PASSWORD,
    }
    broker = EmbeddedKafka(
        port=port,
        controller_port=controller,
        work_dir=tmp_path / "tls-kafka",
        server_properties={
            "listeners": f"SSL://{LOOPBACK}:{port},INTERNAL://{LOOPBACK}:{internal},"
            f"CONTROLLER://{LOOPBACK}:{controller}",
            "advertised.listeners": f"SSL://{LOOPBACK}:{port},INTERNAL://{LOOPBACK}:{internal}",
            "listener.security.protocol.map": "SSL:SSL,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pems["server"]),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pems["ca"]),
            "ssl.client.auth": "required",
        },
        client_properties=client,  # its readiness is a metadata round trip over mutual TLS (kafka-python)
    )
    with broker:
        yield broker, client, pems["ca"]


def test_one_set_of_pem_settings_reaches_a_mutual_tls_broker_from_all_three_clients(
    tls_broker, spark_cluster
):
    broker, client, ca = tls_broker
    # without the client's certificate the broker refuses: the listener really asks for one
    with pytest.raises(TheodoliteSetupError, match="No Kafka broker answered"):
        wait_for_metadata(
            broker.bootstrap_servers, 5.0, {"security.protocol": "SSL", "ssl.ca.location": str(ca)}
        )

    cluster = KafkaCluster(broker.bootstrap_servers, provider="external", properties=client)
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    try:
        cluster.create_topic(topic, partitions=2)  # kafka-python
        workload = Workload(keys=400, period_ms=1000, value_seed=5)
        # librdkafka, from the properties as the engine hands them on
        with LoadGenerator(
            broker.bootstrap_servers, topic, workload, processes=1, client_config=client
        ) as load:
            time.sleep(3.0)
        totals = load.totals
        assert load.worker_failures == {} and totals.failed == 0
        assert totals.acknowledged >= 400
        assert cluster.total_end_offset(topic) == totals.acknowledged  # kafka-python reads the offsets
        # Java: Spark's Kafka connector, on the driver (offsets) and an executor (the records)
        with spark_cluster.session(instances=1, app_name="theodolite-tls") as spark:
            read = (
                spark.read.format("kafka")
                .options(**cluster.spark_options())
                .option("subscribe", topic)
                .option("startingOffsets", "earliest")
                .load()
            )
            assert read.count() == totals.acknowledged
    finally:
        cluster.close()
