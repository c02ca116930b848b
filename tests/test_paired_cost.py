"""The paired cost comparison (core/paired_cost.py) on scripted batches, and the backlog read's batch selection
and plan (engine/backlog_read.py) without a broker or Spark."""

import pytest

from pytest_theodolite.core.capacity import MicroBatch
from pytest_theodolite.core.paired_cost import paired_cost
from pytest_theodolite.engine.backlog_read import BacklogPlan, BacklogRead, full_batches


def test_batches_are_compared_by_number_so_what_falls_on_both_cancels():
    ref = [2.0e-5, 1.0e-5, 1.0e-5, 1.0e-5]
    change = [2.4e-5, 1.1e-5, 1.2e-5, 1.3e-5]  # a stall in the first batch on both sides
    compared = paired_cost(ref, change)
    assert compared.batch_ratio == pytest.approx(1.2)  # the median of 1.2, 1.1, 1.2, 1.3
    assert compared.change == pytest.approx(0.2)
    assert compared.change_median / compared.ref_median == pytest.approx(1.25)  # by medians: 1.25 over 1.0
    assert compared.pairs == 4
    assert compared.text() == (
        "task CPU per record, change over REF batch by batch: +20.0% over 4 batches (medians 10.00 and 12.50 us)"
    )
    assert compared.to_dict()["batch_ratio"] == pytest.approx(1.2)


def test_a_longer_side_is_paired_as_far_as_the_shorter_goes_and_an_empty_one_is_named():
    assert paired_cost([1.0, 1.0], [1.0, 2.0, 9.0]).batch_ratio == pytest.approx(1.5)  # 1.0 and 2.0
    assert paired_cost([1.0, 1.0], [1.0, 2.0, 9.0]).pairs == 2
    with pytest.raises(ValueError, match="the change measured no full batch"):
        paired_cost([1.0], [])
    with pytest.raises(ValueError, match="REF and the change measured no full batch"):
        paired_cost([], [])
    with pytest.raises(ValueError, match="must be positive"):
        paired_cost([1.0, 0.0], [1.0, 1.0])


def test_a_backlog_read_measures_the_full_batches_after_the_fill_and_their_task_cpu():
    batches = {
        0: MicroBatch(0, 90.0, 5.0, 120_000),  # before the backlog was filled: not measured
        1: MicroBatch(1, 101.0, 5.0, 120_000),
        2: MicroBatch(2, 106.0, 5.0, 60_000),  # not full
        3: MicroBatch(3, 111.0, 5.0, 119_000),
    }
    assert [b.batch_id for b in full_batches(batches, 120_000, 100.0)] == [1, 3]
    read = BacklogRead((batches[1], batches[3]), (0.6, None), 120.0)
    assert read.task_cpu_per_record_s() == pytest.approx([5e-6])  # batch 3's figure is missing
    assert read.wall_per_record_s() == pytest.approx([5.0 / 120_000, 5.0 / 119_000])


def test_a_backlog_plan_refuses_what_cannot_be_read_and_says_which():
    assert BacklogPlan().batch_records == 120_000
    with pytest.raises(ValueError, match="batches >= 1"):
        BacklogPlan(batches=0)
    with pytest.raises(ValueError, match="fill_factor, fill_s and max_read_s above 0"):
        BacklogPlan(fill_s=0)
