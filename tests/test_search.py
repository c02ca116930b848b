"""Search strategies against a scripted SLO oracle: results AND the exact sequence of sub-experiments."""

from dataclasses import dataclass

import pytest

from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.scalability import (
    CapacityResult,
    DemandResult,
    SubExperiment,
    capacity_from_sub_experiments,
    demand_from_sub_experiments,
)
from pytest_theodolite.core.search import (
    SEARCH_STRATEGIES,
    IncrementalSearch,
    Metric,
    Strategy,
    describe_strategy,
    parse_strategy,
    search_capacity,
    search_demand,
)

P, F, I, E = Outcome.PASS, Outcome.FAIL, Outcome.INVALID, Outcome.ERRORED

LOADS = [100, 200, 300, 400]
RESOURCES = [1, 2, 3, 4, 5]


def monotonic_oracle(needed: dict[int, int | None], overrides: dict[tuple[int, int], Outcome] | None = None):
    """(load, r) passes iff r >= needed[load] (None: no r suffices); `overrides` script special points."""

    def oracle(load: int, resources: int) -> Outcome:
        if overrides and (load, resources) in overrides:
            return overrides[(load, resources)]
        need = needed[load]
        return P if need is not None and resources >= need else F

    return oracle


def ran(result):
    return [(s.load, s.resources) for s in result.sub_experiments]


NEEDED = {100: 1, 200: 2, 300: 4, 400: None}


# ---- demand ------------------------------------------------------------------------------------------------


def test_full_runs_every_point_and_takes_the_smallest_pass():
    result = search_demand(monotonic_oracle(NEEDED), LOADS, RESOURCES, Strategy.FULL)
    assert dict(result.demand) == {100: 1, 200: 2, 300: 4, 400: None}
    assert ran(result) == [(l, r) for l in LOADS for r in RESOURCES]


def test_full_finds_the_minimum_even_when_results_are_not_monotonic():
    # r=2 passes, r=3 fails (e.g. coordination overhead): Full still reports 2.
    oracle = monotonic_oracle({100: 4}, overrides={(100, 2): P})
    assert dict(search_demand(oracle, [100], RESOURCES, Strategy.FULL).demand) == {100: 2}


def test_linear_stops_at_the_first_pass():
    result = search_demand(monotonic_oracle(NEEDED), LOADS, RESOURCES, Strategy.LINEAR)
    assert dict(result.demand) == {100: 1, 200: 2, 300: 4, 400: None}
    assert ran(result) == [
        (100, 1),
        (200, 1),
        (200, 2),
        (300, 1),
        (300, 2),
        (300, 3),
        (300, 4),
        (400, 1),
        (400, 2),
        (400, 3),
        (400, 4),
        (400, 5),
    ]
    assert result.strategy == "linear" and result.skipped == () and result.unmeasured == ()


def test_linear_with_lower_bound_starts_at_the_previous_demand():
    result = search_demand(monotonic_oracle(NEEDED), LOADS, RESOURCES, Strategy.LINEAR, lower_bound=True)
    assert dict(result.demand) == {100: 1, 200: 2, 300: 4, 400: None}
    assert ran(result) == [(100, 1), (200, 1), (200, 2), (300, 2), (300, 3), (300, 4), (400, 4), (400, 5)]
    assert result.strategy == "linear+lower-bound"


def test_lower_bound_skips_larger_loads_after_an_unsolvable_one():
    needed = {100: 2, 200: None, 300: 1, 400: 1}  # 300 and 400 would pass, but must not be run
    result = search_demand(monotonic_oracle(needed), LOADS, [1, 2, 3], Strategy.LINEAR, lower_bound=True)
    assert dict(result.demand) == {100: 2, 200: None, 300: None, 400: None}
    assert result.skipped == (300, 400)
    assert ran(result) == [(100, 1), (100, 2), (200, 2), (200, 3)]


