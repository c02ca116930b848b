"""Which reference tracks the jobs' speed: the SHA-512 calibration, or a query that reads Kafka as a job does?

A stored baseline is judged on another host through the ratio of a reference's speed there and on the
baseline's host (engine/calibration.py). That ratio is only as good as the reference's tracking of the jobs'
own speed. Each round here measures, one after another on the same cluster and broker:

- the SHA-512 calibration (``calibration.calibrate``: rows/s on one quarter-core instance);
- a **Kafka reference**: a batch query on one quarter-core instance that reads a prefilled topic of generator
  records from the broker, parses them with ``from_json``, writes each back to a JSON string and aggregates per
  key (a shuffle) -- the per-record work of a streaming job without its micro-batch scheduling;
- mu(1) of each chosen use case, measured directly with its gate's settings (engine/capacity_probe.py).

For every pair of rounds (i, j) it then compares the speed change a reference reports, ref_i / ref_j, with the
one the job shows, mu_i / mu_j: the error a calibration would have had, had round j recorded the baseline and
round i judged it. ``--busy K`` runs K busy-looping processes beside every second round: a host shared with
other work, the speed change a shared CI runner sees (without it, rounds differ only by the host's noise).

    python experiments/reference_tracking.py [--rounds 6] [--uc 1 3] [--busy 1] [--records 100000] [--results DIR]
    python experiments/reference_tracking.py --read DIR [DIR ...]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capacity_probe import GATES  # the shipped gates, by use case (experiments/ is on the path)
from confluent_kafka import Producer
from kafka.admin import NewTopic

from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.engine import calibration
from pytest_theodolite.engine.capacity_probe import measure_capacity
from pytest_theodolite.engine.capacity_search import CapacityPlan, offered_workload
from pytest_theodolite.engine.markers import gate_spec
from pytest_theodolite.engine.runner import ExperimentRunner, new_writer
from pytest_theodolite.engine.services import open_kafka, open_spark
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.infra.process import terminate_as_interrupt
from theodolite_generator.records import SPARK_SCHEMA_DDL, encode_record, key_of

REFERENCE_TOPIC = "theodolite-reference-records"
ROUNDS_FILE = "rounds.jsonl"


@dataclass(frozen=True)
class Reading:
    rows_per_s: float
    spread: float
    cpu_us_per_row: float | None


def prefill(kafka: Any, topic: str, records: int, keys: int = 1000, partitions: int = 4) -> None:
    """`records` generator records over `keys` sensors into a new `topic` (once: every timed run reads it all)."""
    kafka.admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 20})
    start_ms = int(time.time() * 1000) - records
    for n in range(records):
        key = key_of(n % keys)
        producer.produce(
            topic, key=key.encode(), value=encode_record(key, start_ms + n, (n * 7919) % 5000 / 3)
        )
        if n % 10_000 == 0:
            producer.poll(0)
    if producer.flush(60):
        raise RuntimeError(f"records left unsent to {topic} after 60 s")


def kafka_reference_job(spark: Any, kafka: Any, topic: str, expected: int) -> float:
    """One timed run of the Kafka reference; its rows/s. A new DataFrame each run: nothing is reused."""
    from pyspark.sql import functions as F

    raw = (
        spark.read.format("kafka")
        .options(**kafka.spark_options())
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    parsed = raw.select(F.from_json(F.col("value").cast("string"), SPARK_SCHEMA_DDL).alias("r")).select("r.*")
    document = F.to_json(F.struct("identifier", "timestamp", "valueInW"))
    per_key = parsed.groupBy("identifier").agg(
        F.count("*").alias("n"), F.avg("valueInW").alias("mean"), F.max(F.length(document)).alias("widest")
    )
    started = time.perf_counter()
    counted = per_key.agg(F.sum("n")).collect()[0][0]
    elapsed = time.perf_counter() - started
    if counted != expected:
        raise RuntimeError(f"the reference read {counted} records of {topic}, expected {expected}")
    return expected / elapsed


def kafka_calibrate(cluster: Any, kafka: Any, topic: str, records: int, repeats: int = 3) -> Reading:
    """As calibration.calibrate: two runs at full speed to load classes and JIT, then `repeats` under the limit."""
    cpu = calibration.REFERENCE_CPU if cluster.can_limit_cpu else None
    with cluster.session(instances=1, instance_cpu=None, app_name="theodolite-kafka-reference") as spark:
        for _ in range(2):
            kafka_reference_job(spark, kafka, topic, records)
        cluster.limit_instances(cpu)
        runs, cpu_per_row = [], []
        for _ in range(repeats):
            before = cluster.instance_cpu_seconds()
            runs.append(kafka_reference_job(spark, kafka, topic, records))
            after = cluster.instance_cpu_seconds()
            if before is not None and after is not None:
                cpu_per_row.append((after - before) / records * 1e6)
    best = max(runs)
    return Reading(best, (best - min(runs)) / best, min(cpu_per_row) if cpu_per_row else None)


@contextmanager
def busy_loops(count: int) -> Iterator[None]:
    """`count` processes spinning on a core each, stopped on exit (whatever happens inside)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def pair_errors(reference: list[float], job: list[float]) -> list[float]:
    """For every ordered pair of rounds (i, j), i != j: the reference's speed ratio over the job's, minus 1."""
    return [
        (reference[i] / reference[j]) / (job[i] / job[j]) - 1
        for i, j in itertools.permutations(range(len(job)), 2)
    ]


