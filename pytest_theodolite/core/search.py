"""Theodolite's search strategies for the demand and capacity metrics, over an SLO oracle.

The oracle runs one sub-experiment and returns its `Outcome` (or an object with an `.outcome`):
`oracle(load, resources) -> Outcome`. Every call is recorded, in order, in the result's `sub_experiments`.

Strategies (for demand; capacity mirrors them with loads and resources swapped):
- FULL: every resource amount; demand = the smallest that passed (no monotonicity assumed).
- LINEAR: resources ascending, stop at the first pass.
- BINARY: bisection over the resources; assumes more resources never hurt (probe = lower middle; the capacity
  mirror probes the upper middle, as Theodolite does).
- INITIAL_GUESS: start at the previous load's demand (the first resource amount if it had none or this is the
  first load), then step down while passing (stop at the first fail) or up while failing (stop at the first
  pass).
- BASELINE_GUESS: INITIAL_GUESS starting where the caller says (`IncrementalSearch.search(..., guess=)`; a gate
  gives its baseline's demand at that load, the largest resource amount where that was "none"), else as
  INITIAL_GUESS. On unchanged code it confirms the baseline with one passing sub-experiment and, below it, one
  failing one, the fewest that can tell "same demand" from "lower"; a linear search would also run every
  failing amount below (each a long one: a job falling behind needs minutes to be judged with certainty).
- A demand search given a `floor` (a gate's reference demand) never steps below it: a pass at the floor ends
  the load as AT_MOST that many instances. A gate needs no more to tell "not above the reference", and the
  failing run one instance below a demand is the dearest sub-experiment of a search (a job falling behind is
  judged only once its batches stop settling). An exact demand (recording a baseline) takes no floor.
- A demand search given a `ceiling` never steps above it while nothing passed: a FAIL at the ceiling ends the
  load as ABOVE (demand "none" among the instances run, more not run). A gate gives its reference's demand
  where no regression can be judged -- a testbed much slower than the baseline's, on which a higher demand
  stays not comparable however high it is -- and saves the failing runs above it (each minutes long).
- `lower_bound=True` adds Theodolite's LowerBound restriction to any of them: the next load only tries
  resources >= the previous load's demand. A load that no resource amount could handle ends the demand search:
  larger loads are reported as "none" without running (they are listed in `skipped`). For capacity the
  restriction starts the next resource amount at the previous capacity; a resource amount without a passing
  load does not end the search (more resources may still handle the smallest load).

INVALID and ERRORED outcomes are never a pass and never a fail. The first one ends the search for that load
(capacity: resource amount), which is then reported as *unmeasured* (in `unmeasured`, absent from the mapping)
rather than "none": "none" is a measured result, unmeasured is a broken benchmark. Later loads are still
searched (with `stop_on_unmeasured=True` they are all marked unmeasured without running, e.g. when the broker
died); LowerBound and InitialGuess then start from the last load whose demand was measured.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pytest_theodolite.core.outcomes import Outcome, StepStatus, most_failing
from pytest_theodolite.core.scalability import CapacityResult, DemandResult, Metric, SubExperiment
from pytest_theodolite.core.strategies import (
    SEARCH_STRATEGIES,
    Probes,
    Strategy,
    describe_strategy,
    parse_strategy,
    probes,
)

__all__ = [
    "SEARCH_STRATEGIES",
    "CapacityResult",
    "DemandResult",
    "IncrementalSearch",
    "Metric",
    "Oracle",
    "Step",
    "StepSearch",
    "Strategy",
    "SubExperiment",
    "describe_strategy",
    "parse_strategy",
    "search_capacity",
    "search_demand",
]


class _HasOutcome(Protocol):
    @property
    def outcome(self) -> Outcome: ...


Oracle = Callable[[int, int], "Outcome | _HasOutcome"]


def _outcome_of(returned: object, load: int, resources: int) -> Outcome:
    outcome = returned if isinstance(returned, Outcome) else getattr(returned, "outcome", None)
    if not isinstance(outcome, Outcome):
        raise TypeError(
            f"the SLO oracle returned {returned!r} for load {load}, resources {resources}:"
            " it must return an Outcome or an object with an .outcome attribute"
        )
    return outcome


def _ascending_unique(values: Sequence[int], what: str) -> tuple[int, ...]:
    if not values:
        raise ValueError(f"no {what} to search: give at least one")
    if any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in values):
        raise ValueError(f"{what} must be positive integers, got {list(values)}")
    if len(set(values)) != len(values):
        raise ValueError(f"{what} contain duplicates: {list(values)}")
    return tuple(sorted(values))


@dataclass(frozen=True)
class Step:
    """What one x (a load for demand, a resource amount for capacity) came to in an `IncrementalSearch`."""

    x: int
    optimum: int | None  # demand: fewest passing resources; capacity: largest passing load; None: "none"
    status: StepStatus
    sub_experiments: tuple[SubExperiment, ...]  # the ones this x ran, in order
    #: the y values this x could try (LowerBound narrows them), for messages
    candidates: tuple[int, ...] = ()

    @property
    def failed_at(self) -> int | None:
        """The most resources that FAILed here (an ABOVE demand is higher), None where none did."""
        return most_failing(self.sub_experiments)


class StepSearch:
    """One x being searched, one probe at a time: `next_probe` is the (load, resources) to run next, or None
    once the search is over; `record` takes its outcome. An INVALID or ERRORED outcome ends the search with
    x unmeasured. With a `floor` (demand only) a pass never leads below it: the search ends AT_MOST there; with
    a `ceiling`, a FAIL there never leads above it while nothing passed: the search ends ABOVE."""

    def __init__(
        self,
        x: int,
        demand: bool,
        candidates: tuple[int, ...],
        probes: Probes | None,
        floor: int | None = None,
        ceiling: int | None = None,
    ) -> None:
        self.x, self._demand, self.candidates, self._probes = x, demand, candidates, probes
        self.floor = floor if demand else None
        self.ceiling = ceiling if demand else None
        self.sub_experiments: list[SubExperiment] = []
        self._step: Step | None = None
        self._y: int | None = None
        if probes is not None:
            self._advance(None)

    @classmethod
    def done(cls, step: Step) -> StepSearch:
        running = cls(step.x, True, step.candidates, None)
        running._step = step
        return running

    @property
    def next_probe(self) -> tuple[int, int] | None:
        if self._step is not None or self._y is None:
            return None
        return (self.x, self._y) if self._demand else (self._y, self.x)

    def record(self, outcome: Outcome) -> None:
        probe = self.next_probe
        if probe is None:
            raise RuntimeError(f"the search of {self.x} is over: nothing to record")
        self.sub_experiments.append(SubExperiment(probe[0], probe[1], outcome))
        if not outcome.is_measured:
            self._finish(None, StepStatus.UNMEASURED)
            return
        self._advance(outcome is Outcome.PASS)

    @property
    def stepping_down(self) -> bool:
        """Demand: the next probe has fewer resources than one that passed (it can only find a lower
        demand)."""
        passed = [s.resources for s in self.sub_experiments if s.outcome is Outcome.PASS]
        probe = self.next_probe
        return self._demand and probe is not None and bool(passed) and probe[1] < min(passed)

    def stop_at_most(self) -> None:
        """End a demand search that is stepping down: demand AT_MOST its fewest passing resources."""
        if not self.stepping_down:
            raise RuntimeError(
                f"the search of {self.x} is not stepping down below a pass: it cannot stop here"
            )
        self._finish(
            min(s.resources for s in self.sub_experiments if s.outcome is Outcome.PASS), StepStatus.AT_MOST
        )

    def _advance(self, passed: bool | None) -> None:
        assert self._probes is not None
        try:
            self._y = next(self._probes) if passed is None else self._probes.send(passed)
        except StopIteration as stop:
            self._finish(stop.value, StepStatus.MEASURED if stop.value is not None else StepStatus.NONE)
            return
        if self.floor is not None and self._y < self.floor and self.stepping_down:
            self.stop_at_most()
        elif self.ceiling is not None and self._climbing_past(self.ceiling):
            self._finish(None, StepStatus.ABOVE)

    def _climbing_past(self, ceiling: int) -> bool:
        """Demand: nothing passed, a FAIL at `ceiling` or more instances, and the next probe has more still."""
        if any(s.outcome is Outcome.PASS for s in self.sub_experiments):
            return False
        failed = [s.resources for s in self.sub_experiments if s.outcome is Outcome.FAIL]
        probe = self.next_probe
        return bool(failed) and max(failed) >= ceiling and probe is not None and probe[1] > max(failed)

    def _finish(self, optimum: int | None, status: StepStatus) -> None:
        self._step = Step(self.x, optimum, status, tuple(self.sub_experiments), self.candidates)
        if self._probes is not None:
            self._probes.close()

    def step(self) -> Step:
        if self._step is None:
            raise RuntimeError(f"the search of {self.x} is not over: run {self.next_probe} first")
        return self._step


@dataclass
class IncrementalSearch:
    """One benchmark's search, one x at a time and in any order, keeping the optima found so far (as
    Theodolite's `Results` does for its strategies and restrictions): LowerBound and InitialGuess start from
    the optimum of the largest smaller x already measured. `search_demand` runs it over every load in
    ascending order; a gate runs it one load per test, in whatever order pytest runs them."""

    metric: Metric
    strategy: Strategy
    lower_bound: bool
    ys: tuple[int, ...]  # resources for demand, loads for capacity: ascending, unique
    stop_on_unmeasured: bool = False
    steps: dict[int, Step] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)  # x in the order they were searched

    def __post_init__(self) -> None:
        self.strategy = Strategy(self.strategy)
        what = "resources" if self.metric is Metric.DEMAND else "loads"
        self.ys = _ascending_unique(self.ys, what)

    def previous(self, x: int) -> Step | None:
        """The step of the largest x' < x whose result was measured ("none" and skipped included)."""
        below = [step for x_, step in self.steps.items() if x_ < x and step.status != StepStatus.UNMEASURED]
        return max(below, key=lambda step: step.x, default=None)

    def search(
        self,
        x: int,
        oracle: Oracle,
        guess: int | None = None,
        floor: int | None = None,
        ceiling: int | None = None,
    ) -> Step:
        """Search x (once: a second call returns the first result). `guess` is where BASELINE_GUESS starts
        (other strategies ignore it); without one it starts as INITIAL_GUESS does. A demand search does not
        step below `floor` once a probe passed (AT_MOST), nor above `ceiling` while none did (ABOVE)."""
        running = self.start(x, guess, floor, ceiling)
        while running.next_probe is not None:
            running.record(_outcome_of(oracle(*running.next_probe), *running.next_probe))
        return self.finish(running)

    def start(
        self, x: int, guess: int | None = None, floor: int | None = None, ceiling: int | None = None
    ) -> StepSearch:
        """Begin searching x one probe at a time (`StepSearch`); `finish` keeps its result. `search` drives
        one; two driven alternately compare two versions of a job probe by probe."""
        if x in self.steps:
            return StepSearch.done(self.steps[x])
        demand = self.metric is Metric.DEMAND
        previous = self.previous(x)
        candidates = self.ys
        if (
            self.lower_bound
            and previous is not None
            and previous.optimum is not None
            and previous.status != StepStatus.AT_MOST
        ):
            # (an AT_MOST demand is only an upper bound of the previous load's: it cannot restrict this one)
            candidates = tuple(y for y in self.ys if y >= previous.optimum)
        elif self.lower_bound and previous is not None and previous.status == StepStatus.ABOVE:
            # the previous load needs more than it failed at; so does this one (more were not run: none of
            # them is known to fail)
            above = previous.failed_at or 0
            candidates = tuple(y for y in self.ys if y > above)
        if self.stop_on_unmeasured and any(s.status == StepStatus.UNMEASURED for s in self.steps.values()):
            return StepSearch.done(Step(x, None, StepStatus.UNMEASURED, (), candidates))
        if (
            self.lower_bound
            and demand
            and previous is not None
            and previous.optimum is None
            and previous.status != StepStatus.ABOVE
        ):
            # No resource amount handled a smaller load, so none handles this one: "none" without running.
            return StepSearch.done(Step(x, None, StepStatus.SKIPPED, (), candidates))
        if self.strategy is not Strategy.BASELINE_GUESS or guess is None:
            guess = previous.optimum if previous is not None else None
        probed = probes(self.strategy, candidates, demand, guess)
        return StepSearch(x, demand, candidates, probed, floor, ceiling)

    def finish(self, running: StepSearch) -> Step:
        """Keep a finished `StepSearch`'s result (once per x)."""
        step = running.step()
        if step.x in self.steps:
            return self.steps[step.x]
        return self._keep(step)

    def keep(self, step: Step) -> Step:
        """Keep a step another search found (the capacity strategy's), as its own (once per x)."""
        if step.x in self.steps:
            return self.steps[step.x]
        return self._keep(step)

    def _keep(self, step: Step) -> Step:
        self.steps[step.x] = step
        self.order.append(step.x)
        return step

    def result(self, xs: Sequence[int] = ()) -> DemandResult | CapacityResult:
        """The metric over every x searched so far; `xs` (all the x of the benchmark) only fills in the
        `loads`/`resources` the result was asked for."""
        searched = sorted(self.steps)
        common = {
            "unmeasured": tuple(x for x in searched if self.steps[x].status == StepStatus.UNMEASURED),
            "skipped": tuple(x for x in searched if self.steps[x].status == StepStatus.SKIPPED),
            "sub_experiments": tuple(sub for x in self.order for sub in self.steps[x].sub_experiments),
            "strategy": describe_strategy(self.strategy, self.lower_bound),
        }
        optimum = {
            x: self.steps[x].optimum for x in searched if self.steps[x].status != StepStatus.UNMEASURED
        }
        all_xs = tuple(sorted(set(xs) | set(searched)))
        if self.metric is Metric.DEMAND:
            at_most = tuple(x for x in searched if self.steps[x].status == StepStatus.AT_MOST)
            at_least = tuple(x for x in searched if self.steps[x].status == StepStatus.AT_LEAST)
            above = {
                x: failed
                for x in searched
                if self.steps[x].status == StepStatus.ABOVE
                and (failed := self.steps[x].failed_at) is not None
            }
            return DemandResult(
                demand=optimum,
                loads=all_xs,
                resources=self.ys,
                at_most=at_most,
                above=above,
                at_least=at_least,
                **common,  # type: ignore[arg-type]
            )
        return CapacityResult(capacity=optimum, loads=self.ys, resources=all_xs, **common)  # type: ignore[arg-type]


