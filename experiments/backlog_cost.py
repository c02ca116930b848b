"""Can a change of what a job's record costs be seen in a backlog read in large micro-batches, where a constant load
far below the job's capacity hides it (docs/lab-notes/capacity.md, "a user's own job")?

The click-stream example job (examples/clickstream), unchanged (REF) and with ``--hash-rounds`` chained SHA-256
hashes of every record's user (the change; own_job_quality.py's edit), both loaded into this process under their own
module names. Each run of a side: a fresh query on one instance (Spark's own settings), micro-batches capped at
``--batch-records``; the generator fills the input topic at ``--fill-factor`` times the load's rate for ``--fill-s``
seconds and stops, while the instance runs without a CPU limit (JIT, code generation); then the instance is limited
to ``--instance-cpu`` of a core and the full batches that start after that (the first ``--warm`` of them left out)
are measured: seconds per batch and the instances' CPU (cgroup) per record read -- or, with ``--settle N``, the
``--batches`` that follow once the last N batches no longer fall (capacity.settled_start). The sides alternate in ABBA
order for ``--rounds`` rounds, so that a drift of the host falls on both.

    python experiments/backlog_cost.py --hash-rounds 5 --rounds 3     # A/B: five extra hashes a record
    python experiments/backlog_cost.py --hash-rounds 0 --rounds 3     # A/A: both sides the unchanged job
    python experiments/backlog_cost.py --instance-cpu 0.25 --batch-records 100000 --fill-s 15   # a quarter core

Prints a line per run, then per round the change's figures over REF's -- wall seconds per record (the median
batch), the instances' CPU per record over all measured batches, and the median batch's CPU per record -- and
their mean with a 95 % t-interval over the rounds. Nothing else may run beside it (the instances are CPU-limited).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from types import ModuleType

from own_job_quality import EXAMPLE, changed_source, job_module
from scipy import stats

from pytest_theodolite.core.capacity import MicroBatch, settled_start
from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.engine import monitor
from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
from pytest_theodolite.engine.capacity_probe import BATCH_CAP_OPTION, batches_of
from pytest_theodolite.engine.runner import ExperimentRunner, new_writer
from pytest_theodolite.engine.services import open_kafka, open_spark
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.spark.cluster import SparkCluster
from theodolite_generator import Workload


@dataclass(frozen=True)
class BacklogRun:
    side: str
    round: int
    batches: list[MicroBatch]  # the measured ones
    cpu_s: float | None  # the instances' CPU over the measured batches
    wall_s: float
    batch_cpu_s: list[float]  # each measured batch's (from its start to its end)

    @property
    def records(self) -> int:
        return sum(b.input_rows for b in self.batches)

    @property
    def us_per_record(self) -> float:
        """Median batch seconds per record read, in microseconds."""
        return statistics.median(b.duration_s / b.input_rows for b in self.batches) * 1e6

    @property
    def cpu_us_per_record(self) -> float | None:
        return None if self.cpu_s is None or not self.records else self.cpu_s / self.records * 1e6

    @property
    def median_batch_cpu_us(self) -> float | None:
        """The median batch's CPU per record: a batch that stalls (a collection, a snapshot) left out."""
        if len(self.batch_cpu_s) != len(self.batches) or not self.batches:
            return None
        return (
            statistics.median(c / b.input_rows for c, b in zip(self.batch_cpu_s, self.batches, strict=True))
            * 1e6
        )


def cpu_at(samples: list[tuple[float, float]], at: float) -> float | None:
    """The instances' cumulative CPU seconds at epoch `at`, interpolated between the samples around it."""
    for (t0, c0), (t1, c1) in pairwise(samples):
        if t0 <= at <= t1:
            return c0 + (c1 - c0) * (at - t0) / (t1 - t0) if t1 > t0 else c0
    return None


