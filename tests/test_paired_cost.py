"""The paired cost comparison (core/paired_cost.py) on scripted batches, the backlog read's batch selection and
plan (engine/backlog_read.py), and pull-request mode's paired read with scripted sides: without a broker or
Spark."""

import json
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from generator import Workload
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


class BacklogSide:
    """One side of pull-request mode that reads a scripted backlog; `log` records what each side was asked, in
    order, and whether the parent held the cluster's session lock meanwhile."""

    def __init__(self, name, log, spark, results_dir, task_cpu_s=None, error=None):
        self.name, self.log, self.error = name, log, error
        self.task_cpu_s = task_cpu_s or []
        self.spec = SimpleNamespace(spark=spark, results_dir=results_dir)

    def start_backlog_read(self, load, workload, plan):
        self.log.append((self.name, "start", load, workload.keys, plan.batch_records, self.spec.spark.held))

    def backlog_read(self):
        from pytest_theodolite.pull_request.sides import SideError

        self.log.append((self.name, "result", self.spec.spark.held))
        if self.error:
            raise SideError(
                f"{self.name}: the backlog read failed: Traceback (most recent call last):\n  ...\n{self.error}"
            )
        batches = tuple(MicroBatch(i, 100.0 + 8 * i, 6.0, 120_000) for i in range(len(self.task_cpu_s)))
        return BacklogRead(batches, tuple(self.task_cpu_s), 200.0)

    def run(self, load, resources, workload, *, confirm=False):
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
    def __init__(self, max_instances):
        self.max_instances, self.held = max_instances, False

    @contextmanager
    def sessions_held(self):
        self.held = True
        try:
            yield
        finally:
            self.held = False


def paired_experiment(tmp_path, ref_cpu, change_cpu, *, max_instances=4, paired_cost=True, errors=None):
    from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
    from pytest_theodolite.pull_request.experiment import CompareTarget, PairedExperiment

    log: list = []
    spark = HeldCluster(max_instances)
    settings = ExperimentSettings(loads=(2000, 5000), resources=(1, 2), paired_cost=paired_cost)
    benchmark = Benchmark("scripted", lambda *a, **k: None, lambda keys: Workload(keys=keys))
    errors = errors or {}
    sides = {
        side: BacklogSide(side, log, spark, tmp_path / side, cpu, errors.get(side))
        for side, cpu in (("ref", ref_cpu), ("change", change_cpu))
    }
    target = CompareTarget("main", "0123456789", Path("."), Path("."))
    return PairedExperiment(benchmark, settings, target, sides), log


def test_both_sides_read_their_backlogs_at_once_under_the_lock_once_per_benchmark(tmp_path):
    experiment, log = paired_experiment(tmp_path, [0.60, 0.66, 0.60], [0.69, 0.75, 0.72])
    experiment.measure(2000)
    experiment.measure(5000)
    # both asked before either is waited for, the parent holding the session lock; the highest load's keys
    assert log[:4] == [
        ("ref", "start", 5000, 5000, 120_000, True),
        ("change", "start", 5000, 5000, 120_000, True),
        ("ref", "result", True),
        ("change", "result", True),
    ]
    assert sum(1 for entry in log if entry[1] == "start") == 2  # once per benchmark, not per load
    # batch by batch: 0.69/0.60, 0.75/0.66, 0.72/0.60 -> median 1.15
    assert experiment.paired_cost.batch_ratio == pytest.approx(1.15)
    note = experiment.paired_cost_note()
    assert note.startswith("task CPU per record, change over REF batch by batch: +15.0% over 3 batches")
    assert "one instance each, 120,000-record batches; reported, not judged" in note
    written = json.loads((tmp_path / "scripted_paired_cost.json").read_text())
    assert written["load"] == 5000 and written["comparison"]["pairs"] == 3 and written["problem"] is None
    assert written["sides"]["change"]["task_cpu_s"] == [0.69, 0.75, 0.72]
    assert written["plan"]["batch_records"] == 120_000


def test_a_side_that_fails_its_read_leaves_no_figure_and_says_why_the_other_side_is_still_heard(tmp_path):
    errors = {"ref": "pytest_theodolite.engine.runner.RunAborted: the query stopped: OutOfMemoryError"}
    experiment, log = paired_experiment(tmp_path, [0.6], [0.7], errors=errors)
    experiment.measure(2000)
    assert ("change", "result", True) in log  # the other side's answer is read, so its pipe stays in step
    assert experiment.paired_cost is None
    assert experiment.paired_cost_note().endswith("not measured: ref: " + errors["ref"])
    assert json.loads((tmp_path / "scripted_paired_cost.json").read_text())["problem"].startswith("ref: ")


def test_a_read_without_task_cpu_or_with_one_instance_says_so_and_without_the_option_nothing_runs(tmp_path):
    experiment, _ = paired_experiment(tmp_path, [None, None], [0.7, 0.7])
    experiment.measure(2000)
    assert experiment.paired_cost_note().endswith(
        "not measured: ref: its batches have no task CPU figure (no event "
        "log was read: the gate's spark_conf keeps its own)"
    )
    empty, _ = paired_experiment(tmp_path, [], [0.7])
    empty.measure(2000)
    assert empty.paired_cost_note().endswith("not measured: REF measured no full batch: nothing to pair")
    single, log = paired_experiment(tmp_path, [0.6], [0.7], max_instances=1)
    single.measure(2000)
    assert not [entry for entry in log if entry[1] == "start"]
    assert "raise --theodolite-max-instances to 2 or more" in single.paired_cost_note()
    off, log = paired_experiment(tmp_path, [0.6], [0.7], paired_cost=False)
    off.measure(2000)
    assert not [entry for entry in log if entry[1] == "start"] and off.paired_cost_note() is None
