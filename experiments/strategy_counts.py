"""How many sub-experiments each search strategy needs for a measured demand function.

    python experiments/strategy_counts.py theodolite-results/expuc1-keys_demand.csv [--resources 1 2 3 4]

Replays every strategy against the oracle the demand function implies (r instances pass load l iff
r >= demand(l); "none" passes nothing), the monotonicity Theodolite's binary and lower-bound searches assume.
For a grid measured without that assumption, use demand_grid.py, which replays on the measured verdicts.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.search import SEARCH_STRATEGIES, search_demand


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("demand_csv", type=Path)
    parser.add_argument("--resources", type=int, nargs="+", default=[1, 2, 3, 4])
    args = parser.parse_args()
    rows = list(csv.DictReader(args.demand_csv.open()))
    demand = {
        int(row["load"]): None if row["resources"] in ("none", "unmeasured") else int(row["resources"])
        for row in rows
    }

    def oracle(load: int, resources: int) -> Outcome:
        needed = demand[load]
        return Outcome.PASS if needed is not None and resources >= needed else Outcome.FAIL

    print(f"demand: {demand}")
    print("| strategy | sub-experiments | same demand function |")
    print("|---|---|---|")
    for strategy in SEARCH_STRATEGIES:
        for lower_bound in (False, True):
            result = search_demand(oracle, sorted(demand), args.resources, strategy, lower_bound=lower_bound)
            same = all(result.demand.get(load) == value for load, value in demand.items())
            print(f"| {result.strategy} | {len(result.sub_experiments)} | {'yes' if same else 'no'} |")


if __name__ == "__main__":
    main()
