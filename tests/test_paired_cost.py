"""The paired cost comparison (core/paired_cost.py) on scripted batches, the backlog read's batch selection and
plan (engine/backlog_read.py), and pull-request mode's paired read with scripted sides: without a broker or
Spark."""

import json
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_theodolite.core.capacity import MicroBatch
from pytest_theodolite.core.paired_cost import (
    MIN_JUDGED_PAIRS,
    batch_ratios,
    check_paired_cost,
    check_paired_cost_twice,
    first_certain_pass,
    paired_cost,
    paired_cost_by_leg,
    rose_beyond,
)
from pytest_theodolite.engine.backlog_read import (
    BacklogPlan,
    BacklogRead,
    backlog_beyond_running_batch,
    backlog_drained,
    cycle_s,
    fill_over,
    full_batches,
    lag_behind,
    leg_full_batches,
    measured_batches,
    measured_by_leg,
    read_over,
    settled_batches,
)
from pytest_theodolite.report.paired import paired_read_note
from theodolite_generator import Workload


def test_batches_are_compared_by_number_so_what_falls_on_both_cancels():
    ref = [2.0e-5, 1.0e-5, 1.0e-5, 1.0e-5]
    change = [2.4e-5, 1.1e-5, 1.2e-5, 1.3e-5]  # a stall in the first batch on both sides
    compared = paired_cost(ref, change)
    assert compared.batch_ratio == pytest.approx(1.2)  # the median of 1.2, 1.1, 1.2, 1.3
    assert compared.change == pytest.approx(0.2)
    assert compared.change_median / compared.ref_median == pytest.approx(1.25)  # by medians: 1.25 over 1.0
    assert compared.pairs == 4
    assert compared.text() == (
        "time per record, change over REF batch by batch: +20.0% over 4 batches (medians 10.00 and 12.50 us)"
    )
    assert compared.to_dict()["batch_ratio"] == pytest.approx(1.2)


# the batch-by-batch ratios of a clean and an injected pull-request run of the click-stream gate, 2026-11-29
# (docs/lab-notes/capacity.md): a batch stalled on one side reads far off
#: beyond +7 % by the median, but twelve of them not significant (p 0.13, a bursty hour's read); 24 are (p 0.049)
SHORT_OF_SIGNIFICANT = [1.12, 1.10, 1.11, 0.86, 0.95, 1.13, 0.92, 1.14, 1.09, 0.88, 1.15, 1.12]
#: beyond +7 % by the median, and far from significant however many of them (p 0.60; 24: 0.66)
SCATTERED = [1.12, 1.10, 1.11, 0.80, 0.85, 1.13, 0.82, 1.14, 1.09, 0.78, 1.15, 1.12]
CLEAN_RATIOS = [0.996, 0.936, 1.013, 0.881, 1.040, 0.904, 1.012, 1.014, 0.929, 1.078, 0.992, 1.022]
DEARER_RATIOS = [1.039, 1.001, 1.017, 1.176, 1.115, 0.989, 1.166, 1.270, 1.289, 1.100, 1.121, 1.081]


def test_a_change_is_a_cost_regression_only_beyond_the_tolerance_and_significant():
    from pytest_theodolite.core.outcomes import CostStatus

    ref = [1.0e-5] * 12
    clean = paired_cost(ref, [1.0e-5 * r for r in CLEAN_RATIOS])
    dearer = paired_cost(ref, [1.0e-5 * r for r in DEARER_RATIOS])
    assert clean.p_value > 0.3 and dearer.p_value < 0.001
    assert check_paired_cost(clean, 0.07).status == CostStatus.PASS
    judged = check_paired_cost(dearer, 0.07)
    assert judged.status == CostStatus.REGRESSION and judged.relative == pytest.approx(0.1075)
    assert judged.text.startswith("+11% (tolerance 7%, p 0.0")
    assert check_paired_cost(dearer, 0.12).status == CostStatus.PASS  # significant, within the tolerance
    assert check_paired_cost(dearer, None).status == CostStatus.PASS  # no tolerance: reported only
    # beyond the tolerance by its median, but half the batches cheaper: not significant
    mixed = paired_cost(ref, [1.0e-5 * r for r in (1.3, 0.8, 1.3, 0.8, 1.3, 0.8, 1.3)])
    assert mixed.change == pytest.approx(0.3) and mixed.p_value > 0.05
    assert check_paired_cost(mixed, 0.07).status == CostStatus.PASS
    few = paired_cost(ref[: MIN_JUDGED_PAIRS - 1], [1.3e-5] * (MIN_JUDGED_PAIRS - 1))
    assert few.p_value is None
    unsure = check_paired_cost(few, 0.07)
    assert (
        unsure.status == CostStatus.NOT_COMPARED and "5 pairs of batches, fewer than the 6" in unsure.reason
    )
    same = paired_cost(ref, ref)
    assert same.p_value == 1.0 and check_paired_cost(same, 0.07).status == CostStatus.PASS


def test_a_read_may_stop_as_a_pass_once_its_ratios_lie_certainly_below_the_tolerance_never_as_a_regression():
    # the clean run's ratios are certainly below +7 % once enough of them are in; never before six pairs
    stopped = first_certain_pass(CLEAN_RATIOS, 0.07)
    assert stopped is not None and MIN_JUDGED_PAIRS <= stopped < len(CLEAN_RATIOS)
    assert first_certain_pass([0.9] * 5, 0.07) is None  # five level pairs: too few for any p-value
    assert first_certain_pass([0.9] * 6, 0.07) == MIN_JUDGED_PAIRS
    # ratios at the tolerance itself or above it never stop: the full read decides those
    assert first_certain_pass([1.07] * 12, 0.07) is None
    assert first_certain_pass(DEARER_RATIOS, 0.07) is None
    # the same ratios certain under a wider tolerance, not under a narrower one
    assert first_certain_pass([1.04, 1.05, 1.03, 1.06, 1.04, 1.05, 1.04], 0.10) == MIN_JUDGED_PAIRS
    assert first_certain_pass([1.04, 1.05, 1.03, 1.06, 1.04, 1.05, 1.04], 0.03) is None


