"""mu(r) measured on the running job: the records/s `r` instances sustain (core/capacity.py says why and how).

The generator offers a load above what the instances take, the job reads it in micro-batches capped at
``batch_records`` (``maxOffsetsPerTrigger``), primed at full speed for the plan's priming batches where the
instances' CPU can be limited, then limited; the batches are read from the query's progress every
``interval_s`` until the estimate is certain (``CapacityRule``) or the phase's bound has passed
(``max_measure_s``, longer for long batches: core/capacity.phase_bound_s). The batches are written as series
(``capacity-rows``, ``capacity-ms``, ``capacity-id``, timestamped by the batch's start), so the
estimate can be recomputed from the files. The session keeps an event log for the measurement, from which each
batch's task CPU is read (core/task_cpu.py; series ``capacity-task-cpu-ms``) and reported beside the capacity.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_theodolite.core.capacity import (
    SERIES_CAPACITY_ID,
    SERIES_CAPACITY_MS,
    SERIES_CAPACITY_ROWS,
    CapacityEstimate,
    CapacityRule,
    MicroBatch,
    estimate_capacity,
    phase_bound_s,
    two_phase_capacity,
)
from pytest_theodolite.core.contention import SERIES_LIMITED_INSTANCE_CPU, HostUsage, host_usage
from pytest_theodolite.core.estimators import TimeSeries
from pytest_theodolite.core.outcomes import CapacityStatus, Outcome
from pytest_theodolite.core.task_cpu import (
    SERIES_CAPACITY_TASK_CPU_MS,
    TaskCpuPerRecord,
    TaskCpuTally,
    task_cpu_per_record,
)
from pytest_theodolite.engine import monitor
from pytest_theodolite.engine.host_sampler import HostSampler
from pytest_theodolite.engine.job import RunAborted, RunningJob
from pytest_theodolite.engine.runner import ExperimentRunner
from pytest_theodolite.infra.spark.executors import driver_jvm_pid, executor_addresses
from theodolite_generator import Workload

#: the job option that caps a micro-batch (the job passes it to its Kafka source as ``maxOffsetsPerTrigger``)
BATCH_CAP_OPTION = "max_offsets_per_trigger"
BATCH_CAP_HINT = (
    f"a capacity is measured in capped micro-batches: take {BATCH_CAP_OPTION}: int | None = None in the job's "
    "start_query and pass it to the Kafka source as maxOffsetsPerTrigger (docs/writing-a-gate.md), or name "
    "another strategy on the gate"
)

#: the measurement's status: certain, bounded before it was certain, or no estimate (a run that broke)


@dataclass(frozen=True)
class CapacityMeasurement:
    """One capacity measurement of `instances` instances."""

    instances: int
    load: int  # the load the generator offered, in the benchmark's dimension
    offered_rate: float  # records/s
    batch_records: int  # the micro-batch cap
    estimate: CapacityEstimate | None
    status: CapacityStatus
    reason: str = ""
    limited_from_s: float | None = None  # epoch seconds the instances' CPU limit applied from
    timings: Mapping[str, float] = field(default_factory=dict)
    #: the estimate of each batch size ("large": `batch_records`, "small"), before they were combined
    phases: Mapping[str, CapacityEstimate | None] = field(default_factory=dict)
    small_batch_records: int | None = None  # the second phase's cap; None: one phase
    small_from_s: float | None = None  # epoch seconds the second phase's query started
    rule: CapacityRule = field(default_factory=CapacityRule)
    #: > 0: repeated at a higher rate, the instances having taken all they were offered (its series' index)
    attempt: int = 0
    #: where the host's CPU went from the CPU limit on; reported, not judged: between micro-batches the
    #: instances wait for the driver, and on a quiet host their busiest ran at 81-91 % of its quota
    #: (docs/lab-notes/contention.md), too near what starvation leaves them; None where not read
    host: HostUsage | None = None
    #: the first phase's task CPU per record (core/task_cpu.py); reported, not judged: it compares two runs only
    #: where both read the same batches at the same time; None where no event log was read
    task_cpu: TaskCpuPerRecord | None = None

    def progress_text(self) -> str:
        """One line for the live progress output."""
        seconds = ", ".join(
            f"{name.removesuffix('_s').replace('_', ' ')} {value:.0f} s"
            for name, value in self.timings.items()
        )
        host = "" if self.host is None else f" [{self.host.describe()}]"
        if self.estimate is None:
            return f"capacity of {self.instances} instances: {self.status}: {self.reason} [{seconds}]{host}"
        task_cpu = "" if self.task_cpu is None else f", {self.task_cpu.text()}"
        return (
            f"capacity of {self.instances} instances: {self.estimate.text()}, {self.status}{task_cpu} "
            f"[{seconds}]{host}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "instances": self.instances,
            "load": self.load,
            "offered_rate": self.offered_rate,
            "batch_records": self.batch_records,
            "estimate": None if self.estimate is None else self.estimate.to_dict(),
            "status": self.status,
            "reason": self.reason,
            "limited_from_s": self.limited_from_s,
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
            "phases": {k: None if v is None else v.to_dict() for k, v in self.phases.items()},
            "small_batch_records": self.small_batch_records,
            "small_from_s": self.small_from_s,
            "rule": self.rule.to_dict(),
            "attempt": self.attempt,
            "host": None if self.host is None else self.host.to_dict(),
            "task_cpu": None if self.task_cpu is None else self.task_cpu.to_dict(),
        }


def batches_of(progresses: list[dict[str, Any]], topic: str) -> dict[int, MicroBatch]:
    """The finished micro-batches in query progresses, by id, with the rows each read from `topic` (the
    input topic: the cap is its source's, and the load is counted in its records)."""
    batches = {}
    for progress in progresses:
        batch, start = progress.get("batchId"), monitor.batch_start_s(progress)
        duration = (progress.get("durationMs") or {}).get("triggerExecution")
        rows = monitor.input_rows(progress, topic)
        if batch is None or start is None or duration is None or rows is None:
            continue
        batches[int(batch)] = MicroBatch(int(batch), start, float(duration) / 1000.0, int(rows))
    return batches


@dataclass(frozen=True)
class ProbePlan:
    """How one capacity measurement runs."""

    batch_records: int  # the micro-batch cap of the first phase
    rule: CapacityRule = field(default_factory=CapacityRule)
    #: the second phase's cap as a share of the first's; None: one phase, the per-batch cost left in
    small_batch_share: float | None = 0.25
    #: per phase, from the CPU limit on; long batches stretch it (core/capacity.phase_bound_s)
    max_measure_s: float = 60.0


def event_log_conf(directory: Path, job_conf: Mapping[str, str]) -> dict[str, str]:
    """The session settings that write its event log, uncompressed and in one file, into `directory`; none
    where the gate's own settings (`job_conf`) keep an event log: that one is the user's, not read here."""
    if str(job_conf.get("spark.eventLog.enabled", "false")).lower() == "true":
        return {}
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": directory.resolve().as_uri(),
        "spark.eventLog.compress": "false",  # compressed by default from Spark 4.0
        "spark.eventLog.rolling.enabled": "false",
    }


