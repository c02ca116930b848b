"""The ``capacity`` search strategy: demand(load) derived from each instance count's measured capacity, with a
lag-trend sub-experiment only where the capacities cannot tell.

Per benchmark, once: mu(r) for r = 1, 2, ... (engine/capacity_probe.py), with the generator sending the gate's
highest load's keys ``probe_factor`` times as often, until an instance count takes that load outside the guard
band. Per load: the first instance count predicted to pass; an instance count whose capacity lies within the
guard band of the load is run under the gate's own lag-trend protocol (core/capacity.derive_demand). A demand
above the baseline's is never reported on a prediction alone: the lag trend decides at the baseline's demand.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from pytest_theodolite.core.capacity import (
    CapacityEstimate,
    CapacityRule,
    batches_needed,
    derive_demand,
    phase_bound_s,
    predicted_pass,
)
from pytest_theodolite.core.cost import CostEstimate, PointCost
from pytest_theodolite.core.outcomes import CapacityStatus, Outcome, StepStatus
from pytest_theodolite.core.records import SubExperimentRecord
from pytest_theodolite.core.scalability import SubExperiment
from pytest_theodolite.core.search import Step, Strategy
from pytest_theodolite.engine.capacity_probe import CapacityMeasurement, ProbePlan, measure_capacity
from pytest_theodolite.engine.runner import ExperimentRunner
from pytest_theodolite.store.baseline import Baseline
from theodolite_generator import Workload


@dataclass(frozen=True)
class CapacityPlan:
    """How the capacities are measured and how far a prediction is trusted."""

    #: the generator sends the highest load's keys this many times as often (the job must not keep up)
    probe_factor: float = 1.25
    #: micro-batches of this many seconds of the highest load; a second phase reads a quarter of that
    batch_s: float = 2.0
    small_batch_share: float = 0.25
    #: a prediction within this share of a capacity's interval is certified by the lag trend
    guard: float = 0.10
    rule: CapacityRule = field(default_factory=CapacityRule)
    max_measure_s: float = 60.0

    def probe_plan(self, top_rate: float) -> ProbePlan:
        """One measurement's plan for a gate whose highest load offers `top_rate` records/s."""
        return ProbePlan(
            max(1, round(top_rate * self.batch_s)), self.rule, self.small_batch_share, self.max_measure_s
        )


#: where the instances took all they were offered (a lower bound, no CPU per record at capacity), the
#: measurement is repeated offering this many times what they took, at most UNSATURATED_RETRIES times
UNSATURATED_RATE_FACTOR = 3.0
UNSATURATED_RETRIES = 2

#: where the large micro-batches spent more than this share of their time on the per-batch cost (c0: the driver's
#: planning, task launches, state commits), they show little of what a record costs -- a +15 % dearer record moves
#: such a batch by a few percent, within its noise: the measurement is repeated in batches PER_BATCH_GROWTH times
#: larger (the small phase at the old cap), offered enough to fill them, at most PER_BATCH_RETRIES times
PER_BATCH_SHARE = 0.5
PER_BATCH_GROWTH = 4
PER_BATCH_RETRIES = 2

#: one capacity measurement: (the workload offered, its plan, the attempt) -> the measurement
Measure = Callable[[Workload, ProbePlan, int], CapacityMeasurement]


def offered_workload(workload: Callable[[int], Workload], top: int, factor: float) -> Workload:
    """The highest load's workload sent `factor` times as often: its keys (and so a stateful job's per-batch work
    over its keys) as they are, its records/s times `factor`."""
    return workload(top).sent_faster(factor)


def at_rate(workload: Workload, rate: float) -> Workload:
    """`workload`'s keys sending about `rate` records/s in all."""
    return workload.sent_faster(rate / workload.target_rate)


