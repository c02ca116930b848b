"""Pure-function tests of the SLO checks on synthetic series (no broker, no Spark)."""

import dataclasses
import math

import numpy as np
import pytest

from pytest_theodolite.core.estimators import SlopeThreshold, TimeSeries, lag_trend_slope
from pytest_theodolite.core.evaluation import (
    SloSettings,
    combine_outcomes,
    combine_repetitions,
    combine_verdicts,
    evaluate_repetition,
    median_trend_verdict,
)
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.slo import (
    GENERATOR_RATE,
    LAG_TREND,
    LATENCY_TREND,
    MALFORMED_RECORDS,
    SloVerdict,
    check_generator_rate,
    check_lag_trend,
    check_latency_trend,
    check_malformed_records,
)

T0 = 1_700_000_000.0  # epoch seconds: large timestamps check the fit keeps its precision


def noisy_lag(slope: float, *, seconds: int = 300, step: float = 5.0, noise: float = 3000.0, seed: int = 1):
    rng = np.random.default_rng(seed)
    t = T0 + np.arange(0, seconds + step, step)
    lag = 50_000 + slope * (t - T0) + rng.normal(0, noise, t.size)
    return t, lag


# ---- lag_trend_slope ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["ols", "theil-sen"])
@pytest.mark.parametrize("true_slope", [0.0, 250.0, 5000.0, -1200.0])
def test_slope_recovers_known_trend_within_noise(method, true_slope):
    t, lag = noisy_lag(true_slope)
    estimate = lag_trend_slope(t, lag, warmup_s=60, method=method)
    # 49 samples with noise sd 3000 over 240 s: the standard error is ~6 records/s. A 50 records/s tolerance
    # is ~8 sigma (deterministic seed anyway) yet small against the slopes, so a wrong estimator cannot pass.
    assert abs(estimate - true_slope) < 50


def test_ols_matches_numpy_polyfit_exactly():
    t, lag = noisy_lag(777.0, seed=7)
    keep = (t - t[0]) >= 60
    expected = np.polyfit(t[keep] - T0, lag[keep], 1)[0]
    assert lag_trend_slope(t, lag, 60) == pytest.approx(expected, rel=1e-9)


def test_flat_series_has_zero_slope():
    t = T0 + np.arange(0, 120, 1.0)
    assert lag_trend_slope(t, np.full(t.size, 1234.0), 10) == pytest.approx(0.0, abs=1e-9)
    assert lag_trend_slope(t, np.full(t.size, 1234.0), 10, method="theil-sen") == 0.0


def test_warmup_drops_the_initial_transient():
    # A steep start-up ramp during the first 60 s, flat afterwards: only the warm-up hides the ramp.
    t = T0 + np.arange(0, 301, 5.0)
    lag = np.where(t - T0 < 60, 100_000 * (t - T0), 6_000_000.0)
    assert lag_trend_slope(t, lag, warmup_s=60) == pytest.approx(0.0, abs=1e-6)
    assert lag_trend_slope(t, lag, warmup_s=0) > 2000


def test_warmup_boundary_is_inclusive_like_theodolite():
    # Samples at exactly first + warm-up are kept: 2 samples (60 s and 65 s) remain, so a slope exists.
    t = T0 + np.array([0.0, 30.0, 60.0, 65.0])
    assert lag_trend_slope(t, [0, 0, 100, 600], warmup_s=60) == pytest.approx(100.0)


def test_theil_sen_resists_an_outlier_that_misleads_ols():
    t = T0 + np.arange(0, 200, 5.0)
    lag = 1000.0 + 10.0 * (t - T0)
    lag[-1] += 5_000_000  # one wild sample at the end (e.g. a monitor glitch)
    assert lag_trend_slope(t, lag, 0, method="theil-sen") == pytest.approx(10.0)
    assert lag_trend_slope(t, lag, 0, method="ols") > 1000


def test_unsorted_samples_give_the_same_slope():
    t, lag = noisy_lag(300.0)
    order = np.random.default_rng(3).permutation(t.size)
    assert lag_trend_slope(t[order], lag[order], 60) == pytest.approx(lag_trend_slope(t, lag, 60))


