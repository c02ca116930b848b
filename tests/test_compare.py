"""Pull-request mode's decision logic on scripted outcomes: ABBA order, paired searches, verdicts."""

from pathlib import Path

import pytest

from pytest_theodolite.core.outcomes import Outcome, StepStatus, Verdict
from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.core.search import IncrementalSearch, Step, Strategy
from pytest_theodolite.judge.demand_points import shifted_guess
from pytest_theodolite.pull_request.paired import (
    CHANGE,
    REF,
    SAME_TESTBED,
    PairedDemandSearch,
    abba,
    compare_sides,
    measured_demand,
)
from pytest_theodolite.pull_request.target import CompareTarget
from pytest_theodolite.store.baseline import Baseline

P, F, I = Outcome.PASS, Outcome.FAIL, Outcome.INVALID


def test_abba_alternates_so_that_a_linear_drift_falls_on_both_sides_alike():
    sequence = [side for index in range(4) for side in abba(index)]
    assert sequence == [REF, CHANGE, CHANGE, REF, REF, CHANGE, CHANGE, REF]
    # a host that slows down by 1 per slot: both sides collect the same total drift over every 4 slots
    drift = {REF: 0, CHANGE: 0}
    for slot, side in enumerate(sequence):
        drift[side] += slot
    assert drift[REF] == drift[CHANGE]


def paired(strategy=Strategy.BASELINE_GUESS, lower_bound=True):
    return PairedDemandSearch(
        {
            side: IncrementalSearch(Metric.DEMAND, strategy, lower_bound, (1, 2, 3, 4))
            for side in (REF, CHANGE)
        }
    )


def scripted(needed: dict[str, dict[int, int | None]], broken=()):
    def oracle(side, load, resources):
        if (side, load, resources) in broken:
            return I
        need = needed[side][load]
        return P if need is not None and resources >= need else F

    return oracle


def judged(steps, tolerance=0):
    return compare_sides(
        "b", steps[CHANGE].x, measured_demand(steps[REF]), measured_demand(steps[CHANGE]), tolerance
    )


def test_sides_that_agree_run_the_same_pairs_in_abba_order():
    search = paired()
    needed = {REF: {4000: 1, 20000: 4}, CHANGE: {4000: 1, 20000: 4}}
    steps = search.measure(4000, scripted(needed), guess=1, exact_change=True)
    assert {side: step.optimum for side, step in steps.items()} == {REF: 1, CHANGE: 1}
    search.measure(20000, scripted(needed), guess=4, exact_change=True)
    assert search.order == [
        (REF, 4000, 1),
        (CHANGE, 4000, 1),
        (CHANGE, 20000, 4),
        (REF, 20000, 4),
        (REF, 20000, 3),
        (CHANGE, 20000, 3),
    ]


def test_a_regressed_change_keeps_probing_after_ref_is_done():
    search = paired()
    needed = {REF: {12000: 2}, CHANGE: {12000: 4}}
    steps = search.measure(12000, scripted(needed), guess=2)
    assert steps[REF].optimum == 2 and steps[CHANGE].optimum == 4
    assert search.order == [
        (REF, 12000, 2),
        (CHANGE, 12000, 2),  # change fails at 2: steps up; REF passes: steps down
        (CHANGE, 12000, 3),
        (REF, 12000, 1),
        (CHANGE, 12000, 4),
    ]
    point = judged(steps)
    assert point.verdict is Verdict.REGRESSION
    assert (point.baseline, point.measured) == (2, 4)


@pytest.mark.parametrize(
    ("ref", "change", "tolerance", "verdict"),
    [
        (2, 2, 0, Verdict.PASS),
        (2, 1, 0, Verdict.IMPROVEMENT),
        (2, 3, 0, Verdict.REGRESSION),
        (2, 3, 1, Verdict.PASS),
    ],
)
def test_the_change_is_judged_against_ref_with_the_tolerance(ref, change, tolerance, verdict):
    needed = {REF: {1000: ref}, CHANGE: {1000: change}}
    steps = paired().measure(1000, scripted(needed), guess=ref, exact_change=True)
    assert judged(steps, tolerance).verdict is verdict


