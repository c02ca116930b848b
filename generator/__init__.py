"""Theodolite's load generator for Kafka, standalone (no pytest, no plugin imports).

``Workload`` says what to send (keys, period, value seed, UC4 hierarchy); ``LoadGenerator`` sends it from
several processes with confluent-kafka and measures the achieved rate; ``python -m generator`` is the
command line. Bad parameters raise ``WorkloadError`` (a ``ValueError``) before anything is produced.
"""

from generator.kafka_client import (
    DEFAULT_PRODUCER_CONFIG,
    check_topics,
    librdkafka_config,
    publish_sensor_registry,
)
from generator.producer import MEASURED_RATE_PER_PROCESS, LoadGenerator, RateSample, RateSummary
from generator.records import SPARK_SCHEMA_DDL, ActivePowerRecord, ValueTable, encode_record, key_of
from generator.worker import WorkerTotals
from generator.workload import (
    Hierarchy,
    KeySchedule,
    MachineSensor,
    SensorGroup,
    Workload,
    WorkloadError,
    build_sensor_registry,
)

__all__ = [
    "DEFAULT_PRODUCER_CONFIG",
    "MEASURED_RATE_PER_PROCESS",
    "SPARK_SCHEMA_DDL",
    "ActivePowerRecord",
    "Hierarchy",
    "KeySchedule",
    "LoadGenerator",
    "MachineSensor",
    "RateSample",
    "RateSummary",
    "SensorGroup",
    "ValueTable",
    "WorkerTotals",
    "Workload",
    "WorkloadError",
    "build_sensor_registry",
    "check_topics",
    "encode_record",
    "key_of",
    "librdkafka_config",
    "publish_sensor_registry",
]
