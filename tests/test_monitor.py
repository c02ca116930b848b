"""Pure parts of the lag monitor: offsets out of query progress, lag arithmetic, observed totals."""

import json

import pytest

from pytest_theodolite.engine.monitor import (
    ProgressError,
    input_rows,
    late_rows_per_batch,
    observed_totals,
    processed_offsets,
    sample_from,
    sink_output_rows,
    state_rows,
    total_lag,
)


def progress(batch_id, end_offset, **extra):
    return {
        "batchId": batch_id,
        "sources": [{"description": "KafkaV2[Subscribe[in]]", "endOffset": end_offset}],
        **extra,
    }


def test_processed_offsets_reads_json_string_and_dict_forms():
    as_string = progress(3, json.dumps({"in": {"0": 10, "1": 20}}))
    as_dict = progress(3, {"in": {"0": 10, "1": 20}})
    assert processed_offsets(as_string, "in") == {0: 10, 1: 20}
    assert processed_offsets(as_dict, "in") == {0: 10, 1: 20}


def test_processed_offsets_counts_only_the_input_topic():
    # UC4 reads its feedback topic in another source of the same query
    two_sources = {
        "sources": [
            {"endOffset": json.dumps({"in": {"0": 5}})},
            {"endOffset": json.dumps({"feedback": {"0": 999}})},
        ]
    }
    assert processed_offsets(two_sources, "in") == {0: 5}
    assert processed_offsets(None, "in") == {}
    with pytest.raises(ProgressError, match=r"'not json' of source 'KafkaV2.*' is not JSON"):
        processed_offsets(
            {"sources": [{"description": "KafkaV2[Subscribe[in]]", "endOffset": "not json"}]}, "in"
        )
    with pytest.raises(ProgressError, match="not partition -> offset"):
        processed_offsets({"sources": [{"endOffset": '{"in": {"0": "ten"}}'}]}, "in")


def test_input_rows_count_only_the_sources_of_the_input_topic():
    """UC4's feedback source adds rows to the query's numInputRows; a capacity counts the load's records, and
    the micro-batch cap is the input source's (a capacity measurement once refused UC4 as ignoring its cap:
    35 853 rows in a batch capped at 35 152, 701 of them feedback)."""
    from pytest_theodolite.engine.capacity_probe import batches_of

    batch = {
        "batchId": 5,
        "timestamp": "2026-11-26T06:10:00.000Z",
        "durationMs": {"triggerExecution": 4000},
        "numInputRows": 35_853,
        "sources": [
            {"endOffset": json.dumps({"in": {"0": 9000}}), "numInputRows": 35_152},
            {"endOffset": {"feedback": {"0": 40}}, "numInputRows": 701},
        ],
    }
    assert input_rows(batch, "in") == 35_152
    assert input_rows(batch, "feedback") == 701
    # no source names its offsets (a progress of another shape): the query's own count
    assert input_rows({"numInputRows": 12}, "in") == 12
    assert input_rows({}, "in") is None
    [read] = batches_of([batch], "in").values()
    assert read.input_rows == 35_152 and read.duration_s == 4.0


def test_total_lag_counts_unprocessed_partitions_fully_and_never_negative():
    assert total_lag({0: 100, 1: 50}, {0: 60}) == 40 + 50
    assert total_lag({0: 100}, {0: 120}) == 0  # a progress newer than the end-offset read
    assert total_lag({}, {}) == 0


def test_sample_from_takes_rates_and_batch_duration_of_the_last_batch():
    p = progress(
        7,
        {"in": {"0": 30}},
        inputRowsPerSecond=12.5,
        processedRowsPerSecond=40.0,
        durationMs={"triggerExecution": 250},
    )
    sample = sample_from(1000.0, {0: 100}, p, "in")
    assert (sample.lag, sample.end_offset, sample.processed_offset) == (70, 100, 30)
    assert (sample.input_rows_per_s, sample.processed_rows_per_s, sample.batch_duration_ms) == (
        12.5,
        40.0,
        250.0,
    )
    assert sample.batch_id == 7
    assert sample.state_rows is None  # a stateless query
    before_first_batch = sample_from(1000.0, {0: 100}, None, "in")
    assert before_first_batch.lag == 100 and before_first_batch.batch_duration_ms is None
    assert before_first_batch.state_rows is None
    stateful = progress(8, {"in": {"0": 30}}, stateOperators=[{"numRowsTotal": 640}])
    assert sample_from(1000.0, {0: 100}, stateful, "in").state_rows == 640


