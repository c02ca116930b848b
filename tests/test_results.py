"""Raw results: written as measured, in Theodolite's file shapes, secrets redacted, read back again."""

import json

import numpy as np
import pandas as pd
import pytest
from theodolite_analysis import theodolite_trend_slope

from pytest_theodolite.core.estimators import SlopeThreshold, TimeSeries, lag_trend_slope
from pytest_theodolite.core.evaluation import SloSettings
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.records import (
    SERIES_GENERATOR_RATE,
    SERIES_LAG,
    RepetitionRecord,
    SubExperimentRecord,
)
from pytest_theodolite.core.redaction import REDACTED, redact_secrets
from pytest_theodolite.core.scalability import CapacityResult, DemandResult, Metric, SubExperiment
from pytest_theodolite.core.slo import GENERATOR_RATE, LAG_TREND, SloVerdict
from pytest_theodolite.store.results import (
    RawSeriesKey,
    ResultsError,
    ResultsWriter,
    read_results,
    read_series,
    series_file_name,
)

T0 = 1_700_000_000.0


def make_writer(tmp_path, **kwargs):
    defaults = {
        "metric": Metric.DEMAND,
        "slo_settings": SloSettings(warmup_s=30, lag_trend_threshold=SlopeThreshold(relative_to_load=0.01)),
        "settings": {
            "duration_s": 300,
            "strategy": "linear+lower-bound",
            "testbed": {"cores": 2, "instance_cpu": 1.0},
        },
        "loads": [1000, 2000],
        "resources": [1, 2],
    }
    defaults.update(kwargs)
    return ResultsWriter(tmp_path, 3, **defaults)


def a_record(load=1000, resources=1, slopes=(5.0, 7.0, 6.0), generator=Outcome.PASS):
    repetitions = [
        RepetitionRecord(
            i,
            (
                SloVerdict(LAG_TREND, Outcome.PASS, s, 10.0, "ok"),
                SloVerdict(GENERATOR_RATE, generator, 990.0, 980.0),
            ),
            {"records_total": 300_000, "records_malformed": 0},
        )
        for i, s in enumerate(slopes)
    ]
    return SubExperimentRecord.from_repetitions(load, resources, float(load), repetitions)


def test_series_file_names_follow_theodolite():
    assert series_file_name(3, 1000, 2, SERIES_LAG, 0) == "exp3_1000_2_lag-trend_0.csv"
    with pytest.raises(ValueError, match="no '_'"):
        series_file_name("a_b", 1, 1, SERIES_LAG, 0)
    with pytest.raises(ValueError, match="series name"):
        series_file_name(1, 1, 1, "Lag_Trend", 0)


def test_series_rows_are_on_disk_as_soon_as_they_are_appended(tmp_path):
    writer = make_writer(tmp_path)
    with writer.open_series(1000, 1, SERIES_LAG, 0) as series:
        series.append(T0, 10)
        series.append(T0 + 1.5, 12.25)
        # Still open: another reader (or a post-crash analysis) already sees both rows.
        on_disk = (tmp_path / "exp3_1000_1_lag-trend_0.csv").read_text()
        assert on_disk == (
            "labels,timestamp,value\n{series=lag-trend},1700000000,10\n{series=lag-trend},1700000001.5,12.25\n"
        )
    with pytest.raises(ValueError, match="closed"):
        series.append(T0 + 2, 1)


def test_a_lazy_series_leaves_no_file_until_its_first_row(tmp_path):
    writer = make_writer(tmp_path)
    path = tmp_path / "exp3_1000_1_state-rows_0.csv"
    with writer.open_series(1000, 1, "state-rows", 0, lazy=True):
        pass
    assert not path.exists()  # a stateless job's state was never sampled
    with writer.open_series(1000, 1, "state-rows", 0, lazy=True) as series:
        assert not path.exists()
        series.append(T0, 640)
        assert path.read_text() == "labels,timestamp,value\n{series=state-rows},1700000000,640\n"
    with pytest.raises(ValueError, match="closed"):
        series.append(T0 + 1, 641)


