"""Kafka in a container, where a Docker engine answers (testcontainers-python).

The image is the one built here (image.py) unless ``--kafka-image`` names another; all are configured through
the ``KAFKA_*`` environment variables that apache/kafka, confluentinc/cp-kafka and ours read alike. The client
listener is published on 127.0.0.1 only and advertised there: a test never addresses a container by its bridge
address. Brokers talk among themselves (here: to themselves) on a second listener inside the container.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pytest_theodolite.core.errors import TheodoliteSetupError
from pytest_theodolite.infra.kafka.admin import KafkaCluster, wait_for_metadata
from pytest_theodolite.infra.kafka.embedded import READY_LINE, SINGLE_NODE_SETTINGS, new_cluster_id
from pytest_theodolite.infra.kafka.image import broker_environment, ensure_kafka_image
from pytest_theodolite.infra.ports import LOOPBACK, free_port

__all__ = ["docker_engine_problem", "kafka_container", "missing_docker_client", "start_kafka_container"]

CLIENT_PORT = 9092  # inside the container
#: a label on every container this provider starts, so that one left behind is easy to find
LABEL = "pytest-theodolite.kafka"


#: what --kafka testcontainers needs beyond the plugin's own dependencies
DOCKER_EXTRA = "pip install 'pytest-theodolite[docker]'"


def missing_docker_client() -> str | None:
    """The Docker and testcontainers clients' import error, in a sentence with the command that installs them;
    None where both import."""
    try:
        import docker  # noqa: F401
        import testcontainers.core.container  # noqa: F401
    except ImportError as exc:
        return f"--kafka testcontainers needs the {exc.name} package, which is not installed: {DOCKER_EXTRA}"
    return None


def docker_engine_problem() -> str | None:
    """None if a Docker engine answers, else a short reason (never a stack trace)."""
    try:
        import docker

        client = docker.from_env(timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:  # docker raises many types (DockerException, ConnectionError, FileNotFoundError)
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else 'no answer'}"
    return None


def container_environment(host_port: int) -> dict[str, str]:
    """One KRaft node whose client listener is advertised as the port published on 127.0.0.1."""
    return {
        "CLUSTER_ID": new_cluster_id(),
        **broker_environment(
            {
                "node.id": "1",
                "process.roles": "broker,controller",
                "listeners": f"PLAINTEXT://:{CLIENT_PORT},BROKER://:9094,CONTROLLER://:9093",
                "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{host_port},BROKER://localhost:9094",
                "inter.broker.listener.name": "BROKER",
                "controller.listener.names": "CONTROLLER",
                "controller.quorum.voters": "1@localhost:9093",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT",
                **SINGLE_NODE_SETTINGS,
            }
        ),
    }


def _ensure_pulled(client: Any, image: str) -> None:
    import docker.errors

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        try:
            client.images.pull(image)
        except docker.errors.APIError as exc:
            raise TheodoliteSetupError(
                f"The Kafka image {image} is not here and cannot be pulled ({exc.explanation or exc}). "
                "Build or load it, or leave --kafka-image unset to run the image this plugin builds here."
            ) from exc


def _use_reaper_if_available(client: Any) -> str | None:
    """testcontainers removes a session's containers through its Ryuk container, even after a SIGKILL. Where
    Ryuk's image is neither here nor pullable (no registry), turn Ryuk off and say so: the containers are then
    removed by the session's own teardown, which Ctrl-C and SIGTERM reach, but SIGKILL does not."""
    import docker.errors
    from testcontainers.core.config import testcontainers_config

    if testcontainers_config.ryuk_disabled:
        return None
    image = testcontainers_config.ryuk_image
    try:
        client.images.get(image)
        return None
    except docker.errors.ImageNotFound:
        pass
    try:
        client.images.pull(image)
        return None
    except docker.errors.APIError as exc:
        testcontainers_config.ryuk_disabled = True
        return (
            f"testcontainers' reaper image {image} cannot be pulled ({exc.explanation or exc}); Ryuk is off"
        )


def _stderr(message: str) -> None:
    print(f"pytest-theodolite: {message}", file=sys.stderr, flush=True)


def start_kafka_container(
    image: str | None,
    cache_dir: Path | None = None,
    start_timeout_s: float = 120.0,
    progress: Callable[[str], None] = _stderr,
) -> tuple[Any, str]:
    """Start a broker container; return the testcontainers container and its bootstrap address.

    ``image`` None builds (once) and runs the image of this package (image.py)."""
    if (missing := missing_docker_client()) is not None:
        raise TheodoliteSetupError(missing)
    problem = docker_engine_problem()
    if problem is not None:
        raise TheodoliteSetupError(
            f"--kafka testcontainers needs a Docker engine, and none answers here ({problem}). "
            "Start one (e.g. `dockerd &`), or use `--kafka embedded` to run a Kafka broker without Docker."
        )
    import docker
    import docker.errors
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import LogMessageWaitStrategy

    client = docker.from_env()
    try:
        if image is None:
            image = ensure_kafka_image(client, cache_dir, progress=progress).tag
        else:
            _ensure_pulled(client, image)
        note = _use_reaper_if_available(client)
        if note:
            progress(note)
    finally:
        client.close()

    host_port = free_port()
    container = DockerContainer(image).with_kwargs(labels={LABEL: "broker"})
    for name, value in container_environment(host_port).items():
        container.with_env(name, value)
    # Published on loopback only: with_bind_ports binds every address; docker-py takes (address, port), which
    # testcontainers passes through though its annotation says int.
    container.ports[f"{CLIENT_PORT}/tcp"] = (LOOPBACK, host_port)  # type: ignore[assignment]
    container.waiting_for(LogMessageWaitStrategy(READY_LINE).with_startup_timeout(int(start_timeout_s)))
    try:
        container.start()
    except BaseException as exc:  # Ctrl-C while it starts, too: the container must not outlive the session
        logs = _log_tail(container) if isinstance(exc, Exception) else ""
        container.stop()
        if not isinstance(exc, Exception):
            raise
        raise TheodoliteSetupError(
            f"The Kafka container ({image}) did not start: {type(exc).__name__}: {str(exc)[:300]}\n{logs}"
        ) from exc
    bootstrap = f"{LOOPBACK}:{host_port}"
    try:
        wait_for_metadata(bootstrap, start_timeout_s)  # a metadata round trip through the published port
    except BaseException:
        container.stop()
        raise
    return container, bootstrap


def _log_tail(container: Any, lines: int = 25) -> str:
    try:
        out, err = container.get_logs()
        return "\n".join((out + err).decode(errors="replace").splitlines()[-lines:])
    except Exception:  # no container, or it is gone
        return ""


@contextmanager
def kafka_container(
    image: str | None = None, cache_dir: Path | None = None, start_timeout_s: float = 120.0
) -> Iterator[KafkaCluster]:
    container, bootstrap = start_kafka_container(image, cache_dir, start_timeout_s)
    try:
        cluster = KafkaCluster(bootstrap, provider="testcontainers")
        try:
            yield cluster
        finally:
            cluster.close()
    finally:
        container.stop()


def remove_container(container_id: str) -> None:
    """Remove a container started by another process (the xdist worker that started the shared broker)."""
    import docker
    import docker.errors

    client = docker.from_env()
    try:
        client.containers.get(container_id).remove(force=True, v=True)
    except docker.errors.NotFound:
        pass  # already gone (Ryuk, or a user)
    finally:
        client.close()