class EventLogTail:
    """Each batch's task CPU seconds of the query `query_id`, from the event logs in `directory` as a running
    session writes them: each look reads only what was written since the last one, up to its last complete line
    (a read polls it after every batch; read whole each time, a long log would be read over and over)."""

    def __init__(self, directory: Path, query_id: str) -> None:
        self.directory, self.query_id = directory, query_id
        self._read: dict[Path, tuple[int, TaskCpuTally]] = {}  # per file: bytes read, its tally so far

    def task_cpu(self) -> dict[int, float]:
        cpu: dict[int, float] = {}
        for path in sorted(p for p in self.directory.iterdir() if p.is_file()):
            offset, tally = self._read.get(path, (0, TaskCpuTally(self.query_id)))
            with path.open("rb") as log:
                log.seek(offset)
                written = log.read()
            complete = written.rfind(b"\n") + 1
            tally.feed(written[:complete].decode("utf-8", errors="replace").splitlines())
            self._read[path] = (offset + complete, tally)
            cpu.update(tally.cpu)
        return cpu


def read_task_cpu(directory: Path, query_id: str) -> dict[int, float]:
    """Each batch's task CPU seconds of the query `query_id`, from the (finished) event logs in `directory`."""
    return EventLogTail(directory, query_id).task_cpu()


def measure_capacity(
    runner: ExperimentRunner,
    instances: int,
    load: int,
    plan: ProbePlan,
    *,
    workload: Workload | None = None,
    interval_s: float = 1.0,
    attempt: int = 0,
) -> CapacityMeasurement:
    """mu(`instances`) of the runner's job, the generator offering `workload` (by default `load`'s; choose it
    above the capacity: where the job takes all of it, the estimate is a lower bound, ``saturated`` False).
    With the plan's `small_batch_share`, a second phase reads smaller batches from the same checkpoint, and
    the per-batch cost is taken out of the estimate (capacity.without_per_batch_cost). The session's event log
    lives in a temporary directory for the measurement, removed with it."""
    with tempfile.TemporaryDirectory(prefix="theodolite-event-log-") as event_log:
        return _measure_capacity(
            runner, instances, load, plan, Path(event_log), workload, interval_s, attempt
        )


