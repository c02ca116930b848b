"""One point of a gate as measured, judged against its reference; pytest-free (the plugin turns a verdict
into a test result).

A gate compares the change's demand at a load with a *reference*. `GatePoint` is the stored baseline's
case; pull-request mode's REF, measured beside the change, is the other (`pull_request.gate_point`). Both
give the same things to the gate: the comparison, the JUnit properties, and the message of a failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pytest_theodolite.core.blind_spot import BlindSpot
from pytest_theodolite.core.capacity import CapacityEstimate
from pytest_theodolite.core.cost import RUN_TO_RUN_CV, SIGNIFICANCE, PointCost
from pytest_theodolite.core.outcomes import UNMEASURED, StepStatus, Verdict, count_text
from pytest_theodolite.core.scalability import DemandResult
from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
from pytest_theodolite.engine.markers import GateSpec
from pytest_theodolite.judge.comparison import PointComparison, compare_point
from pytest_theodolite.judge.demand_points import DemandPoint
from pytest_theodolite.report.formats import BenchmarkResult
from pytest_theodolite.report.junit import capacity_junit_properties, cost_junit_properties, junit_properties
from pytest_theodolite.report.summary import (
    cost_text,
    estimate_text,
    failure_table,
    slopes_and_outcomes,
)
from pytest_theodolite.store.baseline import Baseline

if TYPE_CHECKING:  # the session holds experiments; an experiment is handed its session
    from pytest_theodolite.engine.session import TheodoliteSession
    from pytest_theodolite.engine.settings import TheodoliteSettings

#: the reference of a gate outside pull-request mode
STORED_BASELINE = "baseline"


@dataclass
class GatePoint:
    """demand(load) of the change, judged against the stored baseline."""

    spec: GateSpec
    point: DemandPoint
    baseline: Baseline | None
    not_comparable: str | None = None  # why the baseline's testbed cannot be compared with this one
    #: the CPU per record at the demand (cost.py) and how much dearer the job could become before it changes
    cost: PointCost | None = None
    blind_spot: BlindSpot | None = None
    #: the capacity strategy's capacity per instance count (records/s), shown beside the demand
    capacities: Mapping[int, CapacityEstimate] = field(default_factory=dict)
    #: this testbed's speed over the baseline's (calibration.speed_ratio): what decides one-sided verdicts where
    #: the two are not comparable
    host_speed: float | None = None
    #: the share of the load's rate offered (comparison.offered_share: below 1 on a testbed read slower)
    offered_share: float = 1.0

    @property
    def reference(self) -> str:
        """What the verdict compares with, for messages."""
        return STORED_BASELINE

    @property
    def unmeasured(self) -> bool:
        return self.point.status == StepStatus.UNMEASURED

    def comparison(self) -> PointComparison:
        return self.baseline_comparison()

    def baseline_comparison(self) -> PointComparison:
        """The change against the stored baseline."""
        measured = UNMEASURED if self.unmeasured else self.point.resources
        return compare_point(
            self.point.load,
            measured,
            self.baseline,
            self.spec.tolerance,
            skipped=self.point.status == StepStatus.SKIPPED,
            at_most=self.point.status == StepStatus.AT_MOST,
            above=self.point.above,
            not_comparable=self.not_comparable,
            host_speed=self.host_speed,
            offered_share=self.offered_share,
            measured_cost=self.cost,
            cost_tolerance=self.spec.cost_tolerance,
            uncertain=self.point.uncertain_against(self.baseline, self.spec.tolerance),
        )

    def junit_properties(self, comparison: PointComparison) -> list[tuple[str, Any]]:
        return (
            junit_properties(self.spec.benchmark.name, comparison)
            + cost_junit_properties(
                self.point.load,
                self.cost,
                self.baseline.cost.get(self.point.load) if self.baseline is not None else None,
                self.blind_spot,
                self.spec.cost_tolerance,
            )
            + capacity_junit_properties(self.capacities)
        )

    def failure_message(self, comparison: PointComparison) -> str:
        """Why this point fails the gate: not comparable, a regression of demand or of cost."""
        head = comparison.describe(self.spec.benchmark.name, self.reference)
        if comparison.verdict is Verdict.REGRESSION:
            slopes, outcomes = slopes_and_outcomes(self.point.sub_experiments)
            return f"{head}\n" + failure_table(comparison, slopes, outcomes, self.reference)
        if comparison.verdict is Verdict.COST_REGRESSION:
            before, after = self.costs_compared()
            assert before is not None  # a cost regression needs the reference's figure
            return (
                f"{head}\n"
                f"CPU per record at {count_text(before.resources, 'instance')}: {self.reference} "
                f"{estimate_text(before)}, measured {cost_text(comparison, after)}; "
                "a regression needs the rise beyond the tolerance and beyond the figures' noise (one-sided "
                f"p < {SIGNIFICANCE:g}, with {RUN_TO_RUN_CV:.0%} from run to run beside each run's own)"
            )
        return head

    def costs_compared(self) -> tuple[PointCost | None, PointCost | None]:
        """(the reference's CPU per record, the change's) at this load."""
        assert self.baseline is not None
        return self.baseline.cost.get(self.point.load), self.cost


class GateExperiment(Protocol):
    """A benchmark measured in a session, a load per gate test: against the stored baseline
    (engine.experiment.BenchmarkExperiment) or against REF beside it (pull_request.experiment)."""

    benchmark: Benchmark
    settings: ExperimentSettings

    @property
    def points(self) -> Mapping[int, Any]:
        """load -> what was measured there (a demand point; in pull-request mode both sides')"""

    @property
    def reference(self) -> str: ...

    def measure(self, load: int, baseline: Baseline | None = None, tolerance: int = 0) -> Any: ...

    def gate_point(
        self,
        spec: GateSpec,
        load: int,
        baseline: Baseline | None,
        session: TheodoliteSession,
        not_comparable: str | None,
        host_speed: float | None,
    ) -> GatePoint: ...

    def demand_result(self) -> DemandResult: ...

    def baseline_costs(self, session: TheodoliteSession) -> dict[int, PointCost | None] | None: ...

    def baseline_capacities(self) -> dict[int, CapacityEstimate]: ...

    def result(
        self,
        name: str,
        baseline: Baseline | None,
        tolerance: int,
        cost_tolerance: float | None,
        settings: TheodoliteSettings,
        session: TheodoliteSession,
        testbed_extra: Mapping[str, str] | None,
    ) -> BenchmarkResult:
        """What the benchmark measured, judged; report/formats.py renders it."""

    def close(self) -> None: ...
