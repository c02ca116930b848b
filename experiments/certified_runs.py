"""How many sub-experiments pull-request mode runs per gate, its demands searched (without the paired read) or
certified (where the paired read judged the cost), both sides needing the same demands. Replays both of
pull_request/paired.py's procedures on scripted outcomes, from each gate's stored baseline as the guess;
nothing is measured.

    python experiments/certified_runs.py                                # the demands the baselines hold
    python experiments/certified_runs.py --demand uc1-keys:4000=2,12000=4,20000=none   # a slower host's
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.core.search import IncrementalSearch, Strategy
from pytest_theodolite.pull_request.paired import SIDES, PairedDemandSearch
from pytest_theodolite.store.baseline import load_baseline

BASELINES = Path(__file__).resolve().parents[1] / "baselines"
RESOURCES = (1, 2, 3, 4)  # the shipped gates'


def runs(needed: Mapping[int, int | None], guesses: Mapping[int, int | None], certify: bool) -> int:
    """Sub-experiments both sides run over the loads of `guesses` (ascending), each side needing `needed`."""
    search = PairedDemandSearch(
        {side: IncrementalSearch(Metric.DEMAND, Strategy.BASELINE_GUESS, True, RESOURCES) for side in SIDES}
    )

    def oracle(side: str, load: int, resources: int) -> Outcome:
        need = needed[load]
        return Outcome.PASS if need is not None and resources >= need else Outcome.FAIL

    for load in sorted(guesses):
        guess = guesses[load]
        search.measure(load, oracle, max(RESOURCES) if guess is None else guess, certify=certify)
    return len(search.order)


def parse_demand(text: str) -> tuple[str, dict[int, int | None]]:
    """``uc1-keys:4000=2,20000=none`` -> ("uc1-keys", {4000: 2, 20000: None})."""
    name, colon, pairs = text.partition(":")
    try:
        demand = {
            int(load): None if value.strip() == "none" else int(value)
            for load, _, value in (pair.partition("=") for pair in pairs.split(","))
        }
    except ValueError:
        raise SystemExit(f"--demand {text!r} is not BENCHMARK:LOAD=N,LOAD=none,...") from None
    if not colon or not name:
        raise SystemExit(f"--demand {text!r} is not BENCHMARK:LOAD=N,LOAD=none,...")
    return name, demand


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--demand", action="append", default=[], help="BENCHMARK:LOAD=N,... both sides need")
    args = parser.parse_args()
    given = dict(parse_demand(text) for text in args.demand)
    total = {False: 0, True: 0}
    for path in sorted(BASELINES.glob("*.json")):
        baseline = load_baseline(path)
        assert baseline is not None  # globbed: it exists
        needed = {**baseline.demand, **given.get(baseline.benchmark, {})}
        counts = {certify: runs(needed, baseline.demand, certify) for certify in (False, True)}
        for certify, count in counts.items():
            total[certify] += count
        print(
            f"{baseline.benchmark}: demands {dict(needed)}: searched {counts[False]}, certified {counts[True]}"
        )
    print(f"all: searched {total[False]}, certified {total[True]} sub-experiments")


if __name__ == "__main__":
    main()
