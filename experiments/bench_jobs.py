"""Records/s one Spark instance (1 executor, 1 core) sustains for each use-case job, next to Kafka's
ConsumerPerformance reading the same topic on the same broker.

Method (a first cut, not a lag-trend search): the input topic is pre-filled with ``--records`` readings of 64
sensors (written by a Spark batch job, so the fill is fast and native); each job then reads it from the start
with ``maxOffsetsPerTrigger`` = ``--batch`` records per micro-batch and runs until it has processed all of it.
The rate is the input records of micro-batches 2..n divided by the wall time from the start of micro-batch 2
to the end of the last one (micro-batch 1 pays for code generation and consumer creation: that is warm-up);
with ``--warmup-s S`` (30 with ``--scaling``) only the micro-batches that start S seconds after the first.
UC4 also runs the feedback micro-batches that the loop causes in that span, as it would in production.

    python experiments/bench_jobs.py [--records 400000] [--batch 50000] [--uc 1 2 3 4]
    python experiments/bench_jobs.py --scaling 0.25   # 1 and 4 instances at a quarter core each
    python experiments/bench_jobs.py --scaling 0.25 --uc 2 --warmup-s 0   # without the warm-up cut
    python experiments/bench_jobs.py --scaling 0.25 --cfs-period-ms 10   # the quota in 10 ms periods

The figures it gave, with dates: docs/lab-notes/experiments.md.

"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Any

import repo_paths  # noqa: F401 -- spark_jobs/ and benchmarks/ on sys.path

from pytest_theodolite.engine.services import open_spark
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.infra import maven
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.kafka.embedded import EmbeddedKafka
from pytest_theodolite.infra.spark import cgroups
from pytest_theodolite.infra.spark.cluster import STANDALONE_SESSION_CONF, SparkCluster
from pytest_theodolite.infra.spark.jars import connector_jars
from spark_jobs import uc1, uc2, uc3, uc4

SENSORS = 64
PARTITIONS = 1  # one executor core: one input partition keeps the comparison with one consumer fair
SCALING_PARTITIONS = 4  # the scaling step: one input partition per instance at most
#: the scaling step's default: 32 micro-batches of 50,000, of which four instances spend about a third warming up
SCALING_RECORDS = 1_600_000
SCALING_WARMUP_S = 30.0
#: the per-core mode's default, as in its figures above
PER_CORE_RECORDS = 400_000
#: the executors' JVM options of the shipped gates (benchmarks/usecases.py QUICK_WARMUP_EXECUTORS): at a
#: quarter core, C2 compilation would take most of a short run and no instance count would look faster
GATE_EXECUTORS = {"spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
BASE_MS = 1_704_103_200_000
#: the readings are timestamped in 2024: time-based retention would delete them between fill and read
KEEP_FOREVER = {"retention.ms": "-1"}
CONSUMER_PERFORMANCE = [
    "org.apache.kafka:kafka-tools:4.1.1",
    "org.apache.logging.log4j:log4j-core:2.24.3",
    "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3",
]


@dataclass
class JobRate:
    use_case: str
    records: int
    batches: int
    seconds: float
    #: state store bytes per state row (key) of the first stateful operator, at the first and the last
    #: measured micro-batch: equal where the state per key does not grow with the readings
    state_bytes_per_key: tuple[float, float] | None = None
    #: where a measured micro-batch's time went (medians), from Spark's own progress reports
    profile: BatchProfile | None = None

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds else float("nan")


@dataclass(frozen=True)
class BatchProfile:
    """Median milliseconds of a measured micro-batch, from ``StreamingQueryProgress``: ``total`` (trigger
    execution), ``add_batch`` (the tasks on the executors, with their scheduling), ``driver`` (the rest:
    offsets, planning, write-ahead and commit logs -- work of the driver, which no instance count speeds up),
    and over the stateful operators ``state_update`` / ``state_commit`` (summed over their partitions)."""

    batches: int
    total: float
    add_batch: float
    driver: float
    state_update: float
    state_commit: float


def batch_profile(measured: list[Any]) -> BatchProfile | None:
    if not measured:
        return None

    def state_sum(progress: Any, field_name: str) -> float:
        return float(sum(op.get(field_name, 0) or 0 for op in progress.get("stateOperators") or []))

    durations = [p["durationMs"] for p in measured]
    return BatchProfile(
        batches=len(measured),
        total=statistics.median([d.get("triggerExecution", 0) for d in durations]),
        add_batch=statistics.median([d.get("addBatch", 0) for d in durations]),
        driver=statistics.median([d.get("triggerExecution", 0) - d.get("addBatch", 0) for d in durations]),
        state_update=statistics.median([state_sum(p, "allUpdatesTimeMs") for p in measured]),
        state_commit=statistics.median([state_sum(p, "commitTimeMs") for p in measured]),
    )


def fill_input(spark: Any, bootstrap_servers: str, topic: str, records: int) -> None:
    """``records`` readings: sensor ``s_<i % 64>``, one reading per sensor per second of event time."""
    from pyspark.sql import functions as F

    rows = spark.range(records).select(
        F.concat(F.lit("s_"), (F.col("id") % SENSORS).cast("string")).alias("identifier"),
        (F.lit(BASE_MS) + (F.col("id") / SENSORS).cast("long") * 1000 + F.col("id") % SENSORS).alias(
            "timestamp"
        ),
        (F.rand(seed=7) * 1000).alias("valueInW"),
    )
    (
        rows.select(
            F.col("identifier").alias("key"),
            F.to_json(F.struct("identifier", "timestamp", "valueInW")).alias("value"),
        )
        .write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("topic", topic)
        .save()
    )


def uc4_registry() -> dict[str, Any]:
    """4 children x 3 levels: 21 groups over s_0..s_63."""
    sensors = iter(range(SENSORS))

    def group(level: int, index: int) -> dict[str, Any]:
        if level == 2:
            children = [{"identifier": f"s_{next(sensors)}", "name": "sensor"} for _ in range(4)]
        else:
            children = [group(level + 1, index * 4 + i) for i in range(4)]
        return {"identifier": f"group_lvl_{level}_{index}", "name": "group", "children": children}

    return group(0, 0)


def measure(
    query: Any, total_records: int, timeout_s: float, warmup_s: float = 0.0
) -> tuple[int, int, float, tuple[float, float] | None, BatchProfile | None]:
    """Run until ``total_records`` input records are processed; (records, batches, seconds, state bytes per
    key first/last, batch profile) of :func:`steady_batches`."""
    deadline = time.monotonic() + timeout_s
    processed = 0
    while processed < total_records:
        if time.monotonic() > deadline:
            raise TimeoutError(f"processed {processed} of {total_records} records in {timeout_s} s")
        if query.exception() is not None:
            raise RuntimeError(query.exception())
        time.sleep(0.5)
        processed = sum(_input_records(p) for p in query.recentProgress)
    query.stop()
    measured = steady_batches(list(query.recentProgress), warmup_s)
    start = _epoch_s(measured[0]["timestamp"])
    end = _epoch_s(measured[-1]["timestamp"]) + measured[-1]["durationMs"]["triggerExecution"] / 1000
    records = sum(_input_records(p) for p in measured)
    return records, len(measured), end - start, _state_growth(measured), batch_profile(measured)


#: the fewest micro-batches a rate may rest on: fewer means too few records for the warm-up cut
MIN_STEADY_BATCHES = 5


def steady_batches(progress: list[Any], warmup_s: float) -> list[Any]:
    """The progress reports of the micro-batches that count: from the second one with input (the first pays
    for code generation and consumer creation) to the last one with input, leaving out those that started
    within ``warmup_s`` of the first one's start. Each instance is a JVM of its own that compiles the same code
    at a fraction of a core, so four instances take longer to warm up than one; a rate over their first
    seconds measures the warm-up, not the job. Raises ``ValueError`` where fewer than
    :data:`MIN_STEADY_BATCHES` are left."""
    with_input = [i for i, p in enumerate(progress) if _input_records(p) > 0]
    if not with_input:
        raise ValueError("no micro-batch read any input")
    first_start = _epoch_s(progress[with_input[0]]["timestamp"])
    after_warmup = [i for i in with_input[1:] if _epoch_s(progress[i]["timestamp"]) - first_start >= warmup_s]
    if len(after_warmup) < MIN_STEADY_BATCHES:
        raise ValueError(
            f"{len(after_warmup)} micro-batches after the {warmup_s:g} s warm-up, fewer than "
            f"{MIN_STEADY_BATCHES}: give more --records (or a smaller --warmup-s)"
        )
    return progress[after_warmup[0] : with_input[-1] + 1]


def _state_growth(measured: list[Any]) -> tuple[float, float] | None:
    def per_key(progress: Any) -> float | None:
        operators = progress.get("stateOperators") or []
        if not operators or not operators[0].get("numRowsTotal"):
            return None
        return operators[0]["memoryUsedBytes"] / operators[0]["numRowsTotal"]

    sizes = [size for size in map(per_key, measured) if size is not None]
    return (sizes[0], sizes[-1]) if sizes else None


def _input_records(progress: Any) -> int:
    row = progress["observedMetrics"].get("records")
    return int(row["total"] or 0) if row is not None else 0


def _epoch_s(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()  # Python 3.11 reads the trailing "Z"


def run_job(
    use_case: str,
    spark: Any,
    kafka: KafkaCluster,
    input_topic: str,
    records: int,
    batch: int,
    partitions: int = 1,
    warmup_s: float = 0.0,
) -> JobRate:
    output_topic = f"bench-{use_case}-out-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(output_topic, partitions, configs=KEEP_FOREVER)
    with tempfile.TemporaryDirectory(prefix=f"bench-{use_case}-") as checkpoint_dir:
        common: dict[str, Any] = {
            "bootstrap_servers": kafka.bootstrap_servers,
            "input_topic": input_topic,
            "output_topic": output_topic,
            "checkpoint_dir": checkpoint_dir,
            "max_offsets_per_trigger": batch,
            "shuffle_partitions": partitions,
            "query_name": f"bench_{use_case}",
        }
        # measure() reads the rate off the query's recent progress reports: keep every one of the run
        spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "10000")
        query = _start_job(use_case, spark, kafka, partitions, common)
        try:
            counted, batches, seconds, state, profile = measure(query, records, 900, warmup_s)
        finally:
            if query.isActive:
                query.stop()
    return JobRate(use_case, counted, batches, seconds, state, profile)


def _start_job(
    use_case: str, spark: Any, kafka: KafkaCluster, partitions: int, common: dict[str, Any]
) -> Any:
    if use_case == "uc1":
        return uc1.start_query(spark, **common)
    if use_case == "uc2":
        return uc2.start_query(spark, **common)
    if use_case == "uc3":
        return uc3.start_query(spark, **common, window_size="1 hour", window_advance="10 minutes")
    config_topic = f"bench-uc4-config-{uuid.uuid4().hex[:6]}"
    feedback_topic = f"bench-uc4-feedback-{uuid.uuid4().hex[:6]}"
    for topic in (config_topic, feedback_topic):
        kafka.create_topic(topic, partitions, configs=KEEP_FOREVER)
    from kafka import KafkaProducer

    producer = KafkaProducer(**kafka.client_kwargs())
    producer.send(config_topic, key=b"registry", value=json.dumps(uc4_registry()).encode())
    producer.flush()
    producer.close()
    return uc4.start_query(
        spark, **common, config_topic=config_topic, feedback_topic=feedback_topic, window_size="1 minute"
    )


def consumer_performance(bootstrap_servers: str, topic: str, records: int) -> float:
    """nMsg.sec of Kafka's ConsumerPerformance reading ``records`` of ``topic`` once."""
    jars = maven.resolve(CONSUMER_PERFORMANCE)
    command = [
        maven.java_executable(),
        "-Xmx512m",
        "-cp",
        ":".join(map(str, jars)),
        "org.apache.kafka.tools.ConsumerPerformance",
        "--bootstrap-server",
        bootstrap_servers,
        "--topic",
        topic,
        "--messages",
        str(records),
        "--timeout",
        "60000",
    ]
    output = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False).stdout
    header_lines = [line for line in output.splitlines() if line.startswith("start.time")]
    result_lines = [line for line in output.splitlines() if re.match(r"^\d{4}-\d\d-\d\d", line)]
    if not header_lines or not result_lines:
        raise RuntimeError(f"ConsumerPerformance printed no result:\n{output[-2000:]}")
    header = [h.strip() for h in header_lines[0].split(",")]
    values = [v.strip() for v in result_lines[-1].split(",")]
    return float(values[header.index("nMsg.sec")])


