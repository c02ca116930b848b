"""One side's backlog read in large capped micro-batches on one instance: what a paired cost comparison measures.

The generator fills the job's input topic at a rate that sends ``fill_margin`` times the records the read takes in
``fill_s`` seconds (or at ``fill_factor`` times the load's rate), while the instance runs without its CPU limit
(code generation and JIT at full speed), and stops -- at ``fill_s``, or from ``min_fill_s`` on once the topic holds
``backlog_margin`` times those records beyond the query's running batch (`fill_over`); then the instance is limited
(``instance_cpu``: half a core by default) and the query reads the backlog in batches capped at ``batch_records``.
The full batches after the first ``warm_batches`` are measured -- ``batches`` of them, or as many as ``max_read_s``
after the warm batches allows (`read_over`), or as many as the backlog holds (`backlog_drained`) -- each with its
cycle (`cycle_s`: to the next batch's start, the instance's wall-clock throughput) and its tasks' executor CPU from
the session's event log (core/task_cpu.py). Two sides read at the same time are compared batch by batch by their
cycles (core/paired_cost.py); large batches keep the part of a batch's cost that does not depend on its size
small (docs/lab-notes/capacity.md, 2026-11-29). Two such sides stop filling together (``filled``), so that neither
reads while the other's generator still sends (docs/lab-notes/capacity.md, 2026-12-01). A read may be told what its
batches cost as it goes (``progress``), so that pull-request mode can stop both sides once their comparison is
certain (docs/lab-notes/capacity.md, 2026-12-02). A read may go in ``legs``: after each leg's measured batches the
instance's executor is replaced by a new JVM (the cluster manager's choice of worker), whose own warm batches are
skipped -- a way to tell one JVM's lean from the code's (docs/lab-notes/capacity.md, 2026-12-03, afternoon: on
unchanged code a +4 % lean outlasted three JVMs).
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_theodolite.core.capacity import FULL_SHARE, MicroBatch
from pytest_theodolite.engine import monitor
from pytest_theodolite.engine.capacity_probe import (
    BATCH_CAP_HINT,
    BATCH_CAP_OPTION,
    batches_of,
    check_capped,
    check_running,
    event_log_conf,
    read_task_cpu,
)
from pytest_theodolite.engine.job import RunAborted, RunningJob
from pytest_theodolite.engine.runner import ExperimentRunner
from pytest_theodolite.infra.spark.executors import executor_addresses, replace_executor
from theodolite_generator import Workload


@dataclass(frozen=True)
class BacklogPlan:
    """How a backlog is filled and read (the defaults: the click-stream example's validated rounds, which filled
    at 15 times 5 000 records/s: 2.1 times what they read)."""

    batch_records: int = 120_000
    #: None: fast enough that the backlog holds `fill_margin` times the batches read; a number: that many times
    #: the load's rate, whatever it is (15 times a gate's 20 000 records/s is more than a generator sends here)
    fill_factor: float | None = None
    fill_margin: float = 2.0
    #: the longest fill; it ends sooner once the backlog suffices (``backlog_margin``, ``min_fill_s``)
    fill_s: float = 50.0
    #: the fill ends from ``min_fill_s`` on once the records beyond the query's running batch are this many times
    #: what the read takes (`read_records`): an instance that keeps pace with much of the fill leaves less, one
    #: far slower more, than a fixed time allows for; 0: every fill takes ``fill_s``
    backlog_margin: float = 1.25
    #: the instance's seconds at full speed before the fill may end (its code generation and JIT)
    min_fill_s: float = 25.0
    warm_batches: int = 3
    batches: int = 12
    #: seconds the measured batches may take, from the end of the warm ones: a slow host's batches are long and
    #: so is its warm-up (20-27 s and 59-119 s on 2026-12-01), and a cap counted from the fill left it 6-9 pairs
    max_read_s: float = 300.0
    #: seconds the warm batches may take from the end of the fill; a read still warming then measures nothing
    max_warm_s: float = 180.0
    #: pull-request mode: stop both sides' reads once the pairs so far are certainly within the paired tolerance
    #: (core/paired_cost.first_certain_pass); False: every batch is read (an experiment replaying the rule)
    stop_when_certain: bool = True
    #: pull-request mode: a read whose figure rose beyond the paired tolerance, significantly or not, is read once
    #: more, the other side asked first, and the cost is a regression only where that read rose too and both
    #: reads' pairs together significantly (core/paired_cost.check_paired_cost_twice) -- one read of unchanged
    #: code in 60 crossed the line (docs/lab-notes/capacity.md, 2026-12-03); False: one read decides
    confirm_rise: bool = True
    #: each reading instance's CPU limit (cores); None: the gate's ``instance_cpu``. Half a core: two reads at
    #: once take one of a 2-core runner's cores and leave the other to the drivers and the broker; the task CPU
    #: per record compares as on a quarter core, in batches over twice as fast (docs/lab-notes/capacity.md,
    #: 2026-11-29, night)
    instance_cpu: float | None = 0.5
    #: the read's executors in turn: after each leg's measured batches its executor is replaced by a new JVM,
    #: whose first ``warm_batches`` are skipped too; the ``batches`` are shared out over the legs and
    #: ``max_read_s`` with them (the module's doc)
    legs: int = 1

    @property
    def leg_batches(self) -> int:
        """The batches each leg measures."""
        return math.ceil(self.batches / self.legs)

    def cpu_for(self, gate_cpu: float | None) -> float | None:
        """The CPU limit each instance reads with, for a gate whose ``instance_cpu`` is `gate_cpu`."""
        return gate_cpu if self.instance_cpu is None else self.instance_cpu

    @property
    def read_records(self) -> int:
        """The records a read takes at most: every leg's warm batches and the measured ones."""
        return (self.legs * self.warm_batches + self.batches) * self.batch_records

    def fill_factor_for(self, rate: float) -> float:
        """How many times `rate` (records/s) the backlog is filled at."""
        if self.fill_factor is not None:
            return self.fill_factor
        return self.fill_margin * self.read_records / self.fill_s / rate

    def __post_init__(self) -> None:
        if self.batch_records < 1 or self.warm_batches < 0 or not 1 <= self.legs <= self.batches:
            raise ValueError(
                f"need batch_records >= 1, warm_batches >= 0 and 1 <= legs <= batches, got {self.batch_records}, "
                f"{self.warm_batches}, {self.legs} and {self.batches}"
            )
        factor = 1.0 if self.fill_factor is None else self.fill_factor
        if self.instance_cpu is not None and not self.instance_cpu > 0:
            raise ValueError(f"need instance_cpu above 0 or None (the gate's), got {self.instance_cpu}")
        if not (
            factor > 0
            and self.fill_margin >= 1
            and self.fill_s > 0
            and self.max_read_s > 0
            and self.max_warm_s > 0
        ):
            raise ValueError(
                f"need fill_factor, fill_s, max_read_s and max_warm_s above 0 and fill_margin at least 1, got "
                f"{self.fill_factor}, {self.fill_s}, {self.max_read_s}, {self.max_warm_s} and {self.fill_margin}"
            )
        if not (self.backlog_margin == 0 or self.backlog_margin >= 1) or not self.min_fill_s >= 0:
            raise ValueError(
                f"need backlog_margin 0 (every fill takes fill_s) or at least 1, and min_fill_s at least 0, got "
                f"{self.backlog_margin} and {self.min_fill_s}"
            )