def run_side(
    runner: ExperimentRunner,
    spark: SparkCluster,
    side: str,
    round_: int,
    users: int,
    args: argparse.Namespace,
) -> BacklogRun:
    started = time.monotonic()
    job = runner.jobs.new_job()
    fill = runner.benchmark.workload(users).sent_faster(args.fill_factor)
    cap = args.batch_records
    samples: list[tuple[float, float]] = []
    batches: dict[int, MicroBatch] = {}
    full: list[MicroBatch] = []
    prime = args.instance_cpu is not None and spark.can_limit_cpu  # JIT and code generation at full speed
    with runner.jobs.running_job(
        job,
        users,
        1,
        fill,
        instance_cpu=None if prime else args.instance_cpu,
        query_options={BATCH_CAP_OPTION: cap},
    ):
        time.sleep(args.fill_s)
        assert job.generator is not None
        job.generator.stop()
        if prime:
            spark.limit_instances(args.instance_cpu)
        filled_at = time.time()
        deadline = time.monotonic() + args.max_s
        settled_at: int | None = None  # with --settle: the index in `full` from which batches are measured
        while time.monotonic() < deadline:
            time.sleep(0.5)
            used = spark.instance_cpu_seconds_each()
            if used is not None:
                samples.append((time.time(), sum(used)))
            batches.update(batches_of(monitor.all_progress(job.query), job.topics["input"]))
            full = [b for b in sorted(batches.values(), key=lambda b: b.batch_id) if b.start_s >= filled_at]
            full = [b for b in full if b.input_rows >= 0.99 * cap]
            if args.settle and settled_at is None:
                # the last `settle` batches show no fall (capacity.settled_start's test): measure from the next
                tail = [b.duration_s for b in full[args.warm :]][-args.settle :]
                if len(tail) == args.settle and settled_start(tail, 0.95, 0.05, args.settle - 1) == 0:
                    settled_at = len(full)
            first = settled_at if args.settle else args.warm
            if first is not None and len(full) >= first + args.batches:
                break
    first = (settled_at if settled_at is not None else len(full)) if args.settle else args.warm
    measured = full[first : first + args.batches]
    cpu = None
    if measured:
        begin = cpu_at(samples, measured[0].start_s)
        end = cpu_at(samples, measured[-1].start_s + measured[-1].duration_s)
        cpu = None if begin is None or end is None else end - begin
    each = [(cpu_at(samples, b.start_s), cpu_at(samples, b.start_s + b.duration_s)) for b in measured]
    batch_cpu = [e - b for b, e in each if b is not None and e is not None]
    return BacklogRun(side, round_, measured, cpu, time.monotonic() - started, batch_cpu)


def side_runner(
    side: str,
    module: ModuleType,
    kafka: KafkaCluster,
    spark: SparkCluster,
    results: Path,
    args: argparse.Namespace,
) -> ExperimentRunner:
    """A runner of the job `module` (one side: the click-stream job, or one whose ``RECORDS`` template names its
    records) on one instance, its results under `results`."""
    records = getattr(module, "RECORDS", None) or module.CLICKS
    benchmark = Benchmark(
        f"backlog-{side}",
        module.start_query,
        lambda users: Workload(keys=users, records=records),
        input_partitions=4,
    )
    settings = ExperimentSettings(loads=(args.users,), resources=(1,), instance_cpu=args.instance_cpu)
    writer = new_writer(results, side, benchmark, settings, Metric.DEMAND, {})
    return ExperimentRunner(benchmark, settings, kafka, spark, writer)


