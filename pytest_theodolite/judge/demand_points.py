"""demand(load) as one gate test sees it, and where a baseline-guess search starts: shared by the
single-revision gates (engine/experiment.py) and pull-request mode (pull_request/experiment.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_theodolite.core.certainty import uncertain_regression
from pytest_theodolite.core.outcomes import Outcome, StepStatus
from pytest_theodolite.core.records import SubExperimentRecord
from pytest_theodolite.core.search import Step
from pytest_theodolite.store.baseline import Baseline


@dataclass(frozen=True)
class DemandPoint:
    """demand(load) as one gate test sees it."""

    load: int
    resources: int | None  # fewest instances that met every SLO; None: none did (or not measured)
    status: StepStatus
    sub_experiments: tuple[SubExperimentRecord, ...] = ()
    reason: str = ""
    #: ABOVE: the instances the search failed at (a confirming repetition does not move it)
    above: int | None = None

    def uncertain_against(self, baseline: Baseline | None, tolerance: int) -> str | None:
        """Why a regression against the stored baseline here would rest on uncertain verdicts
        (certainty.py), or None."""
        if baseline is None or self.load not in baseline.demand:
            return None
        return uncertain_regression(self.sub_experiments, baseline.demand[self.load], tolerance)

    @property
    def lag_slopes(self) -> dict[int, float | None]:
        return {record.resources: record.lag_trend_slope for record in self.sub_experiments}


def demand_point(step: Step, runs: tuple[SubExperimentRecord, ...], previous: Step | None) -> DemandPoint:
    """A finished search step as a gate sees it, with the reason where it has no number."""
    if step.status == StepStatus.SKIPPED:
        return DemandPoint(
            step.x,
            None,
            StepStatus.SKIPPED,
            reason=f"load {previous.x if previous else '?'} could not be "
            f"handled by any of {list(step.candidates)} instances (lower-bound restriction)",
        )
    if step.status == StepStatus.UNMEASURED:
        broken = next(r for r in runs if r.outcome in (Outcome.INVALID, Outcome.ERRORED))
        detail = "; ".join(v.detail for v in broken.verdicts if v.outcome is broken.outcome and v.detail)
        return DemandPoint(
            step.x,
            None,
            StepStatus.UNMEASURED,
            runs,
            reason=f"{broken.outcome.value} at {broken.resources} instances: {detail}",
        )
    above = step.failed_at if step.status == StepStatus.ABOVE else None
    return DemandPoint(step.x, step.optimum, step.status, runs, above=above)


def baseline_guess(baseline: Baseline | None, load: int, resources: Sequence[int]) -> int | None:
    """Where a baseline-guess search starts at `load`: the baseline's demand there, the most instances where
    it was "none" (one failing run confirms it), None where the baseline has no such load."""
    if baseline is None or load not in baseline.demand:
        return None
    demand = baseline.demand[load]
    return max(resources) if demand is None else demand


def shifted_guess(
    guess: int | None, baseline: Baseline | None, previous: Step | None, resources: Sequence[int]
) -> int | None:
    """Where a baseline-guess search starts at a load in pull-request mode: the baseline's demand there
    (`guess`), scaled by how far REF's demand at the load measured before it (`previous`, REF's step) lay from
    the baseline's demand at that load, rounded up, and no lower than that demand (demand does not fall as the
    load rises). A host on which REF needs half the baseline's instances at one load likely needs about half at
    the next, and a certified pair starting at the baseline's demand would walk down to it one instance count at
    a time, two sub-experiments a step. Unchanged where the previous load met its baseline or has no number."""
    if guess is None or baseline is None or previous is None or previous.optimum is None:
        return guess
    stored = baseline.demand.get(previous.x)
    if not stored or previous.optimum == stored:
        return guess
    scaled = math.ceil(guess * previous.optimum / stored)
    return min(max(resources), max(min(resources), previous.optimum, scaled))
