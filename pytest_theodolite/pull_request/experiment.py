"""Pull-request mode in a session: each benchmark measured at REF and in the working tree, side by side.

`PairedExperiment` is what `TheodoliteSession.experiment` gives when ``--theodolite-compare-ref`` is set: the
same interface as a single-revision experiment for the gate (``measure(load, baseline)`` returns the change's
demand point), with REF's point and the comparison beside it. Both sides run in their own driver process
(sides.py); their searches advance together in ABBA order (paired.py). With ``paired_cost``, both sides also
read a backlog at the same time, once per benchmark, and their task CPU per record is compared batch by batch:
beyond its tolerance, and significant, every load whose demand passed is a cost regression.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_theodolite.core.capacity import CapacityEstimate, predicted_pass
from pytest_theodolite.core.certainty import to_confirm, uncertain_certificate, uncertain_regression
from pytest_theodolite.core.cost import CostCheck, PointCost, point_cost
from pytest_theodolite.core.outcomes import UNMEASURED, CostStatus, MeasuredDemand, StepStatus, Verdict
from pytest_theodolite.core.paired_cost import (
    PairedCost,
    batch_ratios_by_leg,
    check_paired_cost,
    check_paired_cost_twice,
    first_certain_pass,
    paired_cost_by_leg,
    rose_beyond,
)
from pytest_theodolite.core.records import SubExperimentRecord
from pytest_theodolite.core.scalability import DemandResult, Metric
from pytest_theodolite.core.search import IncrementalSearch, Step, Strategy
from pytest_theodolite.engine.backlog_read import BacklogPlan, BacklogRead
from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
from pytest_theodolite.engine.capacity_probe import CapacityMeasurement, ProbePlan
from pytest_theodolite.engine.capacity_search import (
    CapacityPlan,
    capacity_cost,
    derived_demand,
    measure_saturated,
    offered_workload,
)
from pytest_theodolite.engine.experiment import finishing
from pytest_theodolite.engine.markers import GateSpec
from pytest_theodolite.engine.runner import PhaseTimings
from pytest_theodolite.engine.session import ExperimentFactory, TheodoliteSession
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.judge.comparison import (
    Comparison,
    PointComparison,
    compare,
    offered_share,
    weighs_at_least_the_baselines,
)
from pytest_theodolite.judge.demand_points import DemandPoint, baseline_guess, demand_point, shifted_guess
from pytest_theodolite.pull_request.gate_point import PairedGatePoint
from pytest_theodolite.pull_request.paired import (
    CHANGE,
    REF,
    SAME_TESTBED,
    SIDES,
    PairedDemandSearch,
    abba,
    compare_sides,
)
from pytest_theodolite.pull_request.sides import (
    SideError,
    SideProcess,
    SideSpec,
    close_sides,
    job_reference,
    side_roots,
    spec_for,
)
from pytest_theodolite.pull_request.worktree import RefWorktree
from pytest_theodolite.report.paired import PairedModeResult, PairedReadResult
from pytest_theodolite.report.summary import CostFigure
from pytest_theodolite.store.baseline import Baseline
from pytest_theodolite.store.results import experiment_id
from theodolite_generator import Workload

#: how long the parent waits for one reading side's word before it looks at the other's
READ_POLL_S = 0.25

SubExperimentListener = Callable[[str, Any, Any], None]


@dataclass(frozen=True)
class CompareTarget:
    """What the change is compared with: REF's name, its commit and the two trees the jobs come from."""

    ref: str
    commit: str
    ref_root: Path  # REF's temporary worktree
    change_root: Path  # the working tree (pytest's rootdir)
    repo_root: Path | None = None  # the repository's top level (REF's worktree is a checkout of it)

    @property
    def label(self) -> str:
        """'REF origin/main (3f893a9)' for headers; 'REF 3f893a9' where REF was given as a commit id."""
        if self.commit.startswith(self.ref.lower()):
            return f"REF {self.commit[:7]}"
        return f"REF {self.ref} ({self.commit[:7]})"

    @classmethod
    def of(cls, worktree: RefWorktree, change_root: Path) -> CompareTarget:
        assert worktree.path is not None  # entered
        return cls(worktree.ref, worktree.commit, worktree.path, change_root, worktree.repo)

    def job_roots(self, benchmark: Benchmark) -> dict[str, Path]:
        """Where each side imports `benchmark`'s job from (sides.side_roots): a ``src/`` layout or a rootdir
        in a subfolder is found at the same place in REF's worktree."""
        module, _ = job_reference(benchmark)
        ref, change = side_roots(module, self.repo_root or self.change_root, self.ref_root, self.change_root)
        return {REF: ref, CHANGE: change}


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


