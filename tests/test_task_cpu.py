"""Task CPU per record from a Spark event log: the parser on scripted event-log lines (the shape Spark's
JsonProtocol writes), the estimate over scripted batches, and its recomputation from the batch series."""

from __future__ import annotations

import json

import pytest

from pytest_theodolite.core.capacity import MicroBatch
from pytest_theodolite.core.estimators import TimeSeries
from pytest_theodolite.core.task_cpu import (
    TaskCpuPerRecord,
    task_cpu_by_batch,
    task_cpu_from_series,
    task_cpu_per_record,
)

QUERY = "5b0c7f0e-3d1a-4c1e-9a57-1f1c2b3d4e5f"
OTHER_QUERY = "00000000-0000-0000-0000-000000000001"


def job_start(job: int, stages: list[int], query: str | None, batch: int | None) -> str:
    properties = {"spark.job.description": "x", "spark.sql.execution.id": str(job)}
    if query is not None:
        properties["sql.streaming.queryId"] = query
    if batch is not None:
        properties["streaming.sql.batchId"] = str(batch)
    return json.dumps(
        {
            "Event": "SparkListenerJobStart",
            "Job ID": job,
            "Submission Time": 1,
            "Stage Infos": [],
            "Stage IDs": stages,
            "Properties": properties,
        },
        separators=(",", ":"),
    )


def task_end(stage: int, cpu_ns: int, deserialize_ns: int = 0, reason: str = "Success") -> str:
    return json.dumps(
        {
            "Event": "SparkListenerTaskEnd",
            "Stage ID": stage,
            "Stage Attempt ID": 0,
            "Task Type": "ResultTask",
            "Task End Reason": {"Reason": reason},
            "Task Info": {"Task ID": 1},
            "Task Metrics": {
                "Executor Deserialize CPU Time": deserialize_ns,
                "Executor Run Time": 10,
                "Executor CPU Time": cpu_ns,
            },
        },
        separators=(",", ":"),
    )


def test_each_batch_sums_its_jobs_tasks_cpu_and_deserialisation():
    lines = [
        '{"Event":"SparkListenerLogStart","Spark Version":"3.5.1"}',
        job_start(0, [0, 1], QUERY, 0),
        task_end(0, 200_000_000, 10_000_000),
        task_end(1, 300_000_000),
        # a second job of the same batch (a stateful query's commit, a foreachBatch's second action)
        job_start(1, [2], QUERY, 0),
        task_end(2, 50_000_000),
        job_start(2, [3], QUERY, 1),
        task_end(3, 400_000_000),
        task_end(3, 100_000_000, reason="ExceptionFailure"),  # a failed attempt's CPU was spent too
    ]
    cpu = task_cpu_by_batch(lines, QUERY)
    assert cpu == pytest.approx({0: 0.56, 1: 0.5})


def test_other_queries_and_jobs_outside_a_stream_are_not_counted():
    lines = [
        job_start(0, [0], OTHER_QUERY, 0),
        task_end(0, 900_000_000),
        job_start(1, [1], None, None),  # a job of the driver's own (e.g. a count outside the query)
        task_end(1, 900_000_000),
        job_start(2, [2], QUERY, 4),
        task_end(2, 100_000_000),
        task_end(7, 900_000_000),  # a stage no job of this query started
    ]
    assert task_cpu_by_batch(lines, QUERY) == pytest.approx({4: 0.1})


def test_a_line_cut_short_and_lines_of_other_events_are_skipped():
    lines = [
        job_start(0, [0], QUERY, 2),
        '{"Event":"org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart","physicalPlanDescription":"'
        + "x" * 500
        + '"}',
        task_end(0, 250_000_000),
        task_end(0, 250_000_000)[:40],  # the log still being written
    ]
    assert task_cpu_by_batch(lines, QUERY) == pytest.approx({2: 0.25})


def test_a_batch_whose_tasks_have_not_ended_has_no_cpu_yet():
    assert task_cpu_by_batch([job_start(0, [0], QUERY, 3)], QUERY) == {3: 0.0}