def test_whole_series_round_trip_exactly(tmp_path):
    writer = make_writer(tmp_path)
    t = T0 + np.arange(0, 10, 0.1)
    values = np.random.default_rng(0).normal(1e6, 1e3, t.size)
    path = writer.write_series(1000, 1, SERIES_GENERATOR_RATE, 2, TimeSeries.of(t, values))
    back = read_series(path)
    assert np.array_equal(back.timestamps_s, t) and np.array_equal(back.values, values)
    assert list(pd.read_csv(path).columns) == ["labels", "timestamp", "value"]


def _slope(series):
    return lag_trend_slope(series.timestamps_s, series.values, warmup_s=30)


def test_theodolite_positional_analysis_reads_the_lag_trend_the_plugin_wrote(tmp_path):
    writer = make_writer(tmp_path)
    t = T0 + np.arange(0, 120, 5.0)
    lag = 1490.0 * (t - T0) + np.random.default_rng(1).normal(0, 500, t.size)
    path = writer.write_series(2000, 1, SERIES_LAG, 1, TimeSeries.of(t, lag))
    expected = _slope(read_series(path))
    assert expected == pytest.approx(1490, rel=0.05)
    assert theodolite_trend_slope(path, warmup_s=30) == pytest.approx(expected, rel=1e-6)
    # The old `timestamp,value` shape regressed time on lag: the reading above would see a slope near 0.
    old = tmp_path / "old.csv"
    old.write_text("timestamp,value\n" + "".join(f"{a},{b}\n" for a, b in zip(t, lag, strict=True)))
    assert theodolite_trend_slope(old, warmup_s=30) < 0.01
    assert _slope(read_series(old)) == pytest.approx(expected, rel=1e-9)  # still read


def test_json_holds_settings_before_any_sub_experiment_and_every_finished_one_after(tmp_path):
    writer = make_writer(tmp_path)
    document = json.loads(writer.json_path.read_text())
    assert writer.json_path.name == "exp3_results.json"
    assert document["settings"]["testbed"] == {"cores": 2, "instance_cpu": 1.0}
    assert document["slo"]["lag_trend_threshold_relative"] == 0.01
    assert document["environment"]["versions"]["python"]
    assert document["sub_experiments"] == []
    writer.record_sub_experiment(a_record())
    document = json.loads(writer.json_path.read_text())
    (entry,) = document["sub_experiments"]
    assert (entry["load"], entry["resources"], entry["outcome"], entry["lag_trend_slope"]) == (
        1000,
        1,
        "pass",
        6.0,
    )
    assert len(entry["repetitions"]) == 3


def test_rerecording_a_point_replaces_it(tmp_path):
    writer = make_writer(tmp_path)
    writer.record_sub_experiment(a_record(generator=Outcome.INVALID))
    writer.record_sub_experiment(a_record())
    (entry,) = json.loads(writer.json_path.read_text())["sub_experiments"]
    assert entry["outcome"] == "pass"


def test_secrets_are_never_written(tmp_path):
    settings = {
        "kafka": {
            "sasl.jaas.config": 'PlainLoginModule username="u" password="hunter2"',
            "bootstrap": "b:9092",
        },
        "Spark_Password": "hunter2",
        "api_key": "hunter2",
        "github_token": "hunter2",
        "nested": [{"client_secret": "hunter2"}],
        "remote": "https://user:hunter2@example.invalid/path",
        "warmup_s": 60,
    }
    writer = make_writer(tmp_path, settings=settings)
    text = writer.json_path.read_text()
    assert "hunter2" not in text
    saved = json.loads(text)["settings"]
    assert saved["kafka"] == {"sasl.jaas.config": REDACTED, "bootstrap": "b:9092"}
    assert saved["warmup_s"] == 60 and saved["remote"].endswith("@example.invalid/path")


def test_non_finite_settings_do_not_break_the_json(tmp_path):
    writer = make_writer(tmp_path, settings={"max_offsets_per_trigger": float("inf"), "n": 1})
    assert json.loads(writer.json_path.read_text())["settings"] == {"max_offsets_per_trigger": "inf", "n": 1}