@dataclass(frozen=True)
class BacklogRead:
    """The measured full batches, in order, with each one's task CPU seconds (None: not in the event log) and
    the leg it was read in (empty: all in one)."""

    batches: tuple[MicroBatch, ...]
    task_cpu_s: tuple[float | None, ...]
    wall_s: float  # the whole read, setup and teardown included
    read_from_s: float | None = None  # epoch seconds at which the fill stopped and the read began
    legs: tuple[int, ...] = ()
    #: the read ended because the backlog ran out (`backlog_drained`) before it had every batch it measures
    drained: bool = False
    #: seconds the fill ran until this side's backlog sufficed or ``fill_s`` was up (waiting for the other side of
    #: a paired read not counted)
    fill_s: float | None = None
    #: records beyond the query's last finished batch when the read began (None: not known)
    backlog_records: int | None = None
    #: each measured batch's cycle: from its start to the next batch's (None: no next batch was seen)
    cycle_s: tuple[float | None, ...] = ()

    def cycle_per_record_by_leg(self) -> list[list[float]]:
        """Each measured batch's cycle per record -- the inverse of its wall-clock throughput -- leg by leg, in
        order; batches without a cycle left out."""
        return _by_leg(self.batches, self.cycle_s or (None,) * len(self.batches), self.legs)

    def task_cpu_per_record_s(self) -> list[float]:
        """Each batch's task CPU per record, in order; batches without a figure left out."""
        return [figure for leg in self.task_cpu_per_record_by_leg() for figure in leg]

    def task_cpu_per_record_by_leg(self) -> list[list[float]]:
        """`task_cpu_per_record_s` leg by leg."""
        return _by_leg(self.batches, self.task_cpu_s, self.legs)

    def wall_per_record_s(self) -> list[float]:
        return [b.duration_s / b.input_rows for b in self.batches]