def test_a_second_read_is_judged_with_the_first_both_must_rise_and_their_pairs_together_be_significant():
    from pytest_theodolite.core.outcomes import CostStatus

    def read(ratios):
        return paired_cost([1.0] * len(ratios), ratios)

    short, scattered, dearer, clean = (
        read(r) for r in (SHORT_OF_SIGNIFICANT, SCATTERED, DEARER_RATIOS, CLEAN_RATIOS)
    )
    assert short.ratios == tuple(SHORT_OF_SIGNIFICANT) and short.change == pytest.approx(0.105)
    # what is read again: a median beyond the tolerance, significant or not, with pairs enough to judge
    assert check_paired_cost(short, 0.07).status == CostStatus.PASS and short.p_value > 0.05
    assert rose_beyond(short, 0.07) and rose_beyond(dearer, 0.07) and rose_beyond(scattered, 0.07)
    assert not rose_beyond(clean, 0.07) and not rose_beyond(short, 0.12) and not rose_beyond(short, None)
    assert not rose_beyond(read(SHORT_OF_SIGNIFICANT[:5]), 0.07)  # no p-value: not judged, not read again

    # twelve pairs short of significance and twelve more alike: 24 pairs are
    twice = check_paired_cost_twice(short, short, 0.07)
    assert twice.status == CostStatus.REGRESSION and twice.p_value < 0.05 < short.p_value
    # the smaller rise is the figure, whichever read it was
    assert check_paired_cost_twice(dearer, short, 0.07).relative == pytest.approx(0.105)
    assert check_paired_cost_twice(short, dearer, 0.07).relative == pytest.approx(0.105)
    # both beyond the tolerance, but so scattered that together they are not significant: a pass
    loose = check_paired_cost_twice(scattered, scattered, 0.07)
    assert loose.status == CostStatus.PASS and loose.relative == pytest.approx(0.105) and loose.p_value > 0.5
    # a second read within the tolerance decides as one read would: passed by its figure, or not judged
    assert check_paired_cost_twice(dearer, clean, 0.07) == check_paired_cost(clean, 0.07)
    few = read(CLEAN_RATIOS[:4])
    assert check_paired_cost_twice(dearer, few, 0.07).status == CostStatus.NOT_COMPARED


def test_a_longer_side_is_paired_as_far_as_the_shorter_goes_and_an_empty_one_is_named():
    assert paired_cost([1.0, 1.0], [1.0, 2.0, 9.0]).batch_ratio == pytest.approx(1.5)  # 1.0 and 2.0
    assert paired_cost([1.0, 1.0], [1.0, 2.0, 9.0]).pairs == 2
    assert batch_ratios([1.0, 2.0], [1.5, 1.0, 9.0]) == [1.5, 0.5]  # change over REF, batch by batch
    with pytest.raises(ValueError, match="the change measured no full batch"):
        paired_cost([1.0], [])
    with pytest.raises(ValueError, match="REF and the change measured no full batch"):
        paired_cost([], [])
    with pytest.raises(ValueError, match="must be positive"):
        paired_cost([1.0, 0.0], [1.0, 1.0])


def test_a_backlog_read_measures_the_full_batches_after_the_fill_their_cycles_and_task_cpu():
    batches = {
        0: MicroBatch(0, 90.0, 5.0, 120_000),  # before the backlog was filled: not measured
        1: MicroBatch(1, 101.0, 5.0, 120_000),
        2: MicroBatch(2, 106.5, 5.0, 60_000),  # not full
        3: MicroBatch(3, 111.0, 5.0, 119_000),
    }
    assert [b.batch_id for b in full_batches(batches, 120_000, 100.0)] == [1, 3]
    # a batch's cycle runs to the next batch's start, the driver's work between them included
    assert cycle_s(batches[1], batches) == pytest.approx(5.5)
    assert cycle_s(batches[3], batches) is None  # no later batch finished
    read = BacklogRead((batches[1], batches[3]), (0.6, None), 120.0, cycle_s=(5.5, None))
    assert read.task_cpu_per_record_s() == pytest.approx([5e-6])  # batch 3's figure is missing
    assert read.wall_per_record_s() == pytest.approx([5.0 / 120_000, 5.0 / 119_000])
    assert read.cycle_per_record_by_leg() == [[pytest.approx(5.5 / 120_000)]]
    assert BacklogRead((batches[1],), (0.6,), 120.0).cycle_per_record_by_leg() == [[]]  # none recorded


def test_a_backlog_read_ends_where_its_backlog_has_run_out():
    full = {i: MicroBatch(i, 100.0 + i, 0.5, 2_000) for i in range(3)}
    assert not backlog_drained(full, 2_000, 100.0)
    assert not backlog_drained(full, 2_000, 100.0, lag=1)
    # a batch after the fill that read less than the cap: the topic had no more
    assert backlog_drained({**full, 3: MicroBatch(3, 103.0, 0.5, 1_200)}, 2_000, 100.0)
    # one before the fill's end tells nothing: the generator still sent
    assert not backlog_drained({**full, 3: MicroBatch(3, 99.0, 0.5, 1_200)}, 2_000, 100.0)
    # a job that kept pace with the fill runs no batch after it: its lag says it has read everything
    assert backlog_drained({}, 2_000, 100.0, lag=0)
    assert not backlog_drained({}, 2_000, 100.0, lag=None)