def scaling(records: int, batch: int, use_cases: list[int], instance_cpu: float, warmup_s: float) -> None:
    """Records/s of each job on 1 and on 4 CPU-limited instances (the gates' standalone cluster), reading a
    4-partition topic with 4 shuffle partitions, so that both runs do the same work, after ``warmup_s``."""
    settings = TheodoliteSettings(max_instances=SCALING_PARTITIONS, instance_cpu=instance_cpu)
    rates: dict[tuple[int, int], JobRate] = {}
    with EmbeddedKafka() as broker, open_spark(settings) as cluster:
        kafka = KafkaCluster(broker.bootstrap_servers)
        input_topic = f"bench-input-{uuid.uuid4().hex[:6]}"
        kafka.create_topic(input_topic, SCALING_PARTITIONS, configs=KEEP_FOREVER)
        with cluster.session(instances=1, app_name="bench_jobs_fill", instance_cpu=None) as spark:
            fill_input(spark, broker.bootstrap_servers, input_topic, records)
        for n in use_cases:
            for instances in (1, SCALING_PARTITIONS):
                with cluster.session(
                    instances=instances, conf=GATE_EXECUTORS, app_name="bench_jobs"
                ) as spark:
                    spark.sparkContext.setLogLevel("ERROR")
                    rate = run_job(
                        f"uc{n}", spark, kafka, input_topic, records, batch, SCALING_PARTITIONS, warmup_s
                    )
                rates[(n, instances)] = rate
                print(f"uc{n} on {instances}: {rate.records_per_s:,.0f} records/s", flush=True)
        kafka.close()
    print(
        f"\n## 1 -> {SCALING_PARTITIONS} instances at {instance_cpu:g} core each (CFS period "
        f"{cgroups.PERIOD_US / 1000:g} ms), {records:,} records pre-filled in {SCALING_PARTITIONS} partitions, "
        f"{batch:,} per micro-batch, the first {warmup_s:g} s cut as warm-up"
    )
    print(f"| job | 1 instance, records/s | {SCALING_PARTITIONS} instances, records/s | speed-up |")
    print("|---|---:|---:|---:|")
    for n in use_cases:
        one, many = rates[(n, 1)], rates[(n, SCALING_PARTITIONS)]
        print(
            f"| uc{n} | {one.records_per_s:,.0f} | {many.records_per_s:,.0f} "
            f"| {many.records_per_s / one.records_per_s:.2f}x |"
        )
    print_profiles([(f"uc{n} on {i}", rates[(n, i)]) for n in use_cases for i in (1, SCALING_PARTITIONS)])


