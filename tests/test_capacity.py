"""Capacity per instance count from scripted micro-batches, and the demand derived from it (core/capacity.py)."""

import math

import pytest

from pytest_theodolite.core.capacity import (
    CapacityEstimate,
    CapacityRule,
    MicroBatch,
    batches_needed,
    counted_batches,
    derive_demand,
    estimate_capacity,
    phase_bound_s,
    predicted_pass,
    scaling_curve,
    settled_start,
    without_per_batch_cost,
)

RULE = CapacityRule(settle_batches=2, min_batches=5, precision=0.05)


def scripted(
    cap: int, mu: float, c0: float, count: int, *, start: float = 1000.0, jitter: tuple[float, ...] = (0.0,)
) -> list[MicroBatch]:
    """Full batches of `cap` records, each taking c0 + cap / mu seconds (times a jitter factor, cycled), one
    right after the other."""
    batches, t = [], start
    for i in range(count):
        duration = (c0 + cap / mu) * (1 + jitter[i % len(jitter)])
        batches.append(MicroBatch(i, t, duration, cap))
        t += duration
    return batches


def test_full_batches_give_their_records_over_their_cycles():
    batches = scripted(10_000, mu=5_000, c0=0.5, count=10)
    estimate = estimate_capacity(batches, instances=1, batch_cap=10_000, rule=RULE)
    # 10 000 records every 2.5 s: the per-batch cost is part of the capacity at this batch size
    assert estimate.records_per_s == pytest.approx(4_000)
    assert estimate.saturated
    assert estimate.batches == 10 - 2 - 1  # settling batches out, the first counted one opens the window
    assert estimate.low == pytest.approx(4_000) and estimate.high == pytest.approx(4_000)
    assert estimate.certain(RULE)


def test_the_interval_widens_with_the_batches_spread_and_narrows_with_their_number():
    noisy = scripted(10_000, mu=5_000, c0=0.5, count=8, jitter=(0.2, -0.2, 0.1, -0.1))
    few = estimate_capacity(noisy, instances=1, batch_cap=10_000, rule=RULE)
    assert few.low < few.records_per_s < few.high
    assert not few.certain(RULE)  # +-20 % batches, 5 of them: wider than 5 %
    many = estimate_capacity(
        scripted(10_000, mu=5_000, c0=0.5, count=80, jitter=(0.2, -0.2, 0.1, -0.1)),
        instances=1,
        batch_cap=10_000,
        rule=RULE,
    )
    assert many.relative_half_width < few.relative_half_width
    assert many.certain(RULE)
    assert many.low < 4_000 < many.high


#: the click-stream example's 170 000-record batches on one whole core, no priming (recorded 2026-11-26, ms)
WARMING = (
    3114,
    2906,
    2435,
    3619,
    2676,
    2431,
    2235,
    2011,
    2123,
    2341,
    1984,
    1995,
    2152,
    2304,
    2021,
    2160,
    1885,
)


def test_batches_still_falling_from_a_cold_start_are_left_out_until_they_settle():
    cycles = [ms / 1000 for ms in WARMING]
    start = settled_start(cycles, 0.95, 0.05, keep=3)
    assert 3 <= start <= 8  # the fall from 3.1 to about 2.1 s is dropped, the flat rest kept
    rest = cycles[start:]
    assert settled_start(rest, 0.95, 0.05, keep=3) == 0
    # jitter without a trend, and a trend smaller than the precision, are no reason to drop anything
    assert settled_start([2.0, 2.3, 1.8, 2.2, 1.9, 2.1, 2.0, 2.2], 0.95, 0.05, keep=3) == 0
    assert settled_start([2.04 - 0.001 * i for i in range(20)], 0.95, 0.05, keep=3) == 0
    # never fewer than `keep` left
    assert settled_start([10.0 - i for i in range(8)], 0.95, 0.05, keep=3) == 5


def test_the_estimate_counts_the_settled_batches_only():
    batches, t = [], 1000.0
    for i, ms in enumerate((5000, 5000, *WARMING)):  # two settling batches, then the recorded ones
        batches.append(MicroBatch(i, t, ms / 1000, 170_000))
        t += ms / 1000
    estimate = estimate_capacity(batches, instances=1, batch_cap=170_000, rule=RULE)
    assert estimate is not None
    assert estimate.records_per_s == pytest.approx(170_000 / 2.1, rel=0.05)  # not 170 000 / 2.4, the mean
    assert estimate.batches < len(WARMING) - 1