def _by_leg(
    batches: Sequence[MicroBatch], seconds: Sequence[float | None], legs: Sequence[int]
) -> list[list[float]]:
    """Each batch's `seconds` per record, leg by leg (`legs`: each batch's; empty: all in one); None left out."""
    legs = legs or (0,) * len(batches)
    by_leg: list[list[float]] = [[] for _ in range(max(legs, default=0) + 1)] if batches else []
    for batch, figure, leg in zip(batches, seconds, legs, strict=True):
        if figure is not None:
            by_leg[leg].append(figure / batch.input_rows)
    return by_leg


def cycle_s(batch: MicroBatch, batches: Mapping[int, MicroBatch]) -> float | None:
    """`batch`'s cycle: the seconds from its start to the next batch's start, its driver's work between the two
    included (None: the next batch has not finished yet)."""
    after = batches.get(batch.batch_id + 1)
    return None if after is None else after.start_s - batch.start_s


def full_batches(batches: dict[int, MicroBatch], batch_records: int, from_s: float) -> list[MicroBatch]:
    """The batches that started from `from_s` and read the cap (``FULL_SHARE`` of it), in order."""
    ordered = sorted(batches.values(), key=lambda b: b.batch_id)
    return [b for b in ordered if b.start_s >= from_s and b.input_rows >= FULL_SHARE * batch_records]


def backlog_drained(
    batches: dict[int, MicroBatch], batch_records: int, from_s: float, lag: int | None = None
) -> bool:
    """Whether the backlog has run out, so that no later batch can be full: a batch that started from `from_s`
    (the fill's end, the generator stopped and flushed) read less than the cap, or the query's `lag` behind the
    input topic's end is none (a job that kept pace with the fill runs no batch after it)."""
    if lag == 0:
        return True
    return any(b.start_s >= from_s and b.input_rows < FULL_SHARE * batch_records for b in batches.values())


def lag_behind(end_offsets: Mapping[int, int], progress: Mapping[str, Any] | None, topic: str) -> int | None:
    """The records of `topic` before `end_offsets` that the batch of `progress` had not read; None without end
    offsets or where the progress's offsets cannot be read -- the read then only cannot end early (the lag-trend
    monitor reports such a progress where it judges)."""
    if not end_offsets:
        return None
    try:
        return monitor.total_lag(end_offsets, monitor.processed_offsets(progress, topic))
    except monitor.ProgressError:
        return None


def fill_over(plan: BacklogPlan, filled_for_s: float, backlog: int | None) -> bool:
    """Whether a fill that has run `filled_for_s` seconds ends: at ``fill_s``, or from ``min_fill_s`` on once
    `backlog` -- the records beyond what the query's running batch reads; None: not known -- holds
    ``backlog_margin`` times the records the read takes."""
    if filled_for_s >= plan.fill_s:
        return True
    if not plan.backlog_margin or filled_for_s < plan.min_fill_s or backlog is None:
        return False
    return backlog >= plan.backlog_margin * plan.read_records


def backlog_beyond_running_batch(
    sampler: monitor.LagSampler, progress: Mapping[str, Any] | None, topic: str, batch_records: int
) -> int | None:
    """The records of `topic` that neither the query's last finished batch (`progress`) nor its running one (at
    most `batch_records`) read; None where the broker's end offsets or the progress cannot be read."""
    try:
        end_offsets = sampler.end_offsets()
    # whatever kafka-python raises: the backlog only ends a fill early; the fill then takes fill_s
    except Exception:
        return None
    lag = lag_behind(end_offsets, progress, topic)
    return None if lag is None else lag - batch_records


