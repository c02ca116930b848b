"""Benchmark of the load generator against the embedded broker: rate accuracy, throughput per core next to
Kafka's own ProducerPerformance, and the largest load the whole generator sustains on this machine.

    THEODOLITE_CACHE_DIR=/tmp/tcache python experiments/bench_generator.py [--duration-s 60]
    python experiments/bench_generator.py --only-per-core   # the per-core table alone, every record kind
    python experiments/bench_generator.py --only-rate-accuracy --loads 1000,4000,12000,20000 --duration-s 20

Record kinds in the per-core table: Theodolite's built-in records, a ``JsonTemplate`` and an ``AvroTemplate`` of
a click event, and a ``Replay`` of a 1 000-row JSON-lines sample (generator/factories.py).

All figures of one run come from the same broker, side by side; on a shared machine compare the ratios, not
the absolute numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from pytest_theodolite.infra import maven
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.kafka.embedded import EmbeddedKafka
from theodolite_generator import MEASURED_RATE_PER_PROCESS, LoadGenerator, Workload, encode_record
from theodolite_generator.factories import (
    EVENT_TIME,
    KEY,
    AvroTemplate,
    Choice,
    IntRange,
    JsonTemplate,
    Replay,
    Uniform,
)

PRODUCER_PERFORMANCE_JARS = [
    "org.apache.kafka:kafka-tools:4.1.1",
    "org.apache.logging.log4j:log4j-core:2.24.3",
    "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3",
]
PARTITIONS = 4
UNLIMITED = 1e12  # lifts the generator's own capacity refusal: here we measure that capacity


@dataclass(frozen=True)
class RunResult:
    target: float
    processes: int
    rates: list[float]  # achieved records/s per second after the skipped start
    acknowledged: int
    written: int  # growth of the topic's end offsets
    cpu_s: float  # user + system CPU of the worker processes during the measured seconds
    measured_records: float
    measured_s: float  # wall-clock span of cpu_s

    @property
    def within_2_percent(self) -> int:
        return sum(1 for r in self.rates if abs(r - self.target) <= 0.02 * self.target)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.rates) if self.rates else 0.0

    @property
    def sustained(self) -> bool:
        return bool(self.rates) and self.within_2_percent == len(self.rates)

    @property
    def cpu_us_per_record(self) -> float:
        return self.cpu_s / self.measured_records * 1e6 if self.measured_records else float("nan")

    @property
    def cores(self) -> float:  # CPU the generator took from the machine it shares with the job under test
        return self.cpu_s / self.measured_s if self.measured_s else float("nan")


class UncheckedLoadGenerator(LoadGenerator):
    """Without the capacity refusal (also a record factory's): here we measure that capacity."""

    @property
    def rate_per_process(self) -> float:  # type: ignore[override]
        return UNLIMITED


def _cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def run_generator(
    cluster: KafkaCluster,
    topic: str,
    workload: Workload,
    duration_s: float,
    skip_s: int,
    processes: int | None = None,
    max_rate_per_process: float = UNLIMITED,
) -> RunResult:
    cluster.delete_topic(topic)
    cluster.create_topic(topic, PARTITIONS)
    with (UncheckedLoadGenerator if max_rate_per_process == UNLIMITED else LoadGenerator)(
        cluster.bootstrap_servers,
        topic,
        workload,
        processes=processes,
        max_rate_per_process=max_rate_per_process,
    ) as generator:
        pids = generator.worker_pids
        time.sleep(skip_s)
        cpu_before, wall_before = _cpu_seconds(pids), time.time()
        time.sleep(duration_s - skip_s)
        cpu_after, wall_after = _cpu_seconds(pids), time.time()
    samples = [s for s in generator.achieved_rates() if s.epoch_s >= generator.started_at + skip_s]
    rates = [s.records_per_s for s in samples]
    # records sent while the CPU was measured: the mean achieved rate times that span
    measured = (statistics.fmean(rates) if rates else 0.0) * (wall_after - wall_before)
    return RunResult(
        workload.target_rate,
        generator.process_count,
        rates,
        generator.totals.acknowledged,
        cluster.total_end_offset(topic),
        cpu_after - cpu_before,
        measured,
        wall_after - wall_before,
    )


def run_producer_performance(
    bootstrap: str, topic: str, records: int, record_size: int
) -> tuple[float, float]:
    """(records/s, CPU-µs per record) of Kafka's ProducerPerformance with the generator's producer settings."""
    jars = maven.resolve(PRODUCER_PERFORMANCE_JARS)
    command = [
        maven.java_executable(),
        "-Xmx512m",
        "-cp",
        ":".join(map(str, jars)),
        "org.apache.kafka.tools.ProducerPerformance",
        "--topic",
        topic,
        "--num-records",
        str(records),
        "--record-size",
        str(record_size),
        "--throughput",
        "-1",
        "--producer-props",
        f"bootstrap.servers={bootstrap}",
        "acks=all",
        "linger.ms=5",
        "batch.size=1048576",
        "compression.type=none",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output = process.stdout.read() if process.stdout else ""
        _, status, usage = os.wait4(process.pid, 0)  # rusage of exactly this JVM: all its threads
        process.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if process.returncode is None:
            process.kill()
            process.wait()
    summary = [line for line in output.splitlines() if f"{records} records sent" in line]
    if process.returncode != 0 or not summary:
        raise RuntimeError(f"ProducerPerformance failed:\n{output[-2000:]}")
    rate = float(re.search(r"records sent, ([\d.]+) records/sec", summary[-1]).group(1))
    return rate, (usage.ru_utime + usage.ru_stime) / records * 1e6


SAMPLE_ROWS = 1_000


#: a click event, the same five fields for the JSON and the Avro template
CLICK_FIELDS = {
    "user": KEY,
    "page": Choice(["/", "/cart", "/buy", "/search"]),
    "ms": IntRange(5, 900),
    "price": Uniform(1, 99),
    "ts": EVENT_TIME,
}
CLICK_SCHEMA = {
    "type": "record",
    "name": "Click",
    "fields": [
        {"name": "user", "type": "string"},
        {"name": "page", "type": "string"},
        {"name": "ms", "type": "int"},
        {"name": "price", "type": "double"},
        {"name": "ts", "type": "long"},
    ],
}


def record_kinds(directory: Path) -> dict[str, object]:
    """The record kinds compared per core: built-in, a click-event template as JSON and as Avro, a replayed
    JSON-lines sample (written into `directory`)."""
    sample = directory / "orders.jsonl"
    sample.write_text(
        "".join(
            json.dumps(
                {"order": n, "customer": f"c-{n % 97}", "at": "2020-01-01T00:00:00", "total": n * 0.37}
            )
            + "\n"
            for n in range(SAMPLE_ROWS)
        )
    )
    return {
        "built-in ActivePowerRecord": None,
        "JsonTemplate (5 fields)": JsonTemplate(CLICK_FIELDS, key_format="user-{key_index}"),
        "AvroTemplate (the same 5 fields)": AvroTemplate(
            CLICK_SCHEMA, CLICK_FIELDS, key_format="user-{key_index}"
        ),
        "Replay of a JSON-lines sample": Replay(str(sample), key_field="customer", time_field="at"),
    }


def acknowledged_text(result) -> str:
    if result.acknowledged == result.written:
        return "yes"
    return f"NO ({result.acknowledged} vs {result.written})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration-s", type=float, default=60.0, help="length of each rate-accuracy run")
    parser.add_argument("--skip-s", type=int, default=5, help="start seconds left out of every figure")
    parser.add_argument("--loads", default="1000,10000,50000", help="rate-accuracy loads, records/s")
    parser.add_argument(
        "--max-search",
        default="200000,300000,400000,500000,600000,700000",
        help="ascending loads tried for the largest sustained load",
    )
    parser.add_argument("--search-duration-s", type=float, default=20.0)
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--only-per-core", action="store_true", help="only the throughput-per-core table")
    only.add_argument(
        "--only-rate-accuracy",
        action="store_true",
        help="only the rate-accuracy table (with the CPU it takes)",
    )
    args = parser.parse_args()
    cpus = os.cpu_count() or 1

    with EmbeddedKafka() as broker, tempfile.TemporaryDirectory(prefix="bench-generator-") as scratch:
        cluster = KafkaCluster(broker.bootstrap_servers)
        print(
            f"broker {broker.bootstrap_servers}, {cpus} CPUs, topics with {PARTITIONS} partitions", flush=True
        )

        if not args.only_per_core:
            print(f"\n## Rate accuracy ({args.duration_s:.0f} s per load, first {args.skip_s} s skipped)")
            print(
                "| target rec/s | processes | mean rec/s | min | max | seconds within ±2 % | acked = log growth "
                "| generator CPU, cores | CPU-µs/record |"
            )
            print("|---:|---:|---:|---:|---:|---:|:---:|---:|---:|")
            for load in (int(x) for x in args.loads.split(",")):
                # as users get it: default process count and capacity check
                result = run_generator(
                    cluster,
                    "bench-rate",
                    Workload(keys=load),
                    args.duration_s,
                    args.skip_s,
                    max_rate_per_process=MEASURED_RATE_PER_PROCESS,
                )
                print(
                    f"| {load:,} | {result.processes} | {result.mean:,.0f} | {min(result.rates):,.0f} | "
                    f"{max(result.rates):,.0f} | {result.within_2_percent}/{len(result.rates)} | "
                    f"{acknowledged_text(result)} | {result.cores:.3f} | {result.cpu_us_per_record:.1f} |",
                    flush=True,
                )

        if args.only_rate_accuracy:
            return 0
        print("\n## Throughput per core: one generator process vs ProducerPerformance, same broker")
        record_size = len(encode_record("s_12345", int(time.time() * 1000), 417.263))
        kinds = record_kinds(Path(scratch))
        saturated = {}
        for kind, records in kinds.items():
            # a target no single process reaches: it sends flat out, the achieved mean is its maximum
            saturated[kind] = run_generator(
                cluster,
                "bench-core",
                Workload(keys=2_000_000, period_ms=1000, records=records),
                20.0,
                args.skip_s,
                processes=1,
            )
        cluster.delete_topic("bench-pp")
        cluster.create_topic("bench-pp", PARTITIONS)
        pp_rate, pp_cpu = run_producer_performance(
            broker.bootstrap_servers, "bench-pp", 5_000_000, record_size
        )
        print(
            f"record size {record_size} B for ProducerPerformance (random bytes, no key); the generator's "
            "records carry a key and JSON of about that size"
        )
        print("| producer | records/s | CPU-µs/record | records/s vs ProducerPerformance |")
        print("|---|---:|---:|---:|")
        for kind, result in saturated.items():
            print(
                f"| generator, 1 process, {kind} | {result.mean:,.0f} | {result.cpu_us_per_record:.2f} | "
                f"{result.mean / pp_rate:.0%} |"
            )
        print(f"| ProducerPerformance (JVM) | {pp_rate:,.0f} | {pp_cpu:.2f} | 100% |", flush=True)

        if not args.only_per_core:
            print(
                f"\n## Largest sustained load, all {cpus} processes ({args.search_duration_s:.0f} s each, every "
                f"second after {args.skip_s} s within ±2 %)"
            )
            print("| target rec/s | mean rec/s | min | seconds within ±2 % | sustained |")
            print("|---:|---:|---:|---:|:---:|")
            largest = None
            for load in (int(x) for x in args.max_search.split(",")):
                result = run_generator(
                    cluster,
                    "bench-max",
                    Workload(keys=load),
                    args.search_duration_s,
                    args.skip_s,
                    processes=cpus,
                )
                print(
                    f"| {load:,} | {result.mean:,.0f} | {min(result.rates):,.0f} | "
                    f"{result.within_2_percent}/{len(result.rates)} | {'yes' if result.sustained else 'no'} |",
                    flush=True,
                )
                if not result.sustained:
                    break
                largest = load
            print(f"largest sustained load: {f'{largest:,} records/s' if largest else 'none of those tried'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
