"""The generator's Kafka clients: librdkafka settings from Java-style client properties, the topics checked
before producing, and UC4's sensor registry published."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from theodolite_generator.workload import SENSOR_REGISTRY_EVENT_KEY, Workload, WorkloadError

LOG = logging.getLogger("generator")
LOG.addHandler(logging.NullHandler())  # a library: the host application decides whether librdkafka logs show

DEFAULT_PRODUCER_CONFIG: dict[str, Any] = {
    "linger.ms": 5,
    "batch.size": 1_048_576,
    "batch.num.messages": 10_000,
    "compression.type": "none",
    "acks": "all",
    "partitioner": "murmur2_random",
    "queue.buffering.max.messages": 2_000_000,  # headroom so a short broker stall does not raise BufferError
    "queue.buffering.max.kbytes": 1_048_576,
    "delivery.report.only.error": True,
}


# kafka-python keyword names (what ``KafkaCluster.client_kwargs()`` returns) -> librdkafka property names
_KAFKA_PYTHON_NAMES = {
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "sasl_kerberos_service_name": "sasl.kerberos.service.name",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "ssl_password": "ssl.key.password",
    "ssl_crlfile": "ssl.crl.location",
    "ssl_check_hostname": "ssl.endpoint.identification.algorithm",
    "client_id": "client.id",
}


_JAAS_FIELD = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')  # JAAS quoting: \" and \\


def librdkafka_config(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """Client settings as librdkafka properties: dotted names pass through, kafka-python names are mapped.

    So both ``{"security.protocol": "SASL_SSL", ...}`` and a ``kafka_cluster.client_kwargs()`` dict work.
    ``bootstrap_servers`` is dropped (the generator sets its own).
    """
    config: dict[str, Any] = {}
    for name, value in (settings or {}).items():
        if name in ("bootstrap_servers", "bootstrap.servers"):
            continue
        if name == "sasl.jaas.config":  # a Java client's form: librdkafka takes the user and password
            for field_name, field_value in _JAAS_FIELD.findall(str(value)):
                config.setdefault(f"sasl.{field_name}", re.sub(r"\\(.)", r"\1", field_value))
            continue
        if name == "ssl.endpoint.identification.algorithm" and value == "":  # Java's word for no check
            config[name] = "none"
        elif "." in name:
            config[name] = value
        elif name in _KAFKA_PYTHON_NAMES:
            target = _KAFKA_PYTHON_NAMES[name]
            if name == "ssl_check_hostname":
                value = "https" if value else "none"
            config[target] = value
        else:
            raise WorkloadError(
                f"unknown client setting {name!r}: use librdkafka property names (e.g. 'security.protocol', "
                f"'sasl.username') or the kafka-python names {sorted(_KAFKA_PYTHON_NAMES)}"
            )
    return config


def _admin_config(producer_config: Mapping[str, Any]) -> dict[str, Any]:
    # producer-only properties would make the AdminClient warn; keep the connection and security ones
    producer_only = set(DEFAULT_PRODUCER_CONFIG)
    return {k: v for k, v in producer_config.items() if k not in producer_only} | {"logger": LOG}


def redact_config_secrets(text: str, config: Mapping[str, Any]) -> str:
    """An error text without any configured value that could be a secret (all but the bootstrap address)."""
    for name, value in config.items():
        if name != "bootstrap.servers" and isinstance(value, str) and len(value) >= 3:
            text = text.replace(value, "***")
    return text


def check_topics(
    producer_config: Mapping[str, Any], topics: list[str], bootstrap_servers: str, timeout_s: float
) -> None:
    """Refuse (``WorkloadError``) when no broker answers or a topic is missing -- before producing."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    try:
        admin = AdminClient(_admin_config(producer_config))
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        reason = redact_config_secrets(str(exc.args[0]) if exc.args else repr(exc), producer_config)
        raise WorkloadError(
            f"no Kafka broker answered at {bootstrap_servers} within {timeout_s:.0f} s "
            f"({reason}); check the address, "
            "that the broker runs, and the client security settings"
        ) from None
    for topic in topics:
        described = metadata.topics.get(topic)
        if described is None or described.error is not None:
            raise WorkloadError(
                f"topic {topic!r} does not exist at {bootstrap_servers}; create it first (e.g. "
                "kafka_cluster.create_topic(name, partitions)) -- the generator never auto-creates topics"
            )


def publish_sensor_registry(
    producer_config: Mapping[str, Any], config_topic: str, workload: Workload, timeout_s: float
) -> None:
    """Send the UC4 sensor registry JSON to ``config_topic`` and wait for the broker's acknowledgement."""
    from confluent_kafka import Producer

    registry_json = workload.sensor_registry().to_json().encode()
    outcome: list[Any] = []
    config = {k: v for k, v in producer_config.items() if k != "delivery.report.only.error"}
    # the registry of a deep hierarchy can exceed the default 1 MB request size
    config["message.max.bytes"] = max(int(config.get("message.max.bytes", 0)), len(registry_json) + 65_536)
    producer = Producer({**config, "logger": LOG})
    producer.produce(
        config_topic,
        registry_json,
        SENSOR_REGISTRY_EVENT_KEY,
        on_delivery=lambda err, _msg: outcome.append(err),
    )
    producer.flush(timeout_s)
    if not outcome or outcome[0] is not None:
        reason = (
            "no acknowledgement" if not outcome else redact_config_secrets(str(outcome[0]), producer_config)
        )
        raise WorkloadError(
            f"the sensor registry ({len(registry_json):,} bytes) could not be published to {config_topic!r}: "
            f"{reason}; check the topic's max.message.bytes and the broker"
        )