def read_over(plan: BacklogPlan, full: Sequence[MicroBatch], read_from_s: float, now_s: float) -> bool:
    """Whether a leg that began at `read_from_s` has ended at `now_s` (epoch seconds), its `full` batches so far
    in order: every batch it measures read and the one after (whose start ends the last one's cycle), or its warm
    batches not read within ``max_warm_s``, or its share of ``max_read_s`` past the end of the last warm batch."""
    if len(full) > plan.warm_batches + plan.leg_batches:
        return True
    if len(full) < plan.warm_batches:
        return now_s >= read_from_s + plan.max_warm_s
    last_warm = full[plan.warm_batches - 1] if plan.warm_batches else None
    measuring_from = read_from_s if last_warm is None else last_warm.start_s + last_warm.duration_s
    return now_s >= measuring_from + plan.max_read_s / plan.legs


def leg_full_batches(full: Sequence[MicroBatch], leg_starts: Sequence[float], leg: int) -> list[MicroBatch]:
    """The full batches that began in leg `leg`: from its start (epoch seconds) to the next leg's."""
    end = leg_starts[leg + 1] if leg + 1 < len(leg_starts) else math.inf
    return [batch for batch in full if leg_starts[leg] <= batch.start_s < end]


def measured_by_leg(
    plan: BacklogPlan, full: Sequence[MicroBatch], leg_starts: Sequence[float] = (-math.inf,)
) -> list[list[MicroBatch]]:
    """The full batches a read measures, leg by leg: in each, those after its warm ones, as many as it measures."""
    return [
        leg_full_batches(full, leg_starts, leg)[plan.warm_batches : plan.warm_batches + plan.leg_batches]
        for leg in range(len(leg_starts))
    ]


def measured_batches(
    plan: BacklogPlan, full: Sequence[MicroBatch], leg_starts: Sequence[float] = (-math.inf,)
) -> list[MicroBatch]:
    """`measured_by_leg`, one leg after the other."""
    return [batch for leg in measured_by_leg(plan, full, leg_starts) for batch in leg]


def settled_batches(
    plan: BacklogPlan, full: Sequence[MicroBatch], latest_id: int, leg_starts: Sequence[float] = (-math.inf,)
) -> list[list[MicroBatch]]:
    """The measured batches so far, leg by leg, that a later batch followed (`latest_id`: the last batch that
    finished): their cycle is known (`cycle_s`), and their task CPU all in the event log -- Spark writes the log at
    each stage's end, so a batch's last task ends are there once a later batch has run."""
    return [
        [batch for batch in leg if batch.batch_id < latest_id]
        for leg in measured_by_leg(plan, full, leg_starts)
    ]


def input_end_offsets(runner: ExperimentRunner, topic: str) -> dict[int, int]:
    """The input topic's end offsets by partition; empty where the broker does not answer (the read then waits
    for its batches as it would without them)."""
    sampler = monitor.LagSampler(runner.kafka.client_kwargs(), topic, runner.benchmark.input_partitions)
    try:
        return sampler.end_offsets()
    # whatever kafka-python raises: the offsets only end a read early; the query's own checks report a lost broker
    except Exception:
        return {}
    finally:
        sampler.close()


