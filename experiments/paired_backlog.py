"""Does measuring REF and the change at the same time, rather than one after the other, take out the drift that
made backlog_cost.py's runs of one code differ by up to 1.8x (docs/lab-notes/capacity.md, 2026-11-27)?

Each round starts both sides together, each in its own driver process with its own Spark cluster of one
instance (as pull-request mode runs each side in a driver of its own), on one embedded broker. Each side does
what backlog_cost.py's run does -- fill its input topic at ``--fill-factor`` times the load while its instance
runs without a limit, then limit the instance and read the backlog in micro-batches capped at
``--batch-records`` -- but the two start filling at the same moment, and the full batches ``--warm`` ...
``--warm + --batches`` of both are measured over the same minutes, so a drift of the host or of the executors'
warm-up falls on both at once. Per round and figure -- wall seconds per record, each batch's cycle per record (its
start to the next batch's: what pull-request mode judges), and the tasks' executor CPU per record from each
side's event log (core/task_cpu.py) -- the change's median batch over REF's, and the median of the batch-by-batch
ratios (batch k of the change over batch k of REF). ``--job reviews`` reads experiments/jobs/review_scores.py, a
job whose per-record work is in a Python UDF, its change ``--hash-rounds`` more digest rounds a record.
``--one-at-a-time`` runs the sides in turn instead, each alone on the host, as pull-request mode runs its sides.

    python experiments/paired_backlog.py --hash-rounds 0 --rounds 3     # A/A
    python experiments/paired_backlog.py --hash-rounds 2 --rounds 3     # two extra hashes a record
    python experiments/paired_backlog.py --hash-rounds 0 --rounds 2 --one-at-a-time
    python experiments/paired_backlog.py --job reviews --hash-rounds 9 --rounds 3 --instance-cpu 0.5
    python experiments/paired_backlog.py --job reviews --hash-rounds 9 --calibrate   # the transform alone

Nothing else may run beside it (the instances are CPU-limited).
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from backlog_cost import mean_interval, side_runner
from own_job_quality import EXAMPLE, changed_source

from pytest_theodolite.core.paired_cost import paired_cost
from pytest_theodolite.engine.backlog_read import BacklogPlan, read_backlog
from pytest_theodolite.engine.services import open_kafka, open_spark
from pytest_theodolite.engine.settings import TheodoliteSettings

SIDES = ("ref", "change")
#: what each batch is compared by: its wall time, its cycle (its start to the next batch's start: the wall-clock
#: throughput's inverse, the driver's work between batches included), its tasks' executor CPU
FIGURES = ("wall", "cycle", "task CPU")
#: what each side's process is given of the parent's options
RUN_OPTIONS = "job hash_rounds users fill_factor fill_s batch_records warm batches max_s instance_cpu".split()
#: the jobs a round can read: the click-stream example, and a job of a shape the gates do not have (a Python UDF)
REVIEWS = Path(__file__).parent / "jobs" / "review_scores.py"
REVIEWS_ROUNDS = "DIGEST_ROUNDS = 4\n"


def run_arguments(args: argparse.Namespace) -> list[str]:
    return [f"--{name.replace('_', '-')}={getattr(args, name)}" for name in RUN_OPTIONS]


def backlog_plan(args: argparse.Namespace) -> BacklogPlan:
    return BacklogPlan(
        batch_records=args.batch_records,
        fill_factor=args.fill_factor,
        fill_s=args.fill_s,
        warm_batches=args.warm,
        batches=args.batches,
        max_read_s=args.max_s,
    )


def reviews_source(more_rounds: int) -> str:
    """The review job's source, its UDF hashing each digest `more_rounds` more times (0: unchanged)."""
    source = REVIEWS.read_text()
    if REVIEWS_ROUNDS not in source:
        raise SystemExit(f"{REVIEWS} no longer has the line this script edits")
    return source.replace(REVIEWS_ROUNDS, f"DIGEST_ROUNDS = {4 + more_rounds}\n")


