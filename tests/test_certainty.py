"""Which verdicts a regression rests on, and whether they were certain (certainty.py), on scripted records."""

from pytest_theodolite.core.certainty import (
    to_confirm,
    uncertain_certificate,
    uncertain_regression,
    verdict_text,
)
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.records import RepetitionRecord, SubExperimentRecord
from pytest_theodolite.core.slo import LAG_TREND, SloVerdict


def record(resources: int, outcome: Outcome, stop: str = "certain", **protocol) -> SubExperimentRecord:
    slope = 50.0 if outcome is Outcome.PASS else 1500.0
    verdict = SloVerdict(LAG_TREND, outcome, slope, 1000.0, "", slope - 700, slope + 700)
    repetition = RepetitionRecord(0, (verdict,), {}, {"stop": stop, **protocol})
    return SubExperimentRecord.from_repetitions(20000, resources, 20000.0, [repetition])


def test_a_regression_on_certain_verdicts_rests_on_nothing_uncertain():
    change = [record(4, Outcome.FAIL)]
    assert uncertain_regression(change, 4, 0, [record(4, Outcome.PASS)]) is None


def test_the_changes_fail_at_the_reference_demand_decides():
    unsettled = record(4, Outcome.FAIL, "not-settled", certain=False, failure="no steady state within ...")
    why = uncertain_regression([unsettled], 4)
    assert why is not None and "the change's FAIL at 4 instances: no steady state within ..." in why
    # with a tolerance of 1 the FAIL at 5 decides, not the one at 4
    assert uncertain_regression([unsettled, record(5, Outcome.FAIL)], 4, 1) is None
    assert uncertain_regression([record(5, Outcome.FAIL), unsettled], 4, 0) is not None  # any order


def test_refs_uncertain_pass_at_its_demand_decides_too():
    ref = [record(3, Outcome.FAIL, "max-duration"), record(4, Outcome.PASS, "max-duration")]
    why = uncertain_regression([record(4, Outcome.FAIL)], 4, 0, ref, "REF")
    assert why is not None
    assert "REF's PASS at 4 instances: lag slope +50 [-650, +750] vs 1000 records/s" in why
    assert "FAIL at 3" not in why  # REF's FAIL below its demand decides nothing


def test_no_number_to_regress_from_means_nothing_to_rest_on():
    unsettled = [record(4, Outcome.FAIL, "max-duration")]
    assert uncertain_regression(unsettled, None) is None  # the reference's "none"
    assert uncertain_regression(unsettled, "unmeasured") is None


def test_results_written_before_the_flag_take_certainty_from_the_stop_reason():
    assert record(4, Outcome.FAIL, "falling-behind").certain
    assert not record(4, Outcome.FAIL, "max-duration").certain
    assert not record(4, Outcome.FAIL, "not-settled").certain
    assert record(4, Outcome.FAIL, "not-settled", certain=True).certain  # batches that doubled
    assert SubExperimentRecord.from_repetitions(
        1, 1, 1.0, [RepetitionRecord(0, (SloVerdict(LAG_TREND, Outcome.PASS, 0.0, 1.0),), {}, {})]
    ).certain  # a fixed protocol of old recorded no stop


def test_verdict_text_names_outcome_instances_and_why():
    assert verdict_text(record(1, Outcome.FAIL, "max-duration")).startswith(
        "FAIL at 1 instance: lag slope +1500 [+800, +2200] vs 1000 records/s"
    )


def test_an_uncertain_batch_duration_verdict_is_named_with_its_interval():
    from pytest_theodolite.core.slo import BATCH_DURATION

    lag = SloVerdict(LAG_TREND, Outcome.PASS, 50.0, 1000.0, "", -300.0, 400.0)  # certain
    batches = SloVerdict(BATCH_DURATION, Outcome.FAIL, 7.8, 7.5, "", 7.1, 8.4)  # across the bound
    repetition = RepetitionRecord(0, (lag, batches), {}, {"stop": "max-duration", "certain": False})
    fail = SubExperimentRecord.from_repetitions(16000, 4, 16000.0, [repetition])
    assert verdict_text(fail) == (
        "FAIL at 4 instances: median micro-batch duration 7.80 [7.10, 8.40] vs 7.5 s, the interval still "
        "across the threshold when the measurement's bound ended it"
    )
    why = uncertain_regression([fail], 4)
    assert why is not None and "median micro-batch duration 7.80" in why