def test_binary_probes_the_lower_middle_first():
    # 5 resources: probe index 2 (r=3); pass -> [0,1]: probe r=1 fail -> [1,1]: probe r=2 pass -> 2.
    result = search_demand(monotonic_oracle({100: 2}), [100], RESOURCES, Strategy.BINARY)
    assert dict(result.demand) == {100: 2}
    assert ran(result) == [(100, 3), (100, 1), (100, 2)]


def test_binary_reports_none_after_probing_up_to_the_largest():
    result = search_demand(monotonic_oracle({100: None}), [100], RESOURCES, Strategy.BINARY)
    assert dict(result.demand) == {100: None}
    assert ran(result) == [(100, 3), (100, 4), (100, 5)]


def test_binary_with_lower_bound_bisects_only_above_the_previous_demand():
    result = search_demand(
        monotonic_oracle({100: 3, 200: 4}), [100, 200], RESOURCES, Strategy.BINARY, lower_bound=True
    )
    assert dict(result.demand) == {100: 3, 200: 4}
    # load 200 searches [3, 4, 5]: probe 4 pass, then 3 fail.
    assert ran(result) == [(100, 3), (100, 1), (100, 2), (200, 4), (200, 3)]


def test_initial_guess_starts_at_the_previous_demand_and_steps_both_ways():
    needed = {100: 3, 200: 2, 300: 4}
    result = search_demand(monotonic_oracle(needed), [100, 200, 300], RESOURCES, Strategy.INITIAL_GUESS)
    assert dict(result.demand) == needed
    assert ran(result) == [
        (100, 1),
        (100, 2),
        (100, 3),  # no previous demand: start at r=1, step up while failing
        (200, 3),
        (200, 2),
        (200, 1),  # guess 3 passes: step down while passing, stop at the first fail
        (300, 2),
        (300, 3),
        (300, 4),  # guess 2 fails: step up to the first pass
    ]


def test_initial_guess_after_a_load_without_demand_starts_from_the_first_resource():
    needed = {100: None, 200: 1}
    result = search_demand(monotonic_oracle(needed), [100, 200], [1, 2], Strategy.INITIAL_GUESS)
    assert dict(result.demand) == {100: None, 200: 1}
    assert ran(result) == [(100, 1), (100, 2), (200, 1)]


def test_baseline_guess_starts_at_the_given_demand_and_needs_no_failing_run_below_the_lower_bound():
    # The UC1 gate's shape: baseline 1 / 2 / 4 at 4 000 / 12 000 / 20 000, unchanged code.
    needed = {4000: 1, 12000: 2, 20000: 4}
    baseline = {4000: 1, 12000: 2, 20000: 4}
    search = IncrementalSearch(Metric.DEMAND, Strategy.BASELINE_GUESS, True, (1, 2, 3, 4))
    for load in needed:
        search.search(load, monotonic_oracle(needed), guess=baseline[load])
    result = search.result()
    assert dict(result.demand) == needed
    # 20 000 starts at 4 (pass) and steps down to 3 (fail): linear+lower-bound would also have run 2 (fail)
    assert ran(result) == [(4000, 1), (12000, 2), (12000, 1), (20000, 4), (20000, 3)]
    assert result.strategy == "baseline-guess+lower-bound"


def test_baseline_guess_finds_a_regression_and_an_improvement_by_stepping_from_the_guess():
    needed = {100: 4, 200: 1}  # 100 regressed from 2, 200 improved from 3
    search = IncrementalSearch(Metric.DEMAND, Strategy.BASELINE_GUESS, False, (1, 2, 3, 4))
    search.search(100, monotonic_oracle(needed), guess=2)
    search.search(200, monotonic_oracle(needed), guess=3)
    result = search.result()
    assert dict(result.demand) == needed
    assert ran(result) == [(100, 2), (100, 3), (100, 4), (200, 3), (200, 2), (200, 1)]


