"""Pull-request mode in a session: each benchmark measured at REF and in the working tree, side by side.

`PairedExperiment` is what `TheodoliteSession.experiment` gives when ``--theodolite-compare-ref`` is set: the
same interface as a single-revision experiment for the gate (``measure(load, baseline)`` returns the change's
demand point), with REF's point and the comparison beside it. Both sides run in their own driver process
(sides.py); their searches advance together in ABBA order (paired.py), or their demands are derived from their
capacities (capacities.py). With ``paired_cost``, both sides also read a backlog at the same time, once per
benchmark (paired_read.py); each load's points and verdict are point.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_theodolite.core.capacity import CapacityEstimate
from pytest_theodolite.core.certainty import to_confirm, uncertain_certificate
from pytest_theodolite.core.outcomes import StepStatus
from pytest_theodolite.core.records import SubExperimentRecord
from pytest_theodolite.core.scalability import DemandResult, Metric
from pytest_theodolite.core.search import IncrementalSearch, Strategy
from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
from pytest_theodolite.engine.capacity_probe import CapacityMeasurement
from pytest_theodolite.engine.experiment import finishing
from pytest_theodolite.engine.markers import GateSpec
from pytest_theodolite.engine.runner import PhaseTimings
from pytest_theodolite.engine.session import ExperimentFactory, TheodoliteSession
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.judge.comparison import (
    Comparison,
    compare,
    offered_share,
    weighs_at_least_the_baselines,
)
from pytest_theodolite.judge.demand_points import baseline_guess, demand_point, shifted_guess
from pytest_theodolite.pull_request.capacities import PairedCapacities
from pytest_theodolite.pull_request.gate_point import PairedGatePoint
from pytest_theodolite.pull_request.paired import (
    CHANGE,
    REF,
    SAME_TESTBED,
    SIDES,
    PairedDemandSearch,
)
from pytest_theodolite.pull_request.paired_read import PairedRead
from pytest_theodolite.pull_request.point import PairedPoint
from pytest_theodolite.pull_request.side_spec import SideSpec, spec_for
from pytest_theodolite.pull_request.sides import SideProcess, close_sides
from pytest_theodolite.pull_request.target import CompareTarget
from pytest_theodolite.report.paired import PairedModeResult
from pytest_theodolite.store.baseline import Baseline
from pytest_theodolite.store.results import experiment_id

SubExperimentListener = Callable[[str, Any, Any], None]


@dataclass
class PairedExperiment:
    """One benchmark at REF and in the working tree, advanced one load per gate test."""

    benchmark: Benchmark
    settings: ExperimentSettings
    target: CompareTarget
    sides: Mapping[str, SideProcess]
    on_sub_experiment: SubExperimentListener | None = None
    search: PairedDemandSearch = field(init=False)
    points: dict[int, PairedPoint] = field(default_factory=dict)
    records: dict[tuple[str, int, int], SubExperimentRecord] = field(default_factory=dict)
    timings: dict[str, dict[Any, PhaseTimings]] = field(default_factory=lambda: {side: {} for side in SIDES})

    #: the capacity strategy's measurements per side (None for the other strategies)
    capacities: PairedCapacities | None = field(init=False, default=None)
    #: ``paired_cost``: both sides' backlog read, once per benchmark
    paired_read: PairedRead = field(init=False)
    #: loads whose measurement began and did not end (experiment.finishing): named in the report, not judged
    unfinished: set[int] = field(default_factory=set)
    #: the share of each load's rate both sides are offered (comparison.offered_share), set before the first
    #: sub-experiment from the calibration against the stored baseline: 1 without one, or on a testbed as fast
    offered_share: float = 1.0
    #: this testbed's speed over the stored baseline's host by the calibrations (None: unknown or no baseline),
    #: set with `offered_share`: where it is faster, REF may need fewer instances than the baseline expects
    host_speed: float | None = None

    def __post_init__(self) -> None:
        if self.settings.strategy is Strategy.CAPACITY:
            self.capacities = PairedCapacities(self.benchmark, self.settings, self.sides)
        self.paired_read = PairedRead(self.benchmark, self.settings, self.sides)
        self.search = PairedDemandSearch(
            {
                side: IncrementalSearch(
                    Metric.DEMAND, self.settings.strategy, self.settings.lower_bound, self.settings.resources
                )
                for side in SIDES
            }
        )

    def _run(self, side: str, load: int, resources: int, *, confirm: bool = False) -> SubExperimentRecord:
        record, timings = self.sides[side].run(
            load, resources, self.benchmark.workload(load), confirm=confirm, share=self.offered_share
        )
        self.records[(side, load, resources)] = record
        self.timings[side].update(timings)
        if self.on_sub_experiment is not None:
            self.on_sub_experiment(self._label(side), record, self.timings[side])
        return record

    def _label(self, side: str) -> str:
        return f"{self.benchmark.name} [{'change' if side == CHANGE else self.target.label}]"

    def measure(self, load: int, baseline: Baseline | None = None, tolerance: int = 0) -> PairedPoint:
        """Both sides' demand at `load`; a baseline-guess search starts both at the baseline's demand, scaled
        where REF's demand at the load before differed from the baseline's there (`shifted_guess`). Where
        the change's demand exceeds REF's + `tolerance` on certain verdicts, those verdicts are measured once
        more, each side in the reverse order of its first run (certainty.to_confirm). The load is unfinished
        until both sides' points are in."""
        if load in self.points:
            return self.points[load]
        with finishing(self.unfinished, load):
            self.paired_read.read()
            if self.capacities is not None:
                self.capacities.measure(self._capacity_measured)
                steps = self.capacities.derived_steps(load, self.search.searches, self._run_in_order)
            else:
                steps = self.search.measure(
                    load,
                    self._run,
                    shifted_guess(
                        baseline_guess(baseline, load, self.settings.resources),
                        baseline,
                        self.search.searches[REF].previous(load),
                        self.settings.resources,
                    ),
                    exact_change=self.settings.exact_demand,
                    certify=tolerance == 0 and self.paired_read.judged(),
                    ref_below=self.settings.ref_below
                    or not self.paired_read.certain()
                    or not self._baseline_expected_here(),
                )
            sides = {
                side: demand_point(
                    step,
                    tuple(self.records[(side, s.load, s.resources)] for s in step.sub_experiments),
                    self.search.searches[side].previous(load),
                )
                for side, step in steps.items()
            }
            paired = self._confirmed(
                PairedPoint(
                    load,
                    sides,
                    {} if self.capacities is None else self.capacities.costs(sides),
                    self.settings.instance_cpu,
                    self.paired_read.check(),
                    self.paired_read.unread(),
                ),
                tolerance,
            )
            self.points[load] = paired
            return paired

    def _baseline_expected_here(self) -> bool:
        """Whether REF is expected to need at least the stored baseline's demands on this testbed: each load
        offered weighs at least the baseline's even on the fastest host its calibration allows (a slower testbed
        is offered each load at its share, comparison.offered_share) -- where a single-revision run judges a pass
        at them. Where it may weigh less (a testbed as fast as the baseline's host, or faster), REF often passes one
        below them (docs/lab-notes/capacity.md, 2026-12-06), where a change of how the job scales would go unseen
        without REF's run below (paired.py)."""
        return weighs_at_least_the_baselines(self.host_speed, self.offered_share)

    def _run_in_order(self, side: str, load: int, resources: int) -> SubExperimentRecord:
        """A lag-trend run of the capacity path, kept in the run order as the paired search keeps its own (a
        confirmation runs each side in the reverse order of its first run)."""
        self.search.order.append((side, load, resources))
        return self._run(side, load, resources)

    def _capacity_measured(self, side: str, measurement: CapacityMeasurement) -> None:
        if self.on_sub_experiment is not None:
            self.on_sub_experiment(self._label(side), measurement, {})

    def _confirmed(self, paired: PairedPoint, tolerance: int) -> PairedPoint:
        change_at, ref_at = to_confirm(
            paired.sides[CHANGE].sub_experiments,
            paired.demand(CHANGE),
            paired.demand(REF),
            tolerance,
            paired.sides[REF].sub_experiments,
        )
        targets = {side: r for side, r in ((CHANGE, change_at), (REF, ref_at)) if r is not None}
        if not targets:
            return paired
        # the side that ran later at this load runs first now: the order inside a pair is not neutral
        ran_at = {side: self.search.order.index((side, paired.load, r)) for side, r in targets.items()}
        for side in sorted(targets, key=lambda s: -ran_at[s]):
            self._run(side, paired.load, targets[side], confirm=True)
        sides = {
            side: replace(
                point,
                sub_experiments=tuple(
                    self.records[(side, r.load, r.resources)] for r in point.sub_experiments
                ),
            )
            for side, point in paired.sides.items()
        }
        return replace(paired, sides=sides)

    @property
    def reference(self) -> str:
        return self.target.label

    def gate_point(
        self,
        spec: GateSpec,
        load: int,
        baseline: Baseline | None,
        session: TheodoliteSession,
        not_comparable: str | None,
        host_speed: float | None,
    ) -> PairedGatePoint:
        """Both sides' demand at `load`; the change is judged against REF's, and beside it the stored baseline's
        where there is one (this testbed at `host_speed` of its host). Both sides are offered the same rate:
        where the calibration reads this testbed slower than the stored baseline's, the share of each load's
        rate a gate offers against it (comparison.offered_share): the rate at which a single-revision run tries
        the baseline's demands, the searches' first guesses; at the full rate a slow host ran FAIL after FAIL up
        to the most instances and compared none with none (docs/lab-notes/capacity.md, 2026-12-03). Else the
        full rate."""
        if not self.records and self.capacities is None:  # fixed before the benchmark's first sub-experiment
            self.offered_share = offered_share(host_speed)
            self.host_speed = host_speed
        paired = self.measure(load, baseline, spec.tolerance)
        return PairedGatePoint(
            spec,
            paired.sides[CHANGE],
            baseline,
            not_comparable,
            host_speed=host_speed,
            offered_share=self.offered_share,
            paired=paired,
            label=self.reference,
        )

    def baseline_costs(self, session: TheodoliteSession) -> None:
        """None: a baseline written in pull-request mode records no CPU per record (REF shares the host)."""
        return None

    def baseline_capacities(self) -> dict[int, CapacityEstimate]:
        """None: a baseline is not written in pull-request mode."""
        return {}

    def result(
        self,
        name: str,
        baseline: Baseline | None,
        tolerance: int,
        cost_tolerance: float | None,
        settings: TheodoliteSettings,
        session: TheodoliteSession,
        testbed_extra: Mapping[str, str] | None,
    ) -> PairedModeResult:
        """The change judged against REF per load, both sides' CPU per record, and the change against the
        stored baseline where there is one (report/paired.py says it in words)."""
        unfinished = tuple(sorted(self.unfinished))
        measured, ref = (self.demand_result(side).without(unfinished) for side in (CHANGE, REF))
        points = [self.points[load] for load in sorted(self.points)]
        comparison = Comparison(
            benchmark=name,
            points=tuple(p.comparison(name, tolerance, cost_tolerance) for p in points),
            tolerance=tolerance,
            cost_tolerance=cost_tolerance,
            unfinished=unfinished,
        )
        against = (
            compare(
                measured,
                baseline,
                tolerance,
                measured_testbed=None,
                benchmark=name,
                not_comparable=session.not_comparable(baseline),
                host_speed=session.host_speed(baseline),
                offered_shares={load: self.offered_share for load in self.points},
                uncertain={
                    load: point.sides[CHANGE].uncertain_against(baseline, tolerance)
                    for load, point in self.points.items()
                },
                unfinished=unfinished,
            )
            if baseline is not None
            else None
        )
        ref_function = Baseline(
            name,
            {load: value for load, value in ref.demand.items() if load not in ref.unmeasured},
            {},
            SAME_TESTBED,
        )
        ran = {sub.load for sub in ref.sub_experiments}
        # a change needing no more than REF is no regression only because REF failed below the change's pass
        resting = {
            load: why
            for load, point in sorted(self.points.items())
            if isinstance(ref_needs := point.demand(REF), int)
            and isinstance(change_needs := point.demand(CHANGE), int)
            and change_needs <= ref_needs
            and (why := uncertain_certificate(point.sides[REF].sub_experiments, change_needs))
        }
        capacities = (
            None if self.capacities is None else {side: self.capacities.estimates(side) for side in SIDES}
        )
        return PairedModeResult(
            name,
            self.target.label,
            comparison,
            measured,
            ref_function,
            settings.results_dir,
            (settings.results_dir / REF, settings.results_dir / CHANGE),
            {load: self.benchmark.workload(load).target_rate for load in self.settings.loads},
            {p.load: p.cost_figure() for p in points},
            against_baseline=against,
            baseline=baseline,
            offered_share=self.offered_share,
            capacities=capacities,
            paired_read=self.paired_read.result(),
            ref_expected=tuple(
                load
                for load, point in sorted(self.points.items())
                if point.sides[REF].status == StepStatus.EXPECTED
            ),
            ref_failed_below=tuple(load for load in ref.at_least if load in ran),
            ref_not_run=tuple(load for load in ref.at_least if load not in ran),
            ref_uncertain_below=resting,
            paired_cost_tolerance=self.settings.paired_cost_tolerance,
            calibration=session.calibration,
        )

    def demand_result(self, side: str = CHANGE) -> DemandResult:
        result = self.search.searches[side].result(self.settings.loads)
        assert isinstance(result, DemandResult)
        return result

    def close(self) -> None:
        close_sides(self.sides.values())