def mean_interval(ratios: list[float]) -> str:
    mean = statistics.fmean(ratios)
    if len(ratios) < 2:
        return f"{mean - 1:+.1%}"
    half = stats.t.ppf(0.975, len(ratios) - 1) * statistics.stdev(ratios) / len(ratios) ** 0.5
    return f"{mean - 1:+.1%} [{mean - half - 1:+.1%}, {mean + half - 1:+.1%}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hash-rounds", type=int, default=2, help="0: the change is the unchanged job (A/A)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--users", type=int, default=5000, help="the load: keys, each sending once a second")
    parser.add_argument("--fill-factor", type=float, default=20.0)
    parser.add_argument("--fill-s", type=float, default=20.0)
    parser.add_argument("--batch-records", type=int, default=200_000)
    parser.add_argument("--warm", type=int, default=1)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--max-s", type=float, default=150.0)
    parser.add_argument(
        "--settle",
        type=int,
        default=0,
        help="measure the --batches after the last SETTLE full batches no longer fall (0: a fixed count)",
    )
    parser.add_argument("--instance-cpu", type=float, default=1.0)
    args = parser.parse_args()

    source = (EXAMPLE / "clickstream.py").read_text()
    changed = changed_source(source, args.hash_rounds) if args.hash_rounds else source
    jobs = {"ref": job_module("backlog_ref", source), "change": job_module("backlog_change", changed)}
    results = Path(tempfile.mkdtemp(prefix="theodolite-backlog-"))
    runs: list[BacklogRun] = []
    wall = time.monotonic()
    with (
        open_kafka(TheodoliteSettings(max_instances=1)) as kafka,
        open_spark(TheodoliteSettings(max_instances=1)) as spark,
    ):
        runners = {
            side: side_runner(side, module, kafka, spark, results, args) for side, module in jobs.items()
        }
        for round_ in range(args.rounds):
            for side in ("ref", "change") if round_ % 2 == 0 else ("change", "ref"):
                run = run_side(runners[side], spark, side, round_, args.users, args)
                runs.append(run)
                durations = ", ".join(f"{b.duration_s:.1f}" for b in run.batches)
                cpu = run.cpu_us_per_record
                print(
                    f"round {round_} {side:6}: {len(run.batches)} batches of {args.batch_records} ({durations} s): "
                    f"{run.us_per_record:.2f} us/record wall, "
                    f"{'-' if cpu is None else f'{cpu:.2f}'} CPU us/record "
                    f"(median batch {run.median_batch_cpu_us or 0:.2f}) [{run.wall_s:.0f} s]",
                    flush=True,
                )
    by_round = {(r.side, r.round): r for r in runs if r.batches}
    wall_ratios, cpu_ratios, batch_ratios = [], [], []
    for round_ in range(args.rounds):
        ref, change = by_round.get(("ref", round_)), by_round.get(("change", round_))
        if ref is None or change is None:
            continue
        wall_ratios.append(change.us_per_record / ref.us_per_record)
        if ref.cpu_us_per_record and change.cpu_us_per_record:
            cpu_ratios.append(change.cpu_us_per_record / ref.cpu_us_per_record)
        if ref.median_batch_cpu_us and change.median_batch_cpu_us:
            batch_ratios.append(change.median_batch_cpu_us / ref.median_batch_cpu_us)
    if not wall_ratios:
        raise SystemExit(f"no round measured both sides; raw results: {results}")
    print(f"\nchange ({args.hash_rounds} hash rounds) over REF, {len(wall_ratios)} rounds:")
    print(
        "  wall per record: "
        + ", ".join(f"{r - 1:+.1%}" for r in wall_ratios)
        + f" -> {mean_interval(wall_ratios)}"
    )
    if cpu_ratios:
        print(
            "  CPU per record:  "
            + ", ".join(f"{r - 1:+.1%}" for r in cpu_ratios)
            + f" -> {mean_interval(cpu_ratios)}"
        )
    if batch_ratios:
        print(
            "  median batch's CPU per record: "
            + ", ".join(f"{r - 1:+.1%}" for r in batch_ratios)
            + f" -> {mean_interval(batch_ratios)}"
        )
    print(f"wall time {time.monotonic() - wall:.0f} s; raw results: {results}")


if __name__ == "__main__":
    main()