def test_observed_totals_sums_each_batch_once():
    batches = [
        {"batchId": 0, "observedMetrics": {"records": {"total": 10, "malformed": 1}}},
        {"batchId": 1, "observedMetrics": {"records": {"total": 5, "malformed": 0}}},
        {"batchId": 1, "observedMetrics": {"records": {"total": 5, "malformed": 0}}},  # reported twice
        {"batchId": 2},
    ]
    assert observed_totals(batches, "records") == {"total": 15, "malformed": 1}
    assert observed_totals([], "records") == {}


def test_sink_output_rows_sums_each_batch_once_and_knows_when_the_sink_does_not_say():
    batches = [
        {"batchId": 0, "sink": {"numOutputRows": 12}},
        {"batchId": 1, "sink": {"numOutputRows": 30}},
        {"batchId": 1, "sink": {"numOutputRows": 30}},  # reported twice
        {"batchId": None},
    ]
    assert sink_output_rows(batches) == 42
    assert sink_output_rows([]) == 0
    assert sink_output_rows([*batches, {"batchId": 2, "sink": {"numOutputRows": -1}}]) is None
    assert sink_output_rows([{"batchId": 0, "sink": {}}]) is None


def test_state_rows_sums_the_stateful_operators_of_one_batch():
    # UC4 runs two stateful operators in one query: its state is both
    two_operators = {"stateOperators": [{"numRowsTotal": 64}, {"numRowsTotal": 21, "numRowsUpdated": 5}]}
    assert state_rows(two_operators) == 85
    assert state_rows({"stateOperators": []}) is None  # stateless
    assert state_rows({"batchId": 3}) is None
    assert state_rows(None) is None
    assert state_rows({"stateOperators": [{"numRowsTotal": -1}, {}]}) is None  # nothing reported


def test_a_running_batch_counts_with_its_age():
    # the last batch started at t=100 s and took 2 s; at t=110 s the next one has run for 8 s
    p = progress(
        3, {"in": {"0": 30}}, timestamp="1970-01-01T00:01:40.000Z", durationMs={"triggerExecution": 2000}
    )
    assert sample_from(110.0, {0: 100}, p, "in").batch_duration_ms == 8000.0
    assert sample_from(101.5, {0: 100}, p, "in").batch_duration_ms == 2000.0  # the finished one is longer


def test_late_rows_are_taken_once_per_batch_at_its_end():
    def batch(batch_id, second, dropped):
        return {
            "batchId": batch_id,
            "timestamp": f"2026-11-24T10:00:{second:02d}.000Z",
            "durationMs": {"triggerExecution": 2500},
            # UC4: two stateful operators (the registry's and the groups'), both counted
            "stateOperators": [{"numRowsDroppedByWatermark": dropped}, {"numRowsDroppedByWatermark": 1}],
        }

    start = 1795514400.0  # 2026-11-24T10:00:00Z
    progresses = [batch(8, 10, 4), batch(7, 5, 0), batch(8, 10, 4)]  # a batch seen twice counts once
    assert late_rows_per_batch(progresses) == [(start + 7.5, 1), (start + 12.5, 5)]
    # stateless, unreported (-1) or without a start: nothing to count
    assert late_rows_per_batch([{**batch(1, 0, 0), "stateOperators": []}]) == []
    assert (
        late_rows_per_batch([{**batch(1, 0, 0), "stateOperators": [{"numRowsDroppedByWatermark": -1}]}]) == []
    )
    assert late_rows_per_batch([{"batchId": 1, "stateOperators": [{"numRowsDroppedByWatermark": 3}]}]) == []
    # rows the job dropped itself (UC4's stateful function) are added from its late_rows observation
    own = {**batch(9, 20, 2), "observedMetrics": {"late_rows": {"rows": 30}, "records": {"total": 500}}}
    assert late_rows_per_batch([own]) == [(start + 22.5, 33)]
    assert late_rows_per_batch([{**own, "stateOperators": []}]) == [(start + 22.5, 30)]
