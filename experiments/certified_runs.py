"""How many sub-experiments pull-request mode runs per gate, its demands searched (without the paired read) or
certified (where the paired read judged the cost), both sides needing the same demands. Replays both of
pull_request/paired.py's procedures on scripted outcomes, from each gate's stored baseline as the guess --
certified also with each load's guess shifted by how far REF lay from the baseline at the load before
(judge/demand_points.shifted_guess, as pull-request mode does since 2026-12-05) and without; nothing is measured.

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
from pytest_theodolite.judge.demand_points import shifted_guess
from pytest_theodolite.pull_request.paired import REF, SAME_TESTBED, SIDES, PairedDemandSearch
from pytest_theodolite.store.baseline import Baseline, load_baseline

BASELINES = Path(__file__).resolve().parents[1] / "baselines"
RESOURCES = (1, 2, 3, 4)  # the shipped gates'


def runs(
    needed: Mapping[int, int | None], guesses: Mapping[int, int | None], certify: bool, shift: bool = False
) -> int:
    """Sub-experiments both sides run over the loads of `guesses` (ascending), each side needing `needed`;
    `shift`: each guess shifted by REF's demand at the load before (`shifted_guess`)."""
    search = PairedDemandSearch(
        {side: IncrementalSearch(Metric.DEMAND, Strategy.BASELINE_GUESS, True, RESOURCES) for side in SIDES}
    )
    stored = Baseline("scripted", dict(guesses), {}, SAME_TESTBED)

    def oracle(side: str, load: int, resources: int) -> Outcome:
        need = needed[load]
        return Outcome.PASS if need is not None and resources >= need else Outcome.FAIL

    for load in sorted(guesses):
        guess = guesses[load]
        start = max(RESOURCES) if guess is None else guess
        if shift:
            start = shifted_guess(start, stored, search.searches[REF].previous(load), RESOURCES)
        search.measure(load, oracle, start, certify=certify)
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
    total: dict[bool | str, int] = {False: 0, True: 0, "shifted": 0}
    for path in sorted(BASELINES.glob("*.json")):
        baseline = load_baseline(path)
        assert baseline is not None  # globbed: it exists
        needed = {**baseline.demand, **given.get(baseline.benchmark, {})}
        counts: dict[bool | str, int] = {
            certify: runs(needed, baseline.demand, certify) for certify in (False, True)
        }
        counts["shifted"] = runs(needed, baseline.demand, True, shift=True)
        for how, count in counts.items():
            total[how] += count
        print(
            f"{baseline.benchmark}: demands {dict(needed)}: searched {counts[False]}, certified {counts[True]}, "
            f"certified from shifted guesses {counts['shifted']}"
        )
    print(
        f"all: searched {total[False]}, certified {total[True]}, certified from shifted guesses "
        f"{total['shifted']} sub-experiments"
    )


if __name__ == "__main__":
    main()
