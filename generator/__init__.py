"""Theodolite's load generator for Kafka, standalone (no pytest, no plugin imports).

``Workload`` says what to send (keys, period, value seed, UC4 hierarchy); ``LoadGenerator`` sends it from
several processes with confluent-kafka and measures the achieved rate; ``python -m theodolite_generator`` is the
command line. Bad parameters raise ``WorkloadError`` (a ``ValueError``) before anything is produced.
"""

from theodolite_generator.kafka_client import (
    DEFAULT_PRODUCER_CONFIG,
    check_topics,
    librdkafka_config,
    publish_sensor_registry,
)
from theodolite_generator.producer import MEASURED_RATE_PER_PROCESS, LoadGenerator, RateSample, RateSummary
from theodolite_generator.records import (
    SPARK_SCHEMA_DDL,
    ActivePowerRecord,
    ValueTable,
    encode_record,
    key_of,
)
from theodolite_generator.worker import WorkerTotals
from theodolite_generator.workload import (
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