def test_a_backlog_reads_lag_is_unknown_where_offsets_are_missing_or_unreadable():
    progress = {"sources": [{"endOffset": '{"input": {"0": 40, "1": 60}}'}]}
    assert lag_behind({0: 50, 1: 60}, progress, "input") == 10
    assert lag_behind({0: 40, 1: 60}, progress, "input") == 0
    # the broker did not answer: no end offsets, so no early end
    assert lag_behind({}, progress, "input") is None
    # an offset that cannot be read only prevents an early end, it does not error the read
    assert lag_behind({0: 50}, {"sources": [{"endOffset": "not json"}]}, "input") is None
    assert lag_behind({0: 50}, {"sources": [{"endOffset": {"input": [1, 2]}}]}, "input") is None


def test_a_backlog_read_gives_its_measured_batches_max_read_s_from_the_end_of_the_warm_ones():
    plan = BacklogPlan(warm_batches=3, batches=12, max_read_s=300.0, max_warm_s=180.0)
    # a slow host (2026-12-01): 25-s batches, the warm ones done 100 s after the fill
    slow = [MicroBatch(i, 1000.0 + 25 * i + 25, 25.0, 120_000) for i in range(16)]
    warm_end = slow[2].end_s
    assert warm_end == 1100.0
    assert not read_over(
        plan, slow[:3], 1000.0, 1350.0
    )  # a cap counted from the fill would have ended it here
    assert not read_over(plan, slow[:14], 1000.0, warm_end + 299.0)
    assert read_over(plan, slow[:14], 1000.0, warm_end + 300.0)  # 11 measured: the time is up
    # every batch it measures read, and the one after, whose start ends the last one's cycle
    assert not read_over(plan, slow[:15], 1000.0, 1001.0) and read_over(plan, slow, 1000.0, 1001.0)
    # a read still warming when max_warm_s is up measures nothing more
    assert not read_over(plan, slow[:2], 1000.0, 1179.0)
    assert read_over(plan, slow[:2], 1000.0, 1180.0)
    # without warm batches the measured ones count from the fill
    cold = BacklogPlan(warm_batches=0, batches=2, max_read_s=50.0)
    assert not read_over(cold, [], 1000.0, 1049.0) and read_over(cold, [], 1000.0, 1050.0)


def test_a_measured_batch_is_told_once_a_later_batch_has_finished_its_cycle_then_known():
    plan = BacklogPlan(warm_batches=1, batches=3)
    full = [MicroBatch(i, 10.0 * i, 9.0, 120_000) for i in (4, 5, 6, 7, 8)]
    # batch 4 is warm; 5 and 6 were followed by a later batch (7, not full: a stopped read's last)
    assert [b.batch_id for b in settled_batches(plan, full[:3], latest_id=7)[0]] == [5, 6]
    assert [b.batch_id for b in settled_batches(plan, full[:3], latest_id=6)[0]] == [5]
    # never more than the batches the read measures
    assert [b.batch_id for b in settled_batches(plan, full, latest_id=9)[0]] == [5, 6, 7]
    assert settled_batches(plan, full[:1], latest_id=4) == [[]]


def test_a_read_in_legs_skips_each_new_executors_warm_batches_and_shares_out_the_measured_ones():
    plan = BacklogPlan(warm_batches=1, batches=4, legs=2, max_read_s=100.0)
    assert plan.leg_batches == 2
    # leg 0 from the fill at 0 s; the executor replaced and leg 1 begun at 35 s, while batch 3 (from 30 s) ran
    full = [MicroBatch(i, 10.0 * i, 9.0, 120_000) for i in range(9)]
    by_leg = measured_by_leg(plan, full, (0.0, 35.0))
    assert [[b.batch_id for b in leg] for leg in by_leg] == [[1, 2], [5, 6]]  # 0 and 4 warm, 3 neither leg's
    assert [b.batch_id for b in measured_batches(plan, full, (0.0, 35.0))] == [1, 2, 5, 6]
    assert [[b.batch_id for b in leg] for leg in settled_batches(plan, full, 6, (0.0, 35.0))] == [[1, 2], [5]]
    assert [b.batch_id for b in leg_full_batches(full, (0.0, 35.0), 1)] == [4, 5, 6, 7, 8]
    # each leg's measured batches get their share of max_read_s from the end of its warm ones
    leg_1 = leg_full_batches(full, (0.0, 35.0), 1)
    assert not read_over(plan, leg_1[:2], 35.0, 49.0 + 49.9) and read_over(plan, leg_1[:2], 35.0, 49.0 + 50.0)
    assert read_over(plan, leg_1[:4], 35.0, 60.0)  # its two measured batches read, and the one after
    # the backlog is filled for every leg's warm batches as well as the measured ones
    assert plan.fill_factor_for(1_000.0) == pytest.approx(2.0 * (2 * 1 + 4) * 120_000 / 50.0 / 1_000.0)


