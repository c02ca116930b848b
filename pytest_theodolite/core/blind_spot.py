"""How much dearer a job could become at one load before its demand changes: its blind spot."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pytest_theodolite.core.cost import PointCost
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.records import SubExperimentRecord


@dataclass(frozen=True)
class BlindSpot:
    """How much dearer the job could become at one load before its demand changes: ``share`` 0.5 = 50 %.
    ``source`` says how it was found: "capacity" (the load `resources` instances processed while overloaded at
    a higher load: that load minus its lag slope) or "cpu" (the CPU left under the instances' limit)."""

    load: int
    resources: int
    share: float
    source: str

    @property
    def text(self) -> str:
        how = "capacity" if self.source == "capacity" else "CPU headroom"
        return f"+{max(self.share, 0):.0%} ({how})"


def capacities(records: Iterable[SubExperimentRecord]) -> dict[int, float]:
    """resources -> the records/s that many instances processed while falling behind (load minus lag slope,
    median over the failing sub-experiments that fitted a slope): Theodolite's capacity, seen from above."""
    seen: dict[int, list[float]] = {}
    for record in records:
        slope = record.lag_trend_slope
        if record.outcome is Outcome.FAIL and slope is not None and math.isfinite(slope) and slope > 0:
            seen.setdefault(record.resources, []).append(record.load - slope)
    return {resources: statistics.median(values) for resources, values in seen.items()}


def blind_spot(load: int, cost: PointCost | None, capacity: Mapping[int, float]) -> BlindSpot | None:
    """From the capacity of the demand's instance count where an overloaded run measured it, else from the
    CPU the instances left unused (a lower bound: bigger micro-batches absorb part of a dearer record)."""
    if cost is None:
        return None
    if cost.resources in capacity and load > 0:
        return BlindSpot(load, cost.resources, capacity[cost.resources] / load - 1, "capacity")
    if cost.cpu_utilisation:
        return BlindSpot(load, cost.resources, 1 / cost.cpu_utilisation - 1, "cpu")
    return None


#: a gate whose every load leaves at least this much headroom cannot see a slowdown below it
WIDE_BLIND_SPOT = 0.5
