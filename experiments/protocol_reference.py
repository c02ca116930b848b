"""Do the gates' fast verdicts equal those of Theodolite's own, long protocol? Runs each given sub-experiment
(use case, load, instances) under both, one after the other on the same broker and cluster, and prints both
verdicts, slopes and wall times.

    python experiments/protocol_reference.py --pair 1:12000:1 --pair 1:12000:2 --pair 2:20000:2

The gates' protocol: primed without the CPU limit, warm-up until the batch durations stop falling, measured
from 20 s until the batch-aligned lag slope's 95 % interval lies on one side of the threshold (at most
120 s). Theodolite's: 60 s warm-up under the limit, 300 s measured, OLS over every lag sample. Both judge the
lag trend against 5 % of the load, on instances limited to 0.25 CPU, as the shipped gates do.
``--protocol theodolite`` runs Theodolite's alone (to check verdicts a gate reached another way, e.g. the
capacity strategy's).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1] / "benchmarks")
)  # the gates' use cases (usecases.py)

from usecases import QUICK_WARMUP_EXECUTORS, UC1_KEYS, UC2_KEYS, UC3_KEYS, UC4_ELEMENTS

from pytest_theodolite.core.evaluation import SloSettings
from pytest_theodolite.core.protocol import MeasurementPlan
from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.engine.benchmark import ExperimentSettings
from pytest_theodolite.engine.markers import parse_threshold
from pytest_theodolite.engine.runner import ExperimentRunner, new_writer
from pytest_theodolite.engine.services import open_kafka, open_spark
from pytest_theodolite.engine.settings import TheodoliteSettings

BENCHMARKS = {1: UC1_KEYS, 2: UC2_KEYS, 3: UC3_KEYS, 4: UC4_ELEMENTS}
PROTOCOLS = {
    "gates": (MeasurementPlan(), "batch-aligned"),
    "theodolite": (
        MeasurementPlan(
            warmup_s=60,
            prime_unlimited=False,
            min_duration_s=300,
            max_duration_s=300,
            falling_behind_batches=0,
        ),
        "ols",
    ),
}


def parse_pair(text: str) -> tuple[int, int, int]:
    try:
        uc, load, resources = (int(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not UC:LOAD:INSTANCES, e.g. 1:12000:2") from None
    if uc not in BENCHMARKS:
        raise argparse.ArgumentTypeError(f"use case {uc} is not one of {sorted(BENCHMARKS)}")
    return uc, load, resources


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--pair", type=parse_pair, action="append", required=True, metavar="UC:LOAD:INSTANCES"
    )
    parser.add_argument("--results", type=Path, default=None)
    parser.add_argument(
        "--protocol", choices=sorted(PROTOCOLS), action="append", help="run only these (default: both)"
    )
    args = parser.parse_args()
    results = args.results or Path(tempfile.mkdtemp(prefix="theodolite-reference-"))
    infra = TheodoliteSettings(max_instances=4)
    rows = []
    with open_kafka(infra) as kafka, open_spark(infra) as spark:
        for index, (uc, load, resources) in enumerate(args.pair):
            benchmark = BENCHMARKS[uc]
            verdicts = {}
            for name, (plan, method) in PROTOCOLS.items():
                if args.protocol and name not in args.protocol:
                    continue
                settings = ExperimentSettings(
                    loads=(load,),
                    resources=(resources,),
                    duration_s=plan.min_duration_s,
                    slo=SloSettings(
                        warmup_s=plan.warmup_s or 0.0,
                        lag_trend_threshold=parse_threshold("5%"),
                        slope_method=method,
                    ),
                    plan=plan,
                    instance_cpu=0.25,
                    spark_conf=QUICK_WARMUP_EXECUTORS,
                )
                writer = new_writer(results, f"{name}-{index}", benchmark, settings, Metric.DEMAND, {})
                runner = ExperimentRunner(benchmark, settings, kafka, spark, writer)
                started = time.monotonic()
                record = runner.run_sub_experiment(load, resources)
                lag = next(v for v in record.verdicts if v.name == "lag-trend")
                verdicts[name] = record.outcome.value
                slope = "-" if lag.value is None else f"{lag.value:+.0f}"
                print(
                    f"uc{uc} load={load} r={resources} {name}: {record.outcome.value.upper()} slope {slope} "
                    f"(threshold {lag.threshold:.0f}) in {time.monotonic() - started:.0f} s; "
                    f"{lag.detail}",
                    flush=True,
                )
                rows.append(
                    (uc, load, resources, name, record.outcome.value, slope, time.monotonic() - started)
                )
            if len(verdicts) > 1:  # one protocol alone has nothing to agree with
                print(
                    f"   -> {'same verdict' if len(set(verdicts.values())) == 1 else 'DIFFERENT verdicts'}",
                    flush=True,
                )
    print("\n| use case | load | instances | protocol | verdict | lag slope (records/s) | wall time (s) |")
    print("|---|---|---|---|---|---|---|")
    for uc, load, resources, name, outcome, slope, wall in rows:
        print(f"| UC{uc} | {load} | {resources} | {name} | {outcome} | {slope} | {wall:.0f} |")
    print(f"\nraw results: {results}")


if __name__ == "__main__":
    main()
