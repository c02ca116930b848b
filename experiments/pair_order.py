"""Does the side that runs second in a pull-request pair pay more CPU per record? Reads the results directories
of pull-request-mode runs (each with ``ref/`` and ``change/``), finds every (load, instances) both sides ran and
passed, orders the two by the start of their lag series, and prints the second's CPU per record against the
first's -- on unchanged code (REF = the working tree's commit) any systematic difference is the order's, not
the code's.

    python experiments/pair_order.py /tmp/gq/clean/clean-1 /tmp/gq/clean/clean-2 ...
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from pathlib import Path

from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.records import SERIES_LAG
from pytest_theodolite.pull_request.paired import SIDES
from pytest_theodolite.store.results import list_experiment_ids, read_results, read_series


@dataclass(frozen=True)
class SideRun:
    side: str
    started_s: float  # the first sample of its lag series
    cpu_us_per_record: float


def side_runs(run: Path) -> dict[tuple[str, int, int], list[SideRun]]:
    """(benchmark, load, instances) -> each side's passing sub-experiment there, in the order they ran."""
    found: dict[tuple[str, int, int], list[SideRun]] = {}
    for side in SIDES:
        directory = run / side
        for experiment in list_experiment_ids(directory):
            results = read_results(directory, experiment)
            benchmark = results.settings.get("benchmark", experiment)
            for record in results.sub_experiments:
                lag = results.series_path(record.load, record.resources, SERIES_LAG, 0)
                cost = record.cpu_us_per_record
                if record.outcome is not Outcome.PASS or cost is None or lag is None:
                    continue
                started = float(read_series(lag).timestamps_s[0])
                key = (benchmark, record.load, record.resources)
                found.setdefault(key, []).append(SideRun(side, started, cost))
    return {key: sorted(runs, key=lambda r: r.started_s) for key, runs in found.items() if len(runs) == 2}


def second_vs_first(runs: list[SideRun]) -> float:
    """The second side's CPU per record relative to the first's (0.03 = 3 % dearer)."""
    first, second = runs
    return second.cpu_us_per_record / first.cpu_us_per_record - 1


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="results directories of pull-request-mode runs")
    args = parser.parse_args()
    print("| run | benchmark | load | instances | first | second vs first |")
    print("|---|---|---:|---:|---|---:|")
    differences = []
    for run in args.runs:
        for (benchmark, load, instances), runs in sorted(side_runs(run).items()):
            difference = second_vs_first(runs)
            differences.append(difference)
            print(f"| {run} | {benchmark} | {load} | {instances} | {runs[0].side} | {difference:+.1%} |")
    if differences:
        print(
            f"\n{len(differences)} pairs: the second side's CPU per record against the first's, median "
            f"{statistics.median(differences):+.1%}, mean {statistics.mean(differences):+.1%}, dearer in "
            f"{sum(d > 0 for d in differences)} of {len(differences)}"
        )


if __name__ == "__main__":
    main()