@pytest.mark.parametrize(
    ("timestamps", "values", "warmup", "message"),
    [
        ([], [], 60, "empty"),
        ([T0, T0 + 70], [1, 2], 60, "only 1 sample after a 60 s warm-up"),
        ([T0, T0 + 10], [1, 2], 60, "no sample after a 60 s warm-up"),
        ([T0, T0, T0], [1, 2, 3], 0, "share one timestamp"),
        ([T0, T0 + 1], [1], 0, "2 timestamps but 1 values"),
        ([T0, T0 + 1, T0 + 2], [1, float("nan"), 3], 0, "not a finite number"),
        ([T0, T0 + 1], [1, 2], -5, "warm-up must be"),
    ],
)
def test_unusable_series_raise_a_clear_error(timestamps, values, warmup, message):
    with pytest.raises(ValueError, match=message):
        lag_trend_slope(timestamps, values, warmup)


def test_too_short_error_says_how_to_fix_it():
    with pytest.raises(ValueError, match="run longer or shorten the warm-up"):
        lag_trend_slope([T0, T0 + 61], [0, 5], 60)


def test_unknown_method_is_rejected():
    with pytest.raises(ValueError, match="unknown slope method 'median'"):
        lag_trend_slope([T0, T0 + 1], [0, 1], 0, method="median")


# ---- lag-trend SLO -----------------------------------------------------------------------------------------


def test_lag_trend_passes_below_and_fails_above_the_default_threshold():
    flat = TimeSeries.of(*noisy_lag(100.0))
    growing = TimeSeries.of(*noisy_lag(4000.0))
    passed = check_lag_trend(flat)
    failed = check_lag_trend(growing)
    assert (passed.outcome, passed.threshold, passed.name) == (Outcome.PASS, 2000.0, LAG_TREND)
    assert failed.outcome is Outcome.FAIL
    assert failed.value == pytest.approx(4000.0, abs=50)
    assert ">=" in failed.detail


def test_relative_threshold_scales_with_the_load():
    series = TimeSeries.of(*noisy_lag(500.0, noise=100.0))
    threshold = SlopeThreshold(relative_to_load=0.01)
    # 1 % of 100k records/s = 1000 > 500: pass; 1 % of 10k = 100 < 500: fail.
    assert check_lag_trend(series, threshold=threshold, target_rate=100_000).outcome is Outcome.PASS
    verdict = check_lag_trend(series, threshold=threshold, target_rate=10_000)
    assert (verdict.outcome, verdict.threshold) == (Outcome.FAIL, pytest.approx(100.0))


def test_a_gates_default_threshold_fails_a_job_falling_behind_a_small_load():
    """A gate's default threshold scales with its load: an absolute 2 000 records/s could never fail a job at a
    load of 2 000 records/s or less, however far behind it fell."""
    from pytest_theodolite.engine.markers import GATE_DEFAULTS, parse_threshold

    default = parse_threshold(GATE_DEFAULTS["threshold"])
    falling_behind = TimeSeries.of(*noisy_lag(300.0, noise=20.0))  # keeps 700 of 1 000 records/s
    keeping_up = TimeSeries.of(*noisy_lag(0.0, noise=20.0))
    assert check_lag_trend(falling_behind, threshold=default, target_rate=1_000).outcome is Outcome.FAIL
    assert check_lag_trend(keeping_up, threshold=default, target_rate=1_000).outcome is Outcome.PASS


def test_slope_equal_to_threshold_fails_because_pass_needs_strictly_below():
    series = TimeSeries.of(T0 + np.arange(0, 100.0), 2000.0 * np.arange(0, 100.0))
    assert check_lag_trend(series, warmup_s=0).outcome is Outcome.FAIL


def test_relative_threshold_without_target_rate_is_a_caller_error():
    with pytest.raises(ValueError, match="needs the target rate"):
        check_lag_trend(TimeSeries.of(*noisy_lag(0)), threshold=SlopeThreshold(relative_to_load=0.01))


