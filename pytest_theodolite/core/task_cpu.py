"""Task CPU per record: the executor CPU a micro-batch's tasks spent, per record the batch read.

A capacity is a wall-clock figure: it includes the driver's work between batches and whatever the host took from
the instances while they ran, and two runs of unchanged code differ by more than a small change of what a record
costs. Spark's executors measure their tasks' CPU themselves (``Executor CPU Time`` and ``Executor Deserialize
CPU Time`` of each task, in nanoseconds) and the driver's event log keeps it with each job's micro-batch (the
job's properties ``sql.streaming.queryId`` and ``streaming.sql.batchId``). Over full batches of one cap, a
batch's task CPU over its records is that batch's cost per record plus its share of the per-batch part.

The figure is reported beside each capacity, not judged: it compares two runs only where both read batches of
the same size at the same time (docs/how-it-works.md, "Task CPU per record").

Pure functions over the event log's lines and the batch series: no Spark.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_theodolite.core.capacity import FULL_SHARE, MicroBatch
from pytest_theodolite.core.estimators import TimeSeries

#: the per-batch series of a capacity measurement's task CPU, in ms, timestamped by the batch's start as the
#: capacity's own series are
SERIES_CAPACITY_TASK_CPU_MS = "capacity-task-cpu-ms"

QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
_JOB_START = '"Event":"SparkListenerJobStart"'
_TASK_END = '"Event":"SparkListenerTaskEnd"'
_TASK_CPU_METRICS = ("Executor CPU Time", "Executor Deserialize CPU Time")


class TaskCpuTally:
    """Seconds of executor CPU the tasks of each micro-batch of the query `query_id` spent, by batch id, from an
    event log's lines fed in order -- all at once, or as the log grows: over all the batch's jobs, failed task
    attempts included (their CPU was spent). Only job-start and task-end lines are parsed (an event log is mostly
    query plans); a line cut short (a log still being written) is skipped."""

    def __init__(self, query_id: str) -> None:
        self.query_id = query_id
        self.cpu: dict[int, float] = {}
        self._stage_batch: dict[int, int] = {}

    def feed(self, lines: Iterable[str]) -> None:
        for line in lines:
            head = line[:48]
            if _JOB_START in head:
                event = _event(line)
                properties = event.get("Properties") or {}
                if properties.get(QUERY_ID_PROPERTY) != self.query_id or BATCH_ID_PROPERTY not in properties:
                    continue
                batch = int(properties[BATCH_ID_PROPERTY])
                self.cpu.setdefault(batch, 0.0)
                for stage in event.get("Stage IDs") or ():
                    self._stage_batch[int(stage)] = batch
            elif _TASK_END in head:
                event = _event(line)
                batch_id = self._stage_batch.get(event.get("Stage ID", -1))
                if batch_id is None:
                    continue
                metrics = event.get("Task Metrics") or {}
                self.cpu[batch_id] += sum(float(metrics.get(name) or 0) for name in _TASK_CPU_METRICS) / 1e9


def task_cpu_by_batch(lines: Iterable[str], query_id: str) -> dict[int, float]:
    """A whole event log's task CPU by batch of the query `query_id` (TaskCpuTally)."""
    tally = TaskCpuTally(query_id)
    tally.feed(lines)
    return tally.cpu


def _event(line: str) -> dict[str, Any]:
    try:
        event = json.loads(line)
    except json.JSONDecodeError:
        return {}
    return event if isinstance(event, dict) else {}


@dataclass(frozen=True)
class TaskCpuPerRecord:
    """The task CPU per record of a measurement's full batches: their median and quartiles, in microseconds."""

    median_us: float
    lower_quartile_us: float
    upper_quartile_us: float
    batches: int

    def text(self) -> str:
        return (
            f"task CPU {self.median_us:.2f} us/record "
            f"[quartiles {self.lower_quartile_us:.2f}, {self.upper_quartile_us:.2f}; {self.batches} batches]"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "median_us": round(self.median_us, 4),
            "lower_quartile_us": round(self.lower_quartile_us, 4),
            "upper_quartile_us": round(self.upper_quartile_us, 4),
            "batches": self.batches,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskCpuPerRecord:
        return cls(
            float(data["median_us"]),
            float(data["lower_quartile_us"]),
            float(data["upper_quartile_us"]),
            int(data["batches"]),
        )


def task_cpu_per_record(
    batches: Iterable[MicroBatch],
    task_cpu_s: Mapping[int, float],
    *,
    batch_cap: int,
    from_s: float | None = None,
    before_s: float | None = None,
    settle_batches: int = 0,
) -> TaskCpuPerRecord | None:
    """Task CPU per record over the full batches of `batch_cap` (``FULL_SHARE`` of it) that started from `from_s`
    and before `before_s`, the first `settle_batches` of them left out (a new query's code generation and JIT),
    each batch with a task CPU figure; None where no batch counts. A batch that was not full is left out: its
    per-batch part is spread over fewer records."""
    ordered = sorted({b.batch_id: b for b in batches}.values(), key=lambda b: b.batch_id)
    full = [
        b
        for b in ordered
        if b.input_rows >= FULL_SHARE * batch_cap
        and (from_s is None or b.start_s >= from_s)
        and (before_s is None or b.start_s < before_s)
    ][settle_batches:]
    per_record = [task_cpu_s[b.batch_id] / b.input_rows * 1e6 for b in full if b.batch_id in task_cpu_s]
    if not per_record:
        return None
    if len(per_record) == 1:
        return TaskCpuPerRecord(per_record[0], per_record[0], per_record[0], 1)
    lower, _, upper = statistics.quantiles(per_record, n=4, method="inclusive")
    return TaskCpuPerRecord(statistics.median(per_record), lower, upper, len(per_record))


def task_cpu_from_series(
    measurement: Mapping[str, Any], rows: TimeSeries, ids: TimeSeries, task_cpu_ms: TimeSeries
) -> TaskCpuPerRecord | None:
    """A recorded capacity measurement's (its results-JSON entry) task CPU per record, recomputed from its batch
    series: the task CPU series has a sample for each batch with a figure, at that batch's start."""
    cpu_at = dict(zip(task_cpu_ms.timestamps_s, task_cpu_ms.values, strict=True))
    batches, task_cpu_s = [], {}
    for start, batch_id, records in zip(ids.timestamps_s, ids.values, rows.values, strict=True):
        batches.append(MicroBatch(int(batch_id), float(start), 0.0, int(records)))
        if start in cpu_at:
            task_cpu_s[int(batch_id)] = float(cpu_at[start]) / 1000.0
    rule = measurement.get("rule") or {}
    return task_cpu_per_record(
        batches,
        task_cpu_s,
        batch_cap=int(measurement["batch_records"]),
        from_s=measurement.get("limited_from_s"),
        before_s=measurement.get("small_from_s"),
        settle_batches=int(rule.get("settle_batches", 0)),
    )