def test_redaction_leaves_the_input_untouched():
    settings = {"token": "t", "plain": {"x": 1}}
    assert redact_secrets(settings) == {"token": REDACTED, "plain": {"x": 1}}
    assert settings == {"token": "t", "plain": {"x": 1}}


def test_demand_csv_distinguishes_none_and_unmeasured(tmp_path):
    writer = make_writer(tmp_path)
    result = DemandResult(
        demand={1000: 1, 2000: None, 4000: None},
        unmeasured=(3000,),
        skipped=(4000,),
        sub_experiments=(SubExperiment(1000, 1, Outcome.PASS), SubExperiment(3000, 1, Outcome.ERRORED)),
        strategy="linear+lower-bound",
        loads=(1000, 2000, 3000, 4000),
        resources=(1, 2),
    )
    path = writer.write_demand(result)
    assert path.name == "exp3_demand.csv"
    assert path.read_text() == "load,resources\n1000,1\n2000,none\n3000,unmeasured\n4000,none\n"
    assert read_results(tmp_path).demand == result


def test_an_at_most_demand_is_written_as_a_bound_and_read_back(tmp_path):
    writer = make_writer(tmp_path)
    result = DemandResult(
        demand={1000: 1, 2000: 2},
        at_most=(2000,),
        sub_experiments=(SubExperiment(1000, 1, Outcome.PASS), SubExperiment(2000, 2, Outcome.PASS)),
        strategy="baseline-guess+lower-bound",
        loads=(1000, 2000),
        resources=(1, 2),
    )
    assert writer.write_demand(result).read_text() == "load,resources\n1000,1\n2000,<=2\n"
    assert read_results(tmp_path).demand == result


def test_a_demand_above_the_instances_run_is_written_as_a_bound_and_read_back(tmp_path):
    writer = make_writer(tmp_path)
    result = DemandResult(
        demand={1000: 1, 2000: None},
        above={2000: 2},
        sub_experiments=(SubExperiment(1000, 1, Outcome.PASS), SubExperiment(2000, 2, Outcome.FAIL)),
        strategy="baseline-guess+lower-bound",
        loads=(1000, 2000),
        resources=(1, 2, 3),
    )
    assert writer.write_demand(result).read_text() == "load,resources\n1000,1\n2000,>2\n"
    assert read_results(tmp_path).demand == result


def test_a_demand_certified_from_below_is_written_as_a_bound_and_read_back(tmp_path):
    writer = make_writer(tmp_path)
    result = DemandResult(
        demand={1000: 1, 2000: 2},
        at_least=(1000, 2000),  # REF's side of a certified pull-request load: failed below, not run there
        sub_experiments=(SubExperiment(2000, 1, Outcome.FAIL),),
        strategy="baseline-guess+lower-bound",
        loads=(1000, 2000),
        resources=(1, 2),
    )
    assert writer.write_demand(result).read_text() == "load,resources\n1000,>=1\n2000,>=2\n"
    assert read_results(tmp_path).demand == result


def test_capacity_csv_and_round_trip(tmp_path):
    writer = make_writer(tmp_path, metric=Metric.CAPACITY)
    result = CapacityResult(
        capacity={1: 2000, 2: None},
        sub_experiments=(SubExperiment(2000, 1, Outcome.PASS),),
        strategy="binary",
        loads=(1000, 2000),
        resources=(1, 2),
    )
    assert writer.write_capacity(result).read_text() == "resource,loads\n1,2000\n2,none\n"
    back = read_results(tmp_path)
    assert back.capacity == result and back.metric is Metric.CAPACITY and back.demand is None