def test_a_log_read_as_it_grows_gives_what_the_whole_log_gives_each_line_counted_once(tmp_path):
    """A running session's log, looked at after every batch: each look reads what was written since the last,
    a line still being written is left for the next look, and a second file adds its own batches."""
    from pytest_theodolite.engine.capacity_probe import EventLogTail, read_task_cpu

    lines = [
        job_start(0, [0], QUERY, 0),
        task_end(0, 200_000_000),
        job_start(1, [1], QUERY, 1),
        task_end(1, 300_000_000),
        "{" + '"Event":"SparkListenerSQLExecutionStart","plan":"' + "\u00e9" * 200 + '"}',  # not ASCII
        task_end(1, 100_000_000),
    ]
    written = "".join(line + "\n" for line in lines).encode()
    log = tmp_path / "app-1.inprogress"
    tail = EventLogTail(tmp_path, QUERY)
    looks = []
    cut = written.index(task_end(1, 300_000_000).encode()) + 30  # in the middle of a line
    for end in (0, cut, cut + 1, len(written) - 5, len(written)):
        log.write_bytes(written[:end])
        looks.append(tail.task_cpu())
    assert looks[0] == {} and looks[1] == pytest.approx({0: 0.2, 1: 0.0})
    assert looks[2] == looks[1] and looks[3] == pytest.approx({0: 0.2, 1: 0.3})
    assert looks[4] == pytest.approx({0: 0.2, 1: 0.4}) == task_cpu_by_batch(lines, QUERY)
    assert tail.task_cpu() == looks[4]  # nothing new: nothing counted twice
    (tmp_path / "app-2.inprogress").write_text(
        job_start(0, [0], QUERY, 7) + "\n" + task_end(0, 50_000_000) + "\n"
    )
    assert tail.task_cpu() == pytest.approx({0: 0.2, 1: 0.4, 7: 0.05}) == read_task_cpu(tmp_path, QUERY)


def batches(*rows: int, start: float = 100.0) -> list[MicroBatch]:
    return [MicroBatch(i, start + 10.0 * i, 5.0, n) for i, n in enumerate(rows)]


def test_the_estimate_counts_full_batches_after_the_limit_and_the_settling_ones():
    measured = batches(1000, 10_000, 10_000, 10_000, 10_000, 9_990, 4_000)
    cpu = {0: 9.0, 1: 0.9, 2: 0.5, 3: 0.4, 4: 0.6, 5: 0.5, 6: 0.2}
    estimate = task_cpu_per_record(measured, cpu, batch_cap=10_000, from_s=105.0, settle_batches=1)
    assert estimate is not None
    # batches 1..5 are full and started after 105 s; batch 1 settles; batch 6 is not full
    assert estimate.batches == 4
    assert estimate.median_us == pytest.approx(50.025, abs=0.01)
    assert estimate.lower_quartile_us < estimate.median_us < estimate.upper_quartile_us
    assert estimate.lower_quartile_us == pytest.approx(47.5)
    assert estimate.upper_quartile_us == pytest.approx(52.5, abs=0.05)


def test_batches_from_the_second_phase_and_those_without_a_figure_are_left_out():
    measured = batches(10_000, 10_000, 10_000, 2_500, 2_500)
    cpu = {0: 0.4, 2: 0.6, 3: 0.3, 4: 0.3}
    estimate = task_cpu_per_record(measured, cpu, batch_cap=10_000, before_s=130.0)
    assert estimate is not None and estimate.batches == 2
    assert (estimate.median_us, estimate.lower_quartile_us, estimate.upper_quartile_us) == pytest.approx(
        (50.0, 45.0, 55.0)
    )
    assert task_cpu_per_record(measured, {}, batch_cap=10_000) is None
    single = task_cpu_per_record(measured, {1: 0.5}, batch_cap=10_000)
    assert single == TaskCpuPerRecord(50.0, 50.0, 50.0, 1)


def test_the_estimate_survives_its_json_and_says_what_it_is():
    estimate = TaskCpuPerRecord(44.85, 41.92, 46.85, 9)
    assert TaskCpuPerRecord.from_dict(json.loads(json.dumps(estimate.to_dict()))) == estimate
    assert estimate.text() == "task CPU 44.85 us/record [quartiles 41.92, 46.85; 9 batches]"


def test_the_estimate_is_recomputed_from_the_batch_series():
    measured = batches(10_000, 10_000, 10_000, 10_000, 2_500)
    cpu = {0: 0.7, 1: 0.45, 2: 0.5, 3: 0.55, 4: 0.2}
    measurement = {
        "batch_records": 10_000,
        "limited_from_s": 100.0,
        "small_from_s": 140.0,
        "rule": {"settle_batches": 1},
    }
    starts = [b.start_s for b in measured]
    rows = TimeSeries.of(starts, [b.input_rows for b in measured])
    ids = TimeSeries.of(starts, [b.batch_id for b in measured])
    # batch 2's figure is missing: its task-end lines were never written
    with_cpu = [b for b in measured if b.batch_id != 2]
    task_cpu_ms = TimeSeries.of([b.start_s for b in with_cpu], [cpu[b.batch_id] * 1000 for b in with_cpu])
    recomputed = task_cpu_from_series(measurement, rows, ids, task_cpu_ms)
    direct = task_cpu_per_record(
        measured,
        {i: c for i, c in cpu.items() if i != 2},
        batch_cap=10_000,
        from_s=100.0,
        before_s=140.0,
        settle_batches=1,
    )
    assert recomputed == direct
    assert recomputed is not None and recomputed.batches == 2
    assert (
        recomputed.median_us,
        recomputed.lower_quartile_us,
        recomputed.upper_quartile_us,
    ) == pytest.approx((50.0, 47.5, 52.5))