@dataclass
class PairedBacklogRead:
    """One backlog read by both sides at once: each side's read, what each told as it read, the pairs after which
    both were told to stop (certain of a pass; None: read to the end), their comparison or why there is none."""

    reads: dict[str, BacklogRead] = field(default_factory=dict)
    told: dict[str, list[list[float]]] = field(default_factory=dict)
    stopped_at: int | None = None
    cost: PairedCost | None = None
    problem: str | None = None


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

    #: the capacity strategy's measurements per side and instance count; None for the other strategies
    capacities: dict[str, dict[int, CapacityMeasurement]] | None = None
    capacity_plan: CapacityPlan = field(default_factory=CapacityPlan)
    #: ``paired_cost``: each side's backlog read, their comparison, or why there is none
    backlog_plan: BacklogPlan = field(default_factory=BacklogPlan)
    backlog_reads: dict[str, BacklogRead] = field(default_factory=dict)
    paired_cost: PairedCost | None = None
    paired_cost_problem: str | None = None
    #: the pairs after which both reads were told to stop, certain of a pass (None: read to the end)
    paired_read_stopped_at: int | None = None
    #: each side's batches' task CPU per record as it told them during the read (what a stop rested on)
    backlog_told: dict[str, list[list[float]]] = field(default_factory=dict)
    #: the second read, where the first rose beyond the tolerance (``BacklogPlan.confirm_rise``)
    confirmation: PairedBacklogRead | None = None
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
            self.capacities = {side: {} for side in SIDES}
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
            self.measure_paired_cost()
            if self.capacities is not None:
                steps = self._derived_steps(load)
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
                    certify=tolerance == 0 and self._paired_cost_judged(),
                    ref_below=self.settings.ref_below
                    or not self._paired_cost_certain()
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
                    self._capacity_costs(sides),
                    self.settings.instance_cpu,
                    self.paired_cost_check(),
                    self.paired_unread(),
                ),
                tolerance,
            )
            self.points[load] = paired
            return paired

    def measure_paired_cost(self, first: str = REF) -> None:
        """Once per benchmark, with ``paired_cost``: both sides read a backlog of the highest load's keys at the
        same time, each on one instance, in large capped batches (engine/backlog_read.py), while this process
        holds the cluster's session lock; their task CPU per record is compared batch by batch
        (core/paired_cost.py) and kept with both sides' batches in ``<benchmark>_paired_cost.json``. `first`
        is the side asked to start first (an experiment swaps it to see whether the order leans). A read whose
        figure rose beyond the tolerance, significantly or not, is read once more with the other side asked first
        (``BacklogPlan.confirm_rise``), kept in ``<benchmark>_paired_cost_confirmation.json``: the cost is a
        regression only where both rose beyond it and their pairs together significantly (paired_cost_check)."""
        if first not in SIDES:
            raise ValueError(f"first is one of {', '.join(SIDES)}, not {first!r}")
        if not self.settings.paired_cost or self.backlog_reads or self.paired_cost_problem:
            return
        if self.sides[REF].spec.spark.max_instances < 2:
            self.paired_cost_problem = (
                "it needs two instances at once, one per side: raise --theodolite-max-instances to 2 or more"
            )
            return
        load = max(self.settings.loads)
        read = self._read_both(load, first)
        self.backlog_reads, self.backlog_told, self.paired_read_stopped_at = (
            read.reads,
            read.told,
            read.stopped_at,
        )
        self.paired_cost, self.paired_cost_problem = read.cost, read.problem
        self._write_paired_cost(load, read)
        if (
            self.backlog_plan.confirm_rise
            and read.cost
            and rose_beyond(read.cost, self.settings.paired_cost_tolerance)
        ):
            self.confirmation = self._read_both(load, CHANGE if first == REF else REF)
            self._write_paired_cost(load, self.confirmation, "_confirmation")

    def _read_both(self, load: int, first: str) -> PairedBacklogRead:
        """Both sides' backlog reads at once, `first` asked first, and their comparison."""
        spark = self.sides[REF].spec.spark
        workload = self.benchmark.workload(load)
        problems: list[str] = []
        read = PairedBacklogRead()
        with spark.sessions_held():
            asked = []
            for side in sorted(SIDES, key=lambda side: side != first):
                try:
                    self.sides[side].start_backlog_read(load, workload, self.backlog_plan)
                    asked.append(side)
                except SideError as exc:
                    problems.append(_last_line(str(exc)))
            filled = []
            for side in asked:
                try:
                    self.sides[side].backlog_filled()
                    filled.append(side)
                except SideError as exc:
                    problems.append(f"{side}: {_last_line(str(exc))}")
            # both stop filling and start reading together, so that neither reads while the other's generator
            # still sends (docs/lab-notes/capacity.md, 2026-12-01); each side filled is let read and answered,
            # whatever the other did, so its pipe stays in step
            for side in filled:
                self.sides[side].start_reading()
            self._gather_reads(read, filled, problems)
        for side, backlog in read.reads.items():
            if backlog.batches and not backlog.task_cpu_per_record_s():
                problems.append(
                    f"{side}: its batches have no task CPU figure (no event log was read: the gate's spark_conf "
                    "keeps its own)"
                )
        if not problems:
            try:
                read.cost = paired_cost_by_leg(
                    *(read.reads[side].task_cpu_per_record_by_leg() for side in SIDES)
                )
            except ValueError as exc:
                problems.append(str(exc))
        read.problem = "; ".join(problems) or None
        return read

    def _gather_reads(self, read: PairedBacklogRead, reading: list[str], problems: list[str]) -> None:
        """Wait for the reading sides' reads into `read`. Each side sends its batches' task CPU per record as they
        come in; once both sides' pairs so far lie certainly within the paired tolerance (first_certain_pass),
        both are told to stop -- a pass needs no more batches. A rise is read to the end, so that looking after
        every pair adds no false alarm (docs/lab-notes/capacity.md, 2026-12-02)."""
        tolerance = self.settings.paired_cost_tolerance
        watch = self.backlog_plan.stop_when_certain and tolerance is not None and len(reading) == len(SIDES)
        so_far = read.told = {side: [] for side in reading}
        pending = list(reading)
        while pending:
            told = False  # a side told new figures in this round
            for side in list(pending):
                try:
                    message = self.sides[side].backlog_message(READ_POLL_S)
                except SideError as exc:
                    problems.append(f"{side}: {_last_line(str(exc))}")
                    pending.remove(side)
                    watch = False  # the other side is read to the end: its read is kept as it is
                    continue
                if isinstance(message, BacklogRead):
                    read.reads[side] = message
                    pending.remove(side)
                elif message is not None:
                    so_far[side], told = message, True
            if watch and told and tolerance is not None:
                by_leg = batch_ratios_by_leg(so_far[REF], so_far[CHANGE])
                certain = first_certain_pass([ratio for leg in by_leg for ratio in leg], tolerance)
                if certain is not None:
                    watch, read.stopped_at = False, certain
                    for side in pending:
                        self.sides[side].stop_reading()

    def _write_paired_cost(self, load: int, read: PairedBacklogRead, suffix: str = "") -> None:
        results = self.sides[REF].spec.results_dir.parent
        results.mkdir(parents=True, exist_ok=True)
        document = {
            "load": load,
            "plan": asdict(self.backlog_plan),
            "sides": {
                side: {
                    "batches": [[b.batch_id, b.start_s, b.duration_s, b.input_rows] for b in backlog.batches],
                    "task_cpu_s": list(backlog.task_cpu_s),
                    "wall_s": backlog.wall_s,
                    "read_from_s": backlog.read_from_s,
                    "legs": list(backlog.legs),
                    "drained": backlog.drained,
                    "fill_s": backlog.fill_s,
                    "backlog_records": backlog.backlog_records,
                    "told_task_cpu_per_record_s": read.told.get(side),
                }
                for side, backlog in read.reads.items()
            },
            "comparison": None if read.cost is None else read.cost.to_dict(),
            "problem": read.problem,
            "stopped_certain_after_pairs": read.stopped_at,
        }
        path = results / f"{experiment_id(self.benchmark.name)}_paired_cost{suffix}.json"
        path.write_text(json.dumps(document, indent=1) + "\n")

    def _paired_cost_judged(self) -> bool:
        """Whether the paired read judged the cost (its tolerance set, enough pairs): then the CPU per record at
        each demand is not needed, and the demands are certified rather than searched (paired.py)."""
        check = self.paired_cost_check()
        return check is not None and check.tolerance is not None and check.status != CostStatus.NOT_COMPARED

    def _baseline_expected_here(self) -> bool:
        """Whether REF is expected to need at least the stored baseline's demands on this testbed: each load
        offered weighs at least the baseline's even on the fastest host its calibration allows (a slower testbed
        is offered each load at its share, comparison.offered_share) -- where a single-revision run judges a pass
        at them. Where it may weigh less (a testbed as fast as the baseline's host, or faster), REF often passes one
        below them (docs/lab-notes/capacity.md, 2026-12-06), where a change of how the job scales would go unseen
        without REF's run below (paired.py)."""
        return weighs_at_least_the_baselines(self.host_speed, self.offered_share)

    def _paired_cost_certain(self) -> bool:
        """Whether the paired read is certain the change costs within its tolerance: one read, its pairs below
        the tolerance by the test a read stops early on (first_certain_pass); a read that rose beyond it, and was
        read again, is not."""
        tolerance = self.settings.paired_cost_tolerance
        if tolerance is None or self.paired_cost is None or self.confirmation is not None:
            return False
        return first_certain_pass(self.paired_cost.ratios, tolerance) is not None

    def paired_cost_check(self) -> CostCheck | None:
        """The paired read's figure against its tolerance (core/paired_cost.check_paired_cost); None unread. Where
        a second read was made (the first rose beyond the tolerance), both are judged together
        (core/paired_cost.check_paired_cost_twice); where it could not be read, the cost is not judged."""
        first = self._first_check()
        tolerance = self.settings.paired_cost_tolerance
        if first is None or self.confirmation is None or self.paired_cost is None or tolerance is None:
            return first
        if self.confirmation.cost is None:
            return replace(
                first,
                status=CostStatus.NOT_COMPARED,
                reason=f"not judged: it rose {first.relative:+.1%}, and the read to confirm it failed "
                f"({self.confirmation.problem})",
            )
        return check_paired_cost_twice(self.paired_cost, self.confirmation.cost, tolerance)

    def paired_unread(self) -> str | None:
        """Why the paired read asked for (``paired_cost``) gave nothing to judge, with what to change; None where
        it gave a figure, or none was asked for."""
        if not self.settings.paired_cost:
            return None
        check = self.paired_cost_check()
        if check is not None and check.status != CostStatus.NOT_COMPARED:
            return None
        why = self.paired_cost_problem or (check.reason if check is not None else "it was not read")
        return (
            f"the paired read gave no figure to judge ({why}), and a pass needs it: change what it names (the "
            "loads, the instance CPU, the job's use of max_offsets_per_trigger), or judge the demand alone with "
            "paired_cost=false"
        )

    def _first_check(self) -> CostCheck | None:
        """The first read's figure against the tolerance; None unread."""
        if self.paired_cost is None:
            return None
        return check_paired_cost(self.paired_cost, self.settings.paired_cost_tolerance)

    def paired_read_result(self) -> PairedReadResult | None:
        """The paired backlog read as the report reads it; None where none was asked for."""
        if not self.settings.paired_cost:
            return None
        plan = self.backlog_plan
        cpu = plan.cpu_for(self.settings.instance_cpu)
        limited = cpu is not None and self.sides[REF].spec.spark.can_limit_cpu
        planned = plan.legs * plan.leg_batches
        return PairedReadResult(
            instance_cores=cpu if limited else None,
            batch_records=plan.batch_records,
            planned_batches=planned,
            figure=self.paired_cost,
            check=self.paired_cost_check(),
            problem=self.paired_cost_problem,
            confirming=None if self.confirmation is None else self.confirmation.cost,
            stopped_at=self.paired_read_stopped_at,
            drained={side: len(read.batches) for side, read in self.backlog_reads.items() if read.drained},
        )

    def _measure_capacities(self) -> None:
        """Both sides' capacities, instance count by instance count, in ABBA order, until both take the
        highest load outside the guard band (once)."""
        assert self.capacities is not None
        if any(self.capacities.values()):
            return
        top = max(self.settings.loads)
        top_rate = self.benchmark.workload(top).target_rate
        offered = offered_workload(self.benchmark.workload, top, self.capacity_plan.probe_factor)
        plan = self.capacity_plan.probe_plan(top_rate)
        share = self.settings.slo.lag_trend_threshold.relative_to_load or 0.0
        for index, r in enumerate(self.settings.resources):
            for turn, side in enumerate(abba(index)):

                def measure(
                    workload: Workload, probe: ProbePlan, attempt: int, side: str = side, r: int = r
                ) -> CapacityMeasurement:
                    return self.sides[side].measure_capacity(top, r, workload, probe, attempt=attempt)

                # the second side is offered what the first ended with: the same rate and batches
                measurements, offered, plan = measure_saturated(
                    measure, offered, plan, self.capacity_plan, grow_batches=turn == 0
                )
                self.capacities[side][r] = measurements[-1]
                if self.on_sub_experiment is not None:
                    for measurement in measurements:
                        self.on_sub_experiment(self._label(side), measurement, {})
            estimates = [self.capacities[side][r].estimate for side in SIDES]
            if any(e is None for e in estimates) or all(
                predicted_pass(e, top_rate, share, self.capacity_plan.guard)
                for e in estimates
                if e is not None
            ):
                break

    def _side_capacities(self, side: str) -> dict[int, CapacityEstimate]:
        assert self.capacities is not None
        return {r: m.estimate for r, m in self.capacities[side].items() if m.estimate is not None}

    def _derived_steps(self, load: int) -> dict[str, Step]:
        """Both sides' demand derived from their capacities; the change's regression rests on a lag-trend FAIL
        at REF's demand (engine/capacity_search.derived_demand)."""
        self._measure_capacities()
        rate = self.benchmark.workload(load).target_rate
        share = self.settings.slo.lag_trend_threshold.relative_to_load or 0.0
        steps: dict[str, Step] = {}
        for side in SIDES:  # REF first: its demand is what the change's is held against
            reference = steps[REF].optimum if side == CHANGE else None
            step, _ = derived_demand(
                load,
                rate,
                self._side_capacities(side),
                tuple(self.settings.resources),
                share,
                self.capacity_plan.guard,
                lambda l, r, side=side: self._run_in_order(side, l, r),  # type: ignore[misc]
                reference,
            )
            steps[side] = self.search.searches[side].keep(step)
        return steps

    def _run_in_order(self, side: str, load: int, resources: int) -> SubExperimentRecord:
        """A lag-trend run of the capacity path, kept in the run order as the paired search keeps its own (a
        confirmation runs each side in the reverse order of its first run)."""
        self.search.order.append((side, load, resources))
        return self._run(side, load, resources)

    def _capacity_costs(self, sides: Mapping[str, DemandPoint]) -> dict[str, PointCost | None]:
        """Each side's CPU per record at its capacity at its demand (capacity_search.capacity_cost)."""
        if self.capacities is None:
            return {}
        costs: dict[str, PointCost | None] = {}
        for side, point in sides.items():
            estimate = self._side_capacities(side).get(point.resources) if point.resources else None
            costs[side] = None if estimate is None else capacity_cost(estimate, self.settings.instance_cpu)
        return costs

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
            None if self.capacities is None else {side: self._side_capacities(side) for side in SIDES}
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
            paired_read=self.paired_read_result(),
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


def _last_line(text: str) -> str:
    """A side's error's last line (the exception, after its traceback)."""
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else text


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