def _measure_capacity(
    runner: ExperimentRunner,
    instances: int,
    load: int,
    plan: ProbePlan,
    event_log: Path,
    workload: Workload | None,
    interval_s: float,
    attempt: int,
) -> CapacityMeasurement:
    batch_records, rule, max_measure_s = plan.batch_records, plan.rule, plan.max_measure_s
    small_batch_share = plan.small_batch_share
    workload = workload or runner.benchmark.workload(load)
    protocol = runner.settings.measurement_plan
    prime = (
        protocol.prime_unlimited and runner.spark.can_limit_cpu and runner.settings.instance_cpu is not None
    )
    job = runner.jobs.new_job()
    batches: dict[int, MicroBatch] = {}
    status, reason = CapacityStatus.CERTAIN, ""
    limited_from: float | None = None
    small_records: int | None = None
    small_from: float | None = None
    timings: dict[str, float] = {}
    host_samples: list[tuple[float, dict[str, float]]] = []
    host: HostSampler | None = None
    log_conf = event_log_conf(event_log, runner.settings.spark_conf)
    query_id: str | None = None
    t_start = time.monotonic()
    try:
        with runner.jobs.running_job(
            job,
            load,
            instances,
            workload,
            instance_cpu=None if prime else runner.settings.instance_cpu,
            query_options={BATCH_CAP_OPTION: batch_records},
            spark_conf=log_conf,
        ):
            timings["setup_s"] = time.monotonic() - t_start
            assert job.query is not None
            query_id = str(job.query.id)  # kept over a restart from the checkpoint
            executors = executor_addresses(job.spark)
            if prime:
                while sum(1 for b in batches.values() if b.input_rows > 0) < protocol.prime_batches:
                    if time.monotonic() - t_start > protocol.max_prime_s:
                        break
                    time.sleep(interval_s)
                    check_running(job, executors)
                    batches.update(batches_of(monitor.all_progress(job.query), job.topics["input"]))
                runner.spark.limit_instances(runner.settings.instance_cpu)
                timings["prime_s"] = time.monotonic() - t_start - timings["setup_s"]
            limited_from = time.time()
            t_limited = time.monotonic()
            assert job.generator is not None
            host = HostSampler(
                runner.spark, runner.kafka.local_pids, job.generator.worker_pids, driver_jvm_pid(job.spark)
            )
            host_samples.append((time.time(), host.sample()))
            large, certain, measured_s = _measure_phase(
                job,
                instances,
                executors,
                batches,
                batch_records,
                rule,
                limited_from,
                max_measure_s,
                interval_s,
            )
            timings["measure_s"] = time.monotonic() - t_limited
            uncertain_phase = f"{measured_s:.0f} s"
            if small_batch_share and large is not None and large.saturated:
                t_small = time.monotonic()
                small_records = max(1, round(batch_records * small_batch_share))
                runner.jobs.restart_query(job, {BATCH_CAP_OPTION: small_records})
                small_from = time.time()
                small_rule = replace(rule, settle_batches=1)
                # the batch planned before the restart may run again after it, at the first cap
                _, small_certain, small_measured_s = _measure_phase(
                    job,
                    instances,
                    executors,
                    batches,
                    small_records,
                    small_rule,
                    small_from,
                    max_measure_s,
                    interval_s,
                    largest_cap=batch_records,
                )
                if certain and not small_certain:
                    certain, uncertain_phase = False, f"{small_measured_s:.0f} s of smaller batches"
                timings["measure_small_s"] = time.monotonic() - t_small
            host_samples.append((time.time(), host.sample()))
            if not certain:
                status, reason = CapacityStatus.UNCERTAIN, f"not certain after {uncertain_phase}"
    except RunAborted as exc:
        status, reason = CapacityStatus(exc.outcome.value), exc.reason
        if BATCH_CAP_OPTION in reason:  # the job refused or ignored the cap: say how to take it
            reason = f"{reason}; {BATCH_CAP_HINT}"
    timings["teardown_s"] = time.monotonic() - (job.teardown_started or t_start)
    # the session has stopped: its event log is complete
    task_cpu_s = read_task_cpu(event_log, query_id) if log_conf and query_id else {}
    _write_batches(runner, load, instances, batches, attempt, task_cpu_s)
    # the same function gives the estimate again from the results files (offline re-analysis)
    estimate, large_estimate, small_estimate = two_phase_capacity(
        batches.values(),
        instances=instances,
        large_cap=batch_records,
        small_cap=small_records,
        limited_from_s=limited_from,
        small_from_s=small_from,
        rule=rule,
    )
    phases = {"large": large_estimate}
    if small_records is not None:
        phases["small"] = small_estimate
    return CapacityMeasurement(
        instances,
        load,
        workload.target_rate,
        batch_records,
        estimate if status.is_measured else None,
        status,
        reason,
        limited_from,
        timings,
        phases,
        small_records,
        small_from,
        rule,
        attempt,
        _host_usage(host_samples, host, runner, instances),
        task_cpu_per_record(
            batches.values(),
            task_cpu_s,
            batch_cap=batch_records,
            from_s=limited_from,
            before_s=small_from,
            settle_batches=rule.settle_batches,
        ),
    )