def read_backlog(
    runner: ExperimentRunner,
    load: int,
    plan: BacklogPlan,
    *,
    workload: Workload | None = None,
    interval_s: float = 0.5,
    lock: bool = True,
    filled: Callable[[], None] | None = None,
    progress: Callable[[list[list[float]] | None], bool] | None = None,
) -> BacklogRead:
    """The runner's job on one instance reading a backlog of `workload` (by default `load`'s) sent
    ``plan.fill_factor_for(its rate)`` times as fast (the module's doc). Raises `RunAborted` where the job does not
    start or its query stops. ``lock=False``: the caller holds the cluster's session lock
    (SparkCluster.sessions_held). `filled` is called when the fill time is up, the generator still sending; the
    generator stops and the read begins when it returns (pull-request mode: once the other side has filled too).
    `progress` is called at every look at the query: where more measured batches have a next one that finished
    (``settled_batches``), with every such batch's cycle per record so far (`cycle_s`), leg by leg and in order;
    else with None. The read ends where it returns True."""
    started = time.monotonic()
    offered = workload or runner.benchmark.workload(load)
    fill = offered.sent_faster(plan.fill_factor_for(offered.target_rate))
    instance_cpu = plan.cpu_for(runner.settings.instance_cpu)
    prime = instance_cpu is not None and runner.spark.can_limit_cpu
    batches: dict[int, MicroBatch] = {}
    full: list[MicroBatch] = []
    with tempfile.TemporaryDirectory(prefix="theodolite-event-log-") as directory:
        event_log = Path(directory)
        log_conf = event_log_conf(event_log, runner.settings.spark_conf)
        job = runner.jobs.new_job()
        with runner.jobs.running_job(
            job,
            load,
            1,
            fill,
            instance_cpu=None if prime else instance_cpu,
            query_options={BATCH_CAP_OPTION: plan.batch_records},
            spark_conf=log_conf,
            lock=lock,
        ):
            assert job.query is not None and job.generator is not None
            query_id = str(job.query.id)
            executors = executor_addresses(job.spark)
            input_topic = job.topics["input"]
            fill_s = fill_for(runner, job, plan, input_topic, executors, interval_s)
            if filled is not None:
                filled()
            job.generator.stop()
            if prime:
                runner.spark.limit_instances(instance_cpu)
            filled_at = time.time()
            leg_starts = [filled_at]
            told = 0  # settled batches progress was told of
            # final: the generator has stopped and flushed
            end_offsets = input_end_offsets(runner, input_topic)
            backlog_records = lag_behind(end_offsets, monitor.last_progress(job.query), input_topic)
            lag = None  # the query's, by its last batch's end offsets
            stop = drained = False
            while not stop:
                if drained := backlog_drained(batches, plan.batch_records, filled_at, lag):
                    break  # waiting on would only run max_read_s out
                if read_over(
                    plan, leg_full_batches(full, leg_starts, len(leg_starts) - 1), leg_starts[-1], time.time()
                ):
                    if len(leg_starts) == plan.legs or not measured_by_leg(plan, full, leg_starts)[-1]:
                        break  # the last leg, or one that measured nothing: the next would not do better
                    replace_executor(job.spark)
                    executors = executor_addresses(job.spark)
                    leg_starts.append(time.time())
                time.sleep(interval_s)
                check_running(job, executors)
                progresses = monitor.all_progress(job.query)
                batches.update(batches_of(progresses, input_topic))
                try:  # at its first batch: a job that ignores the cap reads the whole backlog in one
                    check_capped(batches.values(), plan.batch_records, 0.0)
                except RunAborted as exc:
                    raise RunAborted(exc.outcome, f"{exc.reason}; {BATCH_CAP_HINT}") from None
                if progresses:
                    lag = lag_behind(end_offsets, progresses[-1], input_topic)
                full = full_batches(batches, plan.batch_records, filled_at)
                if progress is None:
                    continue
                settled = settled_batches(plan, full, max(batches, default=-1), leg_starts)
                figures = None
                if sum(map(len, settled)) > told:
                    told = sum(map(len, settled))
                    figures = [
                        [cycle / b.input_rows for b in leg if (cycle := cycle_s(b, batches)) is not None]
                        for leg in settled
                    ]
                stop = progress(figures)
        by_leg = measured_by_leg(plan, full, leg_starts)
        measured = tuple(batch for leg in by_leg for batch in leg)
        legs = tuple(leg for leg, batches_of_leg in enumerate(by_leg) for _ in batches_of_leg)
        # the session has stopped: its event log is complete
        task_cpu = read_task_cpu(event_log, query_id) if log_conf else {}
    return BacklogRead(
        measured,
        tuple(task_cpu.get(b.batch_id) for b in measured),
        time.monotonic() - started,
        filled_at,
        legs,
        drained and len(measured) < plan.legs * plan.leg_batches,
        fill_s,
        backlog_records,
        tuple(cycle_s(b, batches) for b in measured),
    )


def fill_for(
    runner: ExperimentRunner,
    job: RunningJob,
    plan: BacklogPlan,
    topic: str,
    executors: frozenset[str],
    interval_s: float,
) -> float:
    """Let the generator fill `topic` until `fill_over` says the fill ends; the seconds it took."""
    started = time.monotonic()
    backlog = None
    sampler = monitor.LagSampler(runner.kafka.client_kwargs(), topic, runner.benchmark.input_partitions)
    try:
        while not fill_over(plan, time.monotonic() - started, backlog):
            time.sleep(min(interval_s, max(0.0, started + plan.fill_s - time.monotonic())))
            check_running(job, executors)
            if plan.backlog_margin and time.monotonic() - started >= plan.min_fill_s:
                backlog = backlog_beyond_running_batch(
                    sampler, monitor.last_progress(job.query), topic, plan.batch_records
                )
    finally:
        sampler.close()
    return time.monotonic() - started
