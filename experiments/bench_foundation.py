"""The broker's cold/warm start, the time to r registered executors (standalone vs local-cluster),
the RSS of the broker and of one executor, and how a CPU-bound job scales with r CPU-limited instances.

    python experiments/bench_foundation.py [--quick]

Each table compares variants measured side by side in this one run (the machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from pathlib import Path

import psutil

from pytest_theodolite.engine.services import prepare_driver_environment
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.infra.kafka.embedded import EmbeddedKafka
from pytest_theodolite.infra.spark.cluster import SparkCluster, StandaloneCluster
from pytest_theodolite.infra.spark.jars import connector_jars


def rss_mib(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def broker_starts(repeats: int) -> None:
    print("## Broker start (Apache Kafka 4.1.1, KRaft combined mode)")
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as m2:
        # cold: empty jar cache and empty Maven local repository, so every jar is downloaded
        os.environ["MAVEN_OPTS"] = f"-Dmaven.repo.local={m2}"
        t0 = time.perf_counter()
        with EmbeddedKafka(cache_dir=Path(cache)) as broker:
            cold = time.perf_counter() - t0
        del os.environ["MAVEN_OPTS"]
        warm = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            with EmbeddedKafka(cache_dir=Path(cache)) as broker:
                warm.append(time.perf_counter() - t0)
                time.sleep(5)  # let it settle before reading its memory
                rss = rss_mib(broker.process.pid)
    print(f"cold start (jar resolution included): {cold:.1f} s")
    print(
        f"warm start: median {statistics.median(warm):.1f} s over {repeats} (min {min(warm):.1f}, max {max(warm):.1f})"
    )
    print(f"broker RSS after start: {rss:.0f} MiB")
    print(f"cold / warm: {cold / statistics.median(warm):.1f}x\n")


def executor_pids() -> list[int]:
    return [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if "CoarseGrainedExecutorBackend" in " ".join(p.info["cmdline"] or [])
    ]


def time_to_executors(spark_cluster: SparkCluster, instances: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    with spark_cluster.session(instances=instances) as spark:
        elapsed = time.perf_counter() - t0
        spark.range(1_000_000).selectExpr("sum(id)").collect()  # load the executor's classes
        rss = max(rss_mib(pid) for pid in executor_pids())
    return elapsed, rss


def executor_registration(instance_counts: list[int], repeats: int) -> None:
    print(f"## Time from session(instances=r) to r registered executors (median of {repeats})")
    jars = connector_jars()
    rows = {}
    with StandaloneCluster(workers=max(instance_counts)) as standalone:
        managed = SparkCluster(standalone.master_url, max(instance_counts), jars)
        local_cluster = SparkCluster("local-cluster", max(instance_counts), jars)
        time_to_executors(managed, 1)  # the driver JVM's own start is not part of either figure
        for r in instance_counts:
            for name, cluster in (("standalone", managed), ("local-cluster", local_cluster)):
                runs = [time_to_executors(cluster, r) for _ in range(repeats)]
                rows[(name, r)] = (statistics.median(t for t, _ in runs), max(m for _, m in runs))
    print("| r | standalone (s) | local-cluster (s) | local-cluster / standalone | executor RSS (MiB) |")
    print("|---|---|---|---|---|")
    for r in instance_counts:
        s, lc = rows[("standalone", r)][0], rows[("local-cluster", r)][0]
        print(f"| {r} | {s:.2f} | {lc:.2f} | {lc / s:.2f} | {rows[('standalone', r)][1]:.0f} |")
    print()


def quota_scaling(instance_counts: list[int], cpu: float, rows_per_run: int, repeats: int) -> None:
    print(f"## CPU-bound job, r instances limited to {cpu} CPU each (cgroups), {rows_per_run:,} rows per run")
    with StandaloneCluster(workers=max(instance_counts), instance_cpu=cpu) as standalone:
        if standalone.instance_groups is None:
            print(
                f"cgroups unavailable: {standalone.cgroup_support.reason if standalone.cgroup_support else '?'}"
            )
            return
        cluster = SparkCluster(
            standalone.master_url,
            max(instance_counts),
            connector_jars(),
            instance_cpu=cpu,
            instance_groups=standalone.instance_groups.groups,
        )
        runs = itertools.count(1)  # a distinct row range per run

        def rows_per_s(spark, rows: int) -> float:
            # A new DataFrame each run: collecting the same one twice reuses its shuffle output and skips the
            # work (an earlier version of this script timed that and reported millions of rows/s).
            # SHA-512 per row is CPU work that code generation cannot fold away; 32 partitions give every r in
            # 1, 2, 4 the same work per instance.
            offset = next(runs) * rows
            job = spark.range(offset, offset + rows, 1, 32).selectExpr(
                "sum(hash(sha2(cast(id as string), 512)))"
            )
            t0 = time.perf_counter()
            job.collect()
            return rows / (time.perf_counter() - t0)

        results: dict[str, float] = {}
        for label, r, limit in [(str(r), r, cpu) for r in instance_counts] + [("1 unlimited", 1, None)]:
            with cluster.session(instances=r, instance_cpu=limit) as spark:
                rows_per_s(spark, rows_per_run // 4)  # warm-up: every executor loads classes and JIT-compiles
                results[label] = statistics.median(rows_per_s(spark, rows_per_run) for _ in range(repeats))
    base = results[str(instance_counts[0])]
    print(f"| r | CPU | rows/s (median of {repeats}) | speed-up vs r=1 | efficiency |")
    print("|---|---|---|---|---|")
    for r in instance_counts:
        print(
            f"| {r} | {r * cpu:g} | {results[str(r)]:,.0f} | {results[str(r)] / base:.2f} | "
            f"{results[str(r)] / base / r:.0%} |"
        )
    unlimited = results["1 unlimited"]
    print(
        f"| 1 | unlimited | {unlimited:,.0f} | {unlimited / base:.2f} | (one unlimited instance, for reference: "
        f"the quota binds if this is ~{1 / cpu:g}x) |"
    )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--only", choices=("broker", "executors", "quota"), help="one table only")
    args = parser.parse_args()
    prepare_driver_environment(TheodoliteSettings())
    repeats = 1 if args.quick else 3
    if args.only in (None, "broker"):
        broker_starts(repeats)
    if args.only in (None, "executors"):
        executor_registration([1, 2, 4], repeats)
    if args.only in (None, "quota"):
        quota_scaling([1, 2, 4], 0.25, 8_000_000 if args.quick else 24_000_000, repeats)


if __name__ == "__main__":
    main()
