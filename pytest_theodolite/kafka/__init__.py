"""Kafka providers: an embedded broker (default), a testcontainers container, or an external cluster."""

from pytest_theodolite.kafka.admin import KafkaCluster

__all__ = ["KafkaCluster"]