def per_batch_share(measurement: CapacityMeasurement) -> float | None:
    """The share of a large micro-batch's cycle spent on the per-batch cost, where two batch sizes separated it
    (None: they did not, or the measurement gave no estimate)."""
    estimate, large = measurement.estimate, measurement.phases.get("large")
    if estimate is None or estimate.per_batch_s is None or large is None or large.batches < 1:
        return None
    cycle = large.window_s / large.batches
    return estimate.per_batch_s / cycle if cycle > 0 else None


def fits_the_bound(estimate: CapacityEstimate, batch_records: int, plan: ProbePlan) -> bool:
    """Whether batches of `batch_records` -- c0 + n / mu seconds each, by `estimate` -- leave time within the
    plan's bound, as long batches stretch it (core/capacity.phase_bound_s), for the settling batches, the
    rule's fewest and the one that opens the window. Larger ones end the measurement with too few batches for
    any estimate."""
    if estimate.per_batch_s is None or not estimate.records_per_s > 0:
        return False
    cycle = estimate.per_batch_s + batch_records / estimate.records_per_s
    return cycle * batches_needed(plan.rule) <= phase_bound_s([cycle], plan.rule, plan.max_measure_s)


def measure_saturated(
    measure: Measure,
    workload: Workload,
    plan: ProbePlan,
    capacity_plan: CapacityPlan,
    *,
    grow_batches: bool = True,
) -> tuple[list[CapacityMeasurement], Workload, ProbePlan]:
    """One instance count's capacity offering `workload`, measured again where the first measurement cannot
    judge what a record costs:

    - where the instances took all they were offered (loads far below what they take: a lower bound, and no
      CPU per record at capacity), offering UNSATURATED_RATE_FACTOR times what they took, in batches of the
      plan's seconds of that, at most UNSATURATED_RETRIES times;
    - with `grow_batches`, where the per-batch cost filled more than PER_BATCH_SHARE of the large batches
      (``per_batch_share``), in batches PER_BATCH_GROWTH times larger where those fit the plan's bound
      (``fits_the_bound``), offered what such batches can take (at most the capacity with the per-batch cost
      taken out, times the probe factor), at most PER_BATCH_RETRIES times. Pull-request mode's second side is
      measured at the first side's final batches, not grown again.

    Every measurement in order (the last is the one to use), and the workload and plan it was offered."""
    measurements = [measure(workload, plan, 0)]
    unsaturated = grown = 0
    while True:
        last = measurements[-1]
        estimate = last.estimate
        if estimate is None:
            break
        share = per_batch_share(last)
        if not estimate.saturated and unsaturated < UNSATURATED_RETRIES:
            unsaturated += 1
            workload = at_rate(
                workload, UNSATURATED_RATE_FACTOR * max(estimate.records_per_s, workload.target_rate)
            )
            batch = workload.target_rate / capacity_plan.probe_factor * capacity_plan.batch_s
            plan = replace(plan, batch_records=max(1, round(batch)))
        elif (
            grow_batches
            and estimate.saturated
            and share is not None
            and share > PER_BATCH_SHARE
            and grown < PER_BATCH_RETRIES
            and fits_the_bound(estimate, plan.batch_records * PER_BATCH_GROWTH, plan)
        ):
            grown += 1
            large = last.phases["large"]
            assert large is not None  # per_batch_share needs it
            # batches PER_BATCH_GROWTH times larger take at most that many times the large batches' records/s,
            # and never more than the capacity without the per-batch cost
            needed = min(PER_BATCH_GROWTH * large.records_per_s, estimate.records_per_s)
            workload = at_rate(workload, max(workload.target_rate, capacity_plan.probe_factor * needed))
            plan = replace(plan, batch_records=plan.batch_records * PER_BATCH_GROWTH)
        else:
            break
        measurements.append(measure(workload, plan, len(measurements)))
    return measurements, workload, plan