def _host_usage(
    samples: list[tuple[float, dict[str, float]]],
    host: HostSampler | None,
    runner: ExperimentRunner,
    instances: int,
) -> HostUsage | None:
    """The host's usage between the first and the last sample (from the limit on to the end of measuring)."""
    if host is None or host.cores is None or len(samples) < 2:
        return None
    names = {name for _, values in samples for name in values}
    series = {
        name: TimeSeries.of([t for t, v in samples if name in v], [v[name] for _, v in samples if name in v])
        for name in names
    }
    return host_usage(
        series,
        instance_cpu=series.get(SERIES_LIMITED_INSTANCE_CPU),
        host_cores=host.cores,
        quota_cores=runner.quota_cores(instances),
        instance_quota_cores=runner.quota_cores(1),
    )


def check_running(job: RunningJob, executors: frozenset[str]) -> None:
    """Raise `RunAborted` (errored) where the job's query stopped or one of its `executors` is gone."""
    query = job.query
    if not query.isActive:
        exc = query.exception()
        raise RunAborted(
            Outcome.ERRORED, f"the query stopped: {str(exc).splitlines()[0] if exc else 'no error'}"
        )
    if lost := executors - executor_addresses(job.spark):
        raise RunAborted(Outcome.ERRORED, f"an executor was lost ({', '.join(sorted(lost))})")


def check_capped(batches: Iterable[MicroBatch], batch_records: int, from_s: float) -> None:
    """A job that ignores the cap reads its backlog in ever larger batches: no capacity can be read from them."""
    for batch in batches:
        # the Kafka source splits the cap over the partitions, rounding a share below one record up
        if batch.start_s >= from_s and batch.input_rows > batch_records * 1.01 + 16:
            raise RunAborted(
                Outcome.ERRORED,
                f"micro-batch {batch.batch_id} read {batch.input_rows} records, above the cap of {batch_records}: "
                f"the job ignores {BATCH_CAP_OPTION}",
            )


def _measure_phase(
    job: RunningJob,
    instances: int,
    executors: frozenset[str],
    batches: dict[int, MicroBatch],
    batch_records: int,
    rule: CapacityRule,
    from_s: float,
    max_s: float,
    interval_s: float,
    largest_cap: int | None = None,
) -> tuple[CapacityEstimate | None, bool, float]:
    """Read batches until the estimate over those that started after `from_s` is certain or the phase's bound
    passed (`max_s`, stretched for long batches: phase_bound_s); (the estimate, whether it is certain, the
    seconds it measured)."""
    started = time.monotonic()
    estimate = None
    while True:
        time.sleep(interval_s)
        check_running(job, executors)
        batches.update(batches_of(monitor.all_progress(job.query), job.topics["input"]))
        check_capped(batches.values(), largest_cap or batch_records, from_s)
        estimate = estimate_capacity(
            batches.values(),
            instances=instances,
            batch_cap=batch_records,
            rule=rule,
            limited_from_s=from_s,
        )
        elapsed = time.monotonic() - started
        if estimate is not None and estimate.certain(rule):
            return estimate, True, elapsed
        durations = [b.duration_s for b in batches.values() if b.start_s >= from_s and b.input_rows > 0]
        if elapsed > phase_bound_s(durations, rule, max_s):
            return estimate, False, elapsed


def _write_batches(
    runner: ExperimentRunner,
    load: int,
    instances: int,
    batches: Mapping[int, MicroBatch],
    attempt: int,
    task_cpu_s: Mapping[int, float],
) -> None:
    ordered = sorted(batches.values(), key=lambda b: b.batch_id)
    writers = {
        name: runner.writer.open_series(load, instances, name, attempt)
        for name in (SERIES_CAPACITY_ROWS, SERIES_CAPACITY_MS, SERIES_CAPACITY_ID)
    }
    if task_cpu_s:
        writers[SERIES_CAPACITY_TASK_CPU_MS] = runner.writer.open_series(
            load, instances, SERIES_CAPACITY_TASK_CPU_MS, attempt
        )
    try:
        for batch in ordered:
            writers[SERIES_CAPACITY_ROWS].append(batch.start_s, batch.input_rows)
            writers[SERIES_CAPACITY_MS].append(batch.start_s, batch.duration_s * 1000.0)
            writers[SERIES_CAPACITY_ID].append(batch.start_s, batch.batch_id)
            if batch.batch_id in task_cpu_s:
                writers[SERIES_CAPACITY_TASK_CPU_MS].append(
                    batch.start_s, task_cpu_s[batch.batch_id] * 1000.0
                )
    finally:
        for writer in writers.values():
            writer.close()
