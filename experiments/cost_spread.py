"""How steady is the CPU-per-record figure from run to run, and what would a cost tolerance have flagged?
Reads the results directories of repeated gate runs (e.g. gate_quality.py's ``clean-1``, ``clean-2``, ...), and
prints per gate point the figure at its demand in each run (with its interval where recorded), the
coefficient of variation over the runs, and -- taking each run in turn as the baseline of every other
(leave-one-out) -- how many of those pairs the cost check (pytest_theodolite/core/cost.py: beyond the tolerance
and, where both have one, intervals apart) would have flagged. On unchanged code every flag is a false alarm.

    python experiments/cost_spread.py /tmp/gq/clean/clean-1 /tmp/gq/clean/clean-2 --tolerance 8%
    python experiments/cost_spread.py /tmp/gq/clean/clean-* --tolerance 8% --tolerance uc4-elements=30%
    python experiments/cost_spread.py RUN... --against BASELINE_RUN   # injected runs vs a clean one
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from collections import defaultdict
from pathlib import Path

from pytest_theodolite.core.cost import PointCost, check_cost, parse_cost_tolerance, point_cost
from pytest_theodolite.core.outcomes import CostStatus
from pytest_theodolite.store.results import ExperimentResults, list_experiment_ids, read_results


def costs_of(run: Path, raw: bool = False) -> dict[tuple[str, int], PointCost]:
    """(benchmark, load) -> the CPU per record at the load's demand, for every experiment of one run."""
    found = {}
    for experiment in list_experiment_ids(run):
        results: ExperimentResults = read_results(run, experiment)
        testbed = results.settings.get("testbed", {})
        instance_cpu = testbed.get("instance_cpu")
        reference = None if raw else testbed.get("calibration_cpu_us_per_row")
        demand = {}
        for record in results.sub_experiments:
            if record.outcome.value == "pass":
                demand[record.load] = min(demand.get(record.load, record.resources), record.resources)
        for load, resources in demand.items():
            at_load = [r for r in results.sub_experiments if r.load == load]
            cost = point_cost(at_load, resources, instance_cpu, reference)
            if cost is not None:
                found[(str(results.settings.get("benchmark", experiment)), load)] = cost
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="results directories, one per gate run")
    parser.add_argument(
        "--tolerance",
        action="append",
        default=[],
        help="the cost tolerance to replay: 8%% for every benchmark, uc4-elements=30%% for one (repeatable; "
        "default: the shipped gates', 30%%)",
    )
    parser.add_argument("--against", type=Path, help="compare every run with this one instead of each other")
    parser.add_argument(
        "--raw",
        action="store_true",
        help="compare the figures as measured, not divided by each run's calibration",
    )
    args = parser.parse_args()
    tolerances: dict[str, float | None] = {"": 0.30} if not args.tolerance else {}
    for text in args.tolerance:
        benchmark, _, value = text.rpartition("=")
        tolerances[benchmark] = parse_cost_tolerance(value)
    runs = {path: costs_of(path, args.raw) for path in args.runs}
    reference = costs_of(args.against, args.raw) if args.against else None
    points: dict[tuple[str, int], dict[Path, PointCost]] = defaultdict(dict)
    for path, costs in runs.items():
        for key, cost in costs.items():
            points[key][path] = cost
    shown = ", ".join(f"{name or 'default'} {value:.0%}" for name, value in tolerances.items() if value)
    print(
        f"cost tolerance: {shown}; figures in CPU us per offered record at the load's demand, compared "
        + (
            "as measured\n"
            if args.raw
            else "divided by each run's calibration CPU per row where both have one\n"
        )
    )
    total_pairs = total_flags = 0
    for (benchmark, load), by_run in sorted(points.items()):
        figures = [c.cpu_us_per_record for c in by_run.values()]
        cells = []
        for cost in by_run.values():
            e = cost.estimate
            interval = "" if e.low is None or e.high is None else f" [{e.low:.1f}, {e.high:.1f}]"
            cells.append(f"{e.cpu_us_per_record:.1f}{interval} @{cost.resources}")
        spread = (
            f"CV {statistics.stdev(figures) / statistics.mean(figures):.1%}" if len(figures) > 1 else "CV n/a"
        )
        if reference is not None:
            base = reference.get((benchmark, load))
            pairs = [(base, c) for c in by_run.values()] if base else []
        else:
            pairs = list(itertools.permutations(by_run.values(), 2))
        tolerance = tolerances.get(benchmark, tolerances.get(""))
        checks = [check_cost(b, m, tolerance) for b, m in pairs]
        flags = sum(1 for check in checks if check.status == CostStatus.REGRESSION)
        changes = [check.relative for check in checks if check.relative is not None]
        widest = f", largest change {max(changes, key=abs):+.1%}" if changes else ""
        total_pairs += len(checks)
        total_flags += flags
        print(
            f"{benchmark} {load}: {'; '.join(cells)}; {spread}{widest}; flagged {flags} of {len(checks)} pairs"
        )
    print(f"\nflagged {total_flags} of {total_pairs} (baseline, run) pairs")


if __name__ == "__main__":
    main()
