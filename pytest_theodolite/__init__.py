"""pytest-theodolite: Theodolite scalability benchmarks as pytest regression gates."""

__version__ = "0.1.0"

KAFKA_VERSION = "4.1.1"
#: what ``--kafka testcontainers`` starts unless ``--kafka-image`` names another: Confluent Platform 8.1 ships
#: Apache Kafka 4.1, the broker version the embedded provider runs
KAFKA_IMAGE = "confluentinc/cp-kafka:8.1.0"
