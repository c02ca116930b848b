"""The capacity strategy in a real gate: embedded broker, local Spark cluster, UC1; capacities measured,
recorded with their batch series and task CPU, reported, and recomputed offline."""

import io
import json
import re
from xml.etree import ElementTree

import pytest

from pytest_theodolite.cli.analyse import main

# it measures (a real gate inside): under pytest-xdist nothing else may run beside it
pytestmark = [pytest.mark.integration, pytest.mark.theodolite_exclusive]

GATE = """
import pytest
from theodolite_generator import Workload
from pytest_theodolite import Benchmark
from theodolite_spark_jobs import uc1

UC1 = Benchmark("uc1-capacity", uc1.start_query, lambda keys: Workload(keys=keys), input_partitions=2)

@pytest.mark.theodolite(UC1, loads=[500, 6000], resources=[1], instance_cpu=0.25, strategy="capacity",
                        duration=8, max_duration=30, max_warmup=40, threshold="10%")
def test_uc1(theodolite_gate):
    theodolite_gate.check()
"""


def test_the_capacity_strategy_measures_records_and_reports_each_instance_counts_capacity(pytester):
    """Which capacities and demands a real measurement reaches depends on the host; that they were reached,
    recorded with their batches, reported and recomputed from the files, does not."""
    pytester.makepyfile(test_uc1_capacity=GATE)
    xml = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--theodolite-results=results",
        "--theodolite-max-instances=1",
        "--theodolite-update-baselines",
        f"--junitxml={xml}",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 2 and "errors" not in outcomes, outcomes
    result.stdout.fnmatch_lines(
        [
            "*capacity per instance count, measured directly (* s): 1: *",
            "*capacity plot: *uc1-capacity_capacity.png",
        ]
    )
    results = pytester.path / "results"
    assert (results / "uc1-capacity_capacity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    document = json.loads((results / "expuc1-capacity_results.json").read_text())
    measurements = document["capacity_measurements"]
    assert measurements and measurements[0]["instances"] == 1, measurements
    for measurement in measurements:
        assert measurement["status"] in ("certain", "uncertain"), measurement
        # a measurement can stay uncertain without an estimate: then it says why
        if measurement["estimate"] is None:
            assert measurement["status"] == "uncertain" and measurement["reason"], measurement
        else:
            assert measurement["estimate"]["records_per_s"] > 0, measurement
        assert measurement["timings"]["measure_s"] > 0, measurement
        # where the host's CPU went while it measured, reported beside the estimate
        host = measurement["host"]
        assert host["host_cores"] >= 1 and host["window_s"] > 0 and host["roles"]["generator"] > 0, host
        r, load, attempt = measurement["instances"], measurement["load"], measurement["attempt"]
        assert (
            (results / f"expuc1-capacity_{load}_{r}_capacity-rows_{attempt}.csv")
            .read_text()
            .startswith("labels,timestamp,value\n")
        )
        if measurement["estimate"] is not None and measurement["estimate"]["saturated"]:
            # full batches were read: each has its tasks' CPU from the session's event log, kept as a series
            task_cpu = measurement["task_cpu"]
            assert task_cpu["batches"] >= 1 and task_cpu["median_us"] > 0, measurement
            series = results / f"expuc1-capacity_{load}_{r}_capacity-task-cpu-ms_{attempt}.csv"
            assert len(series.read_text().splitlines()) > task_cpu["batches"], series
    demand = (results / "expuc1-capacity_demand.csv").read_text().splitlines()
    assert demand[0] == "load,resources" and len(demand) == 3, demand
    # every lag-trend run was a certification, judged like any sub-experiment
    for sub in document["sub_experiments"]:
        assert sub["outcome"] in ("pass", "fail"), sub
    estimated = [m for m in measurements if m["estimate"] is not None]
    properties = {p.get("name"): p.get("value") for p in ElementTree.parse(xml).iter("property")}
    if any(m["instances"] == 1 for m in estimated):
        assert float(properties["theodolite.capacity.1"]) > 0, properties
    # the offline analysis gives each capacity again from its batch series
    out = io.StringIO()
    assert main(["analyse", str(results)], stdout=out) == 0
    text = out.getvalue()
    assert "capacity (recomputed)" in text, text
    rows = [re.split(r"\s{2,}", line) for line in text.splitlines()]
    for measurement in estimated:  # a measurement repeated at a higher rate has a row of its own
        value = f"{measurement['estimate']['records_per_s']:,.0f}"
        row = next(
            row
            for row in rows
            if row[:1] == [str(measurement["instances"])]
            and row[2:3] == [f"{measurement['batch_records']:,}"]
        )
        recomputed, recorded = row[3], row[4]
        assert recomputed.startswith(f"{value} ") or recomputed.startswith(f">= {value} "), row
        assert recorded == value, row  # recomputed from the files, and as recorded
        if measurement["task_cpu"] is not None:
            # the series holds milliseconds, the record seconds: a median on a rounding tie may print one
            # hundredth apart, so compare within the printed precision
            assert abs(float(row[6]) - measurement["task_cpu"]["median_us"]) <= 0.0051, row
