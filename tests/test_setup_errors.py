"""Missing or broken parts stop the run with one message that says what to do."""

import socket
import stat
from pathlib import Path

import pytest

from pytest_theodolite.core.errors import TheodoliteSetupError
from pytest_theodolite.engine import services
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.infra import maven
from pytest_theodolite.infra.kafka import embedded
from pytest_theodolite.infra.kafka.embedded import EmbeddedKafka
from pytest_theodolite.infra.ports import free_port


def test_java_missing(monkeypatch, tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TheodoliteSetupError, match=r"Java was not found .* Install a JDK 17 or newer"):
        maven.java_executable()


def test_java_too_old(monkeypatch, tmp_path):
    fake_java = tmp_path / "bin" / "java"
    fake_java.parent.mkdir()
    fake_java.write_text("#!/bin/sh\necho 'openjdk version \"11.0.22\" 2024-01-16' >&2\n")
    fake_java.chmod(fake_java.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(
        TheodoliteSetupError, match=r"is Java 11, but Kafka 4 and Spark 4 need Java 17 or newer"
    ):
        maven.java_executable()


def test_maven_missing(tmp_path):
    with pytest.raises(
        TheodoliteSetupError, match=r"Maven \(`mvn`\) was not found on PATH.*apt-get install maven"
    ):
        maven.resolve(["org.example:anything:1.0"], cache_dir=tmp_path, mvn=str(tmp_path / "no-mvn"))


@pytest.mark.integration
def test_maven_cannot_resolve_names_the_artifact(tmp_path):
    with pytest.raises(TheodoliteSetupError) as error:
        maven.resolve(["org.apache.kafka:kafka_2.13:0.0.0-no-such-version"], cache_dir=tmp_path)
    assert "Maven could not resolve org.apache.kafka:kafka_2.13:0.0.0-no-such-version" in str(error.value)
    assert "Check the versions" in str(error.value)
    assert not list((tmp_path / "jars").glob("*/.complete")), "a failed resolution must not look cached"


def test_malformed_coordinate(tmp_path):
    with pytest.raises(TheodoliteSetupError, match="not of the form group:artifact:version"):
        maven.resolve(["kafka"], cache_dir=tmp_path)


def test_port_already_taken():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(
            TheodoliteSetupError,
            match=rf"Port {port} on 127.0.0.1, requested for the embedded "
            r"Kafka broker, is already in use",
        ):
            EmbeddedKafka(port=port).start()


@pytest.mark.integration
def test_broker_that_exits_during_start_shows_its_log(monkeypatch, tmp_path):
    # A port taken between our check and the broker's bind: the real JVM fails and exits.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setattr(
            embedded, "port_or_free", lambda requested, what: port if "broker" in what else free_port()
        )
        broker = EmbeddedKafka(work_dir=tmp_path / "kafka")
        with pytest.raises(TheodoliteSetupError) as error:
            broker.start()
    message = str(error.value)
    assert "The embedded Kafka broker exited during start (exit code" in message
    assert "Last lines of" in message and "broker.log" in message
    assert "Address already in use" in message or "BindException" in message
    assert not broker.process.alive()


def test_unreachable_external_bootstrap():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        settings = TheodoliteSettings(
            kafka_provider="external", kafka_bootstrap=f"127.0.0.1:{port}", kafka_timeout_s=2
        )
        with pytest.raises(
            TheodoliteSetupError, match=rf"No Kafka broker answered at 127.0.0.1:{port} within 2 s"
        ):
            services.shared_kafka(settings, Path("/nonexistent"))  # external: nothing shared, reached


def test_cluster_ids_never_start_with_a_dash(monkeypatch):
    from pytest_theodolite.infra.kafka import embedded as module

    ids = iter([b"\xfb" + bytes(15), bytes(16)])  # the first encodes to "-w..."
    monkeypatch.setattr(module.uuid, "uuid4", lambda: type("U", (), {"bytes": next(ids)})())
    cluster_id = module.new_cluster_id()
    assert not cluster_id.startswith("-") and len(cluster_id) == 22