def test_a_floor_ends_the_search_at_a_pass_there_as_at_most_and_saves_the_failing_run_below():
    # The UC1 gate's shape again, as a gate runs it: a pass at the baseline's demand is all a gate needs.
    needed = {4000: 1, 12000: 1, 20000: 4}  # 12 000 improved to 1: a floor cannot see that
    baseline = {4000: 1, 12000: 2, 20000: 4}
    search = IncrementalSearch(Metric.DEMAND, Strategy.BASELINE_GUESS, True, (1, 2, 3, 4))
    for load in needed:
        search.search(load, monotonic_oracle(needed), guess=baseline[load], floor=baseline[load])
    result = search.result()
    assert ran(result) == [(4000, 1), (12000, 2), (20000, 4)]
    assert dict(result.demand) == {4000: 1, 12000: 2, 20000: 4}
    # 4 000 passed at the fewest instances there are: an exact demand, not a bound
    assert result.at_most == (12000, 20000)
    assert [result.status(load) for load in needed] == ["1", "<=2", "<=4"]


def test_a_floor_does_not_stop_a_search_stepping_up_from_a_failure():
    search = IncrementalSearch(Metric.DEMAND, Strategy.BASELINE_GUESS, False, (1, 2, 3, 4))
    step = search.search(100, monotonic_oracle({100: 3}), guess=2, floor=2)
    assert (step.optimum, step.status) == (3, "measured")  # failed at 2, passed at 3: exact
    assert ran(search.result()) == [(100, 2), (100, 3)]


def test_an_at_most_demand_does_not_restrict_the_next_load_by_lower_bound():
    # 100's demand is at most 3; its true demand may be 1, so 200 may still need only 2
    search = IncrementalSearch(Metric.DEMAND, Strategy.BASELINE_GUESS, True, (1, 2, 3, 4))
    search.search(100, monotonic_oracle({100: 1}), guess=3, floor=3)
    step = search.search(200, monotonic_oracle({200: 2}), guess=3)
    assert (step.optimum, step.status) == (2, "measured")
    assert ran(search.result()) == [(100, 3), (200, 3), (200, 2), (200, 1)]


def test_a_ceiling_ends_the_search_at_a_failure_there_as_above_and_saves_the_runs_above():
    # a testbed much slower than the baseline's (the 0.57x machine): 100 and 200 need more than the baseline
    needed = {100: 3, 200: 4, 300: 4}
    baseline = {100: 1, 200: 2, 300: 4}
    search = IncrementalSearch(Metric.DEMAND, Strategy.BASELINE_GUESS, True, (1, 2, 3, 4))
    steps = [
        search.search(load, monotonic_oracle(needed), guess=baseline[load], ceiling=baseline[load])
        for load in needed
    ]
    assert [(s.optimum, s.status, s.failed_at) for s in steps] == [
        (None, "above", 1),
        (None, "above", 2),
        (4, "measured", 3),  # passed at its ceiling: the ceiling stops nothing (3 failed below)
    ]
    # 200 starts above 100's failure (LowerBound), not skipped as "none"; 300 above 200's
    assert ran(search.result()) == [(100, 1), (200, 2), (300, 4), (300, 3)]
    result = search.result()
    assert result.above == {100: 1, 200: 2}
    assert dict(result.demand) == {100: None, 200: None, 300: 4}
    assert [result.status(load) for load in needed] == [">1", ">2", "4"]
    assert result.skipped == ()


def test_a_ceiling_does_not_stop_a_search_that_passed_or_is_below_it():
    search = IncrementalSearch(Metric.DEMAND, Strategy.BASELINE_GUESS, False, (1, 2, 3, 4))
    # started below the ceiling: a FAIL at 1 steps up to 2 (the ceiling), which fails and ends it
    step = search.search(100, monotonic_oracle({100: 4}), guess=1, ceiling=2)
    assert (step.optimum, step.status, step.failed_at) == (None, "above", 2)
    assert ran(search.result()) == [(100, 1), (100, 2)]
    # without a ceiling the same search climbs on to the demand
    free = IncrementalSearch(Metric.DEMAND, Strategy.BASELINE_GUESS, False, (1, 2, 3, 4))
    assert free.search(100, monotonic_oracle({100: 4}), guess=1).optimum == 4
    # a FAIL at the most instances there are is a measured "none", not a bound
    top = IncrementalSearch(Metric.DEMAND, Strategy.BASELINE_GUESS, False, (1, 2, 3, 4))
    step = top.search(100, monotonic_oracle({100: 9}), guess=4, ceiling=4)
    assert (step.optimum, step.status) == (None, "none")