def _search(
    metric: Metric,
    oracle: Oracle,
    loads: Sequence[int],
    resources: Sequence[int],
    strategy: Strategy,
    lower_bound: bool,
    stop_on_unmeasured: bool,
) -> DemandResult | CapacityResult:
    loads_t = _ascending_unique(loads, "loads")
    resources_t = _ascending_unique(resources, "resources")
    demand = metric is Metric.DEMAND
    xs, ys = (loads_t, resources_t) if demand else (resources_t, loads_t)
    search = IncrementalSearch(metric, strategy, lower_bound, ys, stop_on_unmeasured)
    for x in xs:
        search.search(x, oracle)
    return search.result(xs)


def search_demand(
    oracle: Oracle,
    loads: Sequence[int],
    resources: Sequence[int],
    strategy: Strategy = Strategy.LINEAR,
    *,
    lower_bound: bool = False,
    stop_on_unmeasured: bool = False,
) -> DemandResult:
    """Minimal resources per load (loads searched ascending). See the module docstring for the strategies and
    for how INVALID/ERRORED sub-experiments are treated."""
    result = _search(Metric.DEMAND, oracle, loads, resources, strategy, lower_bound, stop_on_unmeasured)
    assert isinstance(result, DemandResult)
    return result


def search_capacity(
    oracle: Oracle,
    loads: Sequence[int],
    resources: Sequence[int],
    strategy: Strategy = Strategy.LINEAR,
    *,
    lower_bound: bool = False,
    stop_on_unmeasured: bool = False,
) -> CapacityResult:
    """Maximal load per resource amount (resource amounts searched ascending)."""
    result = _search(Metric.CAPACITY, oracle, loads, resources, strategy, lower_bound, stop_on_unmeasured)
    assert isinstance(result, CapacityResult)
    return result