def calibrate_reviews(more_rounds: int, records: int = 200_000, repeats: int = 5) -> None:
    """The change's extra cost in the review job's transform alone: both versions over the same cached records
    in ``local[1]``, alternating, the first round left out (code generation, JIT)."""
    from own_job_quality import job_module
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    jobs = {"unchanged": job_module("unchanged", reviews_source(0))}
    jobs["changed"] = job_module("changed", reviews_source(more_rounds))
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    try:
        ids = spark.range(records)
        texts = F.array(*[F.lit(text) for text in jobs["unchanged"].TEXTS])
        review = F.struct(
            F.concat(F.lit("p"), (F.col("id") % 40).cast("string")).alias("product"),
            F.concat(F.lit("reviewer-"), (F.col("id") % 5000).cast("string")).alias("user"),
            F.element_at(texts, (F.col("id") % len(jobs["unchanged"].TEXTS) + 1).cast("int")).alias("text"),
            (F.lit(1_764_000_000_000) + F.col("id")).alias("ts"),
        )
        raw = ids.select(F.to_json(review).cast("binary").alias("value")).cache()
        raw.count()
        seconds: dict[str, list[float]] = {name: [] for name in jobs}
        for repeat in range(repeats + 1):
            for name, job in jobs.items() if repeat % 2 == 0 else reversed(jobs.items()):
                started = time.perf_counter()
                job.product_scores(raw).write.format("noop").mode("overwrite").save()
                if repeat:
                    seconds[name].append(time.perf_counter() - started)
        unchanged, changed = (statistics.median(seconds[name]) for name in jobs)
        print(
            f"{records} records, {repeats} runs each: unchanged {unchanged:.2f} s, changed ({more_rounds} more "
            f"rounds) {changed:.2f} s: {changed / unchanged - 1:+.1%} in the transform alone"
        )
    finally:
        spark.stop()


def child(args: argparse.Namespace) -> None:
    """One side of one round: wait until the other side's cluster is up too, then run."""
    if args.job == "reviews":
        source = reviews_source(args.hash_rounds if args.child == "change" else 0) + "\nRECORDS = REVIEWS\n"
    else:
        source = (EXAMPLE / "clickstream.py").read_text()
        if args.child == "change" and args.hash_rounds:
            source = changed_source(source, args.hash_rounds)
    sync = Path(args.sync)
    # an importable module in the round's directory: the runner finds its import root and gives it to the
    # executors, which import the job's UDFs from it as a user's would
    (sync / "jobs").mkdir(exist_ok=True)
    (sync / "jobs" / f"paired_{args.child}.py").write_text(source)
    sys.path.insert(0, str(sync / "jobs"))
    module = importlib.import_module(f"paired_{args.child}")
    settings = TheodoliteSettings(kafka_provider="external", kafka_bootstrap=args.bootstrap, max_instances=1)
    with open_kafka(settings) as kafka, open_spark(settings) as spark:
        runner = side_runner(args.child, module, kafka, spark, sync, args)
        (sync / f"ready-{args.child}").touch()
        deadline = time.monotonic() + 300
        while not args.alone and not all((sync / f"ready-{side}").exists() for side in SIDES):
            if time.monotonic() > deadline:
                raise SystemExit("the other side's cluster did not come up within 300 s")
            time.sleep(0.2)
        # both sides measure the same batches by number, over the same minutes
        run = read_backlog(runner, args.users, backlog_plan(args))
    (sync / f"{args.child}.json").write_text(
        json.dumps(
            {
                "batches": [[b.start_s, b.duration_s, b.input_rows] for b in run.batches],
                "task_cpu_s": list(run.task_cpu_s),
                "cycle_s": list(run.cycle_s),
                "wall_s": run.wall_s,
            }
        )
    )


