"""The capacity strategy's demand: derived from scripted capacities, with lag-trend runs only where they cannot
tell (engine/capacity_search.py), without a broker or Spark."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from generator import Workload
from pytest_theodolite.core.capacity import CapacityEstimate
from pytest_theodolite.core.evaluation import SloSettings
from pytest_theodolite.core.outcomes import STEP_MEASURED, STEP_NONE, STEP_UNMEASURED, Outcome
from pytest_theodolite.core.records import RepetitionRecord, SubExperimentRecord
from pytest_theodolite.core.search import Strategy, search_demand
from pytest_theodolite.core.slo import LAG_TREND, SloVerdict
from pytest_theodolite.engine.capacity_probe import CapacityMeasurement
from pytest_theodolite.engine.capacity_search import CapacitySearch, capacity_note, offered_workload
from pytest_theodolite.engine.markers import parse_threshold


def fake_runner(resources=(1, 2, 3, 4), loads=(4000, 12000, 20000)):
    settings = SimpleNamespace(
        loads=loads, resources=resources, slo=SloSettings(lag_trend_threshold=parse_threshold("5%"))
    )
    benchmark = SimpleNamespace(workload=lambda keys: Workload(keys=keys))
    return SimpleNamespace(settings=settings, benchmark=benchmark)


def measured(r: int, mu: float, half: float = 300.0, *, saturated: bool = True) -> CapacityMeasurement:
    estimate = CapacityEstimate(r, mu, mu - half, mu + half, 8, 20.0, saturated, 20_000)
    return CapacityMeasurement(r, 25_000, 25_000.0, 20_000, estimate, "certain", timings={"measure_s": 30.0})


def search_with(*capacities: CapacityMeasurement) -> CapacitySearch:
    search = CapacitySearch(fake_runner())  # type: ignore[arg-type]
    search.measurements = {m.instances: m for m in capacities}
    return search


class Runs:
    """The lag-trend sub-experiments a search asked for, with scripted outcomes by instance count."""

    def __init__(self, outcomes: dict[int, Outcome]) -> None:
        self.outcomes, self.asked = outcomes, []

    def __call__(self, load: int, resources: int) -> SubExperimentRecord:
        self.asked.append((load, resources))
        outcome = self.outcomes[resources]
        verdict = SloVerdict(LAG_TREND, outcome, 0.0, 100.0, "scripted")
        return SubExperimentRecord.from_repetitions(load, resources, load, [RepetitionRecord(0, (verdict,))])


CAPACITIES = (measured(1, 7_000), measured(2, 13_000, 600), measured(3, 12_500, 600), measured(4, 21_000))


def test_a_load_far_from_every_capacity_runs_nothing():
    runs = Runs({})
    step, ran = search_with(*CAPACITIES).demand(4000, runs)
    assert (step.optimum, step.status, ran, runs.asked) == (1, STEP_MEASURED, (), [])


def test_a_load_within_the_guard_band_is_certified_by_the_lag_trend():
    # 12 000: its bar, 11 400, lies within the band of two instances (12 400 - 13 600, widened by 10 %)
    runs = Runs({2: Outcome.PASS})
    step, ran = search_with(*CAPACITIES).demand(12000, runs)
    assert runs.asked == [(12000, 2)]
    assert (step.optimum, step.status) == (2, STEP_MEASURED)
    assert [r.resources for r in ran] == [2]
    # a FAIL moves the demand on: three instances are within the band too, four pass outside it
    runs = Runs({2: Outcome.FAIL, 3: Outcome.FAIL})
    step, _ = search_with(*CAPACITIES).demand(12000, runs)
    assert runs.asked == [(12000, 2), (12000, 3)]
    assert step.optimum == 4


def test_a_demand_above_the_baselines_rests_on_a_lag_trend_fail_at_the_baselines_demand():
    # 9 000: its bar 8 550 lies above one instance's band (7 300 + 10 %), two predicted; the baseline said 1
    assert search_with(*CAPACITIES).demand(9000, Runs({}))[0].optimum == 2
    runs = Runs({1: Outcome.PASS})
    step, _ = search_with(*CAPACITIES).demand(9000, runs, baseline_demand=1)
    assert runs.asked == [(9000, 1)]
    assert step.optimum == 1  # the lag trend, not the prediction, decides a regression
    runs = Runs({1: Outcome.FAIL})
    step, _ = search_with(*CAPACITIES).demand(9000, runs, baseline_demand=1)
    assert (step.optimum, runs.asked) == (2, [(9000, 1)])


def test_a_load_no_instance_count_takes_is_none_and_a_broken_run_unmeasured():
    step, _ = search_with(*CAPACITIES).demand(40000, Runs({}))
    assert (step.optimum, step.status) == (None, STEP_NONE)
    step, ran = search_with(*CAPACITIES).demand(12000, Runs({2: Outcome.ERRORED}))
    assert (step.optimum, step.status, len(ran)) == (None, STEP_UNMEASURED, 1)


def test_instance_counts_above_a_broken_probe_are_searched_by_the_lag_trend():
    broken = CapacityMeasurement(3, 25_000, 25_000.0, 20_000, None, "errored", "the query stopped")
    search = search_with(measured(1, 7_000), measured(2, 13_000), broken)
    runs = Runs({3: Outcome.FAIL, 4: Outcome.PASS})
    step, _ = search.demand(20000, runs)
    assert runs.asked == [(20000, 3), (20000, 4)]
    assert step.optimum == 4


def test_an_instance_count_without_a_capacity_below_the_derived_demand_is_run_first():
    # one instance gave no estimate (its measurement was bounded first): two are predicted at 2 000, but the
    # lag trend decides whether one takes it
    uncertain = CapacityMeasurement(1, 20_000, 25_000.0, 20_000, None, "uncertain", "not certain after 60 s")
    search = search_with(uncertain, measured(2, 13_000), measured(3, 16_000))
    runs = Runs({1: Outcome.PASS})
    step, _ = search.demand(2000, runs)
    assert (step.optimum, runs.asked) == (1, [(2000, 1)])
    runs = Runs({1: Outcome.FAIL})
    step, _ = search.demand(2000, runs)
    assert (step.optimum, runs.asked) == (2, [(2000, 1)])


def test_the_offered_workload_sends_the_highest_loads_keys_more_often():
    offered = offered_workload(lambda keys: Workload(keys=keys), 20000, 1.25)
    assert offered.keys == 20000 and offered.target_rate == pytest.approx(25_000)
    hierarchy = offered_workload(lambda n: Workload.for_hierarchy(children=n, depth=3), 26, 1.25)
    assert hierarchy.keys == 26**3 and hierarchy.target_rate == pytest.approx(1.25 * 26**3)


def test_the_report_line_names_each_capacity_and_the_seconds():
    note = capacity_note({m.instances: m for m in CAPACITIES[:2]})
    assert note.startswith("capacity per instance count, measured directly (60 s): 1: 7,000 [6,700, 7,300]")


def test_a_plain_search_refuses_the_capacity_strategy_with_what_to_use():
    with pytest.raises(ValueError, match="runs in a gate against a running job"):
        search_demand(lambda load, r: Outcome.PASS, [1], [1], Strategy.CAPACITY)


class ScriptedSide:
    """One side of pull-request mode with scripted capacities (by instance count) and lag-trend outcomes."""

    def __init__(
        self, name: str, log: list, capacities: dict[int, float], outcomes: dict[int, Outcome]
    ) -> None:
        self.name, self.log, self.capacities, self.runs = name, log, capacities, Runs(outcomes)

    def measure_capacity(self, load, resources, workload, plan):
        self.log.append((self.name, resources))
        return measured(resources, self.capacities[resources], self.capacities[resources] * 0.03)

    def run(self, load, resources, workload, *, confirm=False):
        self.log.append((self.name, "run", load, resources))
        return self.runs(load, resources), {}

    def close(self):
        pass


def paired(ref_capacities, change_capacities, outcomes=None):
    from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
    from pytest_theodolite.pull_request.experiment import CompareTarget, PairedExperiment

    log: list = []
    settings = ExperimentSettings(
        loads=(4000, 12000, 20000),
        resources=(1, 2, 3, 4),
        slo=SloSettings(lag_trend_threshold=parse_threshold("5%")),
        strategy=Strategy.CAPACITY,
        instance_cpu=0.25,
    )
    benchmark = Benchmark("scripted", lambda *a, **k: None, lambda keys: Workload(keys=keys))
    sides = {
        "ref": ScriptedSide("ref", log, ref_capacities, dict(outcomes or {})),
        "change": ScriptedSide("change", log, change_capacities, dict(outcomes or {})),
    }
    target = CompareTarget("main", "0123456789", Path("."), Path("."))
    return PairedExperiment(benchmark, settings, target, sides), log


def test_pull_request_mode_measures_both_sides_capacities_in_abba_order():
    capacities = {1: 7_000, 2: 15_000, 3: 16_000, 4: 26_000}
    experiment, log = paired(capacities, capacities)
    point = experiment.measure(4000)
    # REF first at the 1st and 3rd instance count, the change first at the 2nd and 4th; four instances take
    # the highest load, 20 000, outside the guard band on both sides: nothing above them is measured
    assert log == [
        ("ref", 1),
        ("change", 1),
        ("change", 2),
        ("ref", 2),
        ("ref", 3),
        ("change", 3),
        ("change", 4),
        ("ref", 4),
    ]
    assert point.demand("ref") == point.demand("change") == 1
    comparison = point.comparison("scripted", 0, cost_tolerance=0.10)
    assert comparison.verdict.value == "pass"


def test_pull_request_mode_fails_a_change_whose_records_cost_15_percent_more():
    ref = {1: 7_000, 2: 15_000, 3: 16_000, 4: 26_000}
    change = {r: mu / 1.15 for r, mu in ref.items()}
    experiment, _ = paired(ref, change)
    point = experiment.measure(4000)
    assert point.demand("ref") == point.demand("change") == 1
    comparison = point.comparison("scripted", 0, cost_tolerance=0.10)
    assert comparison.verdict.value == "cost-regression"
    assert point.cost_figure().relative == pytest.approx(0.15, abs=0.005)


def test_cost_figures_of_another_strategy_are_not_compared():
    from pytest_theodolite.core.cost import CostEstimate, PointCost
    from pytest_theodolite.engine.capacity_search import same_cost_figure
    from pytest_theodolite.store.baseline import Baseline
    from pytest_theodolite.store.testbed import Testbed

    testbed = Testbed(2, 24.0, 0.25, "embedded", "standalone", "4.0.0", "3.11")
    cost = {4000: PointCost(1, CostEstimate(50.0, 48.0, 52.0, 5))}
    searched = Baseline("b", {4000: 1}, {"strategy": "baseline-guess+lower-bound"}, testbed, cost=cost)
    at_capacity = Baseline("b", {4000: 1}, {"strategy": "capacity"}, testbed, cost=cost)
    assert same_cost_figure(searched, Strategy.CAPACITY).cost == {}
    assert same_cost_figure(searched, Strategy.BASELINE_GUESS) is searched
    assert same_cost_figure(at_capacity, Strategy.CAPACITY) is at_capacity
    assert same_cost_figure(at_capacity, Strategy.LINEAR).cost == {}
    assert same_cost_figure(None, Strategy.CAPACITY) is None


def test_a_regression_derived_in_pull_request_mode_is_confirmed_in_the_reverse_order():
    # REF takes 12 000 on two instances (certified: within the band); the change's capacities predict four,
    # so it runs two under the lag trend (REF's demand): a FAIL, then both are measured once more
    ref = {1: 7_000, 2: 12_400, 3: 13_000, 4: 21_000}
    change = {1: 5_000, 2: 8_000, 3: 8_500, 4: 17_000}
    experiment, log = paired(
        ref, change, {1: Outcome.FAIL, 2: Outcome.PASS, 3: Outcome.FAIL, 4: Outcome.PASS}
    )
    experiment.sides["change"].runs.outcomes[2] = Outcome.FAIL
    point = experiment.measure(12000, tolerance=0)
    runs = [entry for entry in log if entry[1] == "run"]
    assert runs[:2] == [("ref", "run", 12000, 2), ("change", "run", 12000, 2)]
    assert runs[2:] == [("change", "run", 12000, 2), ("ref", "run", 12000, 2)]  # the confirmation, reversed
    assert (point.demand("ref"), point.demand("change")) == (2, 4)
    assert point.comparison("scripted", 0, cost_tolerance=0.10).verdict.value == "regression"


def test_capacities_are_measured_upwards_past_one_without_an_estimate_and_stop_where_one_breaks(monkeypatch):
    import pytest_theodolite.engine.capacity_search as capacity_search

    outcomes = {
        1: CapacityMeasurement(1, 20000, 25_000.0, 40_000, None, "uncertain", "not certain after 60 s"),
        2: measured(2, 13_000),
        3: CapacityMeasurement(3, 20000, 25_000.0, 40_000, None, "errored", "the query stopped"),
    }
    asked = []

    def scripted_measurement(runner, r, load, plan, *, workload):
        asked.append(r)
        return outcomes[r]

    monkeypatch.setattr(capacity_search, "measure_capacity", scripted_measurement)
    runner = fake_runner()
    runner.writer = SimpleNamespace(record_capacity_measurement=lambda entry: None)
    search = CapacitySearch(runner)  # type: ignore[arg-type]
    search.measure_capacities()
    assert asked == [1, 2, 3]  # on past the uncertain one; not past the broken one
    assert set(search.capacities) == {2}