def test_batches_before_the_limit_and_the_settling_ones_do_not_count():
    fast = scripted(10_000, mu=50_000, c0=0.1, count=3)  # primed at full speed
    slow = scripted(10_000, mu=5_000, c0=0.5, count=8, start=fast[-1].end_s + 0.01)
    slow = [MicroBatch(b.batch_id + 3, b.start_s, b.duration_s, b.input_rows) for b in slow]
    window = counted_batches(fast + slow, RULE, 10_000, limited_from_s=slow[0].start_s)
    assert [b.batch_id for b in window] == list(range(5, 11))
    estimate = estimate_capacity(
        fast + slow, instances=1, batch_cap=10_000, rule=RULE, limited_from_s=slow[0].start_s
    )
    assert estimate.records_per_s == pytest.approx(4_000)


def test_the_window_starts_where_the_backlog_fills_the_batches_again():
    # priming emptied the backlog: the first limited batches are small, then full
    small = [MicroBatch(i, 1000.0 + i, 1.0, 2_000) for i in range(4)]
    full = scripted(10_000, mu=5_000, c0=0.5, count=6, start=1004.0)
    full = [MicroBatch(b.batch_id + 4, b.start_s, b.duration_s, b.input_rows) for b in full]
    window = counted_batches(small + full, CapacityRule(settle_batches=0), 10_000)
    assert window[0].batch_id == 3  # the batch before the first full one opens the window
    estimate = estimate_capacity(
        small + full, instances=1, batch_cap=10_000, rule=CapacityRule(settle_batches=0)
    )
    assert estimate.records_per_s == pytest.approx(4_000)


def test_a_job_that_takes_all_that_is_offered_gives_a_lower_bound():
    # batches below the cap: the job emptied its backlog, 3 000 records/s offered
    batches = [MicroBatch(i, 1000.0 + i, 1.0, 3_000) for i in range(10)]
    estimate = estimate_capacity(batches, instances=4, batch_cap=10_000, rule=RULE)
    assert not estimate.saturated
    assert estimate.records_per_s == pytest.approx(3_000)
    assert estimate.certain(RULE)
    assert estimate.text() == ">= 3,000 records/s (not saturated: a lower bound)"


def test_full_batches_that_end_before_their_trigger_interval_are_not_saturated():
    # a 5 s trigger: batches of 10 000 take 2 s and the next one starts 3 s later
    batches = [MicroBatch(i, 1000.0 + 5 * i, 2.0, 10_000) for i in range(10)]
    estimate = estimate_capacity(batches, instances=1, batch_cap=10_000, rule=RULE)
    assert not estimate.saturated
    assert estimate.records_per_s == pytest.approx(2_000)


def test_too_few_batches_give_no_estimate_and_batches_out_of_order_are_an_error():
    assert (
        estimate_capacity(scripted(10_000, 5_000, 0.5, 5), instances=1, batch_cap=10_000, rule=RULE) is None
    )
    overlapping = [MicroBatch(0, 0.0, 2.0, 10), MicroBatch(1, 0.5, 1.0, 10)] + [
        MicroBatch(i, 10.0 + i, 1.0, 10) for i in range(2, 8)
    ]
    with pytest.raises(ValueError, match="ended before the one before it"):
        estimate_capacity(overlapping, instances=1, batch_cap=10, rule=CapacityRule(settle_batches=0))


def test_a_phase_with_long_batches_gets_the_time_its_rule_needs_up_to_twice_its_bound():
    # 2 settling + 1 opening the window + 5 counted
    assert batches_needed(RULE) == 8
    assert phase_bound_s([], RULE, 60.0) == 60.0  # nothing finished yet
    assert phase_bound_s([2.1, 1.9, 2.4], RULE, 60.0) == 60.0  # short batches: the bound as it is
    # the click-stream example's 10-13 s batches: four fitted in 60 s; eight at their median now
    assert phase_bound_s([10.2, 11.5, 12.8], RULE, 60.0) == pytest.approx(8 * 11.5)
    assert phase_bound_s([22.0, 25.0], RULE, 60.0) == 120.0  # never beyond twice the bound
    assert phase_bound_s([10.2, 11.5, 12.8], CapacityRule(settle_batches=1), 60.0) == pytest.approx(7 * 11.5)


def test_a_rule_out_of_range_is_refused():
    with pytest.raises(ValueError, match="min_batches >= 3"):
        CapacityRule(min_batches=2)
    with pytest.raises(ValueError, match="precision in"):
        CapacityRule(precision=0)


def capacity(mu: float, half_width: float = 0.0, *, saturated: bool = True) -> CapacityEstimate:
    return CapacityEstimate(1, mu, mu - half_width, mu + half_width, 10, 20.0, saturated, 10_000)


