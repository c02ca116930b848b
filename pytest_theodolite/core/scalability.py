"""Demand and capacity (Theodolite's scalability metrics) as typed results, and their computation from a
table of verdicts.

demand(l)   = min{ r : all SLOs hold for (l, r) }   -- None ("none") if no tested r passed
capacity(r) = max{ l : all SLOs hold for (l, r) }   -- None ("none") if no tested l passed

A third state, *unmeasured*, is kept apart from "none": a load (demand) or resource amount (capacity) with any
INVALID or ERRORED sub-experiment was not really judged. The search strategies stop at the first such
sub-experiment, so the offline rule here ("any INVALID/ERRORED point makes that x unmeasured") reproduces
them. The pytest gate reports "none" as a normal result and "unmeasured" as a test error.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace

from pytest_theodolite.core.outcomes import Outcome


class Metric(str, enum.Enum):
    DEMAND = "demand"  # minimal resources per load
    CAPACITY = "capacity"  # maximal load per resources


@dataclass(frozen=True)
class SubExperiment:
    """One executed sub-experiment: the (load, resources) point and its combined outcome."""

    load: int
    resources: int
    outcome: Outcome


@dataclass(frozen=True)
class DemandResult:
    """demand: load -> minimal passing resources, or None when no tested amount passed ("none").

    `unmeasured` loads have no demand entry: an INVALID/ERRORED sub-experiment left them unjudged.
    `skipped` loads are in `demand` as None without having run (LowerBound after an unsolvable load).
    `at_most` loads passed at their `demand` and fewer instances were not run: the demand is at most that.
    `above` loads (demand None) failed at the instances given here, and more were not run: the demand is higher.
    `at_least` loads failed below their `demand`, which was not run: the demand is at least that.
    """

    demand: Mapping[int, int | None]
    unmeasured: tuple[int, ...] = ()
    skipped: tuple[int, ...] = ()
    sub_experiments: tuple[SubExperiment, ...] = ()
    strategy: str = ""
    loads: tuple[int, ...] = ()
    resources: tuple[int, ...] = ()
    at_most: tuple[int, ...] = ()
    above: Mapping[int, int] = field(default_factory=dict)
    at_least: tuple[int, ...] = ()

    @property
    def metric(self) -> Metric:
        return Metric.DEMAND

    def status(self, load: int) -> str:
        """'unmeasured', 'none', the demand as text, '<=2' where fewer were not run, '>2' where more were not,
        '>=2' where fewer failed and 2 was not run: one word per load."""
        if load in self.unmeasured:
            return "unmeasured"
        if load in self.above:
            return f">{self.above[load]}"
        value = self.demand.get(load)
        if value is None:
            return "none"
        if load in self.at_least:
            return f">={value}"
        return f"<={value}" if load in self.at_most else str(value)

    def without(self, loads: Collection[int]) -> DemandResult:
        """This result with `loads` left out (a run stopped before their verdicts: what the search found there
        so far is not a demand). The raw sub-experiments stay."""
        if not loads:
            return self
        return replace(
            self,
            demand={load: value for load, value in self.demand.items() if load not in loads},
            unmeasured=tuple(load for load in self.unmeasured if load not in loads),
            skipped=tuple(load for load in self.skipped if load not in loads),
            at_most=tuple(load for load in self.at_most if load not in loads),
            above={load: value for load, value in self.above.items() if load not in loads},
            at_least=tuple(load for load in self.at_least if load not in loads),
        )


@dataclass(frozen=True)
class CapacityResult:
    """capacity: resources -> maximal passing load, or None when no tested load passed ("none")."""

    capacity: Mapping[int, int | None]
    unmeasured: tuple[int, ...] = ()
    skipped: tuple[int, ...] = ()
    sub_experiments: tuple[SubExperiment, ...] = ()
    strategy: str = ""
    loads: tuple[int, ...] = ()
    resources: tuple[int, ...] = ()

    @property
    def metric(self) -> Metric:
        return Metric.CAPACITY

    def status(self, resources: int) -> str:
        if resources in self.unmeasured:
            return "unmeasured"
        value = self.capacity.get(resources)
        return "none" if value is None else str(value)


@dataclass
class _PointsOfOneX:
    passed: list[int] = field(default_factory=list)
    broken: bool = False  # any INVALID/ERRORED


def _group(points: Iterable[SubExperiment], by_load: bool) -> dict[int, _PointsOfOneX]:
    grouped: dict[int, _PointsOfOneX] = {}
    for point in points:
        x, y = (point.load, point.resources) if by_load else (point.resources, point.load)
        entry = grouped.setdefault(x, _PointsOfOneX())
        if point.outcome is Outcome.PASS:
            entry.passed.append(y)
        elif not point.outcome.is_measured:
            entry.broken = True
    return grouped


def demand_from_sub_experiments(points: Iterable[SubExperiment], strategy: str = "offline") -> DemandResult:
    """demand(l) = min passing r among the tested points; a load with an INVALID/ERRORED point is unmeasured."""
    points = tuple(points)
    grouped = _group(points, by_load=True)
    demand = {x: min(g.passed) if g.passed else None for x, g in sorted(grouped.items()) if not g.broken}
    unmeasured = tuple(x for x, g in sorted(grouped.items()) if g.broken)
    return DemandResult(
        demand=demand,
        unmeasured=unmeasured,
        sub_experiments=points,
        strategy=strategy,
        loads=tuple(sorted(grouped)),
        resources=tuple(sorted({p.resources for p in points})),
    )


def capacity_from_sub_experiments(
    points: Iterable[SubExperiment], strategy: str = "offline"
) -> CapacityResult:
    """capacity(r) = max passing l among the tested points; a resource amount with any INVALID/ERRORED
    point is unmeasured."""
    points = tuple(points)
    grouped = _group(points, by_load=False)
    capacity = {x: max(g.passed) if g.passed else None for x, g in sorted(grouped.items()) if not g.broken}
    unmeasured = tuple(x for x, g in sorted(grouped.items()) if g.broken)
    return CapacityResult(
        capacity=capacity,
        unmeasured=unmeasured,
        sub_experiments=points,
        strategy=strategy,
        loads=tuple(sorted({p.load for p in points})),
        resources=tuple(sorted(grouped)),
    )
