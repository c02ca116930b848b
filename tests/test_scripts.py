"""The benchmark scripts' own formatting, on scripted records (the scripts themselves need a broker)."""

import importlib.util
from pathlib import Path

from pytest_theodolite.results import RepetitionRecord, SubExperimentRecord
from pytest_theodolite.slo import GENERATOR_RATE, LAG_TREND, Outcome, SloVerdict

SCRIPTS = Path(__file__).resolve().parents[1] / "benchmarks" / "scripts"


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
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
