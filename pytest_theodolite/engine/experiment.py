"""One benchmark's demand search in a session, advanced one load per gate test: the single-revision
experiment, whose loads are compared with the stored baseline."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_theodolite.core.certainty import to_confirm
from pytest_theodolite.core.cost import (
    BlindSpot,
    PointCost,
    blind_spot,
    capacities,
)
from pytest_theodolite.core.records import SubExperimentRecord
from pytest_theodolite.core.scalability import DemandResult, Metric
from pytest_theodolite.core.search import MEASURED, NONE, IncrementalSearch
from pytest_theodolite.engine.runner import Benchmark, ExperimentRunner, ExperimentSettings
from pytest_theodolite.judge.demand_points import DemandPoint, baseline_guess, demand_point
from pytest_theodolite.store.baseline import Baseline

#: (benchmark name, finished sub-experiment, the runner's phase timings per (load, resources, repetition))
SubExperimentListener = Callable[[str, SubExperimentRecord, Mapping[Any, Any]], None]


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

    def __post_init__(self) -> None:
        self.search = IncrementalSearch(
            Metric.DEMAND, self.settings.strategy, self.settings.lower_bound, self.settings.resources
        )

    def measure(self, load: int, baseline: Baseline | None = None, tolerance: int = 0) -> DemandPoint:
        """demand(load); a baseline-guess search starts at `baseline`'s demand there (`baseline_guess`). Where
        the demand exceeds the baseline's + `tolerance` on a certain FAIL, that FAIL is measured once more
        (certainty.to_confirm)."""
        if load in self.points:
            return self.points[load]
        step = self.search.search(load, self._run, baseline_guess(baseline, load, self.settings.resources))
        runs = tuple(self.runner.records[(s.load, s.resources)] for s in step.sub_experiments)
        point = demand_point(step, runs, self.search.previous(load))
        if baseline is not None and load in baseline.demand and point.status in (MEASURED, NONE):
            again, _ = to_confirm(runs, point.resources, baseline.demand[load], tolerance)
            if again is not None:
                self._run(load, again, confirm=True)
                runs = tuple(self.runner.records[(r.load, r.resources)] for r in runs)
                point = replace(point, sub_experiments=runs)
        self.points[load] = point
        self.runner.writer.write_demand(self.demand_result())
        return point

    def _run(self, load: int, resources: int, *, confirm: bool = False) -> SubExperimentRecord:
        if confirm:
            record = self.runner.confirm_sub_experiment(load, resources)
        else:
            record = self.runner.run_sub_experiment(load, resources)
        if self.on_sub_experiment is not None:
            self.on_sub_experiment(self.benchmark.name, record, self.runner.timings)
        return record

    def demand_result(self) -> DemandResult:
        result = self.search.result(self.settings.loads)
        assert isinstance(result, DemandResult)
        return result

    def blind_spots(self, costs: Mapping[int, PointCost | None]) -> dict[int, BlindSpot | None]:
        """load -> how much dearer the job could become there before its demand changes (cost.BlindSpot)."""
        capacity = capacities(self.runner.records.values())
        return {load: blind_spot(load, cost, capacity) for load, cost in costs.items()}
