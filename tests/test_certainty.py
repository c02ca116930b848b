"""Which verdicts a regression rests on, and whether they were certain (certainty.py), on scripted records."""

from pytest_theodolite.certainty import uncertain_regression, verdict_text
from pytest_theodolite.results import RepetitionRecord, SubExperimentRecord
from pytest_theodolite.slo import LAG_TREND, Outcome, SloVerdict


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
    from pytest_theodolite.slo import BATCH_DURATION

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
