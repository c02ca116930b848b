"""Pull-request mode: the base revision (REF) and the change measured side by side, probe by probe.

Both versions' demand searches advance together: at every step each side names the (load, instances) it
needs next and both run, adjacent in time, in ABBA order (REF first at the 1st, 4th, 5th, 8th ... pair), so
that a drift of the host's speed during the run falls on both alike instead of on the side measured later
(duet benchmarking). Both start at the same guess -- the stored baseline's demand where there is one -- so
where their demands agree they run the very same pairs.

Unless asked for its exact demand, the change steps below a pass only where REF passed too: where REF failed
(or never ran) that instance count, the change's demand is AT_MOST its last pass -- all the verdict needs, and
the run saved is a failing one, the dearest there is. Such a step runs REF first, so that its verdict is known.

Certified (`certify=True`: pull-request mode where the paired read judges the cost and the tolerance is 0),
neither demand is searched: each pair runs the change at r and REF one instance count below, in ABBA order,
starting at the guess. The change passing at r and REF failing below it is the verdict (change <= r <= REF)
in two sub-experiments where the searches take three or four; REF's demand is then AT_LEAST r, and the CPU per
record at a demand is not compared (REF did not run there: the paired read judges the cost). A REF that passes
below moves the pair down, a change that fails moves it up, and a change that fails where REF passed climbs
alone to its demand (a regression, measured once more by the caller).

Without REF below (`ref_below=False`: the caller's paired read is certain the change costs per record no more
than its tolerance allows, and the guess is the demand a stored baseline expects), the pair's first step runs
the change alone at the guess: a pass there is the verdict -- the change needs no more than expected -- and REF
is not run at this load (its step EXPECTED, the guess; not kept as a measurement of REF's). A change that fails
there runs REF at the same instances and the pair goes on as above. What this gives up: where REF would have
passed below the guess, a change that moves the demand without moving its cost per record beyond the tolerance
is not seen.

The verdict per load: the change's demand <= REF's demand + tolerance. A load where either side could not be
measured (an INVALID or ERRORED sub-experiment) is NOT COMPARABLE, never a pass or a regression.

Pure: the sub-experiments are run by the caller's oracle (`side, load, resources -> outcome`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pytest_theodolite.core.cost import PointCost
from pytest_theodolite.core.outcomes import UNMEASURED, MeasuredDemand, Outcome, StepStatus
from pytest_theodolite.core.search import (
    IncrementalSearch,
    Step,
    StepSearch,
    Strategy,
    SubExperiment,
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
        self,
        load: int,
        oracle: SideOracle,
        guess: int | None = None,
        *,
        exact_change: bool = False,
        certify: bool = False,
        ref_below: bool = True,
    ) -> dict[str, Step]:
        """Both sides' demand at `load`. `guess` (the baseline's demand there) is where baseline-guess
        searches start; without one each starts from its own previous load, as initial-guess does. The
        change's demand is exact only with `exact_change`; else it is not searched below REF's passes. With
        `certify` (and an initial- or baseline-guess search, not `exact_change`) the verdict is certified, not
        searched (the module's doc); without `ref_below` (and with a `guess`) the change's pass at the guess is
        the verdict, REF not run there."""
        running = {side: self.searches[side].start(load, guess) for side in SIDES}
        if certify and not exact_change and self._can_certify(running):
            steps = self._certify(load, oracle, running, ref_below=ref_below or guess is None)
            # an expected demand is not REF's measurement: its search (REF's demand function, the next load's
            # guess) does not keep it
            return {
                side: step if step.status == StepStatus.EXPECTED else self.searches[side].keep(step)
                for side, step in steps.items()
            }
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

    def _can_certify(self, running: Mapping[str, StepSearch]) -> bool:
        """Both sides still to search, by a strategy that starts at a guess (a linear or full search promises
        more than a certificate gives)."""
        guessing = all(
            self.searches[side].strategy in (Strategy.BASELINE_GUESS, Strategy.INITIAL_GUESS)
            for side in SIDES
        )
        return guessing and all(r.next_probe is not None for r in running.values())

    def _certify(
        self, load: int, oracle: SideOracle, running: Mapping[str, StepSearch], *, ref_below: bool = True
    ) -> dict[str, Step]:
        """The change at r beside REF one instance count below, pair by pair; without `ref_below` the change
        alone first (the module's doc)."""
        candidates = {side: running[side].candidates for side in SIDES}
        seen: dict[str, dict[int, Outcome]] = {side: {} for side in SIDES}
        runs: dict[str, list[SubExperiment]] = {side: [] for side in SIDES}

        def run(side: str, resources: int | None) -> None:
            if resources is not None and resources not in seen[side]:
                self.order.append((side, load, resources))
                outcome = _outcome_of(oracle(side, load, resources), load, resources)
                seen[side][resources] = outcome
                runs[side].append(SubExperiment(load, resources, outcome))

        def outcome_at(side: str, resources: int | None) -> Outcome | None:
            return None if resources is None else seen[side].get(resources)

        probe = running[CHANGE].next_probe
        r: int | None = probe[1] if probe is not None else None
        alone = False  # the change climbs alone once REF passed where it failed or below
        if not ref_below and r is not None and _below(candidates[REF], r) is not None:
            run(CHANGE, r)
            self.pairs += 1
            if seen[CHANGE][r] is Outcome.PASS:
                expected = Step(load, r, StepStatus.EXPECTED, (), candidates[REF])
                return {
                    CHANGE: _certified_step(CHANGE, load, runs[CHANGE], candidates[CHANGE]),
                    REF: expected,
                }
            run(REF, r)  # what a change failing at the guess needs: does REF fail there too?
            alone = seen[REF][r] is not Outcome.FAIL  # REF passed or was unmeasured: the change goes on alone
            r = _above(candidates[CHANGE], r) if seen[CHANGE][r].is_measured else None
        while r is not None:
            below = _below(candidates[REF], r)
            if alone:
                run(CHANGE, r)
            elif abba(self.pairs)[0] == REF:
                run(REF, below)  # ahead of the change's verdict: what a pass at r needs
                run(CHANGE, r)
            else:
                run(CHANGE, r)
                # what the change's verdict needs next: REF below a pass, REF at a FAIL
                run(REF, below if seen[CHANGE][r] is Outcome.PASS else (r if r in candidates[REF] else None))
            self.pairs += 1
            if not seen[CHANGE][r].is_measured:
                break
            # REF unmeasured: the load is not comparable; the change's demand is still found, alone
            alone = alone or any(not outcome.is_measured for outcome in seen[REF].values())
            if seen[CHANGE][r] is Outcome.PASS:
                # REF failing below (or nothing below) certifies the verdict; REF passing below moves the pair
                # down, unless the change already failed there (its demand is then known)
                lower = _below(candidates[CHANGE], r) if outcome_at(REF, below) is Outcome.PASS else None
                r = None if lower in seen[CHANGE] else lower
                continue
            alone = alone or Outcome.PASS in (outcome_at(REF, r), outcome_at(REF, below))
            higher = _above(candidates[CHANGE], r)
            if higher is None and not alone and r in candidates[REF]:
                run(REF, r)  # the change is none: is REF too?
            r = None if higher in seen[CHANGE] else higher
        return {side: _certified_step(side, load, runs[side], candidates[side]) for side in SIDES}


def _below(candidates: tuple[int, ...], r: int) -> int | None:
    return max((c for c in candidates if c < r), default=None)


def _above(candidates: tuple[int, ...], r: int) -> int | None:
    return min((c for c in candidates if c > r), default=None)


def _certified_step(side: str, load: int, runs: list[SubExperiment], candidates: tuple[int, ...]) -> Step:
    """What a certified search's runs on one side say of its demand at `load`."""
    if any(not run.outcome.is_measured for run in runs):
        return Step(load, None, StepStatus.UNMEASURED, tuple(runs), candidates)
    passed = [run.resources for run in runs if run.outcome is Outcome.PASS]
    failed = {run.resources for run in runs if run.outcome is Outcome.FAIL}
    if passed:
        least = min(passed)
        below = _below(candidates, least)
        status = StepStatus.MEASURED if below is None or below in failed else StepStatus.AT_MOST
        return Step(load, least, status, tuple(runs), candidates)
    higher = _above(candidates, max(failed)) if failed else min(candidates)
    if higher is None:
        return Step(load, None, StepStatus.NONE, tuple(runs), candidates)
    if side == CHANGE:  # not reached: the change climbs until it passes, runs out or is unmeasured
        return Step(load, None, StepStatus.ABOVE, tuple(runs), candidates)
    return Step(
        load, higher, StepStatus.AT_LEAST, tuple(runs), candidates
    )  # REF failed below the change's pass


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
    if step.status in (
        StepStatus.MEASURED,
        StepStatus.NONE,
        StepStatus.SKIPPED,
        StepStatus.AT_MOST,
        StepStatus.AT_LEAST,
        StepStatus.EXPECTED,
    ):
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
    ref_at_least: bool = False,
    ref_expected: bool = False,
) -> PointComparison:
    """The change's demand at one load against REF's (REF in the result's `baseline` fields; `ref_at_least`:
    REF's is at least that; `ref_expected`: REF not run, its value the demand expected); where both sides need
    the same instances, the change's CPU per record against REF's with `cost_tolerance`. A regression resting on
    uncertain verdicts (`uncertain` says which) is NOT COMPARABLE."""
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
        baseline_at_least=ref_at_least,
        baseline_expected=ref_expected,
    )