def start_paired_experiment(
    benchmark: Benchmark,
    settings: ExperimentSettings,
    target: CompareTarget,
    specs: Mapping[str, SideSpec],
    on_sub_experiment: SubExperimentListener | None,
) -> PairedExperiment:
    """Start both sides' driver processes (each imports its own job: a REF without it fails here, before
    anything of this benchmark is measured)."""
    started: dict[str, SideProcess] = {}
    try:
        for side in SIDES:
            started[side] = SideProcess(specs[side]).__enter__()
    except BaseException:
        close_sides(started.values())
        raise
    return PairedExperiment(benchmark, settings, target, started, on_sub_experiment)


def paired_experiments(target: CompareTarget) -> ExperimentFactory:
    """How a session starts each benchmark in pull-request mode: both sides' driver processes, each with its
    own results directory (``ref/``, ``change/``) and its revision in the testbed facts."""

    def start(
        session: TheodoliteSession,
        benchmark: Benchmark,
        settings: ExperimentSettings,
        testbed: dict[str, Any],
    ) -> PairedExperiment:
        roots = target.job_roots(benchmark)
        specs = {
            side: spec_for(
                side,
                roots[side],
                benchmark,
                settings,
                session.kafka,
                session.spark,
                session.results_dir / side,
                experiment_id(benchmark.name),
                {**testbed, "revision": target.commit if side == REF else "working tree"},
            )
            for side in SIDES
        }
        return start_paired_experiment(benchmark, settings, target, specs, session.on_sub_experiment)

    return start