def test_stopping_at_most_is_refused_where_the_search_is_not_stepping_below_a_pass():
    search = IncrementalSearch(Metric.DEMAND, Strategy.BASELINE_GUESS, False, (1, 2, 3, 4))
    running = search.start(100, guess=2)
    with pytest.raises(RuntimeError, match="not stepping down"):
        running.stop_at_most()  # nothing passed yet
    running.record(F)
    with pytest.raises(RuntimeError, match="not stepping down"):
        running.stop_at_most()  # stepping up after a failure


def test_baseline_guess_without_a_guess_starts_as_initial_guess():
    needed = {100: 3, 200: 2}
    for strategy in (Strategy.BASELINE_GUESS, Strategy.INITIAL_GUESS):
        search = IncrementalSearch(Metric.DEMAND, strategy, False, (1, 2, 3, 4))
        for load in needed:
            search.search(load, monotonic_oracle(needed))
        assert ran(search.result()) == [(100, 1), (100, 2), (100, 3), (200, 3), (200, 2), (200, 1)]


def test_other_strategies_ignore_a_guess():
    search = IncrementalSearch(Metric.DEMAND, Strategy.LINEAR, False, (1, 2, 3, 4))
    search.search(100, monotonic_oracle({100: 2}), guess=4)
    assert ran(search.result()) == [(100, 1), (100, 2)]


# ---- INVALID / ERRORED -------------------------------------------------------------------------------------


@pytest.mark.parametrize("broken", [I, E])
@pytest.mark.parametrize("strategy", SEARCH_STRATEGIES)
def test_a_broken_sub_experiment_makes_the_load_unmeasured_not_none(strategy, broken):
    # Load 200's very first probe is broken, whatever the strategy probes first.
    first_probe = {
        Strategy.FULL: 1,
        Strategy.LINEAR: 1,
        Strategy.BINARY: 3,
        Strategy.INITIAL_GUESS: 1,
        Strategy.BASELINE_GUESS: 1,  # no guess given: starts as INITIAL_GUESS
    }[strategy]
    oracle = monotonic_oracle({100: 1, 200: 2, 300: 3}, overrides={(200, first_probe): broken})
    result = search_demand(oracle, [100, 200, 300], RESOURCES, strategy)
    assert result.unmeasured == (200,)
    assert 200 not in result.demand  # unmeasured is not "none"
    assert result.status(200) == "unmeasured"
    assert [s.resources for s in result.sub_experiments if s.load == 200] == [first_probe]  # search stopped
    assert result.demand[300] == 3  # later loads are still measured
    assert SubExperiment(200, first_probe, broken) in result.sub_experiments


def test_an_invalid_point_is_never_taken_as_a_pass_even_after_a_pass_in_full_search():
    oracle = monotonic_oracle({100: 1}, overrides={(100, 3): I})
    result = search_demand(oracle, [100], RESOURCES, Strategy.FULL)
    assert result.unmeasured == (100,) and dict(result.demand) == {}
    assert ran(result) == [(100, 1), (100, 2), (100, 3)]


def test_lower_bound_after_an_unmeasured_load_uses_the_last_measured_demand():
    oracle = monotonic_oracle({100: 2, 200: 3, 300: 3}, overrides={(200, 2): E})
    result = search_demand(oracle, [100, 200, 300], RESOURCES, Strategy.LINEAR, lower_bound=True)
    assert result.unmeasured == (200,) and dict(result.demand) == {100: 2, 300: 3}
    assert ran(result) == [(100, 1), (100, 2), (200, 2), (300, 2), (300, 3)]