def test_a_read_in_legs_keeps_each_batchs_leg_and_pairs_the_sides_within_each_leg():
    batches = tuple(MicroBatch(i, 10.0 * i, 9.0, 100_000) for i in range(5))
    read = BacklogRead(batches, (1.0, 1.0, None, 2.0, 2.0), 60.0, 0.0, (0, 0, 0, 1, 1), cycle_s=(1.0,) * 5)
    assert [pytest.approx(leg) for leg in read.task_cpu_per_record_by_leg()] == [[1e-5, 1e-5], [2e-5, 2e-5]]
    assert [len(leg) for leg in read.cycle_per_record_by_leg()] == [3, 2]
    assert read.task_cpu_per_record_s() == pytest.approx([1e-5, 1e-5, 2e-5, 2e-5])
    one_leg = BacklogRead(batches[:2], (1.0, 1.0), 60.0).task_cpu_per_record_by_leg()
    assert [pytest.approx(leg) for leg in one_leg] == [[1e-5, 1e-5]]
    # REF read three batches in its first leg, the change two: the legs' batches pair within each leg
    compared = paired_cost_by_leg([[1.0, 1.0, 1.0], [2.0, 2.0]], [[1.1, 1.1], [2.0, 2.0]])
    assert compared.pairs == 4
    assert compared.leg_ratios == pytest.approx((1.1, 1.0))
    assert compared.to_dict()["leg_ratios"] == pytest.approx([1.1, 1.0])
    assert "legs +10.0%, +0.0%" in compared.text()
    # paired across legs, the change's second leg would have been read against REF's first
    assert batch_ratios([1.0, 1.0, 1.0, 2.0, 2.0], [1.1, 1.1, 2.0, 2.0])[2] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="no leg was read by both sides"):
        paired_cost_by_leg([[1.0]], [[], [1.0]])


def test_a_backlog_plan_refuses_what_cannot_be_read_and_says_which():
    assert BacklogPlan().batch_records == 120_000
    with pytest.raises(ValueError, match="1 <= legs <= batches"):
        BacklogPlan(batches=0)
    with pytest.raises(ValueError, match="1 <= legs <= batches, got 120000, 3, 13 and 12"):
        BacklogPlan(legs=13)
    with pytest.raises(ValueError, match="fill_factor, fill_s, max_read_s and max_warm_s above 0"):
        BacklogPlan(fill_s=0)
    with pytest.raises(ValueError, match=r"max_warm_s above 0 .*, 0 and 2.0"):
        BacklogPlan(max_warm_s=0)
    with pytest.raises(ValueError, match="fill_margin at least 1"):
        BacklogPlan(fill_margin=0.5)
    with pytest.raises(ValueError, match=r"instance_cpu above 0 or None \(the gate's\), got 0"):
        BacklogPlan(instance_cpu=0)
    with pytest.raises(
        ValueError, match=r"backlog_margin 0 \(every fill takes fill_s\) or at least 1.*got 0.5 and"
    ):
        BacklogPlan(backlog_margin=0.5)
    with pytest.raises(ValueError, match=r"min_fill_s at least 0, got 1\.25 and -1"):
        BacklogPlan(min_fill_s=-1)


def test_a_fill_ends_once_its_backlog_suffices_not_before_the_instance_ran_at_full_speed_nor_after_fill_s():
    plan = BacklogPlan(min_fill_s=25.0, fill_s=50.0)  # (3 + 12) x 120 000 records read, 1.25 times over
    assert plan.read_records == 1_800_000
    enough = 2_250_000
    assert fill_over(plan, 30.0, enough) and not fill_over(plan, 30.0, enough - 1)
    assert not fill_over(plan, 24.9, 10 * enough)  # JIT and code generation at full speed first
    assert not fill_over(plan, 49.9, None)  # the backlog not known: the fill takes its time
    assert fill_over(plan, 50.0, None) and fill_over(plan, 50.0, 0)  # fill_s is the longest fill, as before
    fixed = BacklogPlan(backlog_margin=0)
    assert not fill_over(fixed, 49.9, 10 * enough) and fill_over(fixed, 50.0, 0)
    # legs' warm batches count too
    assert BacklogPlan(legs=3).read_records == (9 + 12) * 120_000


def test_the_backlog_beyond_the_running_batch_is_the_lag_less_one_batch_and_unknown_where_unreadable():
    progress = {"sources": [{"endOffset": '{"input": {"0": 40, "1": 60}}'}]}

    class Sampler:
        def __init__(self, offsets):
            self.offsets = offsets

        def end_offsets(self):
            if isinstance(self.offsets, Exception):
                raise self.offsets
            return self.offsets

    assert backlog_beyond_running_batch(Sampler({0: 5_040, 1: 5_060}), progress, "input", 2_000) == 8_000
    assert backlog_beyond_running_batch(Sampler(OSError("broker gone")), progress, "input", 2_000) is None
    # nothing read yet: the whole topic less the running batch
    assert backlog_beyond_running_batch(Sampler({0: 5_040}), None, "input", 2_000) == 3_040
    assert backlog_beyond_running_batch(Sampler({}), progress, "input", 2_000) is None


def test_a_backlog_is_read_on_half_a_core_whatever_the_gates_unless_the_plan_keeps_the_gates():
    assert BacklogPlan().cpu_for(0.25) == 0.5 and BacklogPlan().cpu_for(None) == 0.5
    assert BacklogPlan(instance_cpu=None).cpu_for(0.25) == 0.25
    assert BacklogPlan(instance_cpu=None).cpu_for(None) is None


def test_a_backlog_is_filled_with_what_the_read_needs_whatever_the_load_unless_a_factor_is_given():
    plan = BacklogPlan()  # 3 + 12 batches of 120 000, twice over, in 50 s: 72 000 records/s
    assert plan.fill_factor_for(5_000) == pytest.approx(14.4)  # the click-stream's validated rounds: 15
    assert plan.fill_factor_for(20_000) == pytest.approx(3.6)  # not 15 x 20 000, more than a generator sends
    assert plan.fill_factor_for(100_000) == pytest.approx(0.72)
    assert BacklogPlan(fill_factor=10.0).fill_factor_for(20_000) == 10.0


