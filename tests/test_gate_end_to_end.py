"""One real gate, end to end: embedded broker, local Spark cluster, UC1, baseline comparison, raw results."""

import io
import json

import pytest
from theodolite_analysis import theodolite_trend_slope

from pytest_theodolite.cli.analyse import main
from pytest_theodolite.core.estimators import lag_trend_slope
from pytest_theodolite.core.protocol import Stop
from pytest_theodolite.store.results import read_series

# it measures (a real gate inside): under pytest-xdist nothing else may run beside it
pytestmark = [pytest.mark.integration, pytest.mark.theodolite_exclusive]

GATE = """
import pytest
from generator import Workload
from pytest_theodolite.engine.runner import Benchmark
from spark_jobs import uc1

UC1 = Benchmark("uc1-e2e", uc1.start_query, lambda keys: Workload(keys=keys), input_partitions=2)

@pytest.mark.theodolite(UC1, loads=[300], resources=[1, 2], duration=8, max_duration=30, max_warmup=40,
                        threshold="20%")
def test_uc1(theodolite_gate):
    theodolite_gate.check()
"""


def test_a_real_gate_reaches_records_and_reports_a_verdict(pytester):
    """Which verdict a real measurement reaches depends on the host; that one was reached -- a pass or a
    regression, never an error -- recorded with its interval and protocol, and reported, does not."""
    pytester.makepyfile(test_uc1_gate=GATE)
    (pytester.path / "baselines").mkdir()
    (pytester.path / "baselines" / "uc1-e2e.json").write_text(
        json.dumps(
            {
                "benchmark": "uc1-e2e",
                "format_version": 1,
                "settings": {},
                "demand": {"300": 2},
                "testbed": {
                    "cores": None,
                    "memory_gib": None,
                    "instance_cpu": None,
                    "kafka_provider": "embedded",
                    "spark_master": "standalone",
                    "pyspark_version": None,
                    "python_version": "3.11",
                },
            }
        )
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--theodolite-results=results", "--theodolite-max-instances=2"
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 1 and "errors" not in outcomes, outcomes
    if outcomes.get("failed"):  # a regression says so with its table, not with a traceback
        result.stdout.fnmatch_lines(["*uc1-e2e load 300: measured *, baseline 2 instances: regression*"])
    result.stdout.fnmatch_lines(
        [
            # the search starts at the baseline's 2 (a pass there ends it; a fail finds no higher count)
            "*theodolite: uc1-e2e load=300 instances=?: * (lag-trend *; lag slope * [[]*, *[]] vs 60 records/s) "
            "[[]setup * s, warm-up * s (primed * s unlimited), measured * s until *, teardown * s[]]*",
            "*theodolite: scalability gates*",
            "uc1-e2e: *",
            "*testbed calibration: * rows/s on one * instance*",
        ]
    )
    results = pytester.path / "results"
    lag_files = sorted(results.glob("expuc1-e2e_300_*_lag-trend_0.csv"))
    assert lag_files, sorted(p.name for p in results.iterdir())
    for lag_file in lag_files:  # Theodolite's positional analysis reads the same trend as the plugin
        assert lag_file.read_text().startswith("labels,timestamp,value\n")
        series = read_series(lag_file)
        if len(series.values) >= 2:
            assert theodolite_trend_slope(lag_file, 0) == pytest.approx(
                lag_trend_slope(series.timestamps_s, series.values, 0), rel=1e-6, abs=1e-6
            )
    assert sorted(results.glob("expuc1-e2e_300_*_batch-id_0.csv"))
    demand = (results / "expuc1-e2e_demand.csv").read_text().splitlines()
    assert demand[0] == "load,resources"
    assert (results / "uc1-e2e_demand.png").read_bytes()[:4] == b"\x89PNG"
    document = json.loads((results / "expuc1-e2e_results.json").read_text())
    assert document["settings"]["benchmark"] == "uc1-e2e"
    assert document["settings"]["testbed"]["calibration_rows_per_s"] > 0
    # the CPU per record at the demand, and the blind spot, beside every verdict
    result.stdout.fnmatch_lines(["*load | baseline | measured | verdict*| CPU per record*| blind spot"])
    for sub in document["sub_experiments"]:
        assert sub["outcome"] in ("pass", "fail"), sub
        protocol = sub["repetitions"][0]["protocol"]
        assert protocol["stop"] in {stop.value for stop in Stop}, protocol
        lag = next(v for v in sub["verdicts"] if v["name"] == "lag-trend")
        if protocol["stop"] in ("certain", "max-duration"):
            assert protocol["warmup_s"] > 0 and protocol["measured_s"] >= 8, protocol
            assert lag["low"] <= lag["value"] <= lag["high"], lag
    passing = [sub["resources"] for sub in document["sub_experiments"] if sub["outcome"] == "pass"]
    ran = {sub["resources"] for sub in document["sub_experiments"]}
    if passing:  # a pass with one fewer instance not run is a bound: "<=N"
        fewest = min(passing)
        expected = f"300,{'' if fewest == 1 or fewest - 1 in ran else '<='}{fewest}"
    else:
        expected = "300,none"
    assert demand[1] == expected, (demand, document["sub_experiments"])
    # the offline analysis recomputes the same verdicts from the raw files
    out = io.StringIO()
    assert main(["analyse", str(results)], stdout=out) == 0
    for sub in document["sub_experiments"]:
        assert any(
            line.split()[:2] == [str(sub["load"]), str(sub["resources"])]
            and line.split()[-1] == sub["outcome"].upper()
            for line in out.getvalue().splitlines()
        ), (sub, out.getvalue())
