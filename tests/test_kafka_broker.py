"""The kafka_cluster fixture against the real embedded broker."""

import pytest
from kafka import KafkaConsumer, KafkaProducer

pytestmark = pytest.mark.integration

RECORDS = 100_000


def test_100k_records_round_trip_through_a_4_partition_topic(kafka_cluster):
    kafka_cluster.create_topic("roundtrip", partitions=4)
    assert kafka_cluster.partition_count("roundtrip") == 4
    producer = KafkaProducer(**kafka_cluster.client_kwargs(), linger_ms=20, batch_size=256 * 1024, acks=1)
    for i in range(RECORDS):
        producer.send("roundtrip", key=b"s_%d" % (i % 1000), value=b"%d" % i)
    producer.flush()
    producer.close()

    offsets = kafka_cluster.end_offsets("roundtrip")
    assert set(offsets) == {0, 1, 2, 3}
    assert sum(offsets.values()) == RECORDS
    assert all(count > 0 for count in offsets.values()), "keys must spread over every partition"

    consumer = KafkaConsumer(
        "roundtrip",
        **kafka_cluster.client_kwargs(),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=10_000,
        max_poll_records=10_000,
    )
    values = set()
    for message in consumer:
        values.add(int(message.value))
        if len(values) == RECORDS:
            break
    consumer.close()
    assert values == set(range(RECORDS))
    kafka_cluster.delete_topic("roundtrip")
    assert "roundtrip" not in kafka_cluster.list_topics()


def test_end_offsets_of_a_missing_topic_is_an_error(kafka_cluster):
    from kafka.errors import UnknownTopicOrPartitionError

    with pytest.raises(UnknownTopicOrPartitionError, match="does-not-exist"):
        kafka_cluster.end_offsets("does-not-exist")


def test_embedded_broker_binds_loopback_only(kafka_cluster):
    assert kafka_cluster.bootstrap_servers.startswith("127.0.0.1:")
    broker = getattr(kafka_cluster, "broker", None)
    if broker is None:
        pytest.skip("the broker was not started by this process (xdist or another provider)")
    properties = (broker.work_dir / "server.properties").read_text()
    assert "listeners=PLAINTEXT://127.0.0.1:" in properties
    assert "advertised.listeners=PLAINTEXT://127.0.0.1:" in properties
    assert "0.0.0.0" not in properties