class BacklogSide:
    """One side of pull-request mode that reads a scripted backlog; `log` records what each side was asked, in
    order, and whether the parent held the cluster's session lock meanwhile. `later_reads`: the batches of a
    second read, a third ... (else each read reads `cycle_s` again)."""

    def __init__(
        self,
        name,
        log,
        spark,
        results_dir,
        cycle_s=None,
        error=None,
        fill_error=None,
        later_reads=(),
        fixed_topics=None,
    ):
        self.name, self.log, self.error, self.fill_error = name, log, error, fill_error
        self.scripted_reads = [cycle_s or [], *later_reads]
        self.cycle_s, self.reads_started = self.scripted_reads[0], 0
        self.spec = SimpleNamespace(
            spark=spark, results_dir=results_dir, kafka={"fixed_topics": dict(fixed_topics or {})}
        )

    def start_backlog_read(self, load, workload, plan):
        self.log.append((self.name, "start", load, workload.keys, plan.batch_records, self.spec.spark.held))
        self.cycle_s = self.scripted_reads[min(self.reads_started, len(self.scripted_reads) - 1)]
        self.reads_started += 1

    def _fail(self, error):
        from pytest_theodolite.pull_request.side_spec import SideError

        raise SideError(
            f"{self.name}: the backlog read failed: Traceback (most recent call last):\n  ...\n{error}"
        )

    def backlog_filled(self):
        self.log.append((self.name, "filled", self.spec.spark.held))
        if self.fill_error:
            self._fail(self.fill_error)

    def start_reading(self):
        self.log.append((self.name, "read", self.spec.spark.held))
        self.told, self.stopped = 0, False

    def backlog_message(self, timeout_s):
        """Each batch's figure once the next batch has run, as a real side sends them; then the read: all its
        batches, or those up to one past the last told where the parent said stop."""
        if self.error:
            self.log.append((self.name, "result", self.spec.spark.held))
            self._fail(self.error)
        if not self.stopped and self.told < len(self.cycle_s) - 1:
            self.told += 1
            return [[cycle / 120_000 for cycle in self.cycle_s[: self.told] if cycle is not None]]
        self.log.append((self.name, "result", self.spec.spark.held))
        read = self.cycle_s[: self.told + 1] if self.stopped else self.cycle_s
        batches = tuple(MicroBatch(i, 100.0 + 8 * i, 6.0, 120_000) for i in range(len(read)))
        return BacklogRead(batches, (None,) * len(read), 200.0, drained=self.drained, cycle_s=tuple(read))

    drained = False  # the read ran out of backlog

    def stop_reading(self):
        self.log.append((self.name, "stop", self.told))
        self.stopped = True

    def run(self, load, resources, workload, *, confirm=False, share=1.0):
        self.log.append((self.name, "run", load, resources))
        from pytest_theodolite.core.outcomes import Outcome
        from pytest_theodolite.core.records import RepetitionRecord, SubExperimentRecord
        from pytest_theodolite.core.slo import LAG_TREND, SloVerdict

        verdict = SloVerdict(LAG_TREND, Outcome.PASS, 0.0, 100.0, "scripted")
        return SubExperimentRecord.from_repetitions(
            load, resources, load, [RepetitionRecord(0, (verdict,))]
        ), {}

    def close(self):
        pass


class HeldCluster:
    def __init__(self, max_instances, can_limit_cpu=False):
        self.max_instances, self.can_limit_cpu, self.held = max_instances, can_limit_cpu, False

    @contextmanager
    def sessions_held(self):
        self.held = True
        try:
            yield
        finally:
            self.held = False


def paired_experiment(
    tmp_path,
    ref_cpu,
    change_cpu,
    *,
    max_instances=4,
    paired_cost=True,
    errors=None,
    fill_errors=None,
    tolerance=0.07,
    can_limit_cpu=False,
    instance_cpu=None,
    later_reads=None,
    fixed_topics=None,
):
    from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
    from pytest_theodolite.pull_request.experiment import PairedExperiment
    from pytest_theodolite.pull_request.target import CompareTarget

    log: list = []
    spark = HeldCluster(max_instances, can_limit_cpu)
    settings = ExperimentSettings(
        loads=(2000, 5000),
        resources=(1, 2),
        paired_cost=paired_cost,
        paired_cost_tolerance=tolerance,
        instance_cpu=instance_cpu,
    )
    benchmark = Benchmark("scripted", lambda *a, **k: None, lambda keys: Workload(keys=keys))
    errors, fill_errors, later_reads = errors or {}, fill_errors or {}, later_reads or {}
    sides = {
        side: BacklogSide(
            side,
            log,
            spark,
            tmp_path / side,
            cpu,
            errors.get(side),
            fill_errors.get(side),
            later_reads.get(side, ()),
            fixed_topics,
        )
        for side, cpu in (("ref", ref_cpu), ("change", change_cpu))
    }
    target = CompareTarget("main", "0123456789", Path("."), Path("."))
    return PairedExperiment(benchmark, settings, target, sides), log


def test_both_sides_read_their_backlogs_at_once_under_the_lock_once_per_benchmark(tmp_path):
    experiment, log = paired_experiment(tmp_path, [0.60, 0.66, 0.60], [0.69, 0.75, 0.72])
    experiment.measure(2000)
    experiment.measure(5000)
    # both asked before either is waited for, the parent holding the session lock; the highest load's keys;
    # neither let read before both have filled
    assert log[:8] == [
        ("ref", "start", 5000, 5000, 120_000, True),
        ("change", "start", 5000, 5000, 120_000, True),
        ("ref", "filled", True),
        ("change", "filled", True),
        ("ref", "read", True),
        ("change", "read", True),
        ("ref", "result", True),
        ("change", "result", True),
    ]
    assert sum(1 for entry in log if entry[1] == "start") == 2  # once per benchmark, not per load
    # batch by batch: 0.69/0.60, 0.75/0.66, 0.72/0.60 -> median 1.15
    assert experiment.paired_read.figure.batch_ratio == pytest.approx(1.15)
    note = paired_read_note(experiment.paired_read.result())
    assert note.startswith("time per record, change over REF batch by batch: +15.0% over 3 batches")
    assert note.endswith(
        "one instance each, 120,000-record batches): not judged: 3 pairs of batches, fewer than the 6 a p-value needs"
    )
    written = json.loads((tmp_path / "scripted_paired_cost.json").read_text())
    assert written["load"] == 5000 and written["comparison"]["pairs"] == 3 and written["problem"] is None
    assert written["sides"]["change"]["cycle_s"] == [0.69, 0.75, 0.72]
    assert written["plan"]["batch_records"] == 120_000


