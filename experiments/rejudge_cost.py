"""Re-judge the CPU-per-record figures of recorded gate runs against the committed baselines at other cost
tolerances, to choose a gate's ``cost_tolerance`` from runs already on disk. Takes each point's figure at its
measured demand from the run's results (core.cost.point_cost, with the run's calibration) and judges it with
core.cost.check_cost against ``baselines/<benchmark>.json``, as the plugin does, at every tolerance given;
prints per point both readings (as measured, divided by the calibrations) and the verdicts, then per tolerance
how many points were judged and how many were regressions. Not applied here: the rate share a slower testbed
was offered (a point measured at a share is not judged by the plugin; see the run's report).

    python experiments/rejudge_cost.py /tmp/gq/clean-1 /tmp/gq/clean-2 --tolerance 8 --tolerance 30
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_theodolite.core.cost import check_cost, point_cost
from pytest_theodolite.core.outcomes import CostStatus
from pytest_theodolite.store.baseline import baseline_path, load_baseline
from pytest_theodolite.store.results import list_experiment_ids, read_results

ROOT = Path(__file__).resolve().parents[1]


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:+.0%}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="results directories, one per gate run")
    parser.add_argument("--baselines", type=Path, default=ROOT / "baselines")
    parser.add_argument(
        "--tolerance", type=float, action="append", help="per cent, repeatable (default: 8, 20, 30)"
    )
    args = parser.parse_args()
    tolerances = [t / 100 for t in (args.tolerance or [8.0, 20.0, 30.0])]
    judged = dict.fromkeys(tolerances, 0)
    regressions = dict.fromkeys(tolerances, 0)
    total = 0
    print(
        "run | benchmark | load@demand | as measured | divided | backlog | "
        + " | ".join(f"{t:.0%}" for t in tolerances)
    )
    for run in args.runs:
        for benchmark in list_experiment_ids(run):
            results = read_results(run, benchmark)
            baseline = load_baseline(baseline_path(args.baselines, benchmark), benchmark)
            if results.demand is None or baseline is None:
                continue  # pull-request sides, or no stored baseline
            testbed = results.settings.get("testbed", {})
            for load in results.loads:
                demand = results.demand.demand.get(load)
                measured = point_cost(
                    results.sub_experiments,
                    demand,
                    results.settings.get("instance_cpu"),
                    testbed.get("calibration_cpu_us_per_row"),
                )
                checks = [check_cost(baseline.cost.get(load), measured, t) for t in tolerances]
                total += 1
                for t, check in zip(tolerances, checks, strict=True):
                    judged[t] += check.status != CostStatus.NOT_COMPARED
                    regressions[t] += check.status == CostStatus.REGRESSION
                first = checks[0]
                print(
                    f"{run} | {benchmark} | {load}@{demand} | {percent(first.relative)} | "
                    f"{percent(first.divided)} | {bool(measured and measured.backlog)} | "
                    + " | ".join(check.status for check in checks)
                )
    for t in tolerances:
        print(f"at {t:.0%}: {judged[t]} of {total} points judged, {regressions[t]} regressions")


if __name__ == "__main__":
    main()