@pytest.mark.parametrize(
    "kwargs", [{}, {"absolute": 1.0, "relative_to_load": 0.1}, {"relative_to_load": -1.0}]
)
def test_slope_threshold_needs_exactly_one_valid_form(kwargs):
    with pytest.raises(ValueError):
        SlopeThreshold(**kwargs)


def test_too_short_lag_series_is_errored_not_passed():
    verdict = check_lag_trend(TimeSeries.of([T0], [0.0]), warmup_s=60)
    assert verdict.outcome is Outcome.ERRORED
    assert "run longer or shorten the warm-up" in verdict.detail


# ---- generator validity ------------------------------------------------------------------------------------


def test_generator_at_target_rate_is_valid():
    t = T0 + np.arange(0, 120.0)
    verdict = check_generator_rate(TimeSeries.of(t, np.full(t.size, 9_900.0)), 10_000, warmup_s=30)
    assert (verdict.outcome, verdict.value, verdict.threshold) == (Outcome.PASS, 9_900.0, 9_800.0)


def test_generator_below_fraction_makes_the_sub_experiment_invalid_not_failed():
    t = T0 + np.arange(0, 120.0)
    verdict = check_generator_rate(TimeSeries.of(t, np.full(t.size, 9_700.0)), 10_000, warmup_s=30)
    assert verdict.outcome is Outcome.INVALID
    assert verdict.name == GENERATOR_RATE
    assert "not produced" in verdict.detail


def test_generator_rate_ignores_the_slow_start_during_warmup_and_fraction_is_a_parameter():
    t = T0 + np.arange(0, 120.0)
    rate = np.where(t - T0 < 30, 0.0, 9_000.0)  # nothing during warm-up, 90 % afterwards
    series = TimeSeries.of(t, rate)
    assert check_generator_rate(series, 10_000, warmup_s=30).outcome is Outcome.INVALID
    assert check_generator_rate(series, 10_000, warmup_s=30, min_fraction=0.9).outcome is Outcome.PASS
    assert check_generator_rate(series, 10_000, warmup_s=0, min_fraction=0.9).outcome is Outcome.INVALID


def test_generator_rate_without_samples_after_warmup_is_errored():
    verdict = check_generator_rate(TimeSeries.of([T0, T0 + 1], [10.0, 10.0]), 10, warmup_s=60)
    assert verdict.outcome is Outcome.ERRORED
    assert check_generator_rate(TimeSeries.of([], []), 10).outcome is Outcome.ERRORED


def test_generator_rate_rejects_a_nonpositive_target():
    with pytest.raises(ValueError, match="target rate must be > 0"):
        check_generator_rate(TimeSeries.of([T0], [1.0]), 0)


# ---- event-time latency trend ------------------------------------------------------------------------------


def test_latency_trend_flat_passes_growing_fails():
    t = T0 + np.arange(0, 300, 2.0)
    rng = np.random.default_rng(5)
    flat = TimeSeries.of(t, 0.8 + rng.normal(0, 0.05, t.size))
    growing = TimeSeries.of(t, 0.8 + 0.05 * (t - T0) + rng.normal(0, 0.05, t.size))
    passed = check_latency_trend(flat, threshold=0.01, warmup_s=60)
    failed = check_latency_trend(growing, threshold=0.01, warmup_s=60)
    assert (passed.outcome, passed.name) == (Outcome.PASS, LATENCY_TREND)
    assert failed.outcome is Outcome.FAIL
    assert failed.value == pytest.approx(0.05, abs=0.005)


def test_latency_trend_too_short_is_errored():
    assert check_latency_trend(TimeSeries.of([], []), threshold=0.01).outcome is Outcome.ERRORED


# ---- malformed records -------------------------------------------------------------------------------------


def test_malformed_bound_absolute_and_relative():
    assert check_malformed_records(5, 1000, max_count=5).outcome is Outcome.PASS
    assert check_malformed_records(6, 1000, max_count=5).outcome is Outcome.FAIL
    assert check_malformed_records(10, 1000, max_fraction=0.01).outcome is Outcome.PASS
    over = check_malformed_records(11, 1000, max_fraction=0.01)
    assert (over.outcome, over.threshold, over.name) == (Outcome.FAIL, 10.0, MALFORMED_RECORDS)