def test_the_note_names_the_cores_each_side_read_on_where_the_cluster_limits_them(tmp_path):
    from pytest_theodolite.engine.backlog_read import BacklogPlan

    cpu = [0.60] * 6
    unlimited, _ = paired_experiment(tmp_path / "unlimited", cpu, cpu)
    limited, _ = paired_experiment(tmp_path / "limited", cpu, cpu, can_limit_cpu=True, instance_cpu=0.25)
    gates_own, _ = paired_experiment(tmp_path / "gate", cpu, cpu, can_limit_cpu=True, instance_cpu=0.25)
    gates_own.paired_read.plan = BacklogPlan(instance_cpu=None)
    for experiment in (unlimited, limited, gates_own):
        experiment.paired_read.read()
    assert "(both sides reading a backlog at once, one instance each, 120,000" in paired_read_note(
        unlimited.paired_read.result()
    )
    # the plan's half core, whatever the gate's quarter; without the plan's, the gate's own
    assert "one instance of 0.5 core each, 120,000-record batches)" in paired_read_note(
        limited.paired_read.result()
    )
    assert "one instance of 0.25 core each, 120,000-record batches)" in paired_read_note(
        gates_own.paired_read.result()
    )


def test_a_side_whose_backlog_ran_out_is_named_with_the_batches_it_read(tmp_path):
    cpu = [0.60] * 7
    experiment, _ = paired_experiment(tmp_path, cpu, cpu, tolerance=None)
    experiment.sides["change"].drained = True
    experiment.measure(2000)
    note = paired_read_note(experiment.paired_read.result())
    assert note.endswith(
        "reported, not judged: paired_cost_tolerance is off; change's backlog ran out after 7 of 12 batches"
    )
    written = json.loads((tmp_path / "scripted_paired_cost.json").read_text())
    assert [written["sides"][side]["drained"] for side in ("ref", "change")] == [False, True]


def test_the_side_asked_to_start_first_can_be_swapped_and_the_figure_stays_change_over_ref(tmp_path):
    experiment, log = paired_experiment(tmp_path, [0.60, 0.66, 0.60], [0.69, 0.75, 0.72])
    experiment.paired_read.read(first="change")
    assert [entry[:2] for entry in log] == [
        ("change", "start"),
        ("ref", "start"),
        ("change", "filled"),
        ("ref", "filled"),
        ("change", "read"),
        ("ref", "read"),
        ("change", "result"),
        ("ref", "result"),
    ]
    assert experiment.paired_read.figure.batch_ratio == pytest.approx(1.15)
    with pytest.raises(ValueError, match="first is one of ref, change, not 'both'"):
        experiment.paired_read.read(first="both")


def test_a_side_that_fails_its_read_leaves_no_figure_and_says_why_the_other_side_is_still_heard(tmp_path):
    errors = {"ref": "pytest_theodolite.engine.runner.RunAborted: the query stopped: OutOfMemoryError"}
    experiment, log = paired_experiment(tmp_path, [0.6], [0.7], errors=errors)
    experiment.measure(2000)
    assert ("change", "result", True) in log  # the other side's answer is read, so its pipe stays in step
    assert experiment.paired_read.figure is None
    assert paired_read_note(experiment.paired_read.result()).endswith("not measured: ref: " + errors["ref"])
    assert json.loads((tmp_path / "scripted_paired_cost.json").read_text())["problem"].startswith("ref: ")


def test_a_side_that_fails_before_its_backlog_is_filled_is_not_let_read_the_other_side_still_is(tmp_path):
    errors = {"change": "pytest_theodolite.engine.runner.RunAborted: the job did not start: ERRORED"}
    experiment, log = paired_experiment(tmp_path, [0.6], [0.7], fill_errors=errors)
    experiment.measure(2000)
    # REF, waiting with its generator sending, is let read and heard; the change, which never filled, is not
    assert [entry[:2] for entry in log if entry[1] != "run"] == [
        ("ref", "start"),
        ("change", "start"),
        ("ref", "filled"),
        ("change", "filled"),
        ("ref", "read"),
        ("ref", "result"),
    ]
    assert experiment.paired_read.figure is None
    assert paired_read_note(experiment.paired_read.result()).endswith(
        "not measured: change: " + errors["change"]
    )


def test_a_read_without_cycles_or_with_one_instance_says_so_and_without_the_option_nothing_runs(tmp_path):
    experiment, _ = paired_experiment(tmp_path, [None, None], [0.7, 0.7])
    # asked for before the read ended (a run interrupted during it): says so rather than naming no reason
    assert paired_read_note(experiment.paired_read.result()).endswith(
        "not measured: the run ended before the read did"
    )
    experiment.measure(2000)
    # full batches, but none followed by another: no cycle to pair
    assert paired_read_note(experiment.paired_read.result()).endswith(
        "not measured: REF measured no full batch: nothing to pair"
    )
    empty, _ = paired_experiment(tmp_path, [], [0.7])
    empty.measure(2000)
    assert paired_read_note(empty.paired_read.result()).endswith(
        "not measured: REF measured no full batch: nothing to pair"
    )
    single, log = paired_experiment(tmp_path, [0.6], [0.7], max_instances=1)
    single.measure(2000)
    assert not [entry for entry in log if entry[1] == "start"]
    assert "raise --theodolite-max-instances to 2 or more" in paired_read_note(single.paired_read.result())
    # pre-created topics are one set: two sides reading at once would share (and empty) them
    shared, log = paired_experiment(tmp_path, [0.6], [0.7], fixed_topics={"input": "in", "output": "out"})
    point = shared.measure(2000)
    assert not [entry for entry in log if entry[1] == "start"]
    assert "pre-created topics (--kafka-topics)" in paired_read_note(shared.paired_read.result())
    assert "paired_cost=false" in point.paired_unread
    off, log = paired_experiment(tmp_path, [0.6], [0.7], paired_cost=False)
    off.measure(2000)
    assert (
        not [entry for entry in log if entry[1] == "start"]
        and paired_read_note(off.paired_read.result()) is None
    )


