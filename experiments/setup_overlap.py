"""How much of a sub-experiment's set-up does starting the generator's workers beside the Spark application save?
Enters the runner's ``running_job`` for chosen (load, instances) points of a use case and leaves it as soon as
the generator sends, alternately in two orders (ABBA by round): ``overlapped`` as the runner does (the workers
spawn, then the application and the query start, then the workers are released) and ``sequential`` as it did
until 2026-12-04 (the workers spawn only once the query runs). Prints each entry's set-up and teardown seconds
and, per point and order, their median.

    python experiments/setup_overlap.py --uc 1 --pair 4000:1 --pair 12000:2 --pair 20000:4 [--rounds 3]

Nothing else may run beside it.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import repo_paths  # noqa: F401 -- spark_jobs/ and benchmarks/ on sys.path
from gate_points import add_benchmark_argument, chosen_benchmark, gate_point_settings, parse_pair
from usecases import QUICK_WARMUP_EXECUTORS

from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.engine.runner import ExperimentRunner, new_writer
from pytest_theodolite.engine.services import open_kafka, open_spark
from pytest_theodolite.engine.settings import TheodoliteSettings
from theodolite_generator import LoadGenerator

ORDERS = ("overlapped", "sequential")


@contextmanager
def sequential_generator() -> Iterator[None]:
    """The order before 2026-12-04: spawn() does nothing, release() spawns and releases at once."""
    spawn, release = LoadGenerator.spawn, LoadGenerator.release
    LoadGenerator.spawn = lambda self: self  # type: ignore[method-assign]
    LoadGenerator.release = lambda self: (spawn(self), release(self))[1]  # type: ignore[method-assign]
    try:
        yield
    finally:
        LoadGenerator.spawn, LoadGenerator.release = spawn, release  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_benchmark_argument(parser)
    parser.add_argument("--pair", type=parse_pair, action="append", required=True, metavar="LOAD:INSTANCES")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    benchmark = chosen_benchmark(args)
    settings = gate_point_settings(
        [load for load, _ in args.pair], [r for _, r in args.pair], 0.25, QUICK_WARMUP_EXECUTORS
    )
    infra = TheodoliteSettings(max_instances=max(r for _, r in args.pair))
    seconds: dict[tuple[int, int, str], list[tuple[float, float]]] = defaultdict(list)
    with (
        tempfile.TemporaryDirectory(prefix="theodolite-setup-overlap-") as results,
        open_kafka(infra) as kafka,
        open_spark(infra) as cluster,
    ):
        writer = new_writer(Path(results), "setup", benchmark, settings, Metric.DEMAND, {})
        runner = ExperimentRunner(benchmark, settings, kafka, cluster, writer)
        for round_ in range(args.rounds):
            orders = ORDERS if round_ % 2 == 0 else ORDERS[::-1]
            for load, instances in args.pair:
                for order in orders:
                    job = runner.jobs.new_job()
                    entered = time.monotonic()
                    with sequential_generator() if order == "sequential" else _nothing():
                        with runner.jobs.running_job(
                            job, load, instances, runner.workload(load), instance_cpu=None
                        ):
                            left = time.monotonic()
                    setup_s, teardown_s = left - entered, time.monotonic() - left
                    seconds[(load, instances, order)].append((setup_s, teardown_s))
                    print(
                        f"round {round_ + 1} {load} on {instances} {order}: set-up {setup_s:.2f} s, "
                        f"teardown {teardown_s:.2f} s",
                        flush=True,
                    )
    print("\n| load | instances | order | entries | median set-up, s | median teardown, s |")
    print("|---:|---:|---|---:|---:|---:|")
    for (load, instances, order), values in seconds.items():
        print(
            f"| {load} | {instances} | {order} | {len(values)} | "
            f"{statistics.median(s for s, _ in values):.2f} | {statistics.median(t for _, t in values):.2f} |"
        )
    for order in ORDERS:
        total = sum(statistics.median(s for s, _ in v) for (_, _, o), v in seconds.items() if o == order)
        print(f"{order}: the points' median set-ups sum to {total:.1f} s")


@contextmanager
def _nothing() -> Iterator[None]:
    yield


if __name__ == "__main__":
    main()