def test_the_change_does_not_step_below_an_instance_count_where_ref_failed():
    search = paired()
    needed = {REF: {20000: 4}, CHANGE: {20000: 4}}
    steps = search.measure(20000, scripted(needed), guess=4)
    # both passed at 4 and step down to 3: REF runs first, fails, and the change's failing run is saved
    assert search.order == [(REF, 20000, 4), (CHANGE, 20000, 4), (REF, 20000, 3)]
    assert (steps[REF].optimum, steps[REF].status) == (4, "measured")
    assert (steps[CHANGE].optimum, steps[CHANGE].status) == (4, "at-most")
    point = compare_sides(
        "b", 20000, measured_demand(steps[REF]), measured_demand(steps[CHANGE]), at_most=True
    )
    assert point.verdict is Verdict.PASS and point.measured_text == "<=4"
    assert "at most 4 instances (fewer not run)" in point.describe()


def test_an_improvement_below_ref_is_seen_only_with_exact_change():
    needed = {REF: {1000: 2}, CHANGE: {1000: 1}}
    bounded = paired().measure(1000, scripted(needed), guess=2)
    assert (bounded[CHANGE].optimum, bounded[CHANGE].status) == (2, "at-most")
    assert judged(bounded).verdict is Verdict.PASS
    exact = paired().measure(1000, scripted(needed), guess=2, exact_change=True)
    assert judged(exact).verdict is Verdict.IMPROVEMENT


def test_the_change_steps_down_beside_ref_while_ref_passes():
    search = paired()
    needed = {REF: {1000: 1}, CHANGE: {1000: 1}}
    steps = search.measure(1000, scripted(needed), guess=2)
    # REF runs first at 1 (the change waits for its verdict), passes, and the change follows
    assert search.order == [(REF, 1000, 2), (CHANGE, 1000, 2), (REF, 1000, 1), (CHANGE, 1000, 1)]
    assert {side: (s.optimum, s.status) for side, s in steps.items()} == {
        REF: (1, "measured"),
        CHANGE: (1, "measured"),
    }


def test_a_change_that_passes_where_ref_failed_is_an_improvement_without_stepping_further():
    search = paired()
    needed = {REF: {1000: 3}, CHANGE: {1000: 2}}
    steps = search.measure(1000, scripted(needed), guess=2)
    assert search.order == [(REF, 1000, 2), (CHANGE, 1000, 2), (REF, 1000, 3)]
    assert (steps[CHANGE].optimum, steps[CHANGE].status) == (2, "at-most")
    assert judged(steps).verdict is Verdict.IMPROVEMENT


def test_none_on_the_change_side_where_ref_had_a_demand_is_a_regression():
    needed = {REF: {1000: 4}, CHANGE: {1000: None}}
    steps = paired().measure(1000, scripted(needed), guess=4)
    assert judged(steps).verdict is Verdict.REGRESSION


def test_a_side_that_could_not_be_measured_makes_the_load_neither_pass_nor_regression():
    needed = {REF: {1000: 2}, CHANGE: {1000: 2}}
    ref_broken = paired().measure(1000, scripted(needed, broken={(REF, 1000, 2)}), guess=2)
    point = judged(ref_broken)
    assert point.verdict is Verdict.NOT_COMPARABLE and "REF could not be measured" in point.reason
    change_broken = paired().measure(1000, scripted(needed, broken={(CHANGE, 1000, 2)}), guess=2)
    assert judged(change_broken).verdict is Verdict.UNMEASURED
    assert not judged(ref_broken).passed and not judged(change_broken).passed


def test_each_side_keeps_its_own_lower_bound():
    search = paired(strategy=Strategy.LINEAR)
    needed = {REF: {100: 1, 200: 2}, CHANGE: {100: 3, 200: 3}}
    search.measure(100, scripted(needed))
    search.measure(200, scripted(needed))
    change_probes = [r for side, load, r in search.order if side == CHANGE and load == 200]
    ref_probes = [r for side, load, r in search.order if side == REF and load == 200]
    assert change_probes == [3] and ref_probes == [1, 2]


def test_a_search_per_side_is_required():
    with pytest.raises(ValueError, match="one search per side"):
        PairedDemandSearch({REF: IncrementalSearch(Metric.DEMAND, Strategy.LINEAR, False, (1, 2))})


def test_ref_labels_name_the_ref_and_its_short_commit():
    commit = "5423128106906f402a8e604c768352ccf10f5853"
    assert CompareTarget("origin/main", commit, Path(), Path()).label == "REF origin/main (5423128)"
    assert CompareTarget(commit, commit, Path(), Path()).label == "REF 5423128"
    assert CompareTarget("5423128", commit, Path(), Path()).label == "REF 5423128"


