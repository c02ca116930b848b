"""Would one Spark application kept across sub-experiments save the gates time, and what does it carry over?
Runs chosen (load, instances) points of a use case under the gates' protocol, as gate_points.py does, either
each in a new application (as the plugin does) or, with ``--kept``, all in one application: a point that
needs no more executors than the application holds gets its surplus killed (``SparkContext.killExecutor``)
and runs on the executors that ran the points before it -- their JVMs warm. A point that needs more starts a
new application. Prints per point the verdict, the lag slope's interval, the set-up and priming seconds (what a
kept application could save) and how the measurement ended.

    python experiments/kept_application.py --uc 1 --pair 14000:4 --pair 8400:2 --pair 2800:1 [--kept]

Order the points by falling instance counts for ``--kept`` to keep any executors. Nothing else may run beside
it (the instances are CPU-limited).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import repo_paths  # noqa: F401 -- spark_jobs/ and benchmarks/ on sys.path
from gate_points import add_benchmark_argument, chosen_benchmark, gate_point_settings, parse_pair, point_row
from usecases import QUICK_WARMUP_EXECUTORS

from pytest_theodolite.cli.points import median_batch_s
from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.engine.runner import ExperimentRunner, new_writer
from pytest_theodolite.engine.services import open_kafka, open_spark
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.infra.spark.cluster import SparkCluster
from pytest_theodolite.infra.spark.executors import executor_ids, registered_executors

KILL_WAIT_S = 60.0


class KeptApplication:
    """A SparkCluster whose `session` keeps its application open for the next one (see the module docstring);
    everything else is the cluster's own. `close` stops the application it holds."""

    def __init__(self, cluster: SparkCluster) -> None:
        self._cluster = cluster
        self._held: Any = None  # the open session() context of the kept application
        self._spark: Any = None
        self._executors = 0
        self.log: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)

    @contextmanager
    def session(
        self, instances: int = 1, instance_cpu: float | str | None = "default", **options: Any
    ) -> Iterator[Any]:
        """SparkCluster.session's arguments (the runner names them all); ``options`` go to a new application."""
        started = time.monotonic()
        if self._spark is not None and instances > self._executors:
            self.close()
        if self._spark is None:
            self._held = self._cluster.session(instances=instances, instance_cpu=instance_cpu, **options)
            self._spark = self._held.__enter__()
            self._executors = instances
            self.log.append(f"new application, {instances} executors")
        else:
            ids = executor_ids(self._spark)
            context = self._spark.sparkContext._jsc.sc()
            for executor in ids[instances:]:
                context.killExecutor(executor)
            deadline = time.monotonic() + KILL_WAIT_S
            while registered_executors(self._spark) != instances and time.monotonic() < deadline:
                time.sleep(0.05)
            self._executors = instances
            self._cluster.limit_instances(instance_cpu)
            self.log.append(
                f"kept executors {executor_ids(self._spark)} of {ids}, {time.monotonic() - started:.1f} s"
            )
        yield self._spark

    def close(self) -> None:
        if self._held is not None:
            self._held.__exit__(None, None, None)
        self._held, self._spark, self._executors = None, None, 0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_benchmark_argument(parser)
    parser.add_argument("--pair", type=parse_pair, action="append", required=True, metavar="LOAD:INSTANCES")
    parser.add_argument("--kept", action="store_true", help="one application across the points")
    parser.add_argument("--instance-cpu", type=float, default=0.25)
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args()
    benchmark = chosen_benchmark(args)
    settings = gate_point_settings(
        [load for load, _ in args.pair],
        [instances for _, instances in args.pair],
        args.instance_cpu,
        QUICK_WARMUP_EXECUTORS,
    )
    results = args.results or Path(tempfile.mkdtemp(prefix="theodolite-kept-"))
    infra = TheodoliteSettings(max_instances=max(instances for _, instances in args.pair))
    rows = []
    with open_kafka(infra) as kafka, open_spark(infra) as cluster:
        spark = KeptApplication(cluster) if args.kept else cluster
        try:
            writer = new_writer(results, "points", benchmark, settings, Metric.DEMAND, {})
            runner = ExperimentRunner(benchmark, settings, kafka, spark, writer)
            for load, instances in args.pair:
                started = time.monotonic()
                record = runner.run_sub_experiment(load, instances)
                repetition = record.repetitions[0]
                setup_s = repetition.counters.get("setup_ms", 0) / 1000
                primed_s = repetition.protocol.get("primed_s") or 0.0
                row = point_row(
                    record,
                    args.instance_cpu,
                    median_batch_s(results, load, instances),
                    time.monotonic() - started,
                )
                rows.append(f"{row} {setup_s:.0f} | {primed_s:.0f} |")
                print(rows[-1], *(spark.log[-1:] if isinstance(spark, KeptApplication) else []), flush=True)
        finally:
            if isinstance(spark, KeptApplication):
                spark.close()
    print(
        "\n| load | instances | verdict | lag slope [95 % interval], records/s | threshold | stop "
        "| CPU us per record | share of the quota | rows written per input record | median batch, s "
        "| state rows | records dropped as late | wall, s | set-up, s | primed, s |"
    )
    print("|---:|---:|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    print(f"{'one application kept' if args.kept else 'a new application per point'}; raw results: {results}")


if __name__ == "__main__":
    main()