def test_stop_on_unmeasured_marks_the_rest_unmeasured_without_running():
    oracle = monotonic_oracle({100: 1, 200: 1, 300: 1}, overrides={(200, 1): E})
    result = search_demand(oracle, [100, 200, 300], RESOURCES, Strategy.LINEAR, stop_on_unmeasured=True)
    assert result.unmeasured == (200, 300)
    assert ran(result) == [(100, 1), (200, 1)]


def test_oracle_may_return_a_result_object_with_an_outcome():
    @dataclass
    class Run:
        outcome: Outcome
        slope: float

    result = search_demand(lambda l, r: Run(P if r >= 2 else F, 0.0), [100], RESOURCES, Strategy.LINEAR)
    assert dict(result.demand) == {100: 2}


def test_oracle_returning_something_else_is_a_clear_error():
    with pytest.raises(TypeError, match="must return an Outcome"):
        search_demand(lambda l, r: True, [100], RESOURCES)


@pytest.mark.parametrize("loads", [[], [100, 100], [0, 100], [1.5]])
def test_bad_loads_are_rejected(loads):
    with pytest.raises(ValueError):
        search_demand(monotonic_oracle({}), loads, RESOURCES)


def test_unsorted_inputs_are_searched_ascending():
    result = search_demand(monotonic_oracle({100: 2, 200: 2}), [200, 100], [2, 1], Strategy.LINEAR)
    assert ran(result) == [(100, 1), (100, 2), (200, 1), (200, 2)]


# ---- capacity ----------------------------------------------------------------------------------------------


def capacity_oracle(max_load: dict[int, int | None], overrides=None):
    """(load, r) passes iff load <= max_load[r]."""

    def oracle(load: int, resources: int) -> Outcome:
        if overrides and (load, resources) in overrides:
            return overrides[(load, resources)]
        cap = max_load[resources]
        return P if cap is not None and load <= cap else F

    return oracle


MAX_LOAD = {1: 100, 2: 200, 3: None, 4: 400}


def test_capacity_linear_ascends_loads_until_the_first_fail():
    result = search_capacity(capacity_oracle(MAX_LOAD), LOADS, [1, 2, 3, 4], Strategy.LINEAR)
    assert isinstance(result, CapacityResult)
    assert dict(result.capacity) == {1: 100, 2: 200, 3: None, 4: 400}
    assert ran(result) == [
        (100, 1),
        (200, 1),
        (100, 2),
        (200, 2),
        (300, 2),
        (100, 3),
        (100, 4),
        (200, 4),
        (300, 4),
        (400, 4),
    ]


def test_capacity_lower_bound_starts_at_previous_capacity_and_does_not_skip_after_none():
    result = search_capacity(
        capacity_oracle(MAX_LOAD), LOADS, [1, 2, 3, 4], Strategy.LINEAR, lower_bound=True
    )
    assert dict(result.capacity) == {1: 100, 2: 200, 3: None, 4: 400}
    assert result.skipped == ()
    assert ran(result) == [
        (100, 1),
        (200, 1),
        (100, 2),
        (200, 2),
        (300, 2),
        (200, 3),  # starts at capacity(2) = 200
        (100, 4),
        (200, 4),
        (300, 4),
        (400, 4),  # capacity(3) was none: no restriction
    ]


def test_capacity_binary_probes_the_upper_middle():
    # loads 100..500 (5): probe index 2 (300) pass -> [3,4]: probe index 4 (500) fail -> [3,3]: 400 pass.
    result = search_capacity(capacity_oracle({1: 400}), [100, 200, 300, 400, 500], [1], Strategy.BINARY)
    assert dict(result.capacity) == {1: 400}
    assert ran(result) == [(300, 1), (500, 1), (400, 1)]


def test_capacity_binary_keeps_a_pass_found_at_the_top():
    # Theodolite's Kotlin returns -1 when the last single-element probe is at the top index and fails even
    # though a lower load passed; this implementation keeps the best pass seen.
    result = search_capacity(capacity_oracle({1: 300}), [100, 200, 300, 400], [1], Strategy.BINARY)
    assert dict(result.capacity) == {1: 300}
    assert ran(result) == [(300, 1), (400, 1)]


