"""Kafka providers: an embedded broker (default), a testcontainers container, or an external cluster."""

import warnings


def _import_kafka_python_quietly() -> None:
    """kafka-python 3.0 loads its protocol schemas with importlib.resources' legacy API as it is imported:
    imported first here, before any module of this package imports it, with those warnings silenced, so that
    no project that loads the plugin gets two hundred warnings about code that is not its own."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
        import kafka  # noqa: F401


_import_kafka_python_quietly()

from pytest_theodolite.infra.kafka.admin import KafkaCluster  # noqa: E402

__all__ = ["KafkaCluster"]
