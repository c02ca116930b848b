"""Kafka in a container, where a Docker engine answers (testcontainers-python)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pytest_theodolite import KAFKA_IMAGE
from pytest_theodolite.errors import TheodoliteSetupError
from pytest_theodolite.kafka.admin import KafkaCluster

__all__ = ["KAFKA_IMAGE", "docker_engine_problem", "kafka_container"]


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


@contextmanager
def kafka_container(image: str = KAFKA_IMAGE) -> Iterator[KafkaCluster]:
    problem = docker_engine_problem()
    if problem is not None:
        raise TheodoliteSetupError(
            f"--kafka testcontainers needs a Docker engine to run {image}, and none answers here ({problem}). "
            "Use `--kafka embedded` to run a Kafka broker without Docker."
        )
    try:
        from testcontainers.community.kafka import KafkaContainer
    except ImportError:  # testcontainers < 4.9 kept it at the top level
        from testcontainers.kafka import KafkaContainer

    with KafkaContainer(image).with_kraft() as container:
        cluster = KafkaCluster(container.get_bootstrap_server(), provider="testcontainers")
        try:
            yield cluster
        finally:
            cluster.close()