def test_malformed_bound_needs_exactly_one_bound():
    with pytest.raises(ValueError, match="exactly one"):
        check_malformed_records(1, 10)
    with pytest.raises(ValueError, match="exactly one"):
        check_malformed_records(1, 10, max_count=1, max_fraction=0.1)


# ---- combining ---------------------------------------------------------------------------------------------


def verdict(outcome, name="x", value=1.0, threshold=2.0):
    return SloVerdict(name, outcome, value, threshold)


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        ([Outcome.PASS, Outcome.PASS], Outcome.PASS),
        ([Outcome.PASS, Outcome.FAIL], Outcome.FAIL),
        ([Outcome.FAIL, Outcome.INVALID], Outcome.INVALID),
        ([Outcome.INVALID, Outcome.ERRORED, Outcome.PASS], Outcome.ERRORED),
        ([Outcome.PASS, Outcome.ERRORED], Outcome.ERRORED),
    ],
)
def test_combine_priority_errored_invalid_fail_pass(outcomes, expected):
    assert combine_outcomes(outcomes) is expected
    assert combine_verdicts([verdict(o) for o in outcomes]) is expected


def test_combining_nothing_is_not_a_pass():
    with pytest.raises(ValueError, match="at least one SLO"):
        combine_verdicts([])


def test_median_slope_decides_over_repetitions():
    # Slopes 500, 2500, 1500: one repetition above the threshold, but the median (1500) is below it.
    reps = [
        SloVerdict(LAG_TREND, Outcome.PASS if s < 2000 else Outcome.FAIL, s, 2000.0)
        for s in (500, 2500, 1500)
    ]
    combined = median_trend_verdict(reps)
    assert (combined.outcome, combined.value) == (Outcome.PASS, 1500.0)
    reps_failing = [SloVerdict(LAG_TREND, Outcome.FAIL, s, 2000.0) for s in (2500, 3000)] + [reps[0]]
    assert median_trend_verdict(reps_failing).outcome is Outcome.FAIL


def test_median_of_an_even_count_averages_the_middle_two():
    reps = [SloVerdict(LAG_TREND, Outcome.PASS, s, 2000.0) for s in (1000, 1900, 2200, 9000)]
    combined = median_trend_verdict(reps)
    assert (combined.value, combined.outcome) == (2050.0, Outcome.FAIL)


def test_repetitions_offered_different_rates_are_judged_each_against_its_rates_threshold():
    """A FAIL measured once more at a lower rate (comparison.regression_share) had a lower threshold."""
    both_fail = [
        SloVerdict(LAG_TREND, Outcome.FAIL, 542.0, 271.0),
        SloVerdict(LAG_TREND, Outcome.FAIL, 300.0, 200.0),
    ]
    combined = median_trend_verdict(both_fail)
    # slopes over thresholds 2.0 and 1.5: median 1.75, shown against the first threshold
    assert (combined.outcome, combined.value, combined.threshold) == (Outcome.FAIL, 1.75 * 271.0, 271.0)
    assert "over their rates' thresholds [542/271, 300/200] = 1.75 >= 1" in combined.detail
    # no steady state at the lower rate: an unbounded slope
    unbounded = median_trend_verdict([both_fail[0], SloVerdict(LAG_TREND, Outcome.FAIL, None, 200.0)])
    assert unbounded.outcome is Outcome.FAIL and unbounded.value == math.inf
    disagree = median_trend_verdict([both_fail[0], SloVerdict(LAG_TREND, Outcome.PASS, -300.0, 200.0)])
    assert disagree.outcome is Outcome.PASS  # (2.0 - 1.5) / 2 < 1; certainty.py sees the disagreement
    with pytest.raises(ValueError, match="a median needs one threshold"):
        median_trend_verdict([both_fail[0], SloVerdict(LAG_TREND, Outcome.FAIL, 1.0, None)])
    with pytest.raises(ValueError, match="positive ones to divide by"):
        median_trend_verdict([both_fail[0], SloVerdict(LAG_TREND, Outcome.PASS, -1.0, 0.0)])


