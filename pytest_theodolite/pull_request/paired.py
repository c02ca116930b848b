"""Pull-request mode: the base revision (REF) and the change measured side by side, probe by probe.

Both versions' demand searches advance together: at every step each side names the (load, instances) it
needs next and both run, adjacent in time, in ABBA order (REF first at the 1st, 4th, 5th, 8th ... pair), so
that a drift of the host's speed during the run falls on both alike instead of on the side measured later
(duet benchmarking). Both start at the same guess -- the stored baseline's demand where there is one -- so
where their demands agree they run the very same pairs.

Unless asked for its exact demand, the change steps below a pass only where REF passed too: where REF failed
(or never ran) that instance count, the change's demand is AT_MOST its last pass -- all the verdict needs, and
the run saved is a failing one, the dearest there is. Such a step runs REF first, so that its verdict is known.

The verdict per load: the change's demand <= REF's demand + tolerance. A load where either side could not be
measured (an INVALID or ERRORED sub-experiment) is NOT COMPARABLE, never a pass or a regression.

Pure: the sub-experiments are run by the caller's oracle (`side, load, resources -> outcome`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pytest_theodolite.core.cost import PointCost
from pytest_theodolite.core.outcomes import UNMEASURED, MeasuredDemand, Outcome
from pytest_theodolite.core.search import (
    AT_MOST,
    MEASURED,
    NONE,
    SKIPPED,
    IncrementalSearch,
    Step,
    StepSearch,
    _outcome_of,
)
from pytest_theodolite.judge.comparison import PointComparison, compare_point
from pytest_theodolite.store.baseline import Baseline
from pytest_theodolite.store.testbed import Testbed

REF: Final = "ref"
CHANGE: Final = "change"
SIDES: Final = (REF, CHANGE)

#: runs one sub-experiment of one side: (side, load, resources) -> an Outcome or a record with .outcome
SideOracle = Callable[[str, int, int], Any]


def abba(pair_index: int) -> tuple[str, str]:
    """The order of the two sides at the `pair_index`-th pair: REF CHANGE, CHANGE REF, REF CHANGE, ... which
    over the run reads A B B A A B B A: a linear drift adds the same to both sides every two pairs."""
    return (REF, CHANGE) if pair_index % 2 == 0 else (CHANGE, REF)


@dataclass
class PairedDemandSearch:
    """REF's and the change's demand searches over the same loads, advanced probe by probe."""

    searches: Mapping[str, IncrementalSearch]
    pairs: int = 0  # pairs run so far: the ABBA position
    #: every sub-experiment in the order it ran: (side, load, resources)
    order: list[tuple[str, int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if set(self.searches) != set(SIDES):
            raise ValueError(f"need one search per side {SIDES}, got {sorted(self.searches)}")

    def measure(
        self, load: int, oracle: SideOracle, guess: int | None = None, *, exact_change: bool = False
    ) -> dict[str, Step]:
        """Both sides' demand at `load`. `guess` (the baseline's demand there) is where baseline-guess
        searches start; without one each starts from its own previous load, as initial-guess does. The
        change's demand is exact only with `exact_change`; else it is not searched below REF's passes."""
        running = {side: self.searches[side].start(load, guess) for side in SIDES}
        while True:
            wanted = {side: r.next_probe for side, r in running.items() if r.next_probe is not None}
            if not wanted:
                break
            order = abba(self.pairs)
            if not exact_change and CHANGE in wanted and wanted.get(REF) == wanted[CHANGE]:
                if running[CHANGE].stepping_down:
                    order = (REF, CHANGE)  # whether the change steps down depends on REF's verdict there
            for side in order:
                if side not in wanted:
                    continue
                if side == CHANGE and not exact_change and not _change_may_run_next(running):
                    running[CHANGE].stop_at_most()
                    continue
                probe_load, resources = wanted[side]
                self.order.append((side, probe_load, resources))
                returned = oracle(side, probe_load, resources)
                running[side].record(_outcome_of(returned, probe_load, resources))
            self.pairs += 1
        return {side: self.searches[side].finish(r) for side, r in running.items()}


def _change_may_run_next(running: Mapping[str, StepSearch]) -> bool:
    """Whether the change may run its next probe: any probe but a step below its passes, or one where REF
    passed at the same (load, instances)."""
    change = running[CHANGE]
    if not change.stepping_down:
        return True
    probe = change.next_probe
    return any(
        (s.load, s.resources) == probe and s.outcome is Outcome.PASS for s in running[REF].sub_experiments
    )


def measured_demand(step: Step) -> MeasuredDemand:
    """A finished search's demand as the comparison takes it: a number, None ("none") or UNMEASURED."""
    if step.status in (MEASURED, NONE, SKIPPED, AT_MOST):
        return step.optimum
    return UNMEASURED


#: both sides run on this very testbed: there is nothing to compare it with
SAME_TESTBED = Testbed(None, None, None, "", "", None, "")


def compare_sides(
    benchmark: str,
    load: int,
    ref: MeasuredDemand,
    change: MeasuredDemand,
    tolerance: int = 0,
    *,
    skipped: bool = False,
    at_most: bool = False,
    ref_cost: PointCost | None = None,
    change_cost: PointCost | None = None,
    cost_tolerance: float | None = None,
    uncertain: str | None = None,
) -> PointComparison:
    """The change's demand at one load against REF's (REF in the result's `baseline` fields); where both
    sides need the same instances, the change's CPU per record against REF's with `cost_tolerance`. A
    regression resting on uncertain verdicts (`uncertain` says which) is NOT COMPARABLE."""
    not_comparable = None
    if ref is UNMEASURED:
        not_comparable = "REF could not be measured at this load (an invalid or errored sub-experiment)"
        ref = None
    costs = {load: ref_cost} if ref_cost is not None and ref_cost.resources == ref else {}
    as_baseline = Baseline(benchmark, {load: ref}, {}, SAME_TESTBED, cost=costs)
    return compare_point(
        load,
        change,
        as_baseline,
        tolerance,
        skipped=skipped,
        at_most=at_most,
        not_comparable=not_comparable,
        measured_cost=change_cost,
        cost_tolerance=cost_tolerance,
        uncertain=uncertain,
    )
