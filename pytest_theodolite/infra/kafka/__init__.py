"""Kafka providers: an embedded broker (default), a testcontainers container, or an external cluster."""

from pytest_theodolite.infra.kafka.admin import KafkaCluster

__all__ = ["KafkaCluster"]
