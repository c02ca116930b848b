"""One load measured on both sides, and the change judged against REF there: each side's demand point, its CPU
per record, the paired read's figure, and the verdict they give together."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_theodolite.core.certainty import uncertain_regression
from pytest_theodolite.core.cost import CostCheck, PointCost, point_cost
from pytest_theodolite.core.outcomes import UNMEASURED, CostStatus, MeasuredDemand, StepStatus, Verdict
from pytest_theodolite.core.records import SubExperimentRecord
from pytest_theodolite.judge.comparison import PointComparison
from pytest_theodolite.judge.demand_points import DemandPoint
from pytest_theodolite.pull_request.paired import CHANGE, REF, compare_sides
from pytest_theodolite.report.summary import CostFigure


@dataclass(frozen=True)
class SideCost:
    """The continuous figure of one side at one load: CPU microseconds per record at its demand."""

    cpu_us_per_record: float | None
    resources: int | None


def cost_at(point_records: tuple[SubExperimentRecord, ...], demand: Any) -> SideCost:
    """The CPU per record of the passing sub-experiment at the demand (None where there is none)."""
    if not isinstance(demand, int):
        return SideCost(None, None)
    record = next((r for r in point_records if r.resources == demand), None)
    return SideCost(None if record is None else record.cpu_us_per_record, demand)


def cost_change(ref: SideCost, change: SideCost) -> float | None:
    """The change's CPU per record relative to REF's (0.2 = 20 % dearer), where both ran the same instances."""
    if (
        ref.cpu_us_per_record is None
        or change.cpu_us_per_record is None
        or ref.resources != change.resources
        or ref.cpu_us_per_record <= 0
    ):
        return None
    return change.cpu_us_per_record / ref.cpu_us_per_record - 1


@dataclass(frozen=True)
class PairedPoint:
    """One load measured on both sides: each side's demand point."""

    load: int
    sides: Mapping[str, DemandPoint]
    #: the capacity strategy's CPU per record at capacity per side, in place of the CPU per offered record
    capacity_costs: Mapping[str, PointCost | None] = field(default_factory=dict)
    #: the instances' CPU limit (their share of the quota spent says whether the CPU per record can rise at all)
    instance_cpu: float | None = None
    #: the benchmark's paired backlog read, judged (``paired_cost``); None where none was read
    paired_cost: CostCheck | None = None
    #: why the paired read that was asked for gave no figure to judge (None: it gave one, or none was asked for):
    #: a pass needs that reading
    paired_unread: str | None = None

    def demand(self, side: str) -> MeasuredDemand:
        point = self.sides[side]
        return UNMEASURED if point.status == StepStatus.UNMEASURED else point.resources

    def comparison(
        self, benchmark: str, tolerance: int, cost_tolerance: float | None = None
    ) -> PointComparison:
        """The change against REF: its demand, and where both need the same instances its CPU per record
        (both measured on this host, alternating: no calibration between them). Where the demand passed and the
        paired read's figure rose beyond its tolerance, the point is a cost regression by that figure."""
        compared = compare_sides(
            benchmark,
            self.load,
            self.demand(REF),
            self.demand(CHANGE),
            tolerance,
            skipped=self.sides[CHANGE].status == StepStatus.SKIPPED,
            at_most=self.sides[CHANGE].status == StepStatus.AT_MOST,
            ref_at_least=self.sides[REF].status == StepStatus.AT_LEAST,
            ref_expected=self.sides[REF].status == StepStatus.EXPECTED,
            ref_cost=self.point_cost(REF),
            change_cost=self.point_cost(CHANGE),
            cost_tolerance=cost_tolerance,
            uncertain=self.uncertain(tolerance),
        )
        if (
            compared.verdict is Verdict.PASS
            and self.paired_cost is not None
            and self.paired_cost.status == CostStatus.REGRESSION
        ):
            return replace(compared, verdict=Verdict.COST_REGRESSION, cost=self.paired_cost)
        if compared.verdict in (Verdict.PASS, Verdict.IMPROVEMENT) and self.paired_unread is not None:
            # never green without the mode's sensitive reading: no verdict (exit 7), and what to change
            return replace(compared, verdict=Verdict.NOT_COMPARABLE, reason=self.paired_unread)
        return compared

    def uncertain(self, tolerance: int, reference_label: str = "REF") -> str | None:
        """Why the change's regression against REF here would rest on uncertain verdicts (certainty.py)."""
        return uncertain_regression(
            self.sides[CHANGE].sub_experiments,
            self.demand(REF),
            tolerance,
            self.sides[REF].sub_experiments,
            reference_label,
        )

    def point_cost(self, side: str) -> PointCost | None:
        """One side's CPU per record at its demand, with its interval."""
        if side in self.capacity_costs:
            return self.capacity_costs[side]
        return point_cost(self.sides[side].sub_experiments, self.demand(side), self.instance_cpu, None)

    def cost(self, side: str) -> SideCost:
        if side in self.capacity_costs:
            figure = self.capacity_costs[side]
            return SideCost(None if figure is None else figure.cpu_us_per_record, self.sides[side].resources)
        return cost_at(self.sides[side].sub_experiments, self.demand(side))

    def cost_figure(self) -> CostFigure:
        ref, change = self.cost(REF), self.cost(CHANGE)
        return CostFigure(ref.cpu_us_per_record, change.cpu_us_per_record, cost_change(ref, change))