@pytest.mark.parametrize("broken", [Outcome.INVALID, Outcome.ERRORED])
def test_a_broken_repetition_makes_the_median_verdict_broken(broken):
    reps = [
        SloVerdict(LAG_TREND, Outcome.PASS, 1.0, 2000.0),
        SloVerdict(LAG_TREND, broken, None, 2000.0, "why"),
    ]
    combined = median_trend_verdict(reps)
    assert combined.outcome is broken
    assert "repetition 1: why" in combined.detail


def test_combine_repetitions_uses_median_for_trends_and_all_for_the_rest():
    def rep(slope, generator_outcome):
        return [
            SloVerdict(LAG_TREND, Outcome.PASS if slope < 2000 else Outcome.FAIL, slope, 2000.0),
            SloVerdict(GENERATOR_RATE, generator_outcome, 1.0, 1.0),
        ]

    combined = {
        v.name: v
        for v in combine_repetitions(
            [rep(100, Outcome.PASS), rep(3000, Outcome.PASS), rep(200, Outcome.PASS)]
        )
    }
    assert combined[LAG_TREND].outcome is Outcome.PASS and combined[LAG_TREND].value == 200
    combined = combine_repetitions(
        [rep(100, Outcome.PASS), rep(200, Outcome.INVALID), rep(300, Outcome.PASS)]
    )
    assert combine_verdicts(combined) is Outcome.INVALID


def test_an_slo_missing_from_one_repetition_counts_as_errored():
    first = [
        SloVerdict(LAG_TREND, Outcome.PASS, 1.0, 2000.0),
        SloVerdict(GENERATOR_RATE, Outcome.PASS, 1.0, 1.0),
    ]
    second = [SloVerdict("run", Outcome.ERRORED, None, None, "executor lost")]
    combined = combine_repetitions([first, second])
    assert combine_verdicts(combined) is Outcome.ERRORED
    assert {v.name for v in combined} == {LAG_TREND, GENERATOR_RATE, "run"}


def test_verdict_round_trips_through_a_dict_and_is_frozen():
    original = SloVerdict(LAG_TREND, Outcome.FAIL, 2500.5, 2000.0, "why")
    assert SloVerdict.from_dict(original.to_dict()) == original
    with pytest.raises(dataclasses.FrozenInstanceError):
        original.value = 0.0  # type: ignore[misc]


# ---- one repetition from its series ------------------------------------------------------------------------


def test_evaluate_repetition_checks_what_is_configured():
    t = T0 + np.arange(0, 300, 5.0)
    lag = TimeSeries.of(t, 10.0 * (t - T0))
    rate = TimeSeries.of(t, np.full(t.size, 1000.0))
    latency = TimeSeries.of(t, np.full(t.size, 0.5))
    only_lag = evaluate_repetition(SloSettings(), lag=lag, target_rate=1000.0)
    assert [v.name for v in only_lag] == [LAG_TREND]
    settings = SloSettings(latency_trend_threshold=0.01, malformed_max_fraction=0.001)
    every = evaluate_repetition(
        settings,
        lag=lag,
        target_rate=1000.0,
        generator_rate=rate,
        event_time_latency=latency,
        records_total=100_000,
        records_malformed=500,
    )
    assert {v.name: v.outcome for v in every} == {
        LAG_TREND: Outcome.PASS,
        GENERATOR_RATE: Outcome.PASS,
        LATENCY_TREND: Outcome.PASS,
        MALFORMED_RECORDS: Outcome.FAIL,
    }


def test_slo_settings_round_trip_and_validation():
    settings = SloSettings(
        warmup_s=30,
        lag_trend_threshold=SlopeThreshold(relative_to_load=0.02),
        slope_method="theil-sen",
        latency_trend_threshold=0.1,
        malformed_max_count=3,
    )
    assert SloSettings.from_dict(settings.to_dict()) == settings
    assert SloSettings.from_dict({}) == SloSettings()
    with pytest.raises(ValueError, match="unknown slope method"):
        SloSettings(slope_method="lasso")  # type: ignore[arg-type]


