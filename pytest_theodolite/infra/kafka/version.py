"""The Apache Kafka release the embedded broker and the built image run (KRaft, no ZooKeeper)."""

KAFKA_VERSION = "4.1.1"