def test_results_read_back_into_the_same_dataclasses(tmp_path):
    writer = make_writer(tmp_path)
    record = a_record()
    t = T0 + np.arange(0, 60.0)
    for rep in range(3):
        writer.write_series(1000, 1, SERIES_LAG, rep, TimeSeries.of(t, t - T0))
    writer.write_series(1000, 1, SERIES_GENERATOR_RATE, 0, TimeSeries.of(t, np.full(t.size, 1000.0)))
    writer.record_sub_experiment(record)
    back = read_results(tmp_path)
    assert back.experiment_id == "3" and back.metric is Metric.DEMAND
    assert back.sub_experiments == (record,)
    assert back.slo_settings == SloSettings(
        warmup_s=30, lag_trend_threshold=SlopeThreshold(relative_to_load=0.01)
    )
    assert (back.loads, back.resources) == ((1000, 2000), (1, 2))
    assert back.repetitions_of(1000, 1) == (0, 1, 2)
    assert back.points_with_lag() == ((1000, 1),)
    assert back.series_path(1000, 1, SERIES_GENERATOR_RATE, 0).name == "exp3_1000_1_generator-rate_0.csv"
    assert RawSeriesKey(1000, 1, SERIES_GENERATOR_RATE, 1) not in back.raw_series


def test_reader_drops_a_row_cut_short_by_a_crash_and_reads_theodolite_group_column(tmp_path):
    cut = tmp_path / "exp1_10_1_lag-trend_0.csv"
    cut.write_text("timestamp,value\n1700000000,5\n1700000001,6\n17000000")
    assert list(read_series(cut).values) == [5.0, 6.0]
    theodolite = tmp_path / "exp1_10_2_lag-trend_0.csv"
    theodolite.write_text("group,timestamp,value\ntheodolite-uc1,1700000000,5\ntheodolite-uc1,1700000005,7\n")
    assert list(read_series(theodolite).timestamps_s) == [T0, T0 + 5]


@pytest.mark.parametrize(
    ("content", "message"),
    [("", "is empty"), ("time,lag\n1,2\n", "lacks column"), ("timestamp,value\n1,abc\n2,3\n", "non-numeric")],
)
def test_unreadable_series_raise_results_error(tmp_path, content, message):
    path = tmp_path / "exp1_10_1_lag-trend_0.csv"
    path.write_text(content)
    with pytest.raises(ResultsError, match=message):
        read_series(path)


def test_reader_errors_name_the_problem(tmp_path):
    with pytest.raises(ResultsError, match="does not exist"):
        read_results(tmp_path / "missing")
    with pytest.raises(ResultsError, match="no results in"):
        read_results(tmp_path)
    (tmp_path / "exp1_10_1_lag-trend_0.csv").write_text("timestamp,value\n")
    (tmp_path / "exp2_10_1_lag-trend_0.csv").write_text("timestamp,value\n")
    with pytest.raises(ResultsError, match="holds experiments 1, 2: choose one"):
        read_results(tmp_path)
    assert read_results(tmp_path, 2).experiment_id == "2"
    with pytest.raises(ResultsError, match="no results of experiment '9'"):
        read_results(tmp_path, 9)
    (tmp_path / "exp2_results.json").write_text("{not json")
    with pytest.raises(ResultsError, match="not valid JSON"):
        read_results(tmp_path, 2)


def test_results_without_json_still_read_with_default_settings(tmp_path):
    (tmp_path / "exp5_10_1_lag-trend_0.csv").write_text("timestamp,value\n1,2\n2,3\n")
    back = read_results(tmp_path)
    assert back.metric is None and back.slo_settings == SloSettings() and back.sub_experiments == ()


def test_a_capacity_measured_again_is_kept_beside_the_first_and_a_rerun_replaces_its_own(tmp_path):
    writer = make_writer(tmp_path)
    entry = {"instances": 1, "load": 2000, "offered_rate": 2500.0, "batch_records": 4000, "status": "certain"}
    writer.record_capacity_measurement({**entry, "attempt": 0})
    writer.record_capacity_measurement({**entry, "attempt": 1, "offered_rate": 7500.0})
    writer.record_capacity_measurement({**entry, "instances": 2})  # an entry of an older file: no attempt
    writer.record_capacity_measurement({**entry, "attempt": 1, "offered_rate": 9000.0})  # re-run
    kept = read_results(tmp_path).capacity_measurements
    assert [(m["instances"], m.get("attempt", 0), m["offered_rate"]) for m in kept] == [
        (1, 0, 2500.0),
        (1, 1, 9000.0),
        (2, 0, 2500.0),
    ]