def correlation(xs: list[float], ys: list[float]) -> float | None:
    """Pearson's r of the logarithms (speeds change by factors); None where one side does not vary."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    if len(lx) < 3 or statistics.pstdev(lx) == 0 or statistics.pstdev(ly) == 0:
        return None
    return statistics.correlation(lx, ly)


def summarise(rounds: list[dict[str, Any]]) -> None:
    """The rounds' table and, per use case and reference, how well the reference tracked the job."""
    ucs = sorted({int(uc) for r in rounds for uc in r["mu"]})
    header = " | ".join(f"UC{uc} mu(1) (busiest instance / its quota)" for uc in ucs)
    print(
        f"| round | busy | SHA-512 rows/s (spread) | Kafka reference rows/s (spread, CPU us/row) | {header} |"
    )
    print("|---|---|---|---|" + "---|" * len(ucs))
    for n, r in enumerate(rounds, 1):
        cells = []
        for uc in ucs:
            m = r["mu"].get(str(uc))
            if m is None or m["records_per_s"] is None:
                cells.append("-" if m is None else m["status"])
                continue
            share = "" if m["busiest_share"] is None else f" ({m['busiest_share']:.0%})"
            cells.append(f"{m['records_per_s']:,.0f}{share}")
        k = r["kafka"]
        cpu = "-" if k["cpu_us_per_row"] is None else f"{k['cpu_us_per_row']:.1f}"
        print(
            f"| {n} | {r['busy']} | {r['sha']['rows_per_s']:,.0f} ({r['sha']['spread']:.0%}) | "
            f"{k['rows_per_s']:,.0f} ({k['spread']:.0%}, {cpu}) | " + " | ".join(cells) + " |"
        )
    print(
        "\nPer use case and reference, over every ordered pair of rounds with a saturated mu(1): the reference's "
        "speed ratio against the job's (0 % = tracked exactly), and Pearson's r of the logarithms."
    )
    print("| use case | reference | rounds | median abs. error | largest abs. error | within 10 % | r |")
    print("|---|---|---|---|---|---|---|")
    for uc in ucs:
        kept = [r for r in rounds if (r["mu"].get(str(uc)) or {}).get("records_per_s")]
        if len(kept) < 2:
            print(f"| UC{uc} | - | {len(kept)} | fewer than two rounds measured | | | |")
            continue
        job = [r["mu"][str(uc)]["records_per_s"] for r in kept]
        for name, key in (("SHA-512", "sha"), ("Kafka", "kafka")):
            reference = [r[key]["rows_per_s"] for r in kept]
            errors = [abs(e) for e in pair_errors(reference, job)]
            corr = correlation(reference, job)
            within = sum(e <= 0.10 for e in errors)
            print(
                f"| UC{uc} | {name} | {len(kept)} | {statistics.median(errors):.1%} | {max(errors):.1%} | "
                f"{within} of {len(errors)} | {'-' if corr is None else f'{corr:+.2f}'} |"
            )


