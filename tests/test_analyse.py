"""`python -m pytest_theodolite analyse`: verdicts and demand/capacity recomputed from raw files alone."""

import io
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pytest_theodolite.cli.analyse import main, reanalyse
from pytest_theodolite.core.estimators import SlopeThreshold, TimeSeries
from pytest_theodolite.core.evaluation import SloSettings, combine_verdicts, evaluate_repetition
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.records import (
    SERIES_GENERATOR_RATE,
    SERIES_LAG,
    RepetitionRecord,
    SubExperimentRecord,
)
from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.core.search import IncrementalSearch, Step, Strategy, search_demand
from pytest_theodolite.store.results import ResultsWriter, read_results

T0 = 1_700_000_000.0
REPO = Path(__file__).resolve().parents[1]

# Per (load, resources): the lag slope (records/s) of the synthetic run, and the rate the generator reaches.
SLOPE = {(100, 1): 50.0, (200, 1): 2500.0, (200, 2): 300.0, (300, 2): 1500.0, (400, 2): 5000.0}
ACHIEVED = {(300, 2): 250.0}  # load 300 on 2 resources: the generator fell behind (< 98 % of 300)


def write_experiment(
    results_dir: Path,
    floors: dict[int, int] | None = None,
    ceilings: dict[int, int] | None = None,
    certified: dict[int, int] | None = None,
) -> ResultsWriter:
    """A linear demand search run through ResultsWriter exactly as the runner would, on synthetic series; with
    `floors` (load -> a reference demand) a gate's search that stops at a pass there, with `ceilings` one that
    stops at a failure there, with `certified` REF's side of a certified pull-request load (run one below)."""
    settings = SloSettings(warmup_s=20)
    writer = ResultsWriter(
        results_dir,
        4,
        metric=Metric.DEMAND,
        slo_settings=settings,
        settings={"strategy": "linear", "duration_s": 120, "kafka_password": "hunter2"},
        loads=[100, 200, 300, 400],
        resources=[1, 2],
    )
    t = T0 + np.arange(0, 120, 2.0)

    def oracle(load: int, resources: int) -> SubExperimentRecord:
        repetitions = []
        for rep in range(3):
            noise = np.random.default_rng(rep).normal(0, 50, t.size)
            lag = TimeSeries.of(t, 1000 + SLOPE[(load, resources)] * (t - T0) + noise)
            rate = TimeSeries.of(t, np.full(t.size, ACHIEVED.get((load, resources), float(load))))
            with writer.open_series(load, resources, SERIES_LAG, rep) as out:
                for ts, value in zip(lag.timestamps_s, lag.values, strict=True):
                    out.append(ts, value)
            writer.write_series(load, resources, SERIES_GENERATOR_RATE, rep, rate)
            verdicts = evaluate_repetition(settings, lag=lag, target_rate=float(load), generator_rate=rate)
            repetitions.append(RepetitionRecord(rep, verdicts))
        record = SubExperimentRecord.from_repetitions(load, resources, float(load), repetitions)
        writer.record_sub_experiment(record)
        return record

    if floors is None and ceilings is None and certified is None:
        writer.write_demand(
            search_demand(oracle, [100, 200, 300, 400], [1, 2], Strategy.LINEAR, lower_bound=True)
        )
        return writer
    search = IncrementalSearch(Metric.DEMAND, Strategy.BASELINE_GUESS, True, (1, 2))
    for load, floor in (floors or {}).items():
        search.search(load, oracle, guess=floor, floor=floor)
    for load, ceiling in (ceilings or {}).items():
        search.search(load, oracle, guess=ceiling, ceiling=ceiling)
    for load, bound in (certified or {}).items():
        below = oracle(load, bound - 1).as_sub_experiment()
        search.keep(Step(load, bound, "at-least", (below,), (1, 2)))
    writer.write_demand(search.result(tuple({**(floors or {}), **(ceilings or {}), **(certified or {})})))
    return writer


@pytest.fixture
def results_dir(tmp_path):
    write_experiment(tmp_path)
    return tmp_path


def verdict_rows(out):
    """The verdict table's rows by (load, resources); its 12 columns tell it apart from the demand table."""
    rows = [line.split() for line in out.splitlines() if line[:1].isdigit()]
    return {tuple(row[:2]): row for row in rows if len(row) == 12}