def certified(needed, guess, broken=(), search=None, load=1000):
    search = search or paired()
    steps = search.measure(load, scripted(needed, broken), guess=guess, certify=True)
    return search, steps


def judged_certified(steps, tolerance=0):
    return compare_sides(
        "b",
        steps[CHANGE].x,
        measured_demand(steps[REF]),
        measured_demand(steps[CHANGE]),
        tolerance,
        at_most=steps[CHANGE].status == "at-most",
        ref_at_least=steps[REF].status == "at-least",
    )


def test_a_certified_load_runs_the_change_at_the_guess_and_ref_one_below_in_abba_order():
    search, steps = certified({REF: {1000: 2}, CHANGE: {1000: 2}}, guess=2)
    # two sub-experiments where the searches run three: REF's pass at 2 is not needed for the verdict
    assert search.order == [(REF, 1000, 1), (CHANGE, 1000, 2)]
    assert {side: (s.optimum, s.status) for side, s in steps.items()} == {
        REF: (2, "at-least"),
        CHANGE: (2, "at-most"),
    }
    point = judged_certified(steps)
    assert point.verdict is Verdict.PASS
    assert (point.baseline_text, point.measured_text) == (">=2", "<=2")
    assert (
        "REF at least 2 instances (not run at 2 or more, which the verdict does not need)"
        in point.describe(reference="REF")
    )
    # the next pair starts with the change: ABBA goes on across loads
    search.measure(2000, scripted({REF: {2000: 3}, CHANGE: {2000: 3}}), guess=3, certify=True)
    assert search.order[2:] == [(CHANGE, 2000, 3), (REF, 2000, 2)]


def test_a_certified_load_at_the_fewest_instances_runs_the_change_alone():
    search, steps = certified({REF: {1000: 1}, CHANGE: {1000: 1}}, guess=1)
    assert search.order == [(CHANGE, 1000, 1)]
    assert (steps[CHANGE].optimum, steps[CHANGE].status) == (1, "measured")
    assert (steps[REF].optimum, steps[REF].status, steps[REF].sub_experiments) == (1, "at-least", ())
    point = judged_certified(steps)
    assert point.verdict is Verdict.PASS
    # REF ran nothing here: its sentence must not claim a FAIL below
    assert point.describe(reference="REF").endswith(
        "REF at least 1 instance (not run at 1 or more, which the verdict does not need): pass"
    )


def test_a_ref_that_passes_below_moves_the_pair_down_and_a_change_failing_there_regressed():
    search, steps = certified({REF: {1000: 1}, CHANGE: {1000: 2}}, guess=3)
    # change passes at 3, REF at 2: down; the change passes at 2, REF at 1: down; the change fails at 1
    assert search.order == [
        (REF, 1000, 2),
        (CHANGE, 1000, 3),
        (CHANGE, 1000, 2),
        (REF, 1000, 1),
        (CHANGE, 1000, 1),
    ]
    assert {side: (s.optimum, s.status) for side, s in steps.items()} == {
        REF: (1, "measured"),
        CHANGE: (2, "measured"),
    }
    assert judged_certified(steps).verdict is Verdict.REGRESSION


def test_a_change_that_fails_where_ref_passed_below_climbs_alone_to_its_demand():
    search, steps = certified({REF: {1000: 1}, CHANGE: {1000: 4}}, guess=2)
    assert search.order == [(REF, 1000, 1), (CHANGE, 1000, 2), (CHANGE, 1000, 3), (CHANGE, 1000, 4)]
    assert (steps[CHANGE].optimum, steps[CHANGE].status) == (4, "measured")
    assert (steps[REF].optimum, steps[REF].status) == (1, "measured")
    point = judged_certified(steps)
    assert point.verdict is Verdict.REGRESSION and (point.baseline, point.measured) == (1, 4)


def test_sides_that_both_fail_move_the_pair_up_and_a_change_that_passes_there_is_certified():
    search, steps = certified({REF: {1000: 3}, CHANGE: {1000: 3}}, guess=2)
    assert search.order == [(REF, 1000, 1), (CHANGE, 1000, 2), (CHANGE, 1000, 3), (REF, 1000, 2)]
    assert {side: (s.optimum, s.status) for side, s in steps.items()} == {
        REF: (3, "at-least"),
        CHANGE: (3, "measured"),
    }
    assert judged_certified(steps).verdict is Verdict.PASS


