"""One real gate, end to end: embedded broker, local Spark cluster, UC1, baseline comparison, raw results."""

import json

import pytest

# it measures (a real gate inside): under pytest-xdist nothing else may run beside it
pytestmark = [pytest.mark.integration, pytest.mark.theodolite_exclusive]

GATE = """
import pytest
from generator import Workload
from pytest_theodolite.runner import Benchmark
from spark_jobs import uc1

UC1 = Benchmark("uc1-e2e", uc1.start_query, lambda keys: Workload(keys=keys), input_partitions=2)

@pytest.mark.theodolite(UC1, loads=[300], resources=[1, 2], duration=8, warmup=8, threshold="20%")
def test_uc1(theodolite_gate):
    comparison = theodolite_gate.check()
    assert comparison.measured in (1, 2)
"""


def test_a_real_gate_measures_compares_and_keeps_raw_results(pytester):
    pytester.makepyfile(test_uc1_gate=GATE)
    (pytester.path / "baselines").mkdir()
    (pytester.path / "baselines" / "uc1-e2e.json").write_text(json.dumps({
        "benchmark": "uc1-e2e", "format_version": 1, "settings": {}, "demand": {"300": 2},
        "testbed": {"cores": None, "memory_gib": None, "instance_cpu": None, "kafka_provider": "embedded",
                    "spark_master": "standalone", "pyspark_version": None, "python_version": "3.11"},
    }))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--theodolite-results=results",
                                           "--theodolite-max-instances=2")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*theodolite: scalability gates*", "*uc1-e2e*"])
    results = pytester.path / "results"
    lag_files = sorted(results.glob("expuc1-e2e_300_*_lag-trend_0.csv"))
    assert lag_files, sorted(p.name for p in results.iterdir())
    assert lag_files[0].read_text().startswith("timestamp,value\n")
    demand = (results / "expuc1-e2e_demand.csv").read_text().splitlines()
    assert demand[0] == "load,resources" and demand[1] in ("300,1", "300,2")
    assert (results / "uc1-e2e_demand.png").read_bytes()[:4] == b"\x89PNG"
    document = json.loads((results / "expuc1-e2e_results.json").read_text())
    assert document["settings"]["benchmark"] == "uc1-e2e"
    assert document["sub_experiments"][0]["outcome"] in ("PASS", "pass")
