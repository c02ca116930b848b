"""Measure a use case's full (load x instances) grid once, then replay every search strategy on it.

    python experiments/demand_grid.py --uc 1 --loads 2000 5000 10000 15000 --resources 1 2 3 4 \
        --instance-cpu 0.25 --duration 20 --warmup 10 [--results DIR]

Prints the demand function, each sub-experiment's lag slope and phase timings (setup / warm-up / measurement
/ teardown), and how many sub-experiments each strategy would have run for the same demand function (the
strategies are replayed against the measured verdicts, so they are compared on identical data).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import repo_paths  # noqa: F401 -- spark_jobs/ and benchmarks/ on sys.path
from usecases import UC1_KEYS, UC2_KEYS, UC3_KEYS, UC4_ELEMENTS

from pytest_theodolite.core.evaluation import SloSettings
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.core.search import SEARCH_STRATEGIES, Strategy, search_demand
from pytest_theodolite.engine.benchmark import ExperimentSettings
from pytest_theodolite.engine.markers import parse_threshold
from pytest_theodolite.engine.runner import ExperimentRunner, new_writer
from pytest_theodolite.engine.services import open_kafka, open_spark
from pytest_theodolite.engine.settings import TheodoliteSettings

BENCHMARKS = {1: UC1_KEYS, 2: UC2_KEYS, 3: UC3_KEYS, 4: UC4_ELEMENTS}


def slope_text(record) -> str:
    """The lag slope, or why there is none (an ERRORED or INVALID sub-experiment has no fitted slope)."""
    slope = record.lag_trend_slope
    return f"{slope:+.0f}/s" if slope is not None else "none"


def cell(record) -> str:
    if record is None:
        return "not run"
    return f"{slope_text(record)} ({record.outcome.value})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--uc", type=int, choices=sorted(BENCHMARKS), default=1)
    parser.add_argument("--loads", type=int, nargs="+", required=True)
    parser.add_argument("--resources", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--instance-cpu", type=float, default=0.25)
    parser.add_argument("--duration", type=float, default=20)
    parser.add_argument("--warmup", type=float, default=10)
    parser.add_argument("--threshold", default="5%")
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args()

    benchmark = BENCHMARKS[args.uc]
    settings = ExperimentSettings(
        loads=tuple(args.loads),
        resources=tuple(args.resources),
        duration_s=args.duration,
        slo=SloSettings(warmup_s=args.warmup, lag_trend_threshold=parse_threshold(args.threshold)),
        strategy=Strategy.FULL,
        lower_bound=False,
        instance_cpu=args.instance_cpu,
    )
    results = args.results or Path(tempfile.mkdtemp(prefix="theodolite-grid-"))
    infra = TheodoliteSettings(max_instances=max(args.resources))
    with open_kafka(infra) as kafka, open_spark(infra) as spark:
        writer = new_writer(
            results, "grid", benchmark, settings, Metric.DEMAND, {"instance_cpu": args.instance_cpu}
        )
        runner = ExperimentRunner(
            benchmark,
            settings,
            kafka,
            spark,
            writer,
            on_sub_experiment=lambda r: print(
                f"  l={r.load} r={r.resources}: {r.outcome.value} slope {slope_text(r)}", flush=True
            ),
        )
        demand = runner.measure_demand()

    print(
        f"\n## {benchmark.name}: demand (instances at {args.instance_cpu} CPU each; threshold {args.threshold})"
    )
    print("| load (records/s) | " + " | ".join(f"r={r} slope" for r in args.resources) + " | demand |")
    print("|---|" + "---|" * (len(args.resources) + 1))
    for load in args.loads:
        rate = benchmark.workload(load).target_rate
        cells = [cell(runner.records.get((load, r))) for r in args.resources]
        print(f"| {load} ({rate:.0f}/s) | " + " | ".join(cells) + f" | {demand.status(load)} |")

    timings = list(runner.timings.values())
    print("\n## Wall time per sub-experiment (median over all, seconds)")
    for phase in ("setup_s", "warmup_s", "measurement_s", "teardown_s"):
        print(f"- {phase.removesuffix('_s')}: {statistics.median(getattr(t, phase) for t in timings):.1f}")

    outcomes = {key: record.outcome for key, record in runner.records.items()}
    print(
        "\n## Sub-experiments each strategy needs for this demand function (replayed on the measured verdicts)"
    )
    for strategy in SEARCH_STRATEGIES:
        for lower_bound in (False, True):
            # a point the grid did not run (its load was unmeasured) replays as unmeasured
            replay = search_demand(
                lambda l, r: outcomes.get((l, r), Outcome.ERRORED),
                settings.loads,
                settings.resources,
                strategy,
                lower_bound=lower_bound,
            )
            same = all(replay.status(l) == demand.status(l) for l in settings.loads)
            print(
                f"- {replay.strategy}: {len(replay.sub_experiments)} sub-experiments"
                + ("" if same else " (a different demand function: the strategy's assumption does not hold)")
            )
    print(f"\nraw results: {results}")


if __name__ == "__main__":
    main()
