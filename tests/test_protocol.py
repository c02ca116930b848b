"""The measurement protocol (priming, steady state, measure until certain) on scripted micro-batch series."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from pytest_theodolite.core.batch_trends import (
    batch_durations_growing,
    batch_durations_rising,
    batch_durations_settled,
    durations_beyond_bound,
)
from pytest_theodolite.core.estimators import TimeSeries, batch_aligned, lag_trend_estimate
from pytest_theodolite.core.measurement_plan import MeasurementPlan
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.protocol import MeasurementProtocol, Phase, Stop, stop_of

T0 = 1_700_000_000.0


def micro_batch_run(load: float, durations, seconds: int, seed: int = 0, jitter: float = 0.05):
    """Samples (t, lag, last finished batch id, its duration in ms, its end) once a second from a scripted
    engine: batch k runs for durations(k) seconds (times 1 + jitter x a standard normal, at least a tenth of
    it) and takes in everything that arrived before it started."""
    rng = np.random.default_rng(seed)
    ends, taken, start, k = [], [], 0.0, 0
    while start < seconds + 60:
        end = start + durations(k) * max(0.1, 1 + jitter * rng.standard_normal())
        ends.append(end)
        taken.append(load * start)  # offsets processed up to when it finishes
        start, k = end, k + 1
    samples = []
    for i in range(seconds):
        t = i + 0.5
        done = [j for j, e in enumerate(ends) if e <= t]
        processed = taken[done[-1]] if done else 0.0
        last = done[-1] if done else None
        duration_ms = None if last is None else (ends[last] - (ends[last - 1] if last else 0.0)) * 1000
        samples.append(
            (T0 + t, load * t - processed, last, duration_ms, None if last is None else T0 + ends[last])
        )
    return samples


def run(protocol: MeasurementProtocol, samples):
    phases = []
    for sample in samples:
        phases.append(protocol.feed(*sample))
        if phases[-1] is Phase.DONE:
            break
    return phases


PLAN = MeasurementPlan(
    prime_batches=3, max_prime_s=30, settle_batches=4, max_warmup_s=60, min_duration_s=20, max_duration_s=120
)


# ---- steady state --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "durations, settled",
    [
        ([9.8, 23.5, 19.4, 13.9], False),  # the start transient measured on a fresh CI machine
        ([4.3, 3.5, 2.8, 2.2], False),
        ([2.0, 2.1, 1.9, 2.0], True),
        ([2.0, 3.0, 4.5, 6.8], True),  # falling behind: growing batches are "settled" (and then fail)
        ([2.0, 2.0, 2.0], False),  # too few
    ],
)
def test_batch_durations_settle_when_they_stop_falling(durations, settled):
    assert batch_durations_settled(durations, batches=4, tolerance=0.2) is settled


# ---- the phases --------------------------------------------------------------------------------------------


def test_a_job_that_keeps_up_is_primed_settles_and_passes_once_certain():
    # start transient: slow first batches, then a steady 2 s period at 60 % utilisation
    samples = micro_batch_run(2000, lambda k: [6, 4, 3][k] if k < 3 else 2.0, 200)
    protocol = MeasurementProtocol(PLAN, threshold_rps=100, offered_rate=2000)
    phases = run(protocol, samples)
    assert phases[0] is Phase.PRIMING and Phase.SETTLING in phases and phases[-1] is Phase.DONE
    first_settling = phases.index(Phase.SETTLING)
    assert protocol.limited_at_s == samples[first_settling][0]  # where the runner applies the CPU limit
    assert protocol.stop is Stop.CERTAIN
    assert protocol.estimate.side_of(100) is Outcome.PASS
    summary = protocol.summary()
    assert summary["warmup_s"] > summary["primed_s"] > 0
    assert PLAN.min_duration_s <= summary["measured_s"] < PLAN.max_duration_s
    assert summary["stop"] == "certain" and summary["failure"] is None and summary["points"] >= 5


@pytest.mark.parametrize("settled_batches", [0, 2])
def test_the_interval_of_a_steady_job_holds_its_true_slope_about_as_often_as_its_confidence_says(
    settled_batches,
):
    # the measurement begins with the settled batches or after them: neither biases the fit (a lag falling as
    # a transient's backlog is worked off would show as intervals below 0)
    plan = MeasurementPlan(
        prime_batches=3, max_warmup_s=60, min_duration_s=20, measure_settled_batches=settled_batches
    )
    held = 0
    for seed in range(100):
        protocol = MeasurementProtocol(plan, threshold_rps=100, offered_rate=2000)
        run(protocol, micro_batch_run(2000, lambda k: [6, 4, 3][k] if k < 3 else 2.0, 200, seed=seed))
        held += protocol.estimate.low <= 0 <= protocol.estimate.high
    assert held >= 88  # 95 % intervals: fewer than 88 of 100 has a chance below 0.3 %


def test_the_measurement_begins_where_the_older_of_the_newest_settled_batches_began():
    samples = micro_batch_run(2000, lambda k: [6, 4, 3][k] if k < 3 else 2.0, 200, jitter=0.0)
    after = MeasurementProtocol(
        dataclasses.replace(PLAN, measure_settled_batches=0), threshold_rps=100, offered_rate=2000
    )
    run(after, samples)
    assert after.measure_from_s == after.settled_at_s  # the sample that ended the warm-up
    protocol = MeasurementProtocol(PLAN, threshold_rps=100, offered_rate=2000)  # two settled batches
    run(protocol, samples)
    assert protocol.settled_at_s == after.settled_at_s  # the same settling
    # batch k ends at 13 + 2(k - 2) s (after 6, 4 and 3 s); the newest finished by then is the one ending at
    # or before it, and the measurement begins where the one before it began
    newest_end = T0 + 13 + 2 * math.floor((protocol.settled_at_s - T0 - 13) / 2)
    assert protocol.measure_from_s == pytest.approx(newest_end - 4)
    assert protocol.stop is after.stop is Stop.CERTAIN
    # both measure at least the least duration; this one began 2 batches (4 s) sooner and ends sooner
    assert protocol.last_s - protocol.measure_from_s >= PLAN.min_duration_s
    assert protocol.last_s < after.last_s
    # the CPU limit applies from the end of priming: a measurement never begins before it
    assert protocol.measure_from_s >= protocol.limited_at_s


def test_a_job_that_falls_behind_fails_certain_without_being_measured_in_a_rise():
    # every batch takes 10 % longer than the last: the lag grows, and the batches never stop rising faster
    # than the threshold allows -- no steady state to measure, and the batches diverged: a certain FAIL
    samples = micro_batch_run(2000, lambda k: 1.0 * 1.10**k, 300)
    protocol = MeasurementProtocol(PLAN, threshold_rps=100, offered_rate=2000)
    run(protocol, samples)
    assert protocol.stop is Stop.NOT_SETTLED and protocol.certain is True
    assert "micro-batch durations were still changing" in protocol.failure_reason


def test_a_job_whose_batches_grow_without_bound_is_failed_without_waiting_for_a_fit():
    # measured: UC1 at 12 000 records/s on one quarter core ran batches of 5, 9, 14, 23, 34, 50 s
    samples = micro_batch_run(12000, lambda k: 1.0 if k < 3 else 5.0 * 1.6 ** (k - 3), 400)
    protocol = MeasurementProtocol(MeasurementPlan(max_warmup_s=90), threshold_rps=600, offered_rate=12000)
    run(protocol, samples)
    assert protocol.stop is Stop.FALLING_BEHIND and protocol.certain is True
    assert protocol.failure_reason.startswith(
        "the job falls behind: each micro-batch took longer than the last"
    )
    assert protocol.last_s - protocol.start_s < 120


def test_the_falling_behind_rule_waits_for_more_growth_than_a_start_transient_shows():
    # growing by growing steps, but to 3.15x the shortest batch only: the recorded transient of a job that
    # keeps up (below); the rule needs FALLING_BEHIND_GROWTH
    assert batch_durations_growing([2.0, 3.1, 4.4, 6.3], batches=3)
    samples = micro_batch_run(12000, lambda k: [1.1, 4.2, 2.6, 2.0, 3.1, 4.4, 6.3][k] if k < 7 else 6.3, 60)
    protocol = MeasurementProtocol(PLAN, threshold_rps=600, offered_rate=12000)
    run(protocol, samples)
    assert protocol.stop is not Stop.FALLING_BEHIND


# Recorded 2026-11-24 (pull-request mode, unchanged code, UC1 at 12 000 records/s on two quarter-core
# instances): the distinct batch durations of two repetitions of the same job, from priming on; after them both
# went on rising by shrinking steps to about 10 s (another repetition: 7.7, 8.2, 8.5, 8.8 s; 9.3 ... 10.4 s) and in
# steady state the point passes (Theodolite's 60 s warm-up and 300 s measured: -201 records/s). README,
# "A false alarm on unchanged code".
RISE_BY_GROWING_STEPS = [1.1, 4.2, 2.6, 2.0, 3.1, 4.4, 6.3, 7.5, 8.2, 8.6, 9.0, 9.3, 9.5, 9.7, 9.8, 9.9]
RISE_AFTER_A_DIP = [
    0.9,
    3.1,
    1.8,
    1.3,
    1.6,
    1.9,
    2.3,
    2.7,
    3.2,
    3.7,
    4.7,
    5.1,
    6.0,
    7.0,
    7.8,
    8.5,
    9.0,
    9.4,
    9.7,
]
TRANSIENTS = {"rise-by-growing-steps": RISE_BY_GROWING_STEPS, "rise-after-a-dip": RISE_AFTER_A_DIP}


def towards_ten_seconds(transient: str):
    recorded = TRANSIENTS[transient]
    return lambda k: recorded[k] if k < len(recorded) else 10.0


@pytest.mark.parametrize("transient", TRANSIENTS)
def test_the_recorded_start_transients_end_in_a_job_that_keeps_up(transient):
    """The premise of the test below: in the scripted engine, the lag at the commits of the steady 10 s batches
    that follow these transients does not grow."""
    samples = micro_batch_run(12000, towards_ten_seconds(transient), 400)
    commits = batch_aligned(
        TimeSeries.of([s[0] for s in samples], [s[1] for s in samples]),
        TimeSeries.of([s[0] for s in samples], [math.nan if s[2] is None else s[2] for s in samples]),
    )
    late = commits.timestamps_s > T0 + 200
    slope = np.polyfit(commits.timestamps_s[late], commits.values[late], 1)[0]
    assert abs(slope) < 600 / 4, slope


@pytest.mark.parametrize("transient", TRANSIENTS)
@pytest.mark.parametrize("seed", range(5))
def test_a_job_that_keeps_up_after_a_rising_start_transient_is_not_failed_as_certain(transient, seed):
    # before rising batches kept a repetition in its warm-up, each transient was failed as certain at some seeds
    # (falling behind at 2.0, 3.1, 4.4, 6.3 s; a lag slope of +1 532 ... +2 212 records/s measured in the rise
    # after the dip) and passed at others: the verdict was the noise's, as in the recorded runs
    protocol = MeasurementProtocol(MeasurementPlan(max_warmup_s=90), threshold_rps=600, offered_rate=12000)
    run(protocol, micro_batch_run(12000, towards_ten_seconds(transient), 400, seed=seed))
    failed_for_certain = protocol.certain and (
        protocol.stop is Stop.FALLING_BEHIND or protocol.estimate.side_of(600) is Outcome.FAIL
    )
    assert not failed_for_certain, (protocol.stop, protocol.estimate, protocol.warmup_used_s)


# Recorded 2026-11-24 (pull-request mode, unchanged code, UC1 at 4 000 records/s on two quarter-core
# instances): the distinct batch durations (s) after priming and their ends (s). With a rise judged over two
# halves of four batches this job never settled in 90 s -- on 1, 2, 3 and 4 instances alike.
SHORT_JITTERY = [0.48, 0.79, 0.82, 0.79, 0.6, 0.62, 0.66, 0.68, 0.51, 0.58, 0.53, 0.67, 0.6, 0.51, 0.68, 0.84]
SHORT_JITTERY += [0.8, 0.79, 0.75, 0.7, 0.5, 0.58, 0.44, 0.44, 0.56, 0.55, 0.6, 0.5, 0.49, 0.59, 0.39, 0.4]
SHORT_JITTERY_ENDS = [0.0, 0.8, 1.6, 2.4, 3.7, 4.9, 5.6, 6.9, 7.9, 8.5, 9.7]
SHORT_JITTERY_ENDS += [10.3, 11.6, 12.7, 13.9, 14.7, 15.5, 16.3, 17.9, 18.6, 19.9, 20.5]
SHORT_JITTERY_ENDS += [21.9, 22.8, 23.9, 24.4, 25.8, 26.9, 27.8, 28.4, 29.8, 30.9]


@pytest.mark.parametrize(
    "durations, ends, rate, rising",
    [
        (SHORT_JITTERY, SHORT_JITTERY_ENDS, 4000, False),
        (SHORT_JITTERY[:8], SHORT_JITTERY_ENDS[:8], 4000, False),  # 0.48 ... 0.82 s: the jitter, not a rise
        ([2.0, 3.1, 4.4, 6.3], None, 12000, True),  # the recorded transient, early
        ([7.5, 8.2, 8.6, 9.0], None, 12000, True),  # still 12 000 x 0.06 s/s = 720 records/s a second
        ([8.2, 8.6, 9.0, 9.3], None, 12000, False),  # 12 000 x 0.04: below the threshold
        ([9.0, 10.0, 9.5, 10.1], None, 12000, False),  # steady, with jitter
        ([2.0, 3.1, 4.4], None, 12000, False),  # too few
    ],
)
def test_batch_durations_rise_when_their_fitted_rise_exceeds_the_threshold_and_the_jitter(
    durations, ends, rate, rising
):
    ends = list(np.cumsum(durations)) if ends is None else ends
    threshold = 0.05 * rate  # the gates' relative lag-trend threshold
    assert batch_durations_rising(durations, ends, 4, rate, threshold, window_s=20) is rising


def test_batch_ends_that_are_not_known_are_taken_as_back_to_back():
    rise = [2.0, 3.1, 4.4, 6.3]
    assert batch_durations_rising(rise, [math.nan] * 4, 4, offered_rate=12000, threshold_rps=600, window_s=20)


@pytest.mark.parametrize("seed", range(5))
def test_a_job_that_keeps_up_with_short_jittery_batches_settles_and_is_measured(seed):
    # the live regression of the rule above: sub-second batches jittering by a third, at 4 000 records/s
    samples = micro_batch_run(4000, lambda k: 2.0 if k < 3 else 0.6, 200, seed=seed, jitter=0.3)
    protocol = MeasurementProtocol(MeasurementPlan(max_warmup_s=90), threshold_rps=200, offered_rate=4000)
    run(protocol, samples)
    assert protocol.warmup_used_s is not None and protocol.warmup_used_s < 40, protocol.summary()
    assert protocol.stop is Stop.CERTAIN and protocol.estimate.side_of(200) is Outcome.PASS


def test_a_measurement_that_began_at_a_dip_goes_back_to_settling_once_with_the_bound_counted_anew():
    # settles at 2 s, then lengthens its batches towards 8 s: measuring that rise would read +600 records/s
    def durations(k):
        return 3.0 if k < 3 else 2.0 if k < 9 else min(8.0, 2.0 + 0.6 * (k - 9))

    plan = MeasurementPlan(max_warmup_s=60, min_duration_s=20, max_duration_s=120)
    protocol = MeasurementProtocol(plan, threshold_rps=100, offered_rate=2000)
    phases = run(protocol, micro_batch_run(2000, durations, 400))
    measuring = [k for k, (a, b) in enumerate(itertools.pairwise(phases)) if b is Phase.MEASURING and a != b]
    assert len(measuring) == 2, "measured, went back to settling, measured again"
    # measured again later than the bound counted from the end of priming allowed
    assert measuring[1] - phases.index(Phase.SETTLING) > plan.max_warmup_s
    assert protocol.stop is Stop.CERTAIN and protocol.estimate.side_of(100) is Outcome.PASS
    assert protocol.last_s - T0 <= plan.longest_s


def test_the_longest_a_repetition_may_take_counts_the_second_settling_phase():
    gates = MeasurementPlan(max_warmup_s=90, max_duration_s=120, max_prime_s=30)
    # priming 30 s, settling up to 180 s, measuring up to 120 s, then settling and measuring once more
    assert gates.longest_s == 30 + 2 * (180 + 120)
    # a repetition that went back to settling (2026-11-27, UC1 20 000 on four): primed 16 s, warm-up 286 s,
    # measured 104 s -- 406 s, past the runner's old guard of 30 + 180 + 120 + 60 s, which ended it as errored
    assert 16 + 286 + 104 <= gates.longest_s
    # Theodolite's fixed warm-up never goes back
    assert MeasurementPlan(warmup_s=300, max_duration_s=300).longest_s == 30 + 300 + 300


@pytest.mark.parametrize(
    "durations, growing",
    [
        ([5, 9, 14], True),
        ([9, 14, 23], True),  # measured: UC1, 12 000 records/s, one quarter core (5, 9, 14, 23, 34, 50 s)
        ([0.3, 0.47, 0.62], False),  # keeps up at 90 %: lengthens towards a fixed point by shrinking steps
        ([2.0, 3.0, 3.5], False),  # the same, slower
        ([0.49, 0.54, 0.61], False),  # a noisy steady state
        ([1.2, 1.4, 1.7], False),  # growing, but less than twice: the fit decides
        ([1.2, 1.8, 2.5], False),  # too short to tell from jitter
        ([9, 14], False),  # too few
    ],
)
def test_growing_batch_durations(durations, growing):
    assert batch_durations_growing(durations, batches=3) is growing


def test_a_job_working_off_its_backlog_under_the_limit_passes_on_its_certainly_falling_lag():
    # each batch takes all that arrived while the one before ran, so shorter batches mean the job processes
    # more than the load: the lag falls, which a job whose capacity lies below the load cannot do
    samples = micro_batch_run(2000, lambda k: max(0.3, 20.0 * 0.85**k), 200)
    protocol = MeasurementProtocol(
        MeasurementPlan(max_warmup_s=100, prime_batches=1), threshold_rps=100, offered_rate=2000
    )
    run(protocol, samples)
    assert protocol.stop is Stop.LAG_FALLING and protocol.certain is True
    assert protocol.estimate is not None and protocol.estimate.high < 0
    assert protocol.settled_at_s is None  # it never settled: the verdict rests on the fall alone
    measured_from = protocol.start_s + protocol.warmup_used_s
    assert protocol.last_s - measured_from >= protocol.plan.min_duration_s
    assert protocol.last_s - protocol.start_s < 100  # well inside the bound that ended it as a guess


def test_a_falling_lag_does_not_pass_a_job_whose_batches_break_their_bound():
    samples = micro_batch_run(2000, lambda k: max(0.3, 20.0 * 0.85**k), 200)
    protocol = MeasurementProtocol(
        MeasurementPlan(max_warmup_s=100, prime_batches=1),
        threshold_rps=100,
        offered_rate=2000,
        max_batch_s=1.0,
    )
    run(protocol, samples)
    assert protocol.stop is not Stop.LAG_FALLING


def test_a_job_over_its_capacity_with_a_backlog_never_passes_on_a_falling_lag():
    # a per-batch cost of 2 s and 1.1 s per second of load: every batch longer than the one before
    durations = [6.0]
    for _ in range(200):
        durations.append(2.0 + 1.1 * durations[-1])
    samples = micro_batch_run(2000, lambda k: durations[k], 300, jitter=0.1)
    protocol = MeasurementProtocol(
        MeasurementPlan(max_warmup_s=100, prime_batches=1), threshold_rps=100, offered_rate=2000
    )
    run(protocol, samples)
    assert protocol.stop is not Stop.LAG_FALLING


def test_batch_durations_that_keep_falling_never_settle_and_say_so_where_a_falling_lag_does_not_pass():
    samples = micro_batch_run(2000, lambda k: max(0.3, 20.0 * 0.85**k), 200)
    protocol = MeasurementProtocol(
        MeasurementPlan(max_warmup_s=100, prime_batches=1, pass_on_falling_lag=False),
        threshold_rps=100,
        offered_rate=2000,
    )
    run(protocol, samples)
    assert protocol.stop is Stop.NOT_SETTLED and protocol.warmup_used_s is None
    assert "no steady state within the 100 s warm-up bound" in protocol.failure_reason
    assert "durations were still falling" in protocol.failure_reason
    assert protocol.certain is False  # catching up a backlog: no steady state, no verdict either way


def test_long_batches_at_the_edge_get_a_longer_warmup_and_their_lag_trend_is_measured():
    # measured: UC1 20 000 at 4 instances on a 0.74x host, batches 16.0, 19.1, 20.2, 22.3 s within the 90 s
    # bound -- too few to tell, a not-settled guess; given the bound once more they settle (here at 20 s) and
    # are measured
    samples = micro_batch_run(20000, lambda k: 1.0 if k < 3 else 16.0 if k == 3 else 20.0, 400)
    protocol = MeasurementProtocol(PLAN, threshold_rps=1000, offered_rate=20000)
    phases = run(protocol, samples)
    assert Phase.MEASURING in phases
    assert protocol.stop in (Stop.CERTAIN, Stop.MAX_DURATION, Stop.FALLING_BEHIND)
    assert protocol.settled_at_s - protocol.start_s > PLAN.max_warmup_s  # it needed the longer bound


def test_long_batches_falling_from_a_peak_get_the_time_of_eight_batches_to_settle():
    # measured: an own stateful job at 32 000 records/s on two quarter-core instances (docs/lab-notes/
    # own-gate-walkthrough.md), batches under the limit 23.0, 22.3, 18.6, 16.2 s when the 90 s bound
    # ended it as a not-settled guess (not comparable); given eight of its batches' time, they settle at 16 s.
    # Primed 30 s in three batches, as recorded: the four after the limit are the first judged
    recorded = [7.0, 15.4, 7.8, 17.4, 23.0, 22.3, 18.6, 16.2]
    samples = micro_batch_run(32000, lambda k: recorded[k] if k < len(recorded) else 16.0, 500, jitter=0.0)
    plan = MeasurementPlan(max_prime_s=30, max_warmup_s=90)  # the gates' bounds
    protocol = MeasurementProtocol(plan, threshold_rps=1600, offered_rate=32000)
    phases = run(protocol, samples)
    assert Phase.MEASURING in phases and protocol.stop is not Stop.NOT_SETTLED
    settled_after = protocol.settled_at_s - protocol.limited_at_s
    assert plan.max_warmup_s < settled_after <= 2 * plan.max_warmup_s


def test_long_batches_that_never_settle_end_at_twice_the_bound_as_a_guess():
    # 24 s batches lengthening by 1.5 s each: rising faster than the threshold allows, far from doubling
    samples = micro_batch_run(8000, lambda k: 24.0 + 1.5 * k, 600, jitter=0.0)
    plan = MeasurementPlan(max_prime_s=30, max_warmup_s=90)
    protocol = MeasurementProtocol(plan, threshold_rps=200, offered_rate=8000)
    run(protocol, samples)
    assert protocol.stop is Stop.NOT_SETTLED and protocol.certain is False
    # eight batches of this length take longer than twice the bound: the cap ends it
    assert protocol.last_s - protocol.limited_at_s == pytest.approx(2 * plan.max_warmup_s, abs=1)
    assert "extended to 180 s for its long batches" in protocol.failure_reason


def test_short_batches_keep_the_plain_warmup_bound():
    # 3 s batches still falling: eight of them fit the bound many times over, so it is not extended
    samples = micro_batch_run(12000, lambda k: max(0.5, 3.0 * 0.995**k) if k > 2 else 1.0, 300, jitter=0.0)
    plan = MeasurementPlan(max_warmup_s=90, settle_tolerance=0.0)
    protocol = MeasurementProtocol(plan, threshold_rps=600, offered_rate=12000)
    run(protocol, samples)
    assert protocol.warmup_bound_s == plan.max_warmup_s


def test_long_batches_that_grow_are_told_falling_behind_within_the_longer_warmup():
    # measured: UC1 12 000 with +50 % CPU per record on 2 instances, 9.4, 18.3, 32.8 s when the 90 s bound
    # ended it as a not-settled guess; one more batch shows the growth
    plan = MeasurementPlan(max_warmup_s=90)  # the gates' bound
    samples = micro_batch_run(
        12000, lambda k: 1.0 if k < 3 else 9.4 if k == 3 else 18.3 * 1.8 ** (k - 4), 300
    )
    protocol = MeasurementProtocol(plan, threshold_rps=600, offered_rate=12000)
    run(protocol, samples)
    # falling behind, or at the longer bound still rising by growing steps: a certain FAIL either way
    assert protocol.stop in (Stop.FALLING_BEHIND, Stop.NOT_SETTLED) and protocol.certain is True
    assert protocol.last_s - protocol.limited_at_s > plan.max_warmup_s


@pytest.mark.parametrize(
    "durations, certain",
    [
        ([10, 25, 60, 150], True),  # the batches under the limit (25, 60 s) at least doubled: falling behind
        ([10, 50, 55, 150], False),  # two long ones that barely grew: a guess either way
    ],
)
def test_batches_too_long_for_even_the_longer_warmup_fail_certain_only_where_they_at_least_double(
    durations, certain
):
    samples = micro_batch_run(20000, lambda k: 1.0 if k < 3 else durations[min(k - 3, 3)], 300)
    protocol = MeasurementProtocol(PLAN, threshold_rps=1000, offered_rate=20000)
    run(protocol, samples)
    assert protocol.stop is Stop.NOT_SETTLED
    assert protocol.certain is certain and protocol.summary()["certain"] is certain
    assert "no steady state within the 60 s warm-up bound (extended to" in protocol.failure_reason
    assert "only 2 micro-batches finished under the CPU limit" in protocol.failure_reason
    assert "too few to tell" in protocol.failure_reason


def test_a_slope_near_the_threshold_measures_to_the_bound_and_says_it_was_not_certain():
    # a lag whose trend is exactly the threshold, with a swing: the interval straddles the threshold
    samples = [(T0 + t, 100.0 * t + 500 * (-1) ** (t // 2), t // 2, 2000.0) for t in range(400)]
    plan = MeasurementPlan(prime_unlimited=False, max_duration_s=60, settle_batches=2)
    protocol = MeasurementProtocol(plan, threshold_rps=100)
    run(protocol, samples)
    assert protocol.stop is Stop.MAX_DURATION
    assert protocol.summary()["measured_s"] == pytest.approx(60, abs=1)
    assert protocol.summary()["certain"] is False  # the point estimate decided
    assert protocol.estimate.low < 100 < protocol.estimate.high


def test_a_job_whose_batches_outlast_the_measurement_fails_for_lack_of_batches():
    samples = [(T0 + t, 1000.0 * t, 0 if t > 2 else None, 2000.0 if t > 2 else None) for t in range(300)]
    plan = MeasurementPlan(prime_unlimited=False, warmup_s=5, min_duration_s=10, max_duration_s=30)
    protocol = MeasurementProtocol(plan, threshold_rps=100)
    run(protocol, samples)
    assert protocol.stop is Stop.NO_BATCHES
    assert "fewer than 2 micro-batches finished in 30 s" in protocol.failure_reason


def test_theodolites_fixed_protocol_cuts_a_fixed_warmup_and_measures_a_fixed_duration():
    samples = micro_batch_run(2000, lambda k: 1.0, 200)
    plan = MeasurementPlan(warmup_s=60, prime_unlimited=False, min_duration_s=30, max_duration_s=30)
    protocol = MeasurementProtocol(plan, threshold_rps=100, method="ols")
    phases = run(protocol, samples)
    assert Phase.PRIMING not in phases
    assert protocol.warmup_used_s == pytest.approx(60)
    assert protocol.summary()["measured_s"] == pytest.approx(30)
    assert protocol.summary()["primed_s"] is None


def test_the_stop_reason_is_recomputed_from_an_interval():
    assert stop_of(-10.0, 50.0, 100.0, "max-duration") == "certain"
    assert stop_of(90.0, 120.0, 100.0, "certain") == "max-duration"
    assert stop_of(None, None, 100.0, "not-settled") == "not-settled"
    assert stop_of(-10.0, 50.0, 100.0, "no-batches") == "no-batches"
    # with the batch-duration SLO's bound: a PASS needs both intervals on their side, a FAIL one of them
    assert stop_of(-10.0, 50.0, 100.0, "certain", (5.9, 6.4), 7.5) == "certain"
    assert stop_of(-10.0, 50.0, 100.0, "certain", (7.1, 8.0), 7.5) == "max-duration"
    assert stop_of(90.0, 120.0, 100.0, "max-duration", (8.1, 9.0), 7.5) == "certain"
    assert stop_of(-10.0, 50.0, 100.0, "certain", None, 7.5) == "certain"  # no interval recorded
    # a PASS on a falling lag stays one while the re-fit still falls certainly, else it is judged as any fit
    assert stop_of(-900.0, -300.0, 100.0, "lag-falling") == "lag-falling"
    assert stop_of(-900.0, -300.0, 100.0, "lag-falling", (8.1, 9.0), 7.5) == "certain"
    assert stop_of(-900.0, 50.0, 100.0, "lag-falling") == "certain"
    assert stop_of(-900.0, 150.0, 100.0, "lag-falling") == "max-duration"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"min_duration_s": 0}, "need 0 < duration <= max duration"),
        ({"min_duration_s": 30, "max_duration_s": 20}, "need 0 < duration <= max duration"),
        ({"warmup_s": -1}, "warm-up must be 'auto' or seconds >= 0"),
        ({"settle_tolerance": 1.0}, "settle tolerance must be in [0, 1)"),
        ({"measure_settled_batches": 5}, "0 <= measure_settled_batches <= settle_batches"),
    ],
)
def test_a_plan_refuses_values_it_cannot_run(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace(")", r"\)")):
        MeasurementPlan(**kwargs)


def test_a_plan_recorded_before_the_measurement_began_with_the_settled_batches_is_read_as_after_them():
    recorded = MeasurementPlan(measure_settled_batches=0).to_dict()
    del recorded["measure_settled_batches"], recorded["pass_on_falling_lag"]
    assert MeasurementPlan.from_dict(recorded).measure_settled_batches == 0
    assert MeasurementPlan.from_dict(recorded).pass_on_falling_lag is False  # recorded before it existed
    del recorded["fail_beyond_batch_bound"]
    assert MeasurementPlan.from_dict(recorded).fail_beyond_batch_bound is False
    assert MeasurementPlan.from_dict(MeasurementPlan().to_dict()) == MeasurementPlan()


# ---- the batch-aligned slope --------------------------------------------------------------------------------


def test_batch_aligned_keeps_the_first_sample_after_each_finished_batch():
    lag = TimeSeries.of([1, 2, 3, 4, 5, 6], [10, 20, 5, 15, 25, 7])
    ids = TimeSeries.of([2, 3, 4, 5, 6], [0, 1, 1, 1, 2])
    aligned = batch_aligned(lag, ids)
    assert aligned.timestamps_s.tolist() == [2, 3, 6] and aligned.values.tolist() == [20, 5, 7]


def test_batch_aligned_moves_each_point_back_to_its_commit():
    lag = TimeSeries.of([1, 2, 3], [1000, 600, 900])
    ids = TimeSeries.of([2, 3], [0, 1])
    ends = TimeSeries.of([2, 3], [1.75, 2.5])  # batch 0 committed 0.25 s before the sample, batch 1 0.5 s
    aligned = batch_aligned(lag, ids, ends, rate=400)
    assert aligned.timestamps_s.tolist() == [1.75, 2.5] and aligned.values.tolist() == [500, 700]


@pytest.mark.parametrize("period_s", [2.0, 3.7, 6.0])
def test_the_batch_aligned_interval_is_honest_under_a_saw_tooth(period_s):
    """A job that keeps up (true trend 0) with steady batches, judged over 50 s: batch-aligned fits one point
    per commit, with an interval that contains 0 about 95 % of the time (2 s batches sampled each second are
    the aliasing case the commit times correct), and narrower than the plain fit over every sample, which has
    to swallow the teeth."""
    misses_aligned = narrower = 0
    for seed in range(60):
        samples = micro_batch_run(2000, lambda k: period_s, 70, seed=seed)[15:65]
        t, lag, ids, _, ends = (np.array([s[i] for s in samples], dtype=float) for i in range(5))
        series, batch_ids, batch_ends = TimeSeries.of(t, lag), TimeSeries.of(t, ids), TimeSeries.of(t, ends)
        ols = lag_trend_estimate(series, warmup_s=0, method="ols")
        aligned = lag_trend_estimate(
            series, warmup_s=0, method="batch-aligned", batch_ids=batch_ids, batch_ends=batch_ends, rate=2000
        )
        misses_aligned += not aligned.low <= 0 <= aligned.high
        narrower += aligned.high - aligned.low < ols.high - ols.low
    assert misses_aligned <= 8  # a 95 % interval: about 3 in 60 miss
    assert narrower >= 50


def test_the_batch_aligned_slope_needs_the_batch_ids():
    with pytest.raises(ValueError, match="needs the batch-id series"):
        lag_trend_estimate(TimeSeries.of([1, 2, 3], [1, 2, 3]), warmup_s=0, method="batch-aligned")


def test_certainty_is_a_coin_toss_at_the_threshold_and_near_one_far_from_it():
    t = np.arange(60.0)
    rng = np.random.default_rng(1)
    noisy = TimeSeries.of(t, 50 * t + 200 * rng.standard_normal(t.size))
    estimate = lag_trend_estimate(noisy, warmup_s=0)
    assert estimate.certainty(estimate.slope) == pytest.approx(0.5)
    assert estimate.certainty(estimate.slope + 20 * estimate.stderr) > 0.999
    assert math.isclose(estimate.high - estimate.slope, estimate.slope - estimate.low)


def test_a_lag_that_is_zero_after_every_commit_has_an_exact_interval():
    t = np.arange(30.0)
    flat = lag_trend_estimate(
        TimeSeries.of(t, np.zeros(t.size)), warmup_s=0, method="batch-aligned", batch_ids=TimeSeries.of(t, t)
    )
    assert (flat.slope, flat.low, flat.high) == (0.0, 0.0, 0.0)
    assert flat.side_of(100) is Outcome.PASS and flat.certainty(100) == 1.0


@pytest.mark.parametrize(
    "max_batch_s, stop, certain",
    [
        (9.0, Stop.CERTAIN, True),  # 6 s batches well under the bound: the lag trend and the bound agree
        (
            5.5,
            Stop.CERTAIN,
            True,
        ),  # over it by less than the settling tolerance: the median's interval decides
        (4.0, Stop.BEYOND_BATCH_BOUND, True),  # well over it, not shortening: a certain FAIL before measuring
        (6.0, Stop.MAX_DURATION, False),  # at it: the lag trend is certain, the bound is not
    ],
)
def test_a_bounded_batch_duration_is_measured_until_its_median_is_certain_too(max_batch_s, stop, certain):
    samples = micro_batch_run(2000, lambda k: 1.0 if k < 3 else 6.0, 400, seed=3)
    plan = MeasurementPlan(max_warmup_s=60, min_duration_s=20, max_duration_s=120)
    protocol = MeasurementProtocol(plan, threshold_rps=100, offered_rate=2000, max_batch_s=max_batch_s)
    run(protocol, samples)
    assert protocol.stop is stop and protocol.certain is certain
    unbounded = MeasurementProtocol(plan, threshold_rps=100, offered_rate=2000)
    run(unbounded, samples)
    assert unbounded.stop is Stop.CERTAIN  # the lag trend alone was certain
    if stop is Stop.MAX_DURATION:
        assert protocol.batch_side() is None and unbounded.last_s < protocol.last_s


# recorded: UC3 8 000 on one instance (REF one below its demand, 2026-12-06), the batch bound stretched to 8.96 s;
# primed in three batches, then lengthening under the limit towards 24 s -- measured to a certain FAIL in 190 s
UC3_BEYOND_ITS_BOUND = [2.1, 4.3, 2.7, 9.4, 13.4, 16.5, 18.6, 22.2, 23.6, 23.5, 24.6, 24.1]


def test_batches_that_lengthen_beyond_the_bound_fail_certain_without_waiting_for_a_median():
    durations = UC3_BEYOND_ITS_BOUND
    samples = micro_batch_run(8000, lambda k: durations[min(k, len(durations) - 1)], 300, jitter=0.0)
    plan = MeasurementPlan(max_prime_s=30, max_warmup_s=90)  # the gates' bounds
    protocol = MeasurementProtocol(plan, threshold_rps=357, offered_rate=8000, max_batch_s=8.96)
    phases = run(protocol, samples)
    assert protocol.stop is Stop.BEYOND_BATCH_BOUND and protocol.certain is True
    assert Phase.MEASURING not in phases  # decided while settling: the third batch under the limit told
    assert protocol.last_s - protocol.start_s < 70  # it ended at 67 s
    assert "beyond the 8.96 s batch bound for good" in protocol.failure_reason
    assert (
        "13.4, 16.5, 18.6 s" in protocol.failure_reason
    )  # the one running when the limit came is not counted
    # without the rule the same batches are measured until the median's interval tells, minutes later
    waiting = MeasurementProtocol(
        dataclasses.replace(plan, fail_beyond_batch_bound=False), 357, offered_rate=8000, max_batch_s=8.96
    )
    run(waiting, samples)
    assert waiting.stop is not Stop.BEYOND_BATCH_BOUND and waiting.last_s - protocol.last_s > 60
    # without a batch bound, or in Theodolite's protocol (a fixed warm-up), the rule has nothing to say
    unbounded = MeasurementProtocol(plan, threshold_rps=357, offered_rate=8000)
    run(unbounded, samples)
    assert unbounded.stop is not Stop.BEYOND_BATCH_BOUND
    fixed = MeasurementPlan(warmup_s=60, prime_unlimited=False, min_duration_s=120, max_duration_s=120)
    theodolite = MeasurementProtocol(fixed, threshold_rps=357, offered_rate=8000, max_batch_s=8.96)
    run(theodolite, samples)
    assert theodolite.stop is not Stop.BEYOND_BATCH_BOUND


@pytest.mark.parametrize(
    "durations",
    [
        [
            1.0,
            1.0,
            1.0,
            20.0,
            16.0,
            12.0,
            9.0,
            7.0,
            6.0,
            5.5,
        ],  # a backlog worked off: shortening into the bound
        [1.0, 1.0, 1.0, 8.0, 7.6, 8.2, 7.9, 8.1, 7.8, 8.0],  # steady just beyond it, within the tolerance
        [1.0, 1.0, 1.0, 4.0, 6.0, 9.0, 9.5, 6.5, 6.2, 6.4],  # one batch over it by the margin, then back
    ],
    ids=["shortening", "within-the-tolerance", "one-long-batch"],
)
def test_batches_beyond_the_bound_that_shorten_or_lie_within_its_tolerance_are_measured(durations):
    samples = micro_batch_run(2000, lambda k: durations[min(k, len(durations) - 1)], 300, jitter=0.0)
    protocol = MeasurementProtocol(
        MeasurementPlan(max_prime_s=30, max_warmup_s=90),
        threshold_rps=100,
        offered_rate=2000,
        max_batch_s=7.0,
    )
    run(protocol, samples)
    assert protocol.stop is not Stop.BEYOND_BATCH_BOUND


@pytest.mark.parametrize(
    "durations, beyond",
    [
        ([9.0, 9.0, 9.0], True),
        ([12.0, 10.0, 12.0], True),  # not shortening: the newest no shorter than the oldest
        ([12.0, 10.0, 9.0], False),  # shortening: it may yet settle within the bound
        ([20.0, 8.0, 20.0], False),  # one within the margin
        ([9.0, 9.0], False),  # too few
    ],
)
def test_durations_beyond_a_bound(durations, beyond):
    assert durations_beyond_bound(durations, 7.5, 0.2) is beyond


def test_few_long_batches_that_already_doubled_end_at_the_plain_bound():
    # 8 then 20 s under the limit: a job falling behind already, no need to wait for a third batch
    samples = micro_batch_run(20000, lambda k: [1, 1, 1, 5, 8, 20, 100][min(k, 6)], 300)
    protocol = MeasurementProtocol(PLAN, threshold_rps=1000, offered_rate=20000)
    run(protocol, samples)
    assert protocol.stop is Stop.NOT_SETTLED and protocol.certain is True
    assert protocol.last_s - protocol.limited_at_s == pytest.approx(PLAN.max_warmup_s, abs=1)
    assert "no steady state within the 60 s warm-up bound: only 2 micro-batches" in protocol.failure_reason


def test_three_batches_on_a_line_do_not_make_a_verdict_certain():
    # recorded: UC3 2 000 on one instance at 926 records/s, its lag after three measured commits 5 173, 5 538
    # and 5 928 -- on a line, a "certain" FAIL, +61 [+61, +61] vs 46, on one degree of freedom; the same load
    # at a lower rate passed. Here a batch commits every 6 s, the lag after each commit at 5 500 but for
    # three on such a line, then back
    rate, after_commit = 926.0, {}
    for k in range(60):
        after_commit[k] = 5500.0 + (366.0 * (k - 5) if 6 <= k <= 8 else 0.0)
    samples = []
    for i in range(300):
        t = i + 0.5
        k = int(t // 6) - 1  # the last finished batch: batch k ends at 6 (k + 1) s
        if k < 0:
            samples.append((T0 + t, rate * t, None, None, None))
            continue
        end = 6.0 * (k + 1)
        samples.append((T0 + t, after_commit[k] + rate * (t - end), k, 5900.0, T0 + end))
    plan = MeasurementPlan(max_warmup_s=90)  # the gates' plan
    three = MeasurementProtocol(dataclasses.replace(plan, min_points=3), threshold_rps=46, offered_rate=rate)
    run(three, samples)
    assert three.stop is Stop.CERTAIN and three.estimate.points == 3  # what min_points=3 allowed
    assert three.estimate.side_of(46) is Outcome.FAIL and three.estimate.high - three.estimate.low < 1.0
    protocol = MeasurementProtocol(plan, threshold_rps=46, offered_rate=rate)
    run(protocol, samples)
    assert plan.min_points == 4 and protocol.estimate is not None and protocol.estimate.points >= 4
    assert protocol.estimate.high - protocol.estimate.low > 1.0  # an interval with a width