def test_a_judged_paired_read_fails_every_load_whose_demand_passed_and_says_by_which_figure(tmp_path):
    from pytest_theodolite.core.outcomes import Verdict
    from pytest_theodolite.engine.markers import GateSpec
    from pytest_theodolite.pull_request.gate_point import PairedGatePoint

    ref_cpu = [0.6] * 12
    dearer, log = paired_experiment(tmp_path, ref_cpu, [0.6 * r for r in DEARER_RATIOS])
    verdicts = {load: dearer.measure(load).comparison("scripted", 0, 0.10) for load in (2000, 5000)}
    assert {load: v.verdict for load, v in verdicts.items()} == {
        2000: Verdict.COST_REGRESSION,
        5000: Verdict.COST_REGRESSION,
    }
    described = verdicts[2000].describe("scripted", "REF main")
    # the p-value of both reads' pairs together (one read's: 0.00073)
    assert (
        "pass" not in described
        and "cost regression: time per record (inverse throughput), batch by batch +11% (tolerance 7%, p 2.2e-05)"
        in described
    )
    # the rise read twice, the change asked first the second time, and twice the same
    assert [entry[0] for entry in log if entry[1] == "start"] == ["ref", "change", "change", "ref"]
    assert paired_read_note(dearer.paired_read.result()).endswith(
        "a cost regression: beyond the 7% tolerance, and so was a second read, the other side asked first (time "
        "per record, change over REF batch by batch: +10.7% over 12 batches (medians 5.00 and 5.54 us, p "
        "0.00073)), both reads' 24 pairs together significant (p 2.2e-05); every load whose demand passed fails"
    )
    spec = GateSpec(dearer.benchmark, dearer.settings, 0, 0.10)
    point = PairedGatePoint(
        spec, dearer.points[2000].sides["change"], None, None, paired=dearer.points[2000], label="REF main"
    )
    message = point.failure_message(point.comparison())
    assert message.startswith(described) and "signed-rank test on the ratios gives p < 0.05" in message
    from pytest_theodolite.judge.comparison import Comparison
    from pytest_theodolite.report.summary import BenchmarkReport, headline

    compared = Comparison("scripted", tuple(verdicts.values()), cost_tolerance=0.10)
    assert headline(BenchmarkReport("scripted", compared, dearer.demand_result(), None)) == (
        "scripted: COST REGRESSION (2 cost regressions by time per record (inverse throughput), batch by batch, "
        "beyond 7%, cost tolerance 10%)"
    )
    properties = dict(point.junit_properties(point.comparison()))
    assert float(properties["theodolite.paired_cost_change"]) == pytest.approx(0.1075, abs=1e-3)

    clean, _ = paired_experiment(tmp_path, ref_cpu, [0.6 * r for r in CLEAN_RATIOS])
    assert clean.measure(2000).comparison("scripted", 0, 0.10).verdict is Verdict.PASS
    assert paired_read_note(clean.paired_read.result()).endswith(
        "within the 7% tolerance or not significant: passed (read stopped after 6 pairs: certainly below the "
        "tolerance)"
    )
    off, _ = paired_experiment(tmp_path, ref_cpu, [0.6 * r for r in DEARER_RATIOS], tolerance=None)
    assert off.measure(2000).comparison("scripted", 0, 0.10).verdict is Verdict.PASS
    assert paired_read_note(off.paired_read.result()).endswith(
        "reported, not judged: paired_cost_tolerance is off"
    )


def test_both_reads_stop_once_their_pairs_are_certainly_within_the_tolerance_and_a_rise_is_read_to_the_end(
    tmp_path,
):
    ref_cpu = [0.6] * 12
    clean, log = paired_experiment(tmp_path, ref_cpu, [0.6 * r for r in CLEAN_RATIOS])
    clean.measure(2000)
    # six pairs told (each batch's figure once the next one ran), certain: both told to stop at once
    assert [entry for entry in log if entry[1] == "stop"] == [("ref", "stop", 6), ("change", "stop", 6)]
    assert clean.paired_read.stopped_at == 6
    assert (
        clean.paired_read.figure is not None and clean.paired_read.figure.pairs == 7
    )  # the batch running when told
    document = json.loads(next(tmp_path.glob("*_paired_cost.json")).read_text())
    assert document["stopped_certain_after_pairs"] == 6 and len(document["sides"]["ref"]["batches"]) == 7

    for dearer_ratios, why in (
        (DEARER_RATIOS, "a rise"),
        ([1.05, 1.09, 1.06, 1.08, 1.04, 1.10] * 2, "around it"),
    ):
        dearer, log = paired_experiment(tmp_path / why, ref_cpu, [0.6 * r for r in dearer_ratios])
        dearer.measure(2000)
        assert not [entry for entry in log if entry[1] == "stop"], why
        assert dearer.paired_read.stopped_at is None and dearer.paired_read.figure.pairs == 12, why

    # without a tolerance there is nothing to be certain of; an experiment may ask for every batch
    off, log = paired_experiment(tmp_path / "off", ref_cpu, [0.6 * r for r in CLEAN_RATIOS], tolerance=None)
    off.measure(2000)
    assert off.paired_read.figure.pairs == 12 and not [entry for entry in log if entry[1] == "stop"]
    from pytest_theodolite.engine.backlog_read import BacklogPlan

    full, log = paired_experiment(tmp_path / "full", ref_cpu, [0.6 * r for r in CLEAN_RATIOS])
    full.paired_read.plan = BacklogPlan(stop_when_certain=False)
    full.measure(2000)
    assert full.paired_read.figure.pairs == 12 and full.paired_read.stopped_at is None


