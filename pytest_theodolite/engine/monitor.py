"""Lag and rate sampling on a fixed clock.

Spark does not commit its consumer offsets to Kafka, and its ``*OffsetsBehindLatest`` metrics read 0 unless
``maxOffsetsPerTrigger`` is set, so the lag is measured from outside: the broker's log-end offsets of the
input topic minus the offsets the query's last finished micro-batch processed up to (its progress
``sources[].endOffset``), sampled every ``interval_s`` -- also while a long batch runs, which is exactly when
the lag grows.

The parsing and arithmetic are pure functions; ``LagSampler`` is the thin part that talks to Kafka and Spark.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# kafka-python's classes as infra.kafka imports them: quietly (infra/kafka/__init__.py)
from pytest_theodolite.infra.kafka.admin import KafkaConsumer, TopicPartition

SERIES = (
    "lag-trend",
    "input-rate",
    "processed-rate",
    "batch-duration",
    "batch-id",
    "batch-end",
    "generator-rate",
)


class ProgressError(ValueError):
    """A query progress that cannot be read as offsets (the sub-experiment cannot be judged)."""


def processed_offsets(progress: Mapping[str, Any] | None, topic: str) -> dict[int, int]:
    """Offsets per partition of ``topic`` that the micro-batch of ``progress`` processed up to.

    ``progress`` is a query progress as JSON (``StreamingQueryProgress.json``); a query may read several
    topics (UC4 reads its feedback topic too), so only sources subscribed to ``topic`` count.

    Raises `ProgressError` for an offset it cannot read: counting that source as unprocessed would turn the
    whole log into lag, a FAIL where the truth is that the run could not be judged (ERRORED).
    """
    offsets: dict[int, int] = {}
    for source in (progress or {}).get("sources") or []:
        end = source.get("endOffset")
        if isinstance(end, str):
            try:
                end = json.loads(end)
            except ValueError:
                raise ProgressError(
                    f"the endOffset {end[:200]!r} of source {source.get('description', '?')!r} is not JSON"
                ) from None
        if isinstance(end, Mapping) and topic in end:
            try:
                for partition, offset in end[topic].items():
                    offsets[int(partition)] = max(offsets.get(int(partition), 0), int(offset))
            except (AttributeError, TypeError, ValueError):
                raise ProgressError(
                    f"the endOffset of topic {topic!r} is not partition -> offset: {str(end[topic])[:200]!r}"
                ) from None
    return offsets


def total_lag(end_offsets: Mapping[int, int], processed: Mapping[int, int]) -> int:
    """Σ over partitions of (log-end offset - processed offset); a partition not processed yet lags by all of it."""
    return sum(max(0, end - processed.get(partition, 0)) for partition, end in end_offsets.items())


def observed_totals(progresses: Sequence[Mapping[str, Any]], metric: str) -> dict[str, int]:
    """Sum of an observation's fields (e.g. records total/malformed) over distinct micro-batches."""
    totals: dict[str, int] = {}
    seen: set[int] = set()
    for progress in progresses:
        batch = progress.get("batchId")
        if batch is None or batch in seen:
            continue
        seen.add(batch)
        row = (progress.get("observedMetrics") or {}).get(metric) or {}
        for name, value in row.items():
            if isinstance(value, (int, float)):
                totals[name] = totals.get(name, 0) + int(value)
    return totals


def sink_output_rows(progresses: Sequence[Mapping[str, Any]]) -> int | None:
    """Rows the query's sink wrote, summed over distinct micro-batches (``sink.numOutputRows``); None where
    the sink does not report them (Spark writes -1). A job that emits several rows per input record -- UC3's
    update mode writes every window a micro-batch changed -- pays for each."""
    total, seen = 0, set()
    for progress in progresses:
        batch = progress.get("batchId")
        if batch is None or batch in seen:
            continue
        seen.add(batch)
        rows = (progress.get("sink") or {}).get("numOutputRows")
        if not isinstance(rows, (int, float)) or rows < 0:
            return None
        total += int(rows)
    return total


def state_rows(progress: Mapping[str, Any] | None) -> int | None:
    """Rows a micro-batch left in the query's state stores (``numRowsTotal`` summed over its stateful
    operators); None for a stateless query. Sampled over a run it shows whether a job's state stays bounded
    (old windows evicted by the watermark) or grows with every record read."""
    operators = (progress or {}).get("stateOperators") or []
    rows = [op.get("numRowsTotal") for op in operators]
    rows = [int(r) for r in rows if isinstance(r, (int, float)) and r >= 0]
    return sum(rows) if rows else None


#: the observation (field ``rows``) in which a job counts the rows it dropped as late itself
#: (spark_jobs.common.LATE_ROWS_METRIC)
LATE_ROWS_METRIC = "late_rows"