# -- micro-batch duration bound (added with the gates) --------------------------------------------------------

from pytest_theodolite.core.slo import BATCH_DURATION, check_batch_duration  # noqa: E402


def test_batch_duration_passes_on_short_batches_after_the_warmup():
    # slow first batches (JIT, consumer creation) are inside the warm-up
    series = TimeSeries.of(list(range(20)), [9000] * 5 + [400, 600, 500, 450, 550] * 3)
    verdict = check_batch_duration(series, max_s=1.0, warmup_s=5)
    assert verdict.name == BATCH_DURATION and verdict.outcome is Outcome.PASS
    assert verdict.value == pytest.approx(0.5)


def test_batch_duration_fails_when_batches_grow():
    series = TimeSeries.of(list(range(20)), [1000 + 500 * i for i in range(20)])
    verdict = check_batch_duration(series, max_s=3.0, warmup_s=5)
    assert verdict.outcome is Outcome.FAIL and verdict.value > 3.0
    assert "median micro-batch duration" in verdict.detail


def test_batch_duration_without_samples_after_warmup_fails_and_bad_bound_raises():
    assert check_batch_duration(TimeSeries.of([], []), max_s=1, warmup_s=0).outcome is Outcome.FAIL
    with pytest.raises(ValueError, match="must be positive"):
        check_batch_duration(TimeSeries.of([0, 1], [1, 1]), max_s=0, warmup_s=0)


def test_evaluate_repetition_adds_the_batch_duration_slo_when_bounded():
    lag = TimeSeries.of(list(range(10)), [0] * 10)
    batches = TimeSeries.of(list(range(10)), [5000] * 10)
    settings = SloSettings(warmup_s=0, max_batch_duration_s=2.0)
    verdicts = evaluate_repetition(settings, lag=lag, target_rate=100.0, batch_duration=batches)
    assert [v.name for v in verdicts] == [LAG_TREND, BATCH_DURATION]
    assert combine_verdicts(verdicts) is Outcome.FAIL
    assert SloSettings.from_dict(settings.to_dict()) == settings


def test_a_testbed_offered_a_share_of_the_rate_gets_its_time_bounds_stretched_by_it():
    settings = SloSettings(warmup_s=0, max_batch_duration_s=2.0)
    assert settings.dilated(1.0) is settings
    assert settings.dilated(0.5).max_batch_duration_s == 4.0
    assert SloSettings().dilated(0.5) == SloSettings()  # no time bound to stretch
    lag = TimeSeries.of(list(range(10)), [0] * 10)
    batches = TimeSeries.of(list(range(10)), [3000] * 10)  # 3 s: beyond 2 s, within 4 s

    def outcome(slo: SloSettings) -> Outcome:
        return combine_verdicts(evaluate_repetition(slo, lag=lag, target_rate=100.0, batch_duration=batches))

    assert outcome(settings) is Outcome.FAIL and outcome(settings.dilated(0.5)) is Outcome.PASS


def test_a_run_that_never_settled_fails_and_its_generator_is_judged_on_every_sample():
    """A run stopped before its warm-up was over (not settled, or falling behind) is a FAIL with the reason, not
    an ERRORED run for want of generator samples after a warm-up that never ended."""
    t = np.arange(0.0, 40.0) + 1_700_000_000.0
    verdicts = evaluate_repetition(
        SloSettings(warmup_s=60),
        lag=TimeSeries.of(t, 1000 * (t - t[0])),
        target_rate=1000.0,
        generator_rate=TimeSeries.of(t, np.full(t.size, 1000.0)),
        not_settled="the job falls behind: each micro-batch took longer than the last (11.2, 18.1, 28.5 s)",
    )
    outcomes = {v.name: v.outcome for v in verdicts}
    assert outcomes == {"lag-trend": Outcome.FAIL, "generator-rate": Outcome.PASS}
    assert verdicts[0].detail.startswith("the job falls behind")