def run_main(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_written_experiment_has_the_expected_online_result(results_dir):
    recorded = read_results(results_dir)
    # LowerBound starts 300 at 2 resources, where the generator fell behind: 300 is unmeasured. 400 runs,
    # from the last measured demand (2), and fails: "none".
    assert [recorded.demand.status(load) for load in (100, 200, 300, 400)] == ["1", "2", "unmeasured", "none"]
    assert [(s.load, s.resources, s.outcome) for s in recorded.demand.sub_experiments] == [
        (100, 1, Outcome.PASS),
        (200, 1, Outcome.FAIL),
        (200, 2, Outcome.PASS),
        (300, 2, Outcome.INVALID),
        (400, 2, Outcome.FAIL),
    ]
    assert "hunter2" not in (results_dir / "exp4_results.json").read_text()


def test_reanalysis_reproduces_the_recorded_verdicts(results_dir):
    recorded = read_results(results_dir)
    analysis = reanalyse(recorded, recorded.slo_settings)
    assert [(r.load, r.resources, r.outcome) for r in analysis.sub_experiments] == [
        (r.load, r.resources, r.outcome)
        for r in sorted(recorded.sub_experiments, key=lambda r: (r.load, r.resources))
    ]
    assert dict(analysis.function.demand) == {100: 1, 200: 2, 400: None}
    assert analysis.function.unmeasured == (300,)
    for fresh in analysis.sub_experiments:
        old = next(
            r for r in recorded.sub_experiments if (r.load, r.resources) == (fresh.load, fresh.resources)
        )
        assert fresh.lag_trend_slope == pytest.approx(old.lag_trend_slope, rel=1e-9)


def test_main_prints_the_table_and_the_demand(results_dir):
    code, out, err = run_main(["analyse", str(results_dir)])
    assert (code, err) == (0, "")
    rows = verdict_rows(out)
    assert rows[("200", "1")][-1] == "FAIL" and rows[("200", "2")][-1] == "PASS"
    assert ("300", "1") not in rows  # never run: LowerBound started load 300 at 2 resources
    assert rows[("300", "2")][-2:] == ["invalid", "INVALID"]
    assert "load  demand (resources)" in out
    assert "300   unmeasured" in out and "200   2" in out
    assert "generator achieved only 250" in out


def test_a_demand_the_search_bounded_stays_a_bound_unless_rejudging_moves_it(tmp_path):
    write_experiment(tmp_path, floors={200: 2})  # 200 passes at 2: 1 is not run
    recorded = read_results(tmp_path)
    assert recorded.demand.at_most == (200,)
    assert reanalyse(recorded, recorded.slo_settings).function.status(200) == "<=2"
    code, out, _ = run_main(["analyse", str(tmp_path)])
    assert code == 0 and "200   <=2" in out
    # a stricter threshold fails 200 at 2 (slope 300): no pass left, so no bound either
    strict = reanalyse(recorded, replace(recorded.slo_settings, lag_trend_threshold=SlopeThreshold(100.0)))
    assert strict.function.status(200) == "none" and strict.function.at_most == ()


def test_a_demand_the_search_left_above_its_failure_stays_above_unless_rejudging_passes_it(tmp_path):
    write_experiment(tmp_path, ceilings={200: 1})  # 200 fails at 1 (slope 2500): 2 is not run
    recorded = read_results(tmp_path)
    assert recorded.demand.above == {200: 1}
    assert reanalyse(recorded, recorded.slo_settings).function.status(200) == ">1"
    code, out, _ = run_main(["analyse", str(tmp_path)])
    assert code == 0 and "200   >1" in out
    # a laxer threshold passes 200 at 1: a demand, no bound
    lax = reanalyse(recorded, replace(recorded.slo_settings, lag_trend_threshold=SlopeThreshold(3000.0)))
    assert lax.function.status(200) == "1" and lax.function.above == {}


def test_a_demand_certified_from_below_stays_a_bound_unless_rejudging_passes_it(tmp_path):
    write_experiment(
        tmp_path, certified={200: 2}
    )  # REF failed at 1 (slope 2500) beside a change passing at 2
    recorded = read_results(tmp_path)
    assert recorded.demand.at_least == (200,)
    assert reanalyse(recorded, recorded.slo_settings).function.status(200) == ">=2"
    code, out, _ = run_main(["analyse", str(tmp_path)])
    assert code == 0 and "200   >=2" in out
    lax = reanalyse(recorded, replace(recorded.slo_settings, lag_trend_threshold=SlopeThreshold(3000.0)))
    assert lax.function.status(200) == "1" and lax.function.at_least == ()


def test_a_stricter_threshold_changes_verdicts_and_demand(results_dir):
    code, out, _ = run_main(["analyse", str(results_dir), "--threshold", "100"])
    assert code == 0
    # Only load 100 (slope 50) passes below 100 records/s; 200 has no passing resource now.
    assert "100   1" in out and "200   none" in out
    assert "threshold 100 records/s" in out


def test_relative_threshold_warmup_and_method_are_applied(results_dir):
    code, out, _ = run_main(
        ["analyse", str(results_dir), "--threshold-relative", "2", "--warmup", "0", "--method", "theil-sen"]
    )
    assert code == 0
    assert "warm-up 0 s, lag-trend threshold 2 x load, slope method theil-sen" in out
    # 2 x 200 = 400 records/s: (200, 1) at 2500 fails, (200, 2) at 300 passes.
    rows = verdict_rows(out)
    assert rows[("200", "1")][-1] == "FAIL" and rows[("200", "2")][-1] == "PASS"
    assert rows[("200", "2")][5] == "400.0"


def test_too_long_warmup_makes_every_point_errored_not_passed(results_dir):
    code, out, _ = run_main(["analyse", str(results_dir), "--warmup", "500"])
    assert code == 0
    assert "PASS" not in out
    assert "run longer or shorten the warm-up" in out


def test_bad_input_exits_2_with_a_clear_message(tmp_path):
    code, out, err = run_main(["analyse", str(tmp_path / "missing")])
    assert (code, out) == (2, "") and "does not exist" in err
    code, _, err = run_main(["analyse", str(tmp_path)])
    assert code == 2 and "no results in" in err
    (tmp_path / "exp1_results.json").write_text(json.dumps({"metric": "demand"}))
    code, _, err = run_main(["analyse", str(tmp_path)])
    assert code == 2 and "no raw lag series" in err
    code, _, err = run_main(["analyse", str(tmp_path), "--warmup", "-1"])
    assert code == 2 and "--warmup must be >= 0" in err


def test_conflicting_threshold_options_are_rejected_by_argparse(results_dir):
    with pytest.raises(SystemExit) as exit_info:
        run_main(["analyse", str(results_dir), "--threshold", "1", "--threshold-relative", "0.1"])
    assert exit_info.value.code == 2


def test_module_runs_as_a_subprocess(results_dir):
    done = subprocess.run(
        [sys.executable, "-m", "pytest_theodolite", "analyse", str(results_dir), "--threshold", "2000"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "experiment 4: demand" in done.stdout and "300   unmeasured" in done.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "pytest_theodolite", "analyse", str(results_dir / "nope")],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_capacity_metric_is_taken_from_the_option(results_dir):
    code, out, _ = run_main(["analyse", str(results_dir), "--metric", "capacity"])
    assert code == 0 and "resources  capacity (load)" in out
    # 1 resource: 100 passes, 200 fails; 2 resources: 300 is INVALID there, so unmeasured.
    assert "1          100" in out and "2          unmeasured" in out
    assert Outcome.INVALID.value in out


def write_protocol_experiment(results_dir: Path) -> ResultsWriter:
    """Two sub-experiments as the adaptive protocol records them: one settled after 30 s (a start backlog being
    worked off before that) and measured with batch ids and commit times; one that never settled."""
    from pytest_theodolite.core.records import SERIES_BATCH_END, SERIES_BATCH_ID

    settings = SloSettings(warmup_s=0, slope_method="batch-aligned")
    writer = ResultsWriter(
        results_dir, "p", metric=Metric.DEMAND, slo_settings=settings, loads=[1000], resources=[1, 2]
    )
    t = T0 + np.arange(0.0, 90.0)
    # lag: a backlog of 30 000 worked off in the first 30 s, then a 2 s saw-tooth around 2 000
    noise = np.random.default_rng(7).normal(0, 20, t.size)
    lag = np.where(t - T0 < 30, 30_000 - 1000 * (t - T0), 2000 + 1000 * ((t - T0) % 2)) + noise
    ids = (t - T0) // 2
    ends = T0 + 2 * ids - 0.0
    for resources, failure in ((2, None), (1, "no steady state within the 90 s warm-up bound: ...")):
        for name, values in ((SERIES_LAG, lag), (SERIES_BATCH_ID, ids), (SERIES_BATCH_END, ends)):
            writer.write_series(1000, resources, name, 0, TimeSeries.of(t, values))
        protocol = {
            "primed_s": 5.0,
            "warmup_s": 30.0 if failure is None else None,
            "measured_s": 60.0,
            "stop": "certain" if failure is None else "not-settled",
            "failure": failure,
        }
        verdicts = evaluate_repetition(
            settings,
            lag=TimeSeries.of(t, lag),
            target_rate=1000.0,
            batch_ids=TimeSeries.of(t, ids),
            batch_ends=TimeSeries.of(t, ends),
            warmup_s=protocol["warmup_s"],
            not_settled=failure,
        )
        writer.record_sub_experiment(
            SubExperimentRecord.from_repetitions(
                1000, resources, 1000.0, [RepetitionRecord(0, verdicts, {}, protocol)]
            )
        )
    return writer


@pytest.mark.parametrize(
    ("recorded", "expected"),
    [
        # a run at a share: its bound stretched by it
        ({"offered_share": 0.5, "bounds_share": 0.5}, Outcome.PASS),
        # from 2026-11-27 to the stretch of both runs, a run whose pass was judged at the share kept its bound
        ({"offered_share": 0.5, "bounds_share": 1.0}, Outcome.FAIL),
        # results from before 2026-11-27 stretched the bound at every share and did not say so
        ({"offered_share": 0.5}, Outcome.PASS),
    ],
)
def test_analyse_judges_a_repetition_offered_a_share_of_the_rate_at_that_rate_and_the_bounds_it_ran_with(
    tmp_path, recorded, expected
):
    settings = SloSettings(warmup_s=0, max_batch_duration_s=2.0)
    writer = ResultsWriter(
        tmp_path, "s", metric=Metric.DEMAND, slo_settings=settings, loads=[1000], resources=[1]
    )
    t = T0 + np.arange(0.0, 30.0)
    lag = TimeSeries.of(t, np.full(t.size, 500.0))
    batches = TimeSeries.of(t, np.full(t.size, 3000.0))  # 3 s: beyond the 2 s bound, within 2 / 0.5
    writer.write_series(1000, 1, SERIES_LAG, 0, lag)
    writer.write_series(1000, 1, "batch-duration", 0, batches)
    protocol = {"offered_rate": 500.0, **recorded}
    verdicts = evaluate_repetition(
        settings.dilated(recorded.get("bounds_share", 0.5)),
        lag=lag,
        target_rate=500.0,
        batch_duration=batches,
        warmup_s=0.0,
    )
    assert combine_verdicts(verdicts) is expected
    writer.record_sub_experiment(
        SubExperimentRecord.from_repetitions(1000, 1, 500.0, [RepetitionRecord(0, verdicts, {}, protocol)])
    )
    again = reanalyse(read_results(tmp_path), settings).sub_experiments[0]
    assert again.outcome is expected
    assert [v.name for v in again.verdicts] == [v.name for v in verdicts]


def test_analyse_keeps_a_fail_beyond_the_batch_bound_with_its_reason(tmp_path):
    settings = SloSettings(warmup_s=0, max_batch_duration_s=9.0)
    writer = ResultsWriter(
        tmp_path, "b", metric=Metric.DEMAND, slo_settings=settings, loads=[1000], resources=[1]
    )
    t = T0 + np.arange(0.0, 70.0)
    lag = TimeSeries.of(t, 1000 * (t - T0))
    batches = TimeSeries.of(t, np.where(t - T0 < 40, 2000.0, 16000.0))  # sampled so far: a 2 s median
    writer.write_series(1000, 1, SERIES_LAG, 0, lag)
    writer.write_series(1000, 1, "batch-duration", 0, batches)
    reason = (
        "micro-batches beyond the 9 s batch bound for good: under the CPU limit they took 13.4, 16.5, 18.6 s"
    )
    protocol = {"primed_s": 10.0, "warmup_s": None, "stop": "beyond-batch-bound", "failure": reason}
    verdicts = evaluate_repetition(
        settings,
        lag=lag,
        target_rate=1000.0,
        batch_duration=batches,
        not_settled=reason,
        beyond_batch_bound=reason,
    )
    writer.record_sub_experiment(
        SubExperimentRecord.from_repetitions(1000, 1, 1000.0, [RepetitionRecord(0, verdicts, {}, protocol)])
    )
    again = reanalyse(read_results(tmp_path), settings).sub_experiments[0]
    assert again.outcome is Outcome.FAIL
    assert next(v for v in again.verdicts if v.name == "batch-duration").detail == reason
    assert again.repetitions[0].protocol["stop"] == "beyond-batch-bound"


def test_analyse_cuts_each_repetition_at_its_recorded_warmup_and_keeps_a_not_settled_fail(tmp_path):
    write_protocol_experiment(tmp_path)
    analysis = reanalyse(read_results(tmp_path), read_results(tmp_path).slo_settings)
    records = {r.resources: r for r in analysis.sub_experiments}
    settled = next(v for v in records[2].verdicts if v.name == "lag-trend")
    assert records[2].outcome is Outcome.PASS and abs(settled.value) < 1 and settled.low <= 0 <= settled.high
    assert records[2].repetitions[0].protocol["stop"] == "certain"
    assert records[1].outcome is Outcome.FAIL
    assert records[1].verdicts[0].detail.startswith("no steady state within the 90 s warm-up bound")
    # one fixed warm-up for all re-fits the backlog too, and a not-settled run is fitted like any other
    refit = reanalyse(
        read_results(tmp_path), SloSettings(warmup_s=0, slope_method="batch-aligned"), fixed_warmup=True
    )
    assert all(
        next(v for v in r.verdicts if v.name == "lag-trend").value < -100 for r in refit.sub_experiments
    )


def test_analyse_prints_interval_warmup_and_stop(tmp_path):
    write_protocol_experiment(tmp_path)
    code, out, err = run_main(["analyse", str(tmp_path)])
    assert (code, err) == (0, "")
    rows = verdict_rows(out)
    settled, unsettled = rows[("1000", "2")], rows[("1000", "1")]
    low, high = (float(x) for x in settled[4].split(".."))
    assert low <= float(settled[3]) <= high
    assert settled[5:] == ["2000.0", "30s", "certain", "-", "-", "-", "PASS"]  # no CPU series: no figure
    assert unsettled[3:] == ["-", "-", "2000.0", "-", "not-settled", "-", "-", "-", "FAIL"]


def test_raw_series_of_an_unfinished_sub_experiment_are_errored_not_judged(results_dir):
    # Ctrl-C or a crash during (500, 1): its lag was sampled, but it never reached the results JSON
    rows = "".join(f"{{series=lag-trend}},{T0 + second},{10.0 * second}\n" for second in range(40))
    # a clear, "judgeable" trend that it must not be judged on
    (results_dir / "exp4_500_1_lag-trend_0.csv").write_text("labels,timestamp,value\n" + rows)
    code, out, _ = run_main(["analyse", str(results_dir)])
    assert code == 0
    rows = verdict_rows(out)
    assert rows[("500", "1")][-1] == "ERRORED", out
    assert (
        "500/1: lag-trend errored: repetition 0: unfinished: raw series without a record in the results JSON"
        in out
    )
    assert rows[("200", "2")][-1] == "PASS"  # the finished ones are read back as before
    assert "500   unmeasured" in out


def test_analyse_recomputes_the_cpu_per_record_from_the_raw_series(tmp_path):
    from pytest_theodolite.core.cost import SERIES_INPUT_RECORDS, SERIES_INSTANCE_CPU

    writer = write_protocol_experiment(tmp_path)
    # the settled run's instances spent 50 us per record on 1 000 records/s while it was measured
    t = T0 + np.arange(30.0, 90.0)
    cpu = 7.0 + 0.05 * (t - t[0]) * (1 + 0.02 * np.random.default_rng(3).standard_normal(t.size))
    writer.write_series(1000, 2, SERIES_INSTANCE_CPU, 0, TimeSeries.of(t, cpu))
    writer.write_series(1000, 2, SERIES_INPUT_RECORDS, 0, TimeSeries.of(t, 1000.0 * (t - T0)))
    analysis = reanalyse(read_results(tmp_path), read_results(tmp_path).slo_settings)
    settled = next(r for r in analysis.sub_experiments if r.resources == 2)
    recomputed = settled.repetitions[0].cost
    assert recomputed["cpu_us_per_record"] == pytest.approx(50.0, rel=0.05)
    assert recomputed["low"] < recomputed["cpu_us_per_record"] < recomputed["high"]
    code, out, _ = run_main(["analyse", str(tmp_path)])
    assert code == 0
    row = verdict_rows(out)[("1000", "2")]
    assert float(row[8]) == pytest.approx(50.0, rel=0.05)
    low, high = (float(x) for x in row[9].split(".."))
    assert low < float(row[8]) < high


def test_analyse_takes_the_cpu_per_record_from_the_measurements_start_not_the_cpu_limit(tmp_path):
    from pytest_theodolite.core.cost import SERIES_INPUT_RECORDS, SERIES_INSTANCE_CPU

    writer = write_protocol_experiment(tmp_path)
    # sampled from the CPU limit (10 s in): 200 us per record while the batches settled, 50 us once
    # measured (the warm-up recorded ended at 30 s); the run that never settled was sampled too
    t = T0 + np.arange(10.0, 90.0)
    cpu = 7.0 + np.where(t - T0 < 30, 0.2 * (t - T0 - 10), 4.0 + 0.05 * (t - T0 - 30))
    for resources in (1, 2):
        writer.write_series(1000, resources, SERIES_INSTANCE_CPU, 0, TimeSeries.of(t, cpu))
        writer.write_series(1000, resources, SERIES_INPUT_RECORDS, 0, TimeSeries.of(t, 1000.0 * (t - T0)))
    analysis = reanalyse(read_results(tmp_path), read_results(tmp_path).slo_settings)
    by_resources = {r.resources: r.repetitions[0] for r in analysis.sub_experiments}
    assert by_resources[2].cost["cpu_us_per_record"] == pytest.approx(50.0)
    assert by_resources[1].cost == {}  # it never settled: nothing measured, no figure


def test_analyse_judges_the_late_records_from_their_raw_series(tmp_path):
    """The late-rows series is re-read like the lag: a recorded late-records bound is applied again offline."""
    from pytest_theodolite.core.records import SERIES_LATE_ROWS

    settings = SloSettings(warmup_s=20, max_late_rate=1.0)
    writer = ResultsWriter(
        tmp_path, "l", metric=Metric.DEMAND, slo_settings=settings, loads=[100], resources=[1, 2]
    )
    t = T0 + np.arange(0.0, 60.0)
    lag = TimeSeries.of(t, np.full(t.size, 500.0))
    # on 1 instance 200 records were dropped as late in the 39 s after the warm-up, on 2 none
    for resources, dropped in ((1, 200), (2, 0)):
        late = TimeSeries.of([t[10], t[40]], [5000, dropped])  # the 5000 fell in the warm-up
        writer.write_series(100, resources, SERIES_LAG, 0, lag)
        writer.write_series(100, resources, SERIES_LATE_ROWS, 0, late)
        verdicts = evaluate_repetition(settings, lag=lag, target_rate=100.0, late_rows=late)
        writer.record_sub_experiment(
            SubExperimentRecord.from_repetitions(100, resources, 100.0, [RepetitionRecord(0, verdicts)])
        )
    results = read_results(tmp_path)
    assert results.slo_settings.max_late_rate == 1.0
    records = {r.resources: r for r in reanalyse(results, results.slo_settings).sub_experiments}
    late_verdict = {r: next(v for v in records[r].verdicts if v.name == "late-records") for r in records}
    assert late_verdict[1].outcome is Outcome.FAIL and late_verdict[1].value == pytest.approx(200 / 39)
    assert late_verdict[2].outcome is Outcome.PASS and records[2].outcome is Outcome.PASS
    # a looser bound given offline passes both
    looser = reanalyse(results, SloSettings(warmup_s=20, max_late_rate=10.0))
    assert all(r.outcome is Outcome.PASS for r in looser.sub_experiments)