@pytest.mark.parametrize(
    ("mu", "rate", "expected"),
    [
        (10_000, 5_000, True),  # far below: passes
        (10_000, 20_000, False),  # far above: fails
        (10_000, 10_000, None),  # at the capacity: the lag trend must decide
        (10_000, 10_200, None),  # within the guard band
        (10_000, 12_000, False),  # its bar, 12 000 x 0.95 = 11 400, lies above the band's 11 000
    ],
)
def test_a_verdict_is_predicted_only_outside_the_guard_band(mu, rate, expected):
    assert predicted_pass(capacity(mu), rate, threshold_share=0.05, guard=0.1) is expected


def test_a_lower_bound_passes_up_to_what_it_took_and_decides_nothing_above():
    took = capacity(20_000, saturated=False)
    assert predicted_pass(took, 15_000, 0.05, 0.1) is True
    assert predicted_pass(took, 25_000, 0.05, 0.1) is None


def test_demand_is_the_first_count_predicted_to_pass():
    capacities = {
        1: capacity(6_000, 200),
        2: capacity(11_000, 300),
        3: capacity(16_000, 400),
        4: capacity(21_000, 500),
    }
    derived = derive_demand(4_000, 4_000, capacities, threshold_share=0.05, guard=0.1)
    assert (derived.resources, derived.decided, derived.certified) == (1, True, ())
    assert derive_demand(14_000, 14_000, capacities, threshold_share=0.05, guard=0.1).resources == 3
    assert derive_demand(40_000, 40_000, capacities, threshold_share=0.05, guard=0.1).resources is None


def test_a_load_at_a_capacity_edge_is_certified_by_the_lag_trend_and_then_decided():
    capacities = {1: capacity(6_000, 200), 2: capacity(11_000, 300), 3: capacity(16_000, 400)}
    derived = derive_demand(11_500, 11_500, capacities, threshold_share=0.05, guard=0.1)
    assert not derived.decided and derived.to_certify == 2 and derived.resources is None
    # the lag trend says 2 instances pass: demand 2
    passed = derive_demand(11_500, 11_500, capacities, threshold_share=0.05, guard=0.1, certified={2: True})
    assert (passed.resources, passed.decided, passed.certified) == (2, True, (2,))
    # it says they fail: 3, which the capacities predict outside the band
    failed = derive_demand(11_500, 11_500, capacities, threshold_share=0.05, guard=0.1, certified={2: False})
    assert (failed.resources, failed.decided) == (3, True)


def test_the_scaling_curve_is_relative_to_one_instance():
    curve = scaling_curve({1: capacity(5_000), 2: capacity(9_000), 4: capacity(16_000, saturated=False)})
    assert curve == {1: 1.0, 2: pytest.approx(1.8)}
    assert scaling_curve({2: capacity(9_000)}) == {}


def test_an_estimate_survives_its_dict():
    estimate = capacity(5_000, 100)
    assert CapacityEstimate.from_dict(estimate.to_dict()) == estimate
    unbounded = CapacityEstimate(2, 5.0, -math.inf, math.inf, 3, 1.0, True, 10)
    assert CapacityEstimate.from_dict(unbounded.to_dict()) == unbounded


def test_two_batch_sizes_take_the_per_batch_cost_out():
    # T = 0.5 s + n / 10 000: batches of 40 000 give 8 889 records/s, of 10 000 give 6 667
    large = estimate_capacity(
        scripted(40_000, 10_000, 0.5, 10, jitter=(0.02, -0.02)), instances=2, batch_cap=40_000, rule=RULE
    )
    small = estimate_capacity(
        scripted(10_000, 10_000, 0.5, 10, jitter=(0.02, -0.02)), instances=2, batch_cap=10_000, rule=RULE
    )
    assert large.records_per_s == pytest.approx(8_889, rel=0.01)
    combined = without_per_batch_cost(large, small, confidence=0.95)
    assert combined.records_per_s == pytest.approx(10_000, rel=0.02)
    assert combined.per_batch_s == pytest.approx(0.5, rel=0.1)
    assert combined.low < 10_000 < combined.high
    # its interval is wider than either size's: a difference of two durations
    assert combined.relative_half_width > large.relative_half_width


def test_sizes_that_do_not_separate_a_per_batch_cost_leave_the_large_batches_estimate():
    large = estimate_capacity(scripted(40_000, 10_000, 0.0, 10), instances=1, batch_cap=40_000, rule=RULE)
    # small batches relatively faster than large ones: no c0 >= 0 fits, the large estimate stands
    faster = estimate_capacity(scripted(10_000, 12_000, 0.0, 10), instances=1, batch_cap=10_000, rule=RULE)
    assert without_per_batch_cost(large, faster, 0.95) is large
    took_all = capacity(5_000, saturated=False)
    assert without_per_batch_cost(took_all, large, 0.95) is took_all
