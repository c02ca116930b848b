"""One benchmark's demand search in a session, advanced one load per gate test: the single-revision
experiment, whose loads are compared with the stored baseline."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pytest_theodolite.core.blind_spot import BlindSpot, blind_spot, capacities
from pytest_theodolite.core.capacity import CapacityEstimate
from pytest_theodolite.core.certainty import to_confirm
from pytest_theodolite.core.cost import PointCost
from pytest_theodolite.core.outcomes import StepStatus
from pytest_theodolite.core.records import SubExperimentRecord
from pytest_theodolite.core.scalability import DemandResult, Metric
from pytest_theodolite.core.search import IncrementalSearch, Strategy
from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
from pytest_theodolite.engine.capacity_probe import CapacityMeasurement
from pytest_theodolite.engine.capacity_search import CapacitySearch, same_cost_figure
from pytest_theodolite.engine.gate import STORED_BASELINE, GatePoint
from pytest_theodolite.engine.markers import GateSpec
from pytest_theodolite.engine.runner import ExperimentRunner
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.engine.testbed import testbed
from pytest_theodolite.judge.comparison import (
    compare,
    offered_share,
    regression_judgeable,
    regression_share,
)
from pytest_theodolite.judge.demand_points import DemandPoint, baseline_guess, demand_point
from pytest_theodolite.report.benchmark import StoredModeResult
from pytest_theodolite.store.baseline import Baseline

if TYPE_CHECKING:  # the session holds experiments; an experiment is handed its session
    from pytest_theodolite.engine.session import TheodoliteSession

#: (benchmark name, finished sub-experiment -- or the capacity strategy's capacity measurement --, the
#: runner's phase timings per (load, resources, repetition))
SubExperimentListener = Callable[[str, SubExperimentRecord | CapacityMeasurement, Mapping[Any, Any]], None]


@contextmanager
def finishing(unfinished: set[int], load: int) -> Iterator[None]:
    """`load` is in `unfinished` until the block ends, and stays there where an interrupt or an error leaves
    it: a report judges no load whose measurement did not end. Inside a block that holds it already (a gate
    point's measurement is part of it), the outer block decides."""
    if load in unfinished:
        yield
        return
    unfinished.add(load)
    yield
    unfinished.discard(load)


@dataclass
class BenchmarkExperiment:
    """One benchmark's demand search in this session, advanced one load per gate test."""

    benchmark: Benchmark
    settings: ExperimentSettings
    runner: ExperimentRunner
    #: told of every finished sub-experiment: (benchmark name, record, the runner's timings)
    on_sub_experiment: SubExperimentListener | None = None
    search: IncrementalSearch = field(init=False)
    points: dict[int, DemandPoint] = field(default_factory=dict)
    #: every sub-experiment's record as the runner handed it back, by (load, instances); a confirming
    #: repetition replaces its first record
    records: dict[tuple[int, int], SubExperimentRecord] = field(default_factory=dict)

    #: the capacity strategy's capacities and derivation; None for the searches over sub-experiments
    capacity_search: CapacitySearch | None = None
    #: load -> the share of its rate its verdict rests on, where not the full rate (comparison.offered_share)
    offered_shares: dict[int, float] = field(default_factory=dict)
    #: loads whose measurement began and did not end (an interrupt or an error stopped it): the report gives
    #: them no verdict, whatever their search found so far
    unfinished: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.search = IncrementalSearch(
            Metric.DEMAND, self.settings.strategy, self.settings.lower_bound, self.settings.resources
        )
        if self.settings.strategy is Strategy.CAPACITY:
            self.capacity_search = CapacitySearch(self.runner, on_measurement=self._measured_capacity)

    def _measured_capacity(self, measurement: CapacityMeasurement) -> None:
        if self.on_sub_experiment is not None:
            self.on_sub_experiment(self.benchmark.name, measurement, {})

    def measure(
        self,
        load: int,
        baseline: Baseline | None = None,
        tolerance: int = 0,
        *,
        judgeable: bool = True,
        confirm_share: float | None = None,
    ) -> DemandPoint:
        """demand(load); a baseline-guess search starts at `baseline`'s demand there (`baseline_guess`). Where
        the demand exceeds the baseline's + `tolerance` on a certain FAIL, that FAIL is measured once more
        (certainty.to_confirm), at `confirm_share` of the load's rate where given (a testbed the calibration
        reads slower: comparison.regression_share). Where no regression can be `judgeable` (a testbed much
        slower than the baseline's), neither that second FAIL nor the instance counts above the first are run:
        the point is not comparable whatever they show, and each costs minutes (the demand is then ABOVE it)."""
        if load in self.points:
            return self.points[load]
        with finishing(self.unfinished, load):
            if self.capacity_search is not None:
                reference = baseline.demand.get(load) if baseline is not None else None
                found, _ = self.capacity_search.demand(load, self._run, reference)
                step = self.search.keep(found)
            else:
                reference = baseline.demand.get(load) if baseline is not None else None
                exact = self.settings.exact_demand
                step = self.search.search(
                    load,
                    self._run,
                    baseline_guess(baseline, load, self.settings.resources),
                    floor=None if exact else reference,
                    ceiling=None if exact or judgeable or reference is None else reference + tolerance,
                )
            runs = tuple(self.records[(s.load, s.resources)] for s in step.sub_experiments)
            point = demand_point(step, runs, self.search.previous(load))
            if (
                judgeable
                and baseline is not None
                and load in baseline.demand
                and point.status in (StepStatus.MEASURED, StepStatus.NONE)
            ):
                again, _ = to_confirm(runs, point.resources, baseline.demand[load], tolerance)
                if again is not None:
                    self._run(load, again, confirm=True, share=confirm_share)
                    runs = tuple(self.records[(r.load, r.resources)] for r in runs)
                    point = replace(point, sub_experiments=runs)
            self.points[load] = point
            self.runner.writer.write_demand(self.demand_result())
            return point

    def _confirmed_at(self, point: DemandPoint, resources: int, share: float) -> DemandPoint:
        """`point`'s FAIL at `resources` measured once more at `share` of the load's rate."""
        self._run(point.load, resources, confirm=True, share=share)
        runs = tuple(self.records[(r.load, r.resources)] for r in point.sub_experiments)
        point = replace(point, sub_experiments=runs)
        self.points[point.load] = point
        self.runner.writer.write_demand(self.demand_result())
        return point

    def _run(
        self, load: int, resources: int, *, confirm: bool = False, share: float | None = None
    ) -> SubExperimentRecord:
        if confirm:
            record = self.runner.confirm_sub_experiment(load, resources, share=share)
        else:
            record = self.runner.run_sub_experiment(load, resources)
        self.records[(load, resources)] = record
        if self.on_sub_experiment is not None:
            self.on_sub_experiment(self.benchmark.name, record, self.runner.timings)
        return record

    def demand_result(self) -> DemandResult:
        result = self.search.result(self.settings.loads)
        assert isinstance(result, DemandResult)
        return result

    def blind_spots(self, costs: Mapping[int, PointCost | None]) -> dict[int, BlindSpot | None]:
        """load -> how much dearer the job could become there before its demand changes (cost.BlindSpot)."""
        capacity = capacities(self.records.values())
        return {load: blind_spot(load, cost, capacity) for load, cost in costs.items()}

    @property
    def reference(self) -> str:
        return STORED_BASELINE

    def gate_point(
        self,
        spec: GateSpec,
        load: int,
        baseline: Baseline | None,
        session: TheodoliteSession,
        not_comparable: str | None,
        host_speed: float | None,
    ) -> GatePoint:
        """demand(load) measured, with its CPU per record and blind spot, judged against `baseline`, on a
        testbed at `host_speed` (over the baseline's; None: unknown, or a recording, which offers full rates).
        On a testbed offered a share of each load's rate, a FAIL at the baseline's demand is measured once more
        at the slowest speed the calibration allows (comparison.regression_share), unless it was uncertain: a
        regression rests on both. The load is unfinished until its point is judged."""
        with finishing(self.unfinished, load):
            # the capacity strategy derives demand from capacities measured at rates of its own
            share = offered_share(host_speed) if self.capacity_search is None else 1.0
            self.runner.offer(share)
            again = self._regression_share(host_speed)
            judgeable = regression_judgeable(not_comparable, host_speed, share)
            # where a regression can be judged, the search confirms a FAIL itself -- at the slowest speed the
            # calibration allows where it reads this testbed slower; else it ends at the FAIL, measured again here
            point = self.measure(
                load,
                baseline,
                spec.tolerance,
                judgeable=judgeable,
                confirm_share=again if judgeable else None,
            )
            if again is not None and not judgeable and baseline is not None:
                failed, _ = to_confirm(
                    point.sub_experiments, point.resources, baseline.demand.get(load), spec.tolerance
                )
                if failed is not None:
                    point = self._confirmed_at(point, failed, again)
                    share = again
            if share != 1:
                self.offered_shares[load] = share
            cost = session.point_cost(self, load)
            spot = self.blind_spots({load: cost})[load]
            capacities = self.capacity_search.capacities if self.capacity_search is not None else {}
            judged = same_cost_figure(baseline, self.settings.strategy)
            return GatePoint(spec, point, judged, not_comparable, cost, spot, capacities, host_speed, share)

    def _regression_share(self, host_speed: float | None) -> float | None:
        """The share of a load's rate a FAIL is confirmed at (comparison.regression_share); None for the
        capacity strategy, whose capacities are measured at rates of their own."""
        return regression_share(host_speed) if self.capacity_search is None else None

    def baseline_costs(self, session: TheodoliteSession) -> dict[int, PointCost | None]:
        """Every measured load's CPU per record, as a baseline records it."""
        return {load: session.point_cost(self, load) for load in self.points}

    def baseline_capacities(self) -> dict[int, CapacityEstimate]:
        """The capacity strategy's capacities, as a baseline records them (none for the other strategies)."""
        return dict(self.capacity_search.capacities) if self.capacity_search is not None else {}

    def result(
        self,
        name: str,
        baseline: Baseline | None,
        tolerance: int,
        cost_tolerance: float | None,
        settings: TheodoliteSettings,
        session: TheodoliteSession,
        testbed_extra: Mapping[str, str] | None,
    ) -> StoredModeResult:
        """The demand function judged against the stored baseline, with the CPU per record and the blind
        spots; an unfinished load is named, not judged (report/benchmark.py says it in words)."""
        unfinished = tuple(sorted(self.unfinished))
        measured = self.demand_result().without(unfinished)
        finished = {load: point for load, point in self.points.items() if load not in unfinished}
        baseline = same_cost_figure(baseline, self.settings.strategy)
        measured_testbed = testbed(
            settings, session.spark, self.settings.instance_cpu, session.calibration, testbed_extra
        )
        costs = {load: session.point_cost(self, load) for load in sorted(finished)}
        not_comparable, host_speed = session.judged_against(baseline, recording=settings.update_baselines)
        comparison = compare(
            measured,
            baseline,
            tolerance,
            measured_testbed=measured_testbed,
            benchmark=name,
            not_comparable=not_comparable,
            host_speed=host_speed,
            offered_shares=self.offered_shares,
            costs=costs,
            cost_tolerance=cost_tolerance,
            uncertain={
                load: point.uncertain_against(baseline, tolerance) for load, point in finished.items()
            },
            unfinished=unfinished,
        )
        capacity = self.capacity_search
        return StoredModeResult(
            name,
            comparison,
            measured,
            baseline,
            settings.results_dir,
            {load: self.benchmark.workload(load).target_rate for load in self.settings.loads},
            costs,
            self.blind_spots(costs),
            recording=settings.update_baselines,
            offered_share=self.runner.offered_share,
            regression_share=self._regression_share(host_speed),
            paired_cost_asked=self.settings.paired_cost,
            capacity_measurements=dict(capacity.measurements) if capacity is not None else None,
            capacities=dict(capacity.capacities) if capacity is not None else None,
            calibration=session.calibration,
        )

    def close(self) -> None:
        """Nothing of its own runs between gate tests: the runner's processes end with each sub-experiment."""