def per_record(run: dict, figure: str) -> list[float]:
    """A side's measured batches as seconds per record, in order: ``wall`` (the batch's duration), ``cycle``
    (its start to the next batch's start, as pull-request mode reads it) or ``task CPU`` (its tasks' executor
    CPU; batches without a figure left out)."""
    if figure == "wall":
        return [d / n for _, d, n in run["batches"]]
    if figure == "cycle":
        return [c / n for (_, _, n), c in zip(run["batches"], run["cycle_s"], strict=True) if c is not None]
    return [c / n for (_, _, n), c in zip(run["batches"], run["task_cpu_s"], strict=True) if c is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--job", choices=("clickstream", "reviews"), default="clickstream")
    parser.add_argument(
        "--hash-rounds",
        type=int,
        default=2,
        help="0: the change is the unchanged job (A/A); reviews: digest rounds",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--users", type=int, default=5000)
    parser.add_argument("--fill-factor", type=float, default=15.0)
    parser.add_argument("--fill-s", type=float, default=50.0)
    parser.add_argument("--batch-records", type=int, default=120_000)
    parser.add_argument("--warm", type=int, default=3)
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--max-s", type=float, default=300.0)
    parser.add_argument("--instance-cpu", type=float, default=0.25)
    parser.add_argument(
        "--one-at-a-time", action="store_true", help="run the sides in turn, each alone, not at the same time"
    )
    parser.add_argument(
        "--calibrate", action="store_true", help="reviews: time the change in the transform alone, local[1]"
    )
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--alone", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--sync", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.calibrate:
        if args.job != "reviews":
            raise SystemExit("--calibrate: the click-stream's is own_job_quality.py --calibrate")
        calibrate_reviews(args.hash_rounds)
        return
    if args.child:
        child(args)
        return

    root = Path(tempfile.mkdtemp(prefix="theodolite-paired-"))
    ratios: dict[tuple[str, str], list[float]] = {}
    wall = time.monotonic()
    with open_kafka(TheodoliteSettings(max_instances=1)) as kafka:
        for round_ in range(args.rounds):
            sync = root / f"round-{round_}"
            sync.mkdir()
            command = [
                *(sys.executable, __file__, f"--round={round_}", f"--bootstrap={kafka.bootstrap_servers}"),
                *(f"--sync={sync}", *run_arguments(args), *(["--alone"] if args.one_at_a_time else [])),
            ]
            if args.one_at_a_time:
                failed = any(run_child(command, side, sync).wait() != 0 for side in SIDES)
            else:
                children = [run_child(command, side, sync) for side in SIDES]
                failed = any([c.wait() != 0 for c in children])
            if failed:
                raise SystemExit(f"a side failed in round {round_}: {sync}/*.log")
            runs = {side: json.loads((sync / f"{side}.json").read_text()) for side in SIDES}
            for side in SIDES:
                durations = ", ".join(f"{d:.1f}" for _, d, _ in runs[side]["batches"])
                starts = [s for s, _, _ in runs[side]["batches"]]
                medians = {
                    figure: statistics.median(values) * 1e6
                    for figure in FIGURES
                    if (values := per_record(runs[side], figure))
                }
                print(
                    f"round {round_} {side:6}: {len(starts)} batches ({durations} s)"
                    + (f" from {time.strftime('%H:%M:%S', time.localtime(starts[0]))}" if starts else "")
                    + "".join(
                        f", median {value:.2f} us/record {figure}" for figure, value in medians.items()
                    ),
                    flush=True,
                )
            for figure in FIGURES:
                ref, change = (per_record(runs[side], figure) for side in SIDES)
                if not ref or not change:
                    print(
                        f"round {round_}: a side has no {figure} figure of a full batch ({sync})", flush=True
                    )
                    continue
                compared = paired_cost(ref, change)
                by_medians = compared.change_median / compared.ref_median
                ratios.setdefault((figure, "median batches"), []).append(by_medians)
                ratios.setdefault((figure, "batch by batch"), []).append(compared.batch_ratio)
                print(
                    f"round {round_}: {figure}: change over REF {by_medians - 1:+.1%} (median batches), "
                    f"{compared.change:+.1%} (median of batch-by-batch ratios)",
                    flush=True,
                )
    if not ratios:
        raise SystemExit(f"no round measured both sides: {root}")
    how = "one after the other" if args.one_at_a_time else "together"
    print(f"\nchange ({args.hash_rounds} hash rounds) over REF, measured {how}:")
    for (figure, by), values in ratios.items():
        print(
            f"  {figure}, {by} ({len(values)} rounds): "
            + ", ".join(f"{r - 1:+.1%}" for r in values)
            + f" -> {mean_interval(values)}"
        )
    print(f"wall time {time.monotonic() - wall:.0f} s; logs and batches: {root}")


def run_child(command: list[str], side: str, sync: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [*command, f"--child={side}"], stdout=(sync / f"{side}.log").open("w"), stderr=subprocess.STDOUT
    )


if __name__ == "__main__":
    main()