@dataclass
class CapacitySearch:
    """One benchmark's capacities, measured once, and the demand derived from them load by load."""

    runner: ExperimentRunner
    plan: CapacityPlan = field(default_factory=CapacityPlan)
    measurements: dict[int, CapacityMeasurement] = field(default_factory=dict)
    #: told of every finished capacity measurement (the live progress)
    on_measurement: Callable[[CapacityMeasurement], None] | None = None

    @property
    def capacities(self) -> dict[int, CapacityEstimate]:
        return {r: m.estimate for r, m in self.measurements.items() if m.estimate is not None}

    @property
    def threshold_share(self) -> float:
        return self.runner.settings.slo.lag_trend_threshold.relative_to_load or 0.0

    def measure_capacities(self, instance_counts: Sequence[int] | None = None) -> None:
        """mu(r) up the instance counts until one takes the highest load outside the guard band (once); with
        `instance_counts`, each of those whatever the fewer took (a sweep: ``points --capacity``)."""
        if self.measurements:
            return
        settings, benchmark = self.runner.settings, self.runner.benchmark
        top = max(settings.loads)
        top_rate = benchmark.workload(top).target_rate
        offered = offered_workload(benchmark.workload, top, self.plan.probe_factor)
        # the gate's max_duration bounds every measurement it makes, a capacity phase's too
        plan = replace(
            self.plan.probe_plan(top_rate),
            max_measure_s=min(self.plan.max_measure_s, settings.measurement_plan.max_duration_s),
        )
        for r in instance_counts or settings.resources:

            def measure(
                workload: Workload, probe: ProbePlan, attempt: int, r: int = r
            ) -> CapacityMeasurement:
                return measure_capacity(self.runner, r, top, probe, workload=workload, attempt=attempt)

            measurements, offered, plan = measure_saturated(measure, offered, plan, self.plan)
            for measurement in measurements:
                self.runner.writer.record_capacity_measurement(measurement.to_dict())
                if self.on_measurement is not None:
                    self.on_measurement(measurement)
            self.measurements[r] = measurement
            if measurement.status in (CapacityStatus.ERRORED, CapacityStatus.INVALID):
                break  # the job or the generator broke: the instance counts above it stay to the lag trend
            if (
                instance_counts is None
                and measurement.estimate is not None
                and predicted_pass(measurement.estimate, top_rate, self.threshold_share, self.plan.guard)
            ):
                break

    def demand(
        self,
        load: int,
        run: Callable[[int, int], SubExperimentRecord],
        baseline_demand: int | None = None,
    ) -> tuple[Step, tuple[SubExperimentRecord, ...]]:
        """demand(load) as a search step, and the lag-trend sub-experiments it ran (`run(load, r)`)."""
        self.measure_capacities()
        return derived_demand(
            load,
            self.runner.benchmark.workload(load).target_rate,
            self.capacities,
            tuple(self.runner.settings.resources),
            self.threshold_share,
            self.plan.guard,
            run,
            baseline_demand,
        )

    def cost(
        self, resources: int | None, instance_cpu: float | None, reference_us_per_row: float | None = None
    ) -> PointCost | None:
        """The CPU per record the instances take at their capacity (`capacity_cost`) at `resources`."""
        estimate = self.capacities.get(resources) if resources is not None else None
        return None if estimate is None else capacity_cost(estimate, instance_cpu, reference_us_per_row)


