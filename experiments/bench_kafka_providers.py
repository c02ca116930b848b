"""The Kafka image build (cold and cached), container start to "ready", and a 100 000-record
round trip through the container side by side with the embedded broker.

    python experiments/bench_kafka_providers.py [--cold] [--repeats 3]

--cold removes this package's images first, so the build starts from debootstrap. Start and round trip
alternate between the providers (embedded, container, embedded, ...) so that the host's noise falls on both.
Needs a Docker engine and root (debootstrap).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import docker
from kafka import KafkaConsumer, KafkaProducer

from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.kafka.containers import start_kafka_container
from pytest_theodolite.infra.kafka.embedded import EmbeddedKafka
from pytest_theodolite.infra.kafka.image import BASE_REPOSITORY, KAFKA_REPOSITORY, ensure_kafka_image

RECORDS = 100_000


@contextmanager
def embedded() -> Iterator[str]:
    with EmbeddedKafka() as broker:
        yield broker.bootstrap_servers


@contextmanager
def container() -> Iterator[str]:
    started, bootstrap = start_kafka_container(None, progress=lambda message: None)
    try:
        yield bootstrap
    finally:
        started.stop()


PROVIDERS: dict[str, Callable[[], AbstractContextManager[str]]] = {
    "embedded": embedded,
    "container": container,
}


def round_trip(bootstrap: str) -> tuple[float, float]:
    """Records/s produced (acks=1, flushed) and consumed, through a 4-partition topic."""
    cluster = KafkaCluster(bootstrap, provider="bench")
    try:
        cluster.create_topic("roundtrip", partitions=4)
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=256 * 1024, acks=1)
        started = time.perf_counter()
        for i in range(RECORDS):
            producer.send("roundtrip", key=b"s_%d" % (i % 1000), value=b"%d" % i)
        producer.flush()
        produce_s = time.perf_counter() - started
        producer.close()
        consumer = KafkaConsumer(
            "roundtrip",
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=10_000,
            max_poll_records=10_000,
        )
        started = time.perf_counter()
        seen = 0
        for _ in consumer:
            seen += 1
            if seen == RECORDS:
                break
        consume_s = time.perf_counter() - started
        consumer.close()
        assert seen == RECORDS, f"{seen} of {RECORDS} records came back"
        cluster.delete_topic("roundtrip")
    finally:
        cluster.close()
    return RECORDS / produce_s, RECORDS / consume_s


def image_builds(cold: bool) -> None:
    client = docker.from_env()
    try:
        if cold:
            for image in client.images.list():
                if any(tag.startswith((KAFKA_REPOSITORY, BASE_REPOSITORY)) for tag in image.tags):
                    client.images.remove(image.id, force=True)
        first = ensure_kafka_image(client)
        started = time.perf_counter()
        ensure_kafka_image(client)
        cached_s = time.perf_counter() - started
    finally:
        client.close()
    print("## Kafka image", first.tag)
    if first.cached:
        print("first call: cached (run with --cold to time a build)")
    else:
        print(
            f"build: base (debootstrap + import) {first.base_seconds:.1f} s, Kafka layer {first.kafka_seconds:.1f} s"
        )
    print(f"cached: {cached_s:.2f} s\n")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cold", action="store_true", help="remove this package's images first")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    image_builds(args.cold)
    starts: dict[str, list[float]] = {name: [] for name in PROVIDERS}
    produced: dict[str, list[float]] = {name: [] for name in PROVIDERS}
    consumed: dict[str, list[float]] = {name: [] for name in PROVIDERS}
    for _ in range(args.repeats):
        for name, provider in PROVIDERS.items():
            started = time.perf_counter()
            with provider() as bootstrap:
                starts[name].append(time.perf_counter() - started)
                produce, consume = round_trip(bootstrap)
            produced[name].append(produce)
            consumed[name].append(consume)
    print(f"## Start to ready and a {RECORDS:,}-record round trip (median of {args.repeats}, alternating)")
    print("| provider | start to ready | produced records/s | consumed records/s |")
    print("|---|---|---|---|")
    for name in PROVIDERS:
        print(
            f"| {name} | {statistics.median(starts[name]):.1f} s | {statistics.median(produced[name]):,.0f} "
            f"| {statistics.median(consumed[name]):,.0f} |"
        )
    ratio = statistics.median(produced["container"]) / statistics.median(produced["embedded"])
    print(f"\ncontainer / embedded, produced records/s: {ratio:.2f}")


if __name__ == "__main__":
    main()
