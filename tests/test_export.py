"""`python -m pytest_theodolite export`: a results directory written by the results writer, read back and
given as Bencher Metric Format or github-action-benchmark JSON (report/export.py, cli/export.py)."""

import io
import json
import math

import pytest

from pytest_theodolite.__main__ import main as module_main
from pytest_theodolite.cli.export import main
from pytest_theodolite.core.evaluation import SloSettings
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.records import LAG_TREND, RepetitionRecord, SubExperimentRecord
from pytest_theodolite.core.scalability import DemandResult, Metric
from pytest_theodolite.core.slo import SloVerdict
from pytest_theodolite.store.results import ResultsWriter


def record(load: int, resources: int, outcome: Outcome, cost: tuple[float, float, float] | None = None):
    verdict = SloVerdict(LAG_TREND, outcome, 0.0 if outcome is Outcome.PASS else 500.0, 100.0)
    recorded = (
        {} if cost is None else {"cpu_us_per_record": cost[0], "low": cost[1], "high": cost[2], "blocks": 3}
    )
    return SubExperimentRecord.from_repetitions(
        load, resources, float(load), [RepetitionRecord(0, (verdict,), {}, {}, recorded)]
    )


def capacity_measurement(
    instances: int, records_per_s: float, saturated: bool = True, attempt: int = 0
) -> dict:
    estimate = {
        "instances": instances,
        "records_per_s": records_per_s,
        "low": records_per_s * 0.95,
        "high": records_per_s * 1.05,
        "batches": 6,
        "window_s": 30.0,
        "saturated": saturated,
        "batch_cap": 20000,
        "standard_error": 10.0,
        "per_batch_s": 0.1,
    }
    return {
        "instances": instances,
        "load": 4000,
        "estimate": estimate,
        "status": "measured",
        "attempt": attempt,
    }


@pytest.fixture
def results_dir(tmp_path):
    """uc1-keys: load 1000 needs 1 instance, 2000 at most 2 (fewer not run), 3000 none, 4000 unmeasured; the
    capacities of 1 and 2 instances (2's measured twice: the second, at a higher rate, counts)."""
    writer = ResultsWriter(
        tmp_path,
        "uc1-keys",
        metric=Metric.DEMAND,
        slo_settings=SloSettings(),
        loads=[1000, 2000, 3000, 4000],
        resources=[1, 2],
        environment={},
    )
    for sub in (
        record(1000, 1, Outcome.PASS, (50.0, 48.0, 52.0)),
        record(2000, 2, Outcome.PASS, (60.0, 57.0, 63.0)),
        record(3000, 1, Outcome.FAIL),
        record(3000, 2, Outcome.FAIL),
    ):
        writer.record_sub_experiment(sub)
    writer.write_demand(
        DemandResult(
            {1000: 1, 2000: 2, 3000: None},
            unmeasured=(4000,),
            loads=(1000, 2000, 3000, 4000),
            resources=(1, 2),
            at_most=(2000,),
        )
    )
    writer.record_capacity_measurement(capacity_measurement(1, 1500.0))
    writer.record_capacity_measurement(capacity_measurement(2, 2000.0, saturated=False))
    writer.record_capacity_measurement(capacity_measurement(2, 2900.0, attempt=1))
    return tmp_path


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_bmf_holds_demand_cost_and_capacity_with_their_intervals(results_dir):
    code, out, err = run(str(results_dir), "--format", "bmf")
    assert code == 0, err
    document = json.loads(out)
    assert document == {
        "uc1-keys/load=1000": {
            "demand": {"value": 1.0},
            "cpu-per-record": {"value": 50.0, "lower_value": 48.0, "upper_value": 52.0},
        },
        # at most 2: fewer were not run, so the interval reaches down to the fewest instances planned
        "uc1-keys/load=2000": {
            "demand": {"value": 2.0, "lower_value": 1.0, "upper_value": 2.0},
            "cpu-per-record": {"value": 60.0, "lower_value": 57.0, "upper_value": 63.0},
        },
        "uc1-keys/instances=1": {"capacity": {"value": 1500.0, "lower_value": 1425.0, "upper_value": 1575.0}},
        "uc1-keys/instances=2": {"capacity": {"value": 2900.0, "lower_value": 2755.0, "upper_value": 3045.0}},
    }


def test_github_action_benchmark_gives_one_direction_per_file(results_dir):
    code, out, _ = run(str(results_dir), "--format", "github-action-benchmark")
    assert code == 0
    entries = json.loads(out)
    assert [e["name"] for e in entries] == [
        "uc1-keys/load=1000 demand",
        "uc1-keys/load=1000 cpu-per-record",
        "uc1-keys/load=2000 demand",
        "uc1-keys/load=2000 cpu-per-record",
    ]
    assert entries[1] == {
        "name": "uc1-keys/load=1000 cpu-per-record",
        "unit": "us CPU per record",
        "value": 50.0,
        "range": "48..52",
    }
    code, out, _ = run(str(results_dir), "--format", "github-action-benchmark", "--measures", "capacity")
    assert code == 0
    assert [(e["name"], e["unit"], math.floor(e["value"])) for e in json.loads(out)] == [
        ("uc1-keys/instances=1 capacity", "records/s", 1500),
        ("uc1-keys/instances=2 capacity", "records/s", 2900),
    ]


def test_a_pull_request_run_exports_its_change_and_writes_a_file(results_dir, tmp_path_factory):
    pr_run = tmp_path_factory.mktemp("pr")
    results_dir.rename(pr_run / "change")
    output = pr_run / "bmf.json"
    code = module_main(["export", str(pr_run), "--format", "bmf", "--output", str(output)])
    assert code == 0
    assert set(json.loads(output.read_text())) == {
        "uc1-keys/load=1000",
        "uc1-keys/load=2000",
        "uc1-keys/instances=1",
        "uc1-keys/instances=2",
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--format", "github-action-benchmark", "--measures", "demand,capacity"], "one direction per file"),
        (["--format", "bmf", "--measures", "cost"], "choose from demand, cpu-per-record, capacity"),
    ],
)
def test_bad_requests_exit_2_with_what_to_do(results_dir, argv, message):
    code, out, err = run(str(results_dir), *argv)
    assert (code, out) == (2, "")
    assert message in err


def test_a_directory_without_results_exits_2(tmp_path):
    code, _, err = run(str(tmp_path), "--format", "bmf")
    assert code == 2 and "no results in" in err
    code, _, err = run(str(tmp_path / "missing"), "--format", "bmf")
    assert code == 2 and "does not exist" in err