def test_a_change_that_no_instance_count_carries_is_none_and_ref_is_run_at_the_most():
    _, both_none = certified({REF: {1000: None}, CHANGE: {1000: None}}, guess=4)
    assert {side: (s.optimum, s.status) for side, s in both_none.items()} == {
        REF: (None, "none"),
        CHANGE: (None, "none"),
    }
    assert judged_certified(both_none).verdict is Verdict.PASS
    search, ref_carries = certified({REF: {1000: 4}, CHANGE: {1000: None}}, guess=4)
    assert search.order == [(REF, 1000, 3), (CHANGE, 1000, 4), (REF, 1000, 4)]
    assert judged_certified(ref_carries).verdict is Verdict.REGRESSION
    # where the change runs first in its pair, REF follows where the change's verdict needs it: at its FAIL
    later = paired()
    later.pairs = 1
    certified({REF: {1000: None}, CHANGE: {1000: None}}, guess=4, search=later)
    assert later.order == [(CHANGE, 1000, 4), (REF, 1000, 4)]


def test_a_side_that_could_not_be_measured_ends_a_certified_load_unjudged():
    _, ref_broken = certified({REF: {1000: 2}, CHANGE: {1000: 2}}, guess=2, broken={(REF, 1000, 1)})
    assert ref_broken[REF].status == "unmeasured"
    assert judged_certified(ref_broken).verdict is Verdict.NOT_COMPARABLE
    _, change_broken = certified({REF: {1000: 2}, CHANGE: {1000: 2}}, guess=2, broken={(CHANGE, 1000, 2)})
    assert judged_certified(change_broken).verdict is Verdict.UNMEASURED


def test_a_certified_refs_lower_bound_restricts_its_next_load_and_a_linear_search_is_never_certified():
    search, _ = certified({REF: {1000: 2, 2000: 2}, CHANGE: {1000: 2, 2000: 2}}, guess=2)
    search.measure(2000, scripted({REF: {2000: 2}, CHANGE: {2000: 2}}), guess=2, certify=True)
    # REF's demand at 1000 is at least 2, so at 2000 nothing below 2 is run on its side: the change alone
    assert search.order[2:] == [(CHANGE, 2000, 2)]
    linear = paired(strategy=Strategy.LINEAR)
    linear.measure(1000, scripted({REF: {1000: 2}, CHANGE: {1000: 2}}), certify=True)
    assert linear.order == [(REF, 1000, 1), (CHANGE, 1000, 1), (CHANGE, 1000, 2), (REF, 1000, 2)]


def quick(needed, guess, broken=(), search=None, load=1000):
    """A certified load without REF below (ref_below=False: the paired read certain of the cost)."""
    search = search or paired()
    steps = search.measure(load, scripted(needed, broken), guess=guess, certify=True, ref_below=False)
    return search, steps


def judged_quick(steps):
    return compare_sides(
        "b",
        steps[CHANGE].x,
        measured_demand(steps[REF]),
        measured_demand(steps[CHANGE]),
        at_most=steps[CHANGE].status == "at-most",
        ref_at_least=steps[REF].status == "at-least",
        ref_expected=steps[REF].status == "expected",
    )


def test_without_ref_below_a_change_passing_at_the_guess_is_the_verdict_and_ref_is_not_run():
    search, steps = quick({REF: {1000: 2}, CHANGE: {1000: 2}}, guess=2)
    assert search.order == [(CHANGE, 1000, 2)]
    assert (steps[REF].optimum, steps[REF].status, steps[REF].sub_experiments) == (2, "expected", ())
    assert (steps[CHANGE].optimum, steps[CHANGE].status) == (2, "at-most")
    point = judged_quick(steps)
    assert point.verdict is Verdict.PASS and (point.baseline_text, point.measured_text) == ("~2", "<=2")
    assert "REF not run, expected to need 2 instances" in point.describe(reference="REF")
    # an expectation is not REF's measurement: its demand function and the next load's guess do not hold it
    assert 1000 not in search.searches[REF].result((1000,)).demand
    assert search.searches[REF].previous(2000) is None