def derived_demand(
    load: int,
    rate: float,
    capacities: Mapping[int, CapacityEstimate],
    resources: tuple[int, ...],
    threshold_share: float,
    guard: float,
    run: Callable[[int, int], SubExperimentRecord],
    reference_demand: int | None = None,
) -> tuple[Step, tuple[SubExperimentRecord, ...]]:
    """demand(load) from the capacities (core/capacity.derive_demand), as a search step, with the lag-trend
    sub-experiments it ran (`run(load, r)`) where the capacities could not tell. A demand above
    `reference_demand` (the baseline's, or REF's) rests on a lag-trend FAIL there, never on a prediction alone.
    Instance counts without a capacity (a measurement that gave none, or never measured) are searched upwards
    by the lag trend below the derived demand, and above the measured counts where none of them takes the
    load -- except below a count that fails the load already: as the derived demand assumes, fewer instances
    take no more (UC3's gate ran 16 000 on one instance for 195 s where two were predicted to fail it)."""
    unprobed = [r for r in resources if r not in capacities]
    runs: list[SubExperimentRecord] = []
    certified: dict[int, bool] = {}

    def step(optimum: int | None, status: StepStatus) -> tuple[Step, tuple[SubExperimentRecord, ...]]:
        ran = tuple(SubExperiment(r.load, r.resources, r.outcome) for r in runs)
        return Step(load, optimum, status, ran, resources), tuple(runs)

    def certify(r: int) -> bool:
        """Run the lag trend at r; False where it could not judge (INVALID or ERRORED)."""
        record = run(load, r)
        runs.append(record)
        if not record.outcome.is_measured:
            return False
        certified[r] = record.outcome is Outcome.PASS
        return True

    while True:
        result = derive_demand(
            load, rate, capacities, threshold_share=threshold_share, guard=guard, certified=certified
        )
        if not result.decided:
            assert result.to_certify is not None
            if not certify(result.to_certify):
                return step(None, StepStatus.UNMEASURED)
            continue
        if (
            reference_demand is not None
            and reference_demand in capacities
            and reference_demand not in certified
            and (result.resources is None or result.resources > reference_demand)
        ):
            if not certify(reference_demand):
                return step(None, StepStatus.UNMEASURED)
            continue
        break

    def fails_with_more(r: int) -> bool:
        """Whether more than r instances fail the load, by the lag trend or the capacities' prediction."""
        return any(
            (
                certified[more]
                if more in certified
                else predicted_pass(capacities[more], rate, threshold_share, guard)
            )
            is False
            for more in capacities
            if more > r
        )

    # counts with no capacity below the derived demand (or above the measured ones, where none takes the
    # load) are run upwards: the first that passes is the demand
    for r in unprobed:
        if result.resources is not None and r > result.resources:
            break
        if r not in certified and fails_with_more(r):
            continue
        if r not in certified and not certify(r):
            return step(None, StepStatus.UNMEASURED)
        if certified[r]:
            return step(r, StepStatus.MEASURED)
    if result.resources is None:
        return step(None, StepStatus.NONE)
    return step(result.resources, StepStatus.MEASURED)


def capacity_cost(
    estimate: CapacityEstimate, instance_cpu: float | None, reference_us_per_row: float | None = None
) -> PointCost | None:
    """The CPU microseconds per record r saturated instances spend: r x their CPU limit / mu(r) (without a limit,
    instance-microseconds). Unlike the CPU per offered record below capacity, it moves with every change of a
    record's cost. None where the instances were not saturated (no figure)."""
    if not estimate.saturated or estimate.records_per_s <= 0:
        return None
    scale = estimate.instances * (instance_cpu or 1.0) * 1e6
    low = scale / estimate.high if estimate.high > 0 and math.isfinite(estimate.high) else None
    high = scale / estimate.low if estimate.low > 0 and math.isfinite(estimate.low) else None
    figure = CostEstimate(scale / estimate.records_per_s, low, high, estimate.batches)
    return PointCost(estimate.instances, figure, reference_us_per_row)


def same_cost_figure(baseline: Baseline | None, strategy: Strategy) -> Baseline | None:
    """`baseline` with its CPU-per-record figures left out where they are another figure than this run's: the
    capacity strategy's CPU per record at capacity against a baseline's CPU per offered record (or the reverse)
    would compare two different things."""
    if baseline is None or not baseline.cost:
        return baseline
    recorded_at_capacity = str(baseline.settings.get("strategy", "")).startswith(Strategy.CAPACITY.value)
    if recorded_at_capacity == (strategy is Strategy.CAPACITY):
        return baseline
    return replace(baseline, cost={})