def test_a_run_ended_beyond_its_batch_bound_fails_that_bound_with_the_protocols_reason():
    """The protocol's beyond-batch-bound stop ends a run before a median was measured in steady state: the
    batch-duration SLO FAILs with its reason, whatever the median of the batches sampled so far."""
    t = np.arange(0.0, 70.0) + 1_700_000_000.0
    reason = (
        "micro-batches beyond the 9 s batch bound for good: under the CPU limit they took 13.4, 16.5, 18.6 s"
    )
    short_then_long = TimeSeries.of(t, np.where(t - t[0] < 40, 2000.0, 16000.0))  # a median of 2 s sampled
    verdicts = evaluate_repetition(
        SloSettings(warmup_s=0, max_batch_duration_s=9.0),
        lag=TimeSeries.of(t, 1000 * (t - t[0])),
        target_rate=1000.0,
        batch_duration=short_then_long,
        not_settled=reason,
        beyond_batch_bound=reason,
    )
    batch = next(v for v in verdicts if v.name == "batch-duration")
    assert batch.outcome is Outcome.FAIL and batch.detail == reason and batch.threshold == 9.0
    assert combine_verdicts(verdicts) is Outcome.FAIL
    without = evaluate_repetition(
        SloSettings(warmup_s=0, max_batch_duration_s=9.0),
        lag=TimeSeries.of(t, 1000 * (t - t[0])),
        target_rate=1000.0,
        batch_duration=short_then_long,
    )
    assert next(v for v in without if v.name == "batch-duration").outcome is Outcome.PASS  # the 2 s median


from pytest_theodolite.core.slo import batch_duration_interval, finished_batch_durations_s  # noqa: E402


def test_the_median_batch_durations_interval_weighs_the_distance_from_the_bound():
    assert batch_duration_interval([9.0]) is None  # one batch: no interval
    low, high = batch_duration_interval([18.0, 19.0, 20.0, 18.5, 19.5])
    assert 17.5 < low < 19 < high < 20.5
    # 5 of 5 batches at 2.5x a 7.5 s bound: certain by magnitude (a sign test would give p 0.03)
    assert batch_duration_interval([18.0, 19.0, 20.0, 18.5, 19.5])[0] > 7.5
    # around the bound: the interval straddles it
    low, high = batch_duration_interval([7.0, 8.0, 7.4, 7.9, 7.2, 7.7])
    assert low < 7.5 < high
    # more batches narrow it
    wide = batch_duration_interval([6.0, 7.0, 6.5])
    narrow = batch_duration_interval([6.0, 7.0, 6.5] * 6)
    assert narrow[1] - narrow[0] < wide[1] - wide[0]


