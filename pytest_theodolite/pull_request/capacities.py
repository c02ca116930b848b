"""The capacity strategy in pull-request mode: both sides' capacities measured instance count by instance count in
ABBA order, and each side's demand at a load derived from them (engine/capacity_search.py), with a lag-trend run
only where the capacity leaves it open."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pytest_theodolite.core.capacity import CapacityEstimate, predicted_pass
from pytest_theodolite.core.cost import PointCost
from pytest_theodolite.core.records import SubExperimentRecord
from pytest_theodolite.core.search import IncrementalSearch, Step
from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
from pytest_theodolite.engine.capacity_probe import CapacityMeasurement, ProbePlan
from pytest_theodolite.engine.capacity_search import (
    CapacityPlan,
    capacity_cost,
    derived_demand,
    measure_saturated,
    offered_workload,
)
from pytest_theodolite.judge.demand_points import DemandPoint
from pytest_theodolite.pull_request.paired import CHANGE, REF, SIDES, abba
from pytest_theodolite.pull_request.sides import SideProcess
from theodolite_generator import Workload

#: (side, load, resources) -> the lag-trend run's record, kept in the paired search's run order
RunInOrder = Callable[[str, int, int], SubExperimentRecord]


@dataclass
class PairedCapacities:
    """Each side's capacity measurements per instance count (measured once per benchmark)."""

    benchmark: Benchmark
    settings: ExperimentSettings
    sides: Mapping[str, SideProcess]
    plan: CapacityPlan = field(default_factory=CapacityPlan)
    measurements: dict[str, dict[int, CapacityMeasurement]] = field(
        default_factory=lambda: {side: {} for side in SIDES}
    )

    def measure(self, on_measured: Callable[[str, CapacityMeasurement], None]) -> None:
        """Both sides' capacities, instance count by instance count, in ABBA order, until both take the
        highest load outside the guard band (once)."""
        if any(self.measurements.values()):
            return
        top = max(self.settings.loads)
        top_rate = self.benchmark.workload(top).target_rate
        offered = offered_workload(self.benchmark.workload, top, self.plan.probe_factor)
        plan = self.plan.probe_plan(top_rate)
        share = self.settings.slo.lag_trend_threshold.relative_to_load or 0.0
        for index, r in enumerate(self.settings.resources):
            for turn, side in enumerate(abba(index)):

                def measure(
                    workload: Workload, probe: ProbePlan, attempt: int, side: str = side, r: int = r
                ) -> CapacityMeasurement:
                    return self.sides[side].measure_capacity(top, r, workload, probe, attempt=attempt)

                # the second side is offered what the first ended with: the same rate and batches
                measurements, offered, plan = measure_saturated(
                    measure, offered, plan, self.plan, grow_batches=turn == 0
                )
                self.measurements[side][r] = measurements[-1]
                for measurement in measurements:
                    on_measured(side, measurement)
            estimates = [self.measurements[side][r].estimate for side in SIDES]
            if any(e is None for e in estimates) or all(
                predicted_pass(e, top_rate, share, self.plan.guard) for e in estimates if e is not None
            ):
                break

    def estimates(self, side: str) -> dict[int, CapacityEstimate]:
        """One side's capacity per instance count, where its measurement gave one."""
        return {r: m.estimate for r, m in self.measurements[side].items() if m.estimate is not None}

    def derived_steps(
        self, load: int, searches: Mapping[str, IncrementalSearch], run_in_order: RunInOrder
    ) -> dict[str, Step]:
        """Both sides' demand derived from their capacities; the change's regression rests on a lag-trend FAIL
        at REF's demand (engine/capacity_search.derived_demand)."""
        rate = self.benchmark.workload(load).target_rate
        share = self.settings.slo.lag_trend_threshold.relative_to_load or 0.0
        steps: dict[str, Step] = {}
        for side in SIDES:  # REF first: its demand is what the change's is held against
            reference = steps[REF].optimum if side == CHANGE else None
            step, _ = derived_demand(
                load,
                rate,
                self.estimates(side),
                tuple(self.settings.resources),
                share,
                self.plan.guard,
                lambda l, r, side=side: run_in_order(side, l, r),  # type: ignore[misc]
                reference,
            )
            steps[side] = searches[side].keep(step)
        return steps

    def costs(self, sides: Mapping[str, DemandPoint]) -> dict[str, PointCost | None]:
        """Each side's CPU per record at its capacity at its demand (capacity_search.capacity_cost)."""
        costs: dict[str, PointCost | None] = {}
        for side, point in sides.items():
            estimate = self.estimates(side).get(point.resources) if point.resources else None
            costs[side] = None if estimate is None else capacity_cost(estimate, self.settings.instance_cpu)
        return costs