def repeated(resources: int, *outcomes: Outcome, load: int = 12000) -> SubExperimentRecord:
    """A record with one certain repetition per outcome (slope +693 for a FAIL, +227 for a PASS)."""
    repetitions = [
        RepetitionRecord(
            i,
            (SloVerdict(LAG_TREND, o, 693.0 if o is Outcome.FAIL else 227.0, 600.0, "", 0.0, 0.0),),
            {},
            {"stop": "certain", "certain": True},
        )
        for i, o in enumerate(outcomes)
    ]
    return SubExperimentRecord.from_repetitions(load, resources, float(load), repetitions)


def test_repetitions_that_disagree_make_a_record_uncertain_and_are_named():
    flipped = repeated(2, Outcome.FAIL, Outcome.PASS)
    assert not flipped.certain and repeated(2, Outcome.FAIL, Outcome.FAIL).certain
    assert verdict_text(flipped).startswith(
        "PASS at 2 instances: its 2 repetitions disagreed (FAIL, lag slope +693 [+0, +0]; PASS, lag slope +227"
    )  # the median of +693 and +227 passes
    # the change's FAIL at REF's demand turned PASS in its confirmation: no regression rests on it
    why = uncertain_regression([repeated(1, Outcome.FAIL), flipped], 2, 0, [repeated(2, Outcome.PASS)])
    assert why is not None and "the change's PASS at 2 instances: its 2 repetitions disagreed" in why
    # REF's PASS at its demand failed its confirmation: its demand is not what the search saw
    ref_flipped = repeated(2, Outcome.PASS, Outcome.FAIL)
    why = uncertain_regression([repeated(2, Outcome.FAIL, Outcome.FAIL)], 2, 0, [ref_flipped], "REF")
    assert why is not None and "REF's" in why and "repetitions disagreed" in why
    # both reproduced: the regression stands
    assert (
        uncertain_regression(
            [repeated(2, Outcome.FAIL, Outcome.FAIL)], 2, 0, [repeated(2, Outcome.PASS, Outcome.PASS)]
        )
        is None
    )


def test_a_regression_on_certain_single_verdicts_is_confirmed_once_before_it_is_reported():
    change = [repeated(2, Outcome.FAIL), repeated(3, Outcome.PASS)]
    ref = [repeated(1, Outcome.FAIL), repeated(2, Outcome.PASS)]
    assert to_confirm(change, 3, 2, 0, ref) == (2, 2)
    assert to_confirm(change, 3, 2, 0) == (2, None)  # a stored baseline: only the change's FAIL
    assert to_confirm(change, 3, 2, 1, ref) == (None, None)  # within the tolerance: no regression
    assert to_confirm(change, 2, 2, 0, ref) == (None, None)  # equal demands
    assert to_confirm(change, None, None, 0, ref) == (None, None)  # REF none: nothing to regress from
    # the change's FAIL at 1 decides a regression against REF's 1 (demand "none" counts as above)
    assert to_confirm([repeated(1, Outcome.FAIL)], None, 1, 0, [repeated(1, Outcome.PASS)]) == (1, 1)
    # already confirmed (two repetitions each): nothing more to run
    confirmed = [repeated(2, Outcome.FAIL, Outcome.FAIL), repeated(3, Outcome.PASS)]
    assert to_confirm(confirmed, 3, 2, 0, [repeated(2, Outcome.PASS, Outcome.PASS)]) == (None, None)
    # uncertain: not comparable already, nothing to confirm
    unsettled = record(2, Outcome.FAIL, "not-settled", certain=False)
    assert to_confirm([unsettled], None, 2, 0) == (None, None)


def test_a_certified_pass_rests_on_refs_fail_at_the_most_instances_below_it():
    unsettled = record(3, Outcome.FAIL, "not-settled", certain=False, failure="no steady state within ...")
    assert uncertain_certificate([unsettled], 4) == "FAIL at 3 instances: no steady state within ..."
    # the FAIL nearest the change's pass decides, certain or not
    further_below = record(2, Outcome.FAIL, "not-settled", certain=False, failure="no steady state")
    assert uncertain_certificate([record(3, Outcome.FAIL), further_below], 4) is None
    assert uncertain_certificate([record(2, Outcome.FAIL), unsettled], 4) is not None
    # unless a certain FAIL at as many instances or more says REF needs more anyway
    assert uncertain_certificate([unsettled, record(4, Outcome.FAIL)], 4) is None
    assert uncertain_certificate([unsettled, record(4, Outcome.FAIL, "max-duration")], 4) is not None
    # nothing below the pass, or no number: nothing rests on REF
    assert uncertain_certificate([], 4) is None
    assert uncertain_certificate([record(4, Outcome.FAIL, "max-duration")], 4) is None
    assert uncertain_certificate([unsettled], None) is None