def late_rows_per_batch(progresses: Sequence[Mapping[str, Any]]) -> list[tuple[float, int]]:
    """Per distinct micro-batch, (epoch s it ended, input rows dropped as older than the watermark: its stateful
    operators' ``numRowsDroppedByWatermark`` and the rows the job counted itself in its ``late_rows``
    observation), in the order of the batches' ends; empty for a query that reports neither. One value per
    batch, so that none is counted twice or missed between two lag samples."""
    per_batch: dict[int, tuple[float, int]] = {}
    for progress in progresses:
        batch, started = progress.get("batchId"), batch_start_s(progress)
        duration = (progress.get("durationMs") or {}).get("triggerExecution")
        operators = progress.get("stateOperators") or []
        dropped = [op.get("numRowsDroppedByWatermark") for op in operators]
        own = ((progress.get("observedMetrics") or {}).get(LATE_ROWS_METRIC) or {}).get("rows")
        dropped = [int(d) for d in [*dropped, own] if isinstance(d, (int, float)) and d >= 0]
        if batch is None or started is None or duration is None or not dropped:
            continue
        per_batch[int(batch)] = (started + float(duration) / 1000.0, sum(dropped))
    return sorted(per_batch.values())


@dataclass(frozen=True)
class LagSample:
    timestamp_s: float
    lag: int
    end_offset: int
    processed_offset: int
    input_rows_per_s: float | None  # of the last finished micro-batch
    processed_rows_per_s: float | None
    batch_duration_ms: float | None  # the longer of the last finished batch and the running one
    batch_id: int | None  # of the last finished batch
    finished_batch_ms: float | None = None  # the last finished batch's own duration
    batch_end_s: float | None = None  # epoch seconds the last finished batch ended (its start + duration)
    state_rows: int | None = None  # rows in the state stores after the last finished batch (stateful jobs)


def input_rows(progress: Mapping[str, Any], topic: str) -> int | None:
    """Rows the progress's micro-batch read from ``topic``: the sum over the sources that read it (UC4 reads its
    feedback topic through a source of its own, whose rows are not the load); the query's ``numInputRows``
    where no source names its offsets."""
    found = None
    for source in progress.get("sources") or []:
        offsets = source.get("endOffset") or source.get("startOffset")
        if isinstance(offsets, str):
            try:
                offsets = json.loads(offsets)
            except ValueError:
                continue
        if isinstance(offsets, Mapping) and topic in offsets and source.get("numInputRows") is not None:
            found = (found or 0) + int(source["numInputRows"])
    if found is None:
        total = progress.get("numInputRows")
        return None if total is None else int(total)
    return found


def batch_start_s(progress: Mapping[str, Any]) -> float | None:
    """Epoch seconds at which the progress's micro-batch started (its ISO-8601 ``timestamp``)."""
    stamp = progress.get("timestamp")
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def sample_from(
    timestamp_s: float, end_offsets: Mapping[int, int], progress: Mapping[str, Any] | None, topic: str
) -> LagSample:
    processed = processed_offsets(progress, topic)
    progress = progress or {}
    duration = finished = (progress.get("durationMs") or {}).get("triggerExecution")
    started = batch_start_s(progress)
    if duration is not None and started is not None:
        # a batch still running counts with its age so far: an overloaded query shows at once, not only
        # when its long batch finally ends
        running_ms = (timestamp_s - started) * 1000.0 - duration
        duration = max(float(duration), running_ms)
    return LagSample(
        timestamp_s=timestamp_s,
        lag=total_lag(end_offsets, processed),
        end_offset=sum(end_offsets.values()),
        processed_offset=sum(processed.values()),
        input_rows_per_s=progress.get("inputRowsPerSecond"),
        processed_rows_per_s=progress.get("processedRowsPerSecond"),
        batch_duration_ms=None if duration is None else float(duration),
        batch_id=progress.get("batchId"),
        finished_batch_ms=None if finished is None else float(finished),
        batch_end_s=None if finished is None or started is None else started + float(finished) / 1000.0,
        state_rows=state_rows(progress),
    )


@dataclass
class LagSampler:
    """Reads broker end offsets with its own consumer (kept open: a new connection each second would cost
    more than the request) and the query's last progress."""

    client_kwargs: Mapping[str, Any] = field(repr=False)
    topic: str
    partitions: int
    request_timeout_s: float = 10.0
    _consumer: KafkaConsumer | None = field(default=None, init=False, repr=False)

    def end_offsets(self) -> dict[int, int]:
        if self._consumer is None:
            self._consumer = KafkaConsumer(
                **self.client_kwargs,
                enable_auto_commit=False,
                request_timeout_ms=int(self.request_timeout_s * 1000) + 1000,
            )
        offsets = self._consumer.end_offsets(
            [TopicPartition(self.topic, p) for p in range(self.partitions)],
            timeout_ms=int(self.request_timeout_s * 1000),
        )
        return {tp.partition: offset for tp, offset in offsets.items()}

    def sample(self, query: Any) -> LagSample:
        end = self.end_offsets()
        now = time.time()
        return sample_from(now, end, last_progress(query), self.topic)

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def last_progress(query: Any) -> dict[str, Any] | None:
    """The query's last progress as a dict, in two py4j calls (pyspark's own wrapper makes one per field)."""
    progress = query._jsq.lastProgress()
    return None if progress is None else json.loads(progress.json())


def all_progress(query: Any) -> list[dict[str, Any]]:
    """Every progress Spark still keeps for the query (see spark.sql.streaming.numRecentProgressUpdates)."""
    return [json.loads(p.json()) for p in query._jsq.recentProgress()]