def test_capacity_full_takes_the_largest_pass():
    oracle = capacity_oracle({1: 100}, overrides={(300, 1): P})
    result = search_capacity(oracle, [100, 200, 300, 400], [1], Strategy.FULL)
    assert dict(result.capacity) == {1: 300}
    assert len(result.sub_experiments) == 4


def test_capacity_initial_guess_steps_up_while_passing_and_down_while_failing():
    result = search_capacity(
        capacity_oracle({1: 200, 2: 400, 3: 100}), LOADS, [1, 2, 3], Strategy.INITIAL_GUESS
    )
    assert dict(result.capacity) == {1: 200, 2: 400, 3: 100}
    assert ran(result) == [
        (100, 1),
        (200, 1),
        (300, 1),  # no guess: start at the smallest load, step up while passing
        (200, 2),
        (300, 2),
        (400, 2),  # guess 200 passes: step up to the end
        (400, 3),
        (300, 3),
        (200, 3),
        (100, 3),  # guess 400 fails: step down to the first pass
    ]


def test_capacity_broken_point_makes_the_resource_amount_unmeasured():
    oracle = capacity_oracle({1: 200, 2: 300}, overrides={(200, 1): I})
    result = search_capacity(oracle, LOADS, [1, 2], Strategy.LINEAR)
    assert result.unmeasured == (1,) and dict(result.capacity) == {2: 300}
    assert result.status(1) == "unmeasured" and result.status(2) == "300"


# ---- strategies agree with the offline metric


@pytest.mark.parametrize("lower_bound", [False, True])
@pytest.mark.parametrize("strategy", SEARCH_STRATEGIES)
def test_offline_metric_on_the_executed_points_reproduces_every_strategy(strategy, lower_bound):
    needed = {100: 1, 200: 3, 300: 3, 400: 5}
    overrides = {(300, 3): E} if strategy is not Strategy.BINARY else {(300, 4): E}
    oracle = monotonic_oracle(needed, overrides)
    online = search_demand(oracle, LOADS, RESOURCES, strategy, lower_bound=lower_bound)
    offline = demand_from_sub_experiments(online.sub_experiments)
    assert offline.unmeasured == online.unmeasured
    assert dict(offline.demand) == dict(online.demand)
    max_load = {1: 100, 2: 200, 3: 200, 4: 400, 5: 400}
    online_c = search_capacity(capacity_oracle(max_load), LOADS, RESOURCES, strategy, lower_bound=lower_bound)
    offline_c = capacity_from_sub_experiments(online_c.sub_experiments)
    assert dict(offline_c.capacity) == dict(online_c.capacity) == max_load


def test_demand_from_a_table_distinguishes_none_and_unmeasured():
    table = [
        SubExperiment(100, 1, F),
        SubExperiment(100, 2, P),
        SubExperiment(200, 2, F),
        SubExperiment(300, 1, I),
    ]
    result = demand_from_sub_experiments(table)
    assert isinstance(result, DemandResult)
    assert dict(result.demand) == {100: 2, 200: None}
    assert result.unmeasured == (300,)
    assert [result.status(l) for l in (100, 200, 300)] == ["2", "none", "unmeasured"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("binary", (Strategy.BINARY, False)),
        ("linear+lower-bound", (Strategy.LINEAR, True)),
        ("lower-bound", (Strategy.LINEAR, True)),
        ("Initial-Guess", (Strategy.INITIAL_GUESS, False)),
        ("baseline-guess+lower-bound", (Strategy.BASELINE_GUESS, True)),
    ],
)
def test_strategy_names_parse_and_describe(text, expected):
    assert parse_strategy(text) == expected
    assert parse_strategy(describe_strategy(*expected)) == expected


def test_unknown_strategy_name_lists_the_choices():
    with pytest.raises(ValueError, match="use one of full, linear, binary, initial-guess"):
        parse_strategy("random")
