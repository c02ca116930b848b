"""Do the gates' fast verdicts equal those of Theodolite's own, long protocol? Runs each given sub-experiment
(use case, load, instances) under both, one after the other on the same broker and cluster, and prints both
verdicts, slopes and wall times.

    python experiments/protocol_reference.py --pair 1:12000:1 --pair 1:12000:2 --pair 2:20000:2

The gates' protocol: primed without the CPU limit, warm-up until the batch durations stop falling, measured
from 20 s until the batch-aligned lag slope's 95 % interval lies on one side of the threshold (at most
120 s). Theodolite's: 60 s warm-up under the limit, 300 s measured, OLS over every lag sample. Both judge the
lag trend against 5 % of the load, on instances limited to 0.25 CPU, as the shipped gates do.
``--protocol theodolite`` runs Theodolite's alone (to check verdicts a gate reached another way, e.g. the
capacity strategy's). ``--gate-slos`` adds the shipped gate's own micro-batch bound (UC3's 7.5 s, read from
benchmarks/test_scalability_gates.py) to both, so that the long protocol judges the gate's verdict definition:

    python experiments/protocol_reference.py --protocol theodolite --gate-slos --pair 3:8000:1

``--protocol theodolite-primed`` runs Theodolite's measurement (60 s warm-up, 300 s, OLS) after the gates' start,
primed without the CPU limit: where the two protocols differ, whether the start or the length decided.

``--boundaries UC`` runs both sides of every demand in that use case's stored baseline (baselines/): for a load
whose demand is r, r instances (the baseline says they pass) and r - 1 (they fail), where r - 1 >= 1:

    python experiments/protocol_reference.py --gate-slos --boundaries 3 --boundaries 4

``--read DIR`` (repeatable) runs nothing: it pairs the verdicts of runs this script recorded (each ``--results``
directory) and prints the agreement over all of them. The agreement counts apart the pairs whose gates' verdict
was uncertain (the gate itself says so, and a stored-mode gate measures such a point again or calls it not
comparable): that is the band within which the two protocols may differ. It then pools the repetitions by
point: a point where Theodolite's own repetitions disagree lies in the band too.

    python experiments/protocol_reference.py --read /tmp/pref-a --read /tmp/pref-b
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import repo_paths  # noqa: F401 -- spark_jobs/ and benchmarks/ on sys.path
import test_scalability_gates
from usecases import QUICK_WARMUP_EXECUTORS, UC1_KEYS, UC2_KEYS, UC3_KEYS, UC4_ELEMENTS

from pytest_theodolite.core.evaluation import SloSettings
from pytest_theodolite.core.measurement_plan import MeasurementPlan
from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.engine.benchmark import ExperimentSettings
from pytest_theodolite.engine.markers import parse_threshold
from pytest_theodolite.engine.runner import ExperimentRunner, new_writer
from pytest_theodolite.engine.services import open_kafka, open_spark
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.store.baseline import Baseline, baseline_path, load_baseline
from pytest_theodolite.store.results import list_experiment_ids, read_results

BASELINES = Path(__file__).resolve().parents[1] / "baselines"
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
    # Theodolite's measurement after the gates' start (primed without the limit): tells whether a difference
    # comes from the start or from the length of the measurement. Run only when asked for (--protocol).
    "theodolite-primed": (
        MeasurementPlan(warmup_s=60, min_duration_s=300, max_duration_s=300, falling_behind_batches=0),
        "ols",
    ),
}
DEFAULT_PROTOCOLS = ("gates", "theodolite")


def gate_batch_bound(benchmark: object) -> float | None:
    """The shipped gate's ``max_batch_duration`` for `benchmark` (None: its gate has none)."""
    for name in dir(test_scalability_gates):
        for mark in getattr(getattr(test_scalability_gates, name), "pytestmark", []):
            if mark.name == "theodolite" and mark.args[0] is benchmark:
                bound = mark.kwargs.get("max_batch_duration")
                return None if bound is None else float(bound)
    return None