def test_without_ref_below_a_ref_that_would_pass_below_goes_unseen_as_documented():
    # REF needs 1, the change 2: certified, REF's pass below moves the pair down and the regression shows;
    # without REF below the change's pass at the guess is the verdict (the paired read judged the cost)
    _, with_ref_below = certified({REF: {1000: 1}, CHANGE: {1000: 2}}, guess=2)
    assert judged_certified(with_ref_below).verdict is Verdict.REGRESSION
    _, without = quick({REF: {1000: 1}, CHANGE: {1000: 2}}, guess=2)
    assert judged_quick(without).verdict is Verdict.PASS


def test_without_ref_below_a_change_failing_at_the_guess_runs_ref_there_and_goes_on_certified():
    # both fail at the guess (a slower host): the pair moves up, REF's FAIL at 2 certifies the change's pass at 3
    search, steps = quick({REF: {1000: 3}, CHANGE: {1000: 3}}, guess=2)
    assert search.order == [(CHANGE, 1000, 2), (REF, 1000, 2), (CHANGE, 1000, 3)]
    assert {side: (s.optimum, s.status) for side, s in steps.items()} == {
        REF: (3, "at-least"),
        CHANGE: (3, "measured"),
    }
    assert judged_quick(steps).verdict is Verdict.PASS
    # REF passes where the change failed: the change climbs alone, a regression
    search, steps = quick({REF: {1000: 2}, CHANGE: {1000: 4}}, guess=2)
    assert search.order == [(CHANGE, 1000, 2), (REF, 1000, 2), (CHANGE, 1000, 3), (CHANGE, 1000, 4)]
    point = judged_quick(steps)
    assert point.verdict is Verdict.REGRESSION and (point.baseline, point.measured) == (2, 4)
    # the change unmeasured at the guess: REF runs there too, the load unjudged
    _, broken = quick({REF: {1000: 2}, CHANGE: {1000: 2}}, guess=2, broken={(CHANGE, 1000, 2)})
    assert judged_quick(broken).verdict is Verdict.UNMEASURED


def test_without_ref_below_the_fewest_instances_and_a_load_without_a_guess_are_certified_as_before():
    search, steps = quick({REF: {1000: 1}, CHANGE: {1000: 1}}, guess=1)
    assert search.order == [(CHANGE, 1000, 1)] and steps[REF].status == "at-least"
    # no guess (no stored baseline): nothing names the demand expected, so REF runs below the change's pass
    search = paired(strategy=Strategy.INITIAL_GUESS, lower_bound=False)
    needed = {REF: {1000: 2, 2000: 2}, CHANGE: {1000: 2, 2000: 2}}
    search.measure(1000, scripted(needed), certify=True, ref_below=False)
    steps = search.measure(2000, scripted(needed), certify=True, ref_below=False)
    ran = sorted((side, r) for side, load, r in search.order if load == 2000)
    assert ran == [(CHANGE, 2), (REF, 1)]  # the change at 2, REF below it
    assert steps[REF].status == "at-least"


def test_a_guess_is_scaled_by_how_far_ref_lay_from_the_baseline_at_the_load_before():
    stored = Baseline("b", {12: 1, 20: 2, 26: 4, 30: None}, {}, SAME_TESTBED)
    resources = (1, 2, 3, 4)

    def ref_at(load: int, demand: int | None, status: str = StepStatus.MEASURED) -> Step:
        return Step(load, demand, status, ())

    # REF needed half the baseline's instances at 20: 26 starts at half of 4
    assert shifted_guess(4, stored, ref_at(20, 1), resources) == 2
    # rounded up, and never below the demand before it
    assert shifted_guess(3, stored, ref_at(20, 1), resources) == 2
    assert shifted_guess(2, stored, ref_at(20, 1), resources) == 1
    # more than the baseline's: scaled up, within the instances there are
    assert shifted_guess(4, stored, ref_at(20, 3, StepStatus.AT_LEAST), resources) == 4
    assert shifted_guess(2, stored, ref_at(12, 2), resources) == 4
    # where the load before met its baseline, had no number, or no baseline: the guess as given
    assert shifted_guess(4, stored, ref_at(20, 2), resources) == 4
    assert shifted_guess(4, stored, ref_at(20, None), resources) == 4
    assert shifted_guess(4, stored, ref_at(30, 2), resources) == 4
    assert shifted_guess(4, stored, ref_at(8, 1), resources) == 4
    assert shifted_guess(4, stored, None, resources) == 4
    assert shifted_guess(4, None, ref_at(20, 1), resources) == 4
    assert shifted_guess(None, stored, ref_at(20, 1), resources) is None
