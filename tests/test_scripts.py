"""The benchmark scripts' own formatting, on scripted records (the scripts themselves need a broker)."""

import importlib.util
import json
import sys
from pathlib import Path

from pytest_theodolite.results import RepetitionRecord, SubExperimentRecord
from pytest_theodolite.slo import GENERATOR_RATE, LAG_TREND, Outcome, SloVerdict

SCRIPTS = Path(__file__).resolve().parents[1] / "benchmarks" / "scripts"


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def record(verdict: SloVerdict) -> SubExperimentRecord:
    return SubExperimentRecord.from_repetitions(2000, 1, 2000.0, [RepetitionRecord(0, (verdict,))])


def test_demand_grid_prints_an_errored_sub_experiment_without_a_slope():
    grid = load_script("demand_grid")
    errored = record(SloVerdict(LAG_TREND, Outcome.ERRORED, None, 20.0, "the query died"))
    invalid = record(SloVerdict(GENERATOR_RATE, Outcome.INVALID, 900.0, 1960.0, "fell short"))
    failed = record(SloVerdict(LAG_TREND, Outcome.FAIL, 1490.4, 20.0))
    assert errored.lag_trend_slope is None
    assert grid.cell(errored) == "none (errored)"
    assert grid.cell(invalid) == "none (invalid)"
    assert grid.cell(failed) == "+1490/s (fail)"
    assert grid.cell(None) == "not run"


def test_gate_quality_reads_ref_and_cpu_change_of_pull_request_mode(tmp_path):
    quality = load_script("gate_quality")
    junit = tmp_path / "run.xml"
    junit.write_text(
        '<testsuites><testsuite><testcase name="test_uc1_database_storage[load=12000]"><properties>'
        '<property name="theodolite.demand.12000" value="3"/>'
        '<property name="theodolite.baseline.12000" value="2"/>'
        '<property name="theodolite.ref.12000" value="2"/>'
        '<property name="theodolite.verdict.12000" value="regression"/>'
        '<property name="theodolite.cpu_change.12000" value="+0.480"/>'
        "</properties></testcase></testsuite></testsuites>"
    )
    (point,) = quality.points_of(junit)
    assert (point.load, point.baseline, point.measured, point.verdict) == ("12000", "2", "3", "regression")
    assert point.cpu_change == "+0.480"


def test_uc4_state_bench_times_two_folds_that_agree():
    bench = load_script("bench_uc4_state")
    batch = bench.readings(240)
    before, after = bench.ScriptedState(), bench.ScriptedState()
    [old] = bench.pandas_fold(bench.WINDOW, iter([batch]), before)
    [new] = bench.uc4.latest_per_child(bench.WINDOW, iter([batch]), after)
    assert old.equals(new.astype(old.dtypes)) and json.loads(before.value[0]) == json.loads(after.value[0])