def print_profiles(runs: list[tuple[str, JobRate]]) -> None:
    """Where each run's median micro-batch went (see :class:`BatchProfile`)."""
    print(
        "\n| run | measured micro-batches | median batch, ms | tasks (addBatch), ms | driver, ms "
        "| state updates, ms | state commits, ms |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, rate in runs:
        p = rate.profile
        if p is not None:
            print(
                f"| {label} | {p.batches} | {p.total:,.0f} | {p.add_batch:,.0f} | {p.driver:,.0f} "
                f"| {p.state_update:,.0f} | {p.state_commit:,.0f} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--records", type=int, help="readings pre-filled (default 400,000; 1,600,000 with --scaling)"
    )
    parser.add_argument("--batch", type=int, default=50_000, help="maxOffsetsPerTrigger")
    parser.add_argument("--uc", nargs="*", type=int, default=[1, 2, 3, 4])
    parser.add_argument(
        "--scaling",
        type=float,
        metavar="CORES",
        help=f"instead: records/s on 1 and {SCALING_PARTITIONS} instances limited to CORES each (e.g. 0.25)",
    )
    parser.add_argument(
        "--cfs-period-ms",
        type=float,
        default=None,
        help=f"the CFS period the quota is given in (default {cgroups.PERIOD_US / 1000:g} ms, as in Kubernetes): "
        "a quarter core gets 25 ms of each 100 ms, so a short task's wall time is rounded up to whole periods",
    )
    parser.add_argument(
        "--warmup-s",
        type=float,
        help="micro-batches that start this long after the first one count (default 0; 30 with --scaling: "
        "four quarter-core instances each compile the job's code for longer than one does)",
    )
    args = parser.parse_args()
    # the defaults differ by mode (see --records, --warmup-s): resolved once, here
    records = args.records or (SCALING_RECORDS if args.scaling else PER_CORE_RECORDS)
    warmup_s = args.warmup_s if args.warmup_s is not None else (SCALING_WARMUP_S if args.scaling else 0.0)
    batches = records // args.batch
    if batches - 1 < MIN_STEADY_BATCHES:  # before anything runs: the first batch never counts
        parser.error(
            f"--records / --batch gives {batches} micro-batches; at least {MIN_STEADY_BATCHES + 1} are needed, "
            "more with a warm-up cut"
        )
    if args.cfs_period_ms is not None:
        cgroups.PERIOD_US = int(args.cfs_period_ms * 1000)  # read by every quota write in this process
    os.environ.setdefault("THEODOLITE_CACHE_DIR", "/tmp/tcache")  # reuse jars already downloaded there
    if args.scaling:
        scaling(records, args.batch, args.uc, args.scaling, warmup_s)
        return

    # the plugin's worker daemon, as on the gates' standalone cluster: local-cluster's executors run here too
    cluster = SparkCluster(
        master_url="local-cluster", max_instances=1, jars=connector_jars(), base_conf=STANDALONE_SESSION_CONF
    )
    with EmbeddedKafka() as broker:
        kafka = KafkaCluster(broker.bootstrap_servers)
        input_topic = f"bench-input-{uuid.uuid4().hex[:6]}"
        kafka.create_topic(input_topic, PARTITIONS, configs=KEEP_FOREVER)
        results: list[JobRate] = []
        with cluster.session(instances=1, app_name="bench_jobs") as spark:
            spark.sparkContext.setLogLevel("ERROR")
            fill_input(spark, broker.bootstrap_servers, input_topic, records)
            assert kafka.total_end_offset(input_topic) == records
            for n in args.uc:
                results.append(
                    run_job(f"uc{n}", spark, kafka, input_topic, records, args.batch, warmup_s=warmup_s)
                )
                print(f"uc{n}: {results[-1].records_per_s:,.0f} records/s", flush=True)
        kafka_rate = consumer_performance(broker.bootstrap_servers, input_topic, records)
        kafka.close()

    print(
        f"\n## One Spark instance (1 executor, 1 core) vs ConsumerPerformance, {records:,} records "
        f"pre-filled, {args.batch:,} per micro-batch, 1 partition"
    )
    print("| job | records/s | measured records | micro-batches | seconds | share of ConsumerPerformance |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r.use_case} | {r.records_per_s:,.0f} | {r.records:,} | {r.batches} | {r.seconds:.1f} "
            f"| {r.records_per_s / kafka_rate:.1%} |"
        )
    print(f"| ConsumerPerformance (1 JVM consumer) | {kafka_rate:,.0f} | {records:,} | | | 100% |")
    for r in results:
        if r.state_bytes_per_key:
            first, last = r.state_bytes_per_key
            print(
                f"{r.use_case}: state per key {first:,.0f} B at the first measured micro-batch, "
                f"{last:,.0f} B at the last"
            )
    print_profiles([(r.use_case, r) for r in results])


if __name__ == "__main__":
    main()