def test_a_rise_is_a_cost_regression_only_where_a_second_read_with_the_other_side_first_rises_too(tmp_path):
    from pytest_theodolite.core.outcomes import CostStatus, Verdict
    from pytest_theodolite.engine.backlog_read import BacklogPlan

    ref_cpu = [0.6] * 12
    dearer = [0.6 * r for r in DEARER_RATIOS]
    # unchanged code whose first read leaned (as UC1's did on 2026-12-03); the second read does not
    leaned, log = paired_experiment(
        tmp_path / "leaned", ref_cpu, dearer, later_reads={"change": [[0.6 * r for r in CLEAN_RATIOS]]}
    )
    assert leaned.measure(2000).comparison("scripted", 0, 0.10).verdict is Verdict.PASS
    check = leaned.paired_read.check()
    assert check.status == CostStatus.PASS and check.relative == pytest.approx(
        leaned.paired_read.confirmation.cost.change
    )
    assert leaned.paired_read.figure.change == pytest.approx(
        0.1075
    )  # the first read's figure is kept as read
    assert [entry[0] for entry in log if entry[1] == "start"] == ["ref", "change", "change", "ref"]
    assert "+10.7% over 12 batches" in paired_read_note(leaned.paired_read.result())
    assert paired_read_note(leaned.paired_read.result()).endswith(") was not: passed")
    assert "beyond the 7% tolerance, but a second read, the other side asked first (time per record" in (
        paired_read_note(leaned.paired_read.result())
    )
    kept = json.loads((tmp_path / "leaned" / "scripted_paired_cost_confirmation.json").read_text())
    assert kept["comparison"]["batch_ratio"] == pytest.approx(
        leaned.paired_read.confirmation.cost.batch_ratio
    )
    assert json.loads((tmp_path / "leaned" / "scripted_paired_cost.json").read_text())["comparison"][
        "batch_ratio"
    ] == pytest.approx(1.1075)

    # the smaller of two rises is the figure
    twice, _ = paired_experiment(
        tmp_path / "twice", ref_cpu, [0.6 * 1.3] * 12, later_reads={"change": [dearer]}
    )
    assert twice.measure(2000).comparison("scripted", 0, 0.10).verdict is Verdict.COST_REGRESSION
    assert twice.paired_read.check().status == CostStatus.REGRESSION
    assert twice.paired_read.check().relative == pytest.approx(0.1075)

    # a second read that fails leaves the cost unjudged, saying why
    failed, _ = paired_experiment(tmp_path / "failed", ref_cpu, dearer)
    failed.sides["change"].scripted_reads.append([])  # the second read measures no batch
    failed.measure(2000)
    assert failed.paired_read.check().status == CostStatus.NOT_COMPARED
    assert failed.paired_read.check().reason.startswith(
        "not judged: it rose +10.7%, and the read to confirm it failed"
    )

    # a rise twelve pairs left short of significance is read again, and judged on both reads' pairs
    short = [0.6 * r for r in SHORT_OF_SIGNIFICANT]
    unsure, log = paired_experiment(tmp_path / "unsure", ref_cpu, short)
    assert unsure.measure(2000).comparison("scripted", 0, 0.10).verdict is Verdict.COST_REGRESSION
    assert [entry[0] for entry in log if entry[1] == "start"] == ["ref", "change", "change", "ref"]
    assert unsure.paired_read.figure.p_value > 0.05 > unsure.paired_read.check().p_value
    assert "both reads' 24 pairs together significant (p 0.049)" in paired_read_note(
        unsure.paired_read.result()
    )
    scattered, _ = paired_experiment(tmp_path / "scattered", ref_cpu, [0.6 * r for r in SCATTERED])
    assert scattered.measure(2000).comparison("scripted", 0, 0.10).verdict is Verdict.PASS
    assert paired_read_note(scattered.paired_read.result()).endswith(
        "both reads' 24 pairs together not significant (p 0.66): passed"
    )

    # a pass is not read again; an experiment may let one read decide
    clean, log = paired_experiment(tmp_path / "clean", ref_cpu, [0.6 * r for r in CLEAN_RATIOS])
    clean.measure(2000)
    assert clean.paired_read.confirmation is None and sum(1 for entry in log if entry[1] == "start") == 2
    once, log = paired_experiment(tmp_path / "once", ref_cpu, dearer)
    once.paired_read.plan = BacklogPlan(confirm_rise=False)
    once.measure(2000)
    assert once.paired_read.confirmation is None and once.paired_read.check().status == CostStatus.REGRESSION
    assert sum(1 for entry in log if entry[1] == "start") == 2


def test_a_side_whose_read_fails_leaves_the_other_read_to_its_end(tmp_path):
    failing, log = paired_experiment(
        tmp_path, [0.6] * 12, [0.6 * r for r in CLEAN_RATIOS], errors={"ref": "the query stopped"}
    )
    failing.measure(2000)
    assert not [entry for entry in log if entry[1] == "stop"]
    assert len(failing.paired_read.first.reads["change"].batches) == 12 and failing.paired_read.figure is None
    assert "the query stopped" in failing.paired_read.problem