def test_finished_batch_durations_take_each_batch_at_the_first_sample_that_names_it():
    # batches of 3 s (ids 0..), sampled each second as the longer of the last finished and the running one
    t = [float(i) for i in range(3, 16)]
    ids = [i // 3 - 1 for i in range(3, 16)]  # the last finished batch at t: 0 at 3-5 s, 1 at 6-8 s ...
    ms = [3000.0 if i % 3 == 0 else 3000.0 + 1000 * (i % 3) for i in range(3, 16)]
    durations = finished_batch_durations_s(TimeSeries.of(t, ms), TimeSeries.of(t, ids), from_s=3.0)
    assert durations == [3.0, 3.0, 3.0, 3.0]  # batch 0 dropped: it may have started before from_s


def test_the_batch_duration_verdict_carries_its_interval_with_the_batch_ids():
    t = [float(i) for i in range(60)]
    ids = [i // 3 for i in range(60)]
    ms = [9000.0 + 300 * ((i // 3) % 2) for i in range(60)]  # 9.0 / 9.3 s batches
    series = TimeSeries.of(t, ms)
    verdict = check_batch_duration(series, max_s=7.5, warmup_s=5, batch_ids=TimeSeries.of(t, ids))
    assert verdict.outcome is Outcome.FAIL and verdict.low > 7.5 and verdict.high < 9.5
    assert f"[{verdict.low:.2f}, {verdict.high:.2f}]" in verdict.detail
    assert check_batch_duration(series, max_s=7.5, warmup_s=5).low is None  # no ids: no interval


def test_the_median_over_repetitions_counts_a_fail_without_a_slope_as_a_lag_without_bound():
    unsettled = SloVerdict(LAG_TREND, Outcome.FAIL, None, 600.0, "no steady state within ...")
    passed = SloVerdict(LAG_TREND, Outcome.PASS, 227.0, 600.0, "")
    assert median_trend_verdict([unsettled, passed, passed]).outcome is Outcome.PASS
    assert median_trend_verdict([unsettled, unsettled, passed]).outcome is Outcome.FAIL


from pytest_theodolite.core.slo import LATE_RECORDS, check_late_records  # noqa: E402


def test_late_records_count_the_batches_that_ended_in_the_measured_window():
    # three batches in (100, 200]: 150 records in 100 s; the one at 100 s ended in the warm-up, the one at
    # 230 s after the last lag sample
    late = TimeSeries.of([90.0, 100.0, 120.0, 160.0, 200.0, 230.0], [900, 500, 50, 0, 100, 700])
    passed = check_late_records(late, max_rate=1.5, from_s=100.0, to_s=200.0)
    assert (passed.name, passed.outcome, passed.value, passed.threshold) == (
        LATE_RECORDS,
        Outcome.PASS,
        1.5,
        1.5,
    )
    assert passed.detail == "150 records dropped as late in 100 s: 1.5/s <= 1.5/s"
    failed = check_late_records(late, max_rate=0.0, from_s=100.0, to_s=200.0)
    assert failed.outcome is Outcome.FAIL and failed.detail.endswith("1.5/s > 0/s")
    nothing = check_late_records(TimeSeries.of([150.0], [0]), max_rate=0.0, from_s=100.0, to_s=200.0)
    assert nothing.outcome is Outcome.PASS and nothing.value == 0.0


def test_late_records_without_a_measured_window_fail_and_a_bad_bound_raises():
    late = TimeSeries.of([10.0], [0])
    verdict = check_late_records(late, max_rate=1.0, from_s=50.0, to_s=40.0)
    assert verdict.outcome is Outcome.FAIL and "no measured window" in verdict.detail
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="late-records bound"):
            check_late_records(late, max_rate=bad, from_s=0.0, to_s=1.0)


def test_evaluate_repetition_judges_late_records_over_the_lag_trends_window_when_bounded():
    t = np.arange(0.0, 100.0) + 1_700_000_000.0
    lag = TimeSeries.of(t, np.zeros(t.size))
    # 600 records dropped during the 60 s warm-up (the start transient), 30 in the 39 s measured after it
    late = TimeSeries.of([t[30], t[59], t[70], t[99]], [600, 0, 10, 20])
    settings = SloSettings(warmup_s=60, max_late_rate=1.0)
    verdicts = evaluate_repetition(settings, lag=lag, target_rate=100.0, late_rows=late)
    assert [v.name for v in verdicts] == [LAG_TREND, LATE_RECORDS]
    assert verdicts[1].outcome is Outcome.PASS and verdicts[1].value == pytest.approx(30 / 39)
    strict = evaluate_repetition(
        dataclasses.replace(settings, max_late_rate=0.5), lag=lag, target_rate=100.0, late_rows=late
    )
    assert combine_verdicts(strict) is Outcome.FAIL
    # not bounded, or a job without stateful operators (no series): not checked
    assert [
        v.name
        for v in evaluate_repetition(SloSettings(warmup_s=60), lag=lag, target_rate=100.0, late_rows=late)
    ] == [LAG_TREND]
    assert [v.name for v in evaluate_repetition(settings, lag=lag, target_rate=100.0)] == [LAG_TREND]
    assert SloSettings.from_dict(settings.to_dict()) == settings
    assert SloSettings.from_dict({}).max_late_rate is None
