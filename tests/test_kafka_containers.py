"""The testcontainers provider: where a Docker engine answers, the same ``kafka_cluster`` surface as the
embedded broker from a configurable image; where none answers, these tests skip and say why."""

import os

import pytest

from pytest_theodolite import KAFKA_IMAGE
from pytest_theodolite.kafka.containers import docker_engine_problem
from pytest_theodolite.settings import build

PROBLEM = docker_engine_problem()
IMAGE = os.environ.get("THEODOLITE_TEST_KAFKA_IMAGE", KAFKA_IMAGE)


def test_the_image_is_configurable_and_its_default_documented():
    assert build(lambda flag: None, [], environ={}).kafka_image == KAFKA_IMAGE
    chosen = build(lambda flag: "apache/kafka:4.1.1" if flag == "--kafka-image" else None, [], environ={})
    assert chosen.kafka_image == "apache/kafka:4.1.1"


@pytest.mark.integration
@pytest.mark.skipif(
    PROBLEM is not None,
    reason=f"no Docker engine answers here ({PROBLEM}): the testcontainers provider cannot start {IMAGE}",
)
def test_the_container_gives_the_kafka_cluster_surface_of_the_embedded_broker(pytester):
    pytester.makepyfile(
        """
        from kafka import KafkaConsumer, KafkaProducer

        def test_round_trip(kafka_cluster):
            assert kafka_cluster.provider == "testcontainers"
            kafka_cluster.create_topic("round-trip", partitions=2)
            producer = KafkaProducer(**kafka_cluster.client_kwargs())
            for n in range(1000):
                producer.send("round-trip", key=b"k%d" % (n % 10), value=b"%d" % n)
            producer.flush()
            producer.close()
            assert kafka_cluster.total_end_offset("round-trip") == 1000
            consumer = KafkaConsumer("round-trip", **kafka_cluster.client_kwargs(),
                                     auto_offset_reset="earliest", consumer_timeout_ms=10_000)
            assert sorted(int(m.value) for m in consumer) == list(range(1000))
            consumer.close()
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--kafka=testcontainers", f"--kafka-image={IMAGE}"
    )
    result.assert_outcomes(passed=1)