def parse_pair(text: str) -> tuple[int, int, int]:
    try:
        uc, load, resources = (int(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not UC:LOAD:INSTANCES, e.g. 1:12000:2") from None
    if uc not in BENCHMARKS:
        raise argparse.ArgumentTypeError(f"use case {uc} is not one of {sorted(BENCHMARKS)}")
    return uc, load, resources


def parse_use_case(text: str) -> int:
    if text not in {str(uc) for uc in BENCHMARKS}:
        raise argparse.ArgumentTypeError(f"use case {text!r} is not one of {sorted(BENCHMARKS)}")
    return int(text)


def boundary_pairs(uc: int, baseline: Baseline) -> list[tuple[int, int, int]]:
    """Both sides of each stored demand: (uc, load, r) and (uc, load, r - 1); a load of demand 1 has one side
    (no instance count below it), a load of demand "none" none (no count was seen to pass)."""
    pairs = []
    for load, demand in baseline.demand.items():
        if demand is not None:
            pairs += [(uc, load, r) for r in (demand - 1, demand) if r >= 1]
    return pairs


def stored_boundaries(uc: int) -> list[tuple[int, int, int]]:
    name = BENCHMARKS[uc].name
    baseline = load_baseline(baseline_path(BASELINES, name), name)
    if baseline is None:
        raise SystemExit(
            f"no baseline for {name} in {BASELINES}: record one or give --pair UC:LOAD:INSTANCES"
        )
    return boundary_pairs(uc, baseline)


@dataclasses.dataclass
class PairVerdicts:
    """One sub-experiment's verdicts: each protocol's outcome (pass/fail) and whether the gates' was certain."""

    label: str  # e.g. "uc3-keys 16000@4"
    outcomes: dict[str, str] = dataclasses.field(default_factory=dict)
    gates_certain: bool | None = None


def same_verdict(pair: PairVerdicts) -> bool:
    return len(set(pair.outcomes.values())) == 1


def agreement(pairs: list[PairVerdicts]) -> str:
    """'k of n agree' over the pairs both protocols ran, and over those whose gates' verdict was certain."""
    compared = [pair for pair in pairs if len(pair.outcomes) > 1]
    same = sum(1 for pair in compared if same_verdict(pair))
    certain = [pair for pair in compared if pair.gates_certain]
    same_certain = sum(1 for pair in certain if same_verdict(pair))
    return (
        f"{same} of {len(compared)} pairs reached the same verdict under both protocols; "
        f"of the {len(certain)} whose gates' verdict was certain, {same_certain}"
    )


def recorded_pairs(directory: Path) -> list[PairVerdicts]:
    """The pairs a ``--results`` directory of this script holds: experiments ``<protocol>-<index>``, one
    sub-experiment each, paired by index."""
    pairs: dict[str, PairVerdicts] = {}
    for experiment in list_experiment_ids(directory):
        protocol, _, index = experiment.rpartition("-")
        if protocol not in PROTOCOLS or not index.isdigit():
            continue
        results = read_results(directory, experiment)
        for sub in results.sub_experiments:
            label = f"{results.settings.get('benchmark', '?')} {sub.load}@{sub.resources}"
            pair = pairs.setdefault(index, PairVerdicts(label))
            pair.outcomes[protocol] = sub.outcome.value
            if protocol == "gates":
                pair.gates_certain = sub.certain
    return [pairs[index] for index in sorted(pairs, key=int)]


def by_point(pairs: list[PairVerdicts]) -> list[str]:
    """The pairs pooled by point (one line each): each protocol's verdicts over its repetitions, and whether
    the point counts: where Theodolite's own repetitions disagree, the reference is itself uncertain there and
    the point lies in the band, whatever the gates read."""
    points: dict[str, dict[str, list[str]]] = {}
    for pair in pairs:
        for protocol, outcome in pair.outcomes.items():
            points.setdefault(pair.label, {}).setdefault(protocol, []).append(outcome)
    lines = []
    for label, outcomes in points.items():
        tallies = "; ".join(
            f"{protocol} " + ", ".join(f"{o.upper()} {found.count(o)}" for o in sorted(set(found)))
            for protocol, found in outcomes.items()
        )
        reference = set(outcomes.get("theodolite", []))
        gates = outcomes.get("gates", [])
        if not reference or not gates:
            reading = "one protocol only"
        elif len(reference) > 1:
            reading = "Theodolite's own repetitions disagree: in the band"
        else:
            same = gates.count(next(iter(reference)))
            reading = {len(gates): "agree", 0: "differ"}.get(same, f"agree in {same} of {len(gates)}")
        lines.append(f"{label}: {tallies} -> {reading}")
    return lines


def print_recorded(directories: list[Path]) -> None:
    everything = []
    for directory in directories:
        for pair in recorded_pairs(directory):
            everything.append(pair)
            verdicts = ", ".join(f"{name} {outcome.upper()}" for name, outcome in pair.outcomes.items())
            certainty = {None: "", True: " (gates certain)", False: " (gates uncertain)"}[pair.gates_certain]
            print(f"{directory}: {pair.label}: {verdicts}{certainty}")
    print(f"\n{agreement(everything)}")
    print("\nby point, repetitions pooled:")
    for line in by_point(everything):
        print(f"  {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pair", type=parse_pair, action="append", default=[], metavar="UC:LOAD:INSTANCES")
    parser.add_argument(
        "--boundaries",
        type=parse_use_case,
        action="append",
        default=[],
        metavar="UC",
        help="both sides of every demand in the use case's stored baseline",
    )
    parser.add_argument("--results", type=Path, default=None)
    parser.add_argument(
        "--read",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="run nothing: the agreement over runs this script recorded in DIR (repeatable)",
    )
    parser.add_argument(
        "--protocol",
        choices=sorted(PROTOCOLS),
        action="append",
        help="run only these (default: gates and theodolite; theodolite-primed: the long protocol after the "
        "gates' unlimited priming)",
    )
    parser.add_argument(
        "--gate-slos",
        action="store_true",
        help="judge the gate's micro-batch bound too (UC3), not the lag alone",
    )
    args = parser.parse_args()
    if args.read:
        print_recorded(args.read)
        return
    pairs = args.pair + [pair for uc in args.boundaries for pair in stored_boundaries(uc)]
    if not pairs:
        parser.error("give the sub-experiments to run: --pair UC:LOAD:INSTANCES or --boundaries UC")
    results = args.results or Path(tempfile.mkdtemp(prefix="theodolite-reference-"))
    infra = TheodoliteSettings(max_instances=4)
    rows, verdicts_by_pair = [], []
    with open_kafka(infra) as kafka, open_spark(infra) as spark:
        for index, (uc, load, resources) in enumerate(pairs):
            benchmark = BENCHMARKS[uc]
            verdicts = PairVerdicts(f"{benchmark.name} {load}@{resources}")
            for name, (plan, method) in PROTOCOLS.items():
                if name not in (args.protocol or DEFAULT_PROTOCOLS):
                    continue
                settings = ExperimentSettings(
                    loads=(load,),
                    resources=(resources,),
                    duration_s=plan.min_duration_s,
                    slo=SloSettings(
                        warmup_s=plan.warmup_s or 0.0,
                        lag_trend_threshold=parse_threshold("5%"),
                        slope_method=method,
                        max_batch_duration_s=gate_batch_bound(benchmark) if args.gate_slos else None,
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
                verdicts.outcomes[name] = record.outcome.value
                if name == "gates":
                    verdicts.gates_certain = record.certain
                slope = "-" if lag.value is None else f"{lag.value:+.0f}"
                failed = [v.name for v in record.verdicts if v.outcome.value == "fail"]
                which = f" ({', '.join(failed)})" if failed else ""
                print(
                    f"uc{uc} load={load} r={resources} {name}: {record.outcome.value.upper()}{which} slope {slope} "
                    f"(threshold {lag.threshold:.0f}) in {time.monotonic() - started:.0f} s; "
                    f"{lag.detail}",
                    flush=True,
                )
                rows.append(
                    (uc, load, resources, name, record.outcome.value, slope, time.monotonic() - started)
                )
            verdicts_by_pair.append(verdicts)
            if len(verdicts.outcomes) > 1:  # one protocol alone has nothing to agree with
                print(
                    f"   -> {'same verdict' if same_verdict(verdicts) else 'DIFFERENT verdicts'}",
                    flush=True,
                )
    print("\n| use case | load | instances | protocol | verdict | lag slope (records/s) | wall time (s) |")
    print("|---|---|---|---|---|---|---|")
    for uc, load, resources, name, outcome, slope, wall in rows:
        print(f"| UC{uc} | {load} | {resources} | {name} | {outcome} | {slope} | {wall:.0f} |")
    if any(len(verdicts.outcomes) > 1 for verdicts in verdicts_by_pair):
        print(f"\n{agreement(verdicts_by_pair)}")
    print(f"\nraw results: {results}")


if __name__ == "__main__":
    main()
