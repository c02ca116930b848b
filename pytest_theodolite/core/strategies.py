"""Theodolite's search strategies, each the order in which one x's candidates are probed (core/search.py runs
them over an SLO oracle and describes each), and their names as gates and results write them."""

from __future__ import annotations

import enum
from collections.abc import Generator, Sequence


class Strategy(str, enum.Enum):
    FULL = "full"
    LINEAR = "linear"
    BINARY = "binary"
    INITIAL_GUESS = "initial-guess"
    BASELINE_GUESS = "baseline-guess"
    #: demand derived from each instance count's measured capacity, certified by the lag trend at its
    #: boundary (engine/capacity_search.py); it needs a running job, so a plain search cannot replay it
    CAPACITY = "capacity"


#: the strategies that search over sub-experiment verdicts (replayable by `search_demand` on recorded ones)
SEARCH_STRATEGIES = tuple(s for s in Strategy if s is not Strategy.CAPACITY)

LOWER_BOUND_SUFFIX = "+lower-bound"


def describe_strategy(strategy: Strategy, lower_bound: bool) -> str:
    """A stable text name, e.g. 'linear+lower-bound' (written to results, read by `parse_strategy`)."""
    return strategy.value + (LOWER_BOUND_SUFFIX if lower_bound else "")


def parse_strategy(text: str) -> tuple[Strategy, bool]:
    """'binary', 'linear+lower-bound', 'lower-bound' (= linear with the restriction, a usual pair)."""
    text = text.strip().lower()
    if text == "lower-bound":
        return Strategy.LINEAR, True
    lower_bound = text.endswith(LOWER_BOUND_SUFFIX)
    name = text.removesuffix(LOWER_BOUND_SUFFIX)
    try:
        return Strategy(name), lower_bound
    except ValueError:
        choices = ", ".join(s.value for s in Strategy)
        raise ValueError(
            f"unknown search strategy {text!r}: use one of {choices}, optionally with '{LOWER_BOUND_SUFFIX}'"
        ) from None


# ---- per-x searches: `candidates` ascending; `smallest` True (demand) finds the smallest passing y, False
# ---- (capacity) the largest. Each is a generator: it yields the y to run next, is sent whether it passed,
# ---- and returns the optimum or None. (Generators, so that two searches can be interleaved probe by probe.)

Probes = Generator[int, bool, "int | None"]


def _full(candidates: Sequence[int], smallest: bool) -> Probes:
    passing = []
    for y in candidates:
        if (yield y):
            passing.append(y)
    if not passing:
        return None
    return min(passing) if smallest else max(passing)


def _linear(candidates: Sequence[int], smallest: bool) -> Probes:
    best = None
    for y in candidates:
        passed = yield y
        if smallest and passed:  # demand: resources ascending, the first pass is the minimum
            return y
        if not smallest:  # capacity: loads ascending, the last pass before the first fail
            if not passed:
                break
            best = y
    return best


def _binary(candidates: Sequence[int], smallest: bool) -> Probes:
    lower, upper, best = 0, len(candidates) - 1, None
    while lower <= upper:
        # Demand probes the lower middle, capacity the upper middle: the probe order Theodolite uses.
        mid = (lower + upper) // 2 if smallest else (lower + upper + 1) // 2
        passed = yield candidates[mid]
        if passed:
            best = candidates[mid]
        if passed == smallest:  # demand pass / capacity fail: the answer lies below
            upper = mid - 1
        else:
            lower = mid + 1
    return best


def _initial_guess(candidates: Sequence[int], smallest: bool, guess: int | None) -> Probes:
    if guess is None:
        start = 0
    else:  # the guess may not be a candidate (restricted away): start at the nearest candidate >= guess
        start = next((i for i, y in enumerate(candidates) if y >= guess), len(candidates) - 1)
    # "Towards the optimum" is downwards for demand (fewer resources) and upwards for capacity (more load).
    toward = -1 if smallest else 1
    if (yield candidates[start]):
        best, i = candidates[start], start + toward
        while 0 <= i < len(candidates) and (yield candidates[i]):  # step while passing
            best, i = candidates[i], i + toward
        return best
    i = start - toward
    while 0 <= i < len(candidates):  # step away while failing, stop at the first pass
        if (yield candidates[i]):
            return candidates[i]
        i -= toward
    return None


def probes(strategy: Strategy, candidates: Sequence[int], smallest: bool, guess: int | None) -> Probes:
    if strategy is Strategy.CAPACITY:
        raise ValueError(
            "the capacity strategy derives the demand from measured capacities: it runs in a gate against a "
            "running job, not as a search over sub-experiment verdicts; choose linear, binary, initial-guess, "
            "baseline-guess or full here"
        )
    if strategy is Strategy.FULL:
        return _full(candidates, smallest)
    if strategy is Strategy.LINEAR:
        return _linear(candidates, smallest)
    if strategy is Strategy.BINARY:
        return _binary(candidates, smallest)
    return _initial_guess(candidates, smallest, guess)  # INITIAL_GUESS and BASELINE_GUESS