def measure_rounds(args: argparse.Namespace, results: Path) -> list[dict[str, Any]]:
    """Measure `args.rounds` rounds, each appended to results/rounds.jsonl as soon as it is measured."""
    plan = CapacityPlan()
    infra = TheodoliteSettings(max_instances=1)
    rounds: list[dict[str, Any]] = []
    with open_kafka(infra) as kafka, open_spark(infra) as cluster:
        prefill(kafka, REFERENCE_TOPIC, args.records)
        runners = {}
        for uc in args.uc:
            mark = GATES[uc].pytestmark[0]
            spec = gate_spec(mark.args, mark.kwargs, {})
            writer = new_writer(results, f"ref{uc}", spec.benchmark, spec.settings, Metric.CAPACITY, {})
            runners[uc] = (ExperimentRunner(spec.benchmark, spec.settings, kafka, cluster, writer), spec)
        for round_no in range(args.rounds):
            busy = args.busy if round_no % 2 else 0
            t_round = time.monotonic()
            with busy_loops(busy):
                sha = calibration.calibrate(cluster)
                reference = kafka_calibrate(cluster, kafka, REFERENCE_TOPIC, args.records)
                measured = {}
                for uc, (runner, spec) in runners.items():
                    top = max(spec.settings.loads)
                    offered = offered_workload(spec.benchmark.workload, top, plan.probe_factor)
                    probe = plan.probe_plan(spec.benchmark.workload(top).target_rate)
                    m = measure_capacity(runner, 1, top, probe, workload=offered, attempt=round_no)
                    print(f"  round {round_no + 1}, UC{uc}: {m.progress_text()}", flush=True)
                    if m.estimate is None:
                        status = f"{m.status}, no estimate: {m.reason}"
                    else:
                        status = m.status if m.estimate.saturated else f"{m.status}, not saturated"
                    measured[str(uc)] = {
                        "records_per_s": m.estimate.records_per_s
                        if m.estimate is not None and m.estimate.saturated
                        else None,
                        "status": status,
                        "busiest_share": None if m.host is None else m.host.busiest_share,
                        "measurement": m.to_dict(),
                    }
            rounds.append(
                {
                    "busy": busy,
                    "seconds": round(time.monotonic() - t_round, 1),
                    "sha": {
                        "rows_per_s": sha.rows_per_s,
                        "spread": sha.spread,
                        "cpu_us_per_row": sha.cpu_us_per_row,
                    },
                    "kafka": {
                        "rows_per_s": reference.rows_per_s,
                        "spread": reference.spread,
                        "cpu_us_per_row": reference.cpu_us_per_row,
                    },
                    "mu": measured,
                }
            )
            with (results / ROUNDS_FILE).open("a") as out:
                out.write(json.dumps(rounds[-1]) + "\n")
            print(f"round {round_no + 1} of {args.rounds} in {rounds[-1]['seconds']:.0f} s", flush=True)
    return rounds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--uc", type=int, nargs="+", choices=sorted(GATES), default=[1, 3])
    parser.add_argument("--busy", type=int, default=1, help="busy loops beside every second round (0: none)")
    parser.add_argument(
        "--records", type=int, default=100_000, help="records the Kafka reference reads a run"
    )
    parser.add_argument("--results", type=Path, default=None)
    parser.add_argument(
        "--read", type=Path, nargs="+", default=None, help="summarise the rounds of earlier runs' results"
    )
    args = parser.parse_args()
    if args.read:
        rounds = []
        for directory in args.read:
            path = directory / ROUNDS_FILE
            if not path.is_file():
                parser.error(f"{path} does not exist: name a directory this script wrote with --results")
            rounds += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        summarise(rounds)
        return
    if args.rounds < 2:
        parser.error("--rounds must be at least 2: the figures compare rounds with each other")
    results = args.results or Path(tempfile.mkdtemp(prefix="theodolite-reference-"))
    results.mkdir(parents=True, exist_ok=True)
    print(f"results: {results}", flush=True)
    t_all = time.monotonic()
    restore = terminate_as_interrupt()  # `kill` or a cancelled job stops every process, as Ctrl-C does
    try:
        rounds = measure_rounds(args, results)
    finally:
        restore()
    print()
    summarise(rounds)
    print(f"\nwall time {time.monotonic() - t_all:.0f} s; rounds in {results / ROUNDS_FILE}")


if __name__ == "__main__":
    main()
