"""Baselines: file round trip, refusal of broken files, the comparison rules. Pure: no broker, no Spark."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from pytest_theodolite.core.capacity import CapacityEstimate
from pytest_theodolite.core.cost import CostEstimate, PointCost
from pytest_theodolite.core.outcomes import UNMEASURED, Verdict
from pytest_theodolite.core.redaction import REDACTED
from pytest_theodolite.core.scalability import DemandResult
from pytest_theodolite.judge.comparison import (
    SPEED_UNCERTAINTY,
    compare,
    compare_point,
    offered_share,
    regression_judgeable,
    regression_share,
    weighs_at_least_the_baselines,
)
from pytest_theodolite.report.notes import offered_note
from pytest_theodolite.store.baseline import (
    FORMAT_VERSION,
    Baseline,
    BaselineError,
    baseline_from_measurement,
    baseline_path,
    load_baseline,
    write_baseline,
)
from pytest_theodolite.store.testbed import Testbed, TestbedDifference, describe_testbed_differences

TESTBED = Testbed(
    cores=8,
    memory_gib=31.3,
    instance_cpu=0.5,
    kafka_provider="embedded",
    spark_master="standalone",
    pyspark_version="4.0.0",
    python_version="3.11.7",
)


def make_baseline(demand: dict[int, int | None] | None = None, **settings: object) -> Baseline:
    return Baseline(
        benchmark="uc1",
        demand={1000: 1, 2000: 2, 4000: 3} if demand is None else demand,
        settings=settings or {"duration_s": 300, "warmup_s": 60},
        testbed=TESTBED,
    )


def valid_document() -> dict:
    return json.loads(make_baseline().to_json())


def write_document(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "uc1.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------------------
# File layout and round trip
# ------------------------------------------------------------------------------------------------------------


def test_written_file_is_sorted_indented_with_loads_in_numeric_order(tmp_path: Path) -> None:
    baseline = Baseline(
        "uc1",
        {10000: None, 2000: 1, 4000: 2},
        {"strategy": "linear", "duration_s": 300.0, "loads": (2000, 4000, 10000)},
        TESTBED,
    )
    path = write_baseline(tmp_path / "baselines" / "uc1.json", baseline)

    assert path == tmp_path / "baselines" / "uc1.json"
    assert path.read_text(encoding="utf-8") == (
        "{\n"
        '  "benchmark": "uc1",\n'
        '  "demand": {\n'
        '    "2000": 1,\n'
        '    "4000": 2,\n'
        '    "10000": null\n'
        "  },\n"
        '  "format_version": 1,\n'
        '  "settings": {\n'
        '    "duration_s": 300.0,\n'
        '    "loads": [\n'
        "      2000,\n"
        "      4000,\n"
        "      10000\n"
        "    ],\n"
        '    "strategy": "linear"\n'
        "  },\n"
        '  "testbed": {\n'
        '    "cores": 8,\n'
        '    "instance_cpu": 0.5,\n'
        '    "kafka_provider": "embedded",\n'
        '    "memory_gib": 31.3,\n'
        '    "pyspark_version": "4.0.0",\n'
        '    "python_version": "3.11.7",\n'
        '    "spark_master": "standalone"\n'
        "  }\n"
        "}\n"
    )
    assert [p.name for p in path.parent.iterdir()] == ["uc1.json"]  # no temporary file left behind


def test_round_trip_gives_an_equal_baseline(tmp_path: Path) -> None:
    baseline = make_baseline({1000: 1, 3000: None}, duration_s=300, nested={"b": [1, 2.5], "a": None})
    path = write_baseline(tmp_path / "uc1.json", baseline)

    loaded = load_baseline(path)

    assert loaded == baseline
    assert loaded is not None and loaded.loads == (1000, 3000) and loaded.format_version == FORMAT_VERSION


CAPACITY = {
    1: CapacityEstimate(1, 7663.2, 7123.0, 8202.0, 11, 40.5, True, 20000, 240.1, 0.68),
    4: CapacityEstimate(4, 25143.0, -math.inf, math.inf, 6, 6.0, False, 20000),
}


def test_capacities_are_stored_and_read_back(tmp_path: Path) -> None:
    baseline = Baseline("uc1", {1000: 1}, {}, TESTBED, capacity=CAPACITY)
    path = write_baseline(tmp_path / "uc1.json", baseline)
    document = json.loads(path.read_text())
    assert list(document["capacity"]) == ["1", "4"]
    assert document["capacity"]["1"]["records_per_s"] == 7663.2
    assert document["capacity"]["4"]["saturated"] is False and document["capacity"]["4"]["low"] is None
    assert load_baseline(path) == baseline
    # a later update without capacities keeps them; one with capacities replaces them
    measured = DemandResult(demand={1000: 1}, loads=(1000,), resources=(1,))
    kept = baseline_from_measurement("uc1", measured, {}, TESTBED, previous=baseline)
    assert kept.capacity == baseline.capacity
    replaced = baseline_from_measurement(
        "uc1", measured, {}, TESTBED, previous=baseline, capacity={1: CAPACITY[1]}
    )
    assert list(replaced.capacity) == [1]


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"1": "fast"}, 'capacity["1"] is the text "fast", expected an object'),
        ({"0": {}}, 'capacity["0"]: not an instance count'),
        ({"2": {**CAPACITY[1].to_dict()}}, 'capacity["2"].instances is 1, expected 2'),
        ({"1": {**CAPACITY[1].to_dict(), "records_per_s": "many"}}, 'capacity["1"].records_per_s is "many"'),
        (
            {"1": {**CAPACITY[1].to_dict(), "saturated": 1}},
            'capacity["1"].saturated is 1, expected true or false',
        ),
    ],
)
def test_a_broken_capacity_names_the_entry_and_the_problem(
    tmp_path: Path, entry: object, problem: str
) -> None:
    path = write_document(tmp_path, {**valid_document(), "capacity": entry})
    with pytest.raises(BaselineError, match=re.escape(problem)):
        load_baseline(path)


def test_rewriting_replaces_the_file(tmp_path: Path) -> None:
    path = tmp_path / "uc1.json"
    write_baseline(path, make_baseline({1000: 1}))
    write_baseline(path, make_baseline({1000: 2}))

    loaded = load_baseline(path)
    assert loaded is not None and loaded.demand == {1000: 2}


def test_settings_are_stored_redacted_and_as_plain_json(tmp_path: Path) -> None:
    baseline = make_baseline(
        kafka={"sasl.jaas.config": "...password=hunter2;", "bootstrap": "SASL://user:pw@host:9092"},
        threshold=float("inf"),
        results_dir=Path("/tmp/results"),
    )
    text = write_baseline(tmp_path / "uc1.json", baseline).read_text(encoding="utf-8")

    assert "hunter2" not in text and ":pw@" not in text
    assert json.loads(text)["settings"] == {
        "kafka": {"bootstrap": f"SASL://{REDACTED}@host:9092", "sasl.jaas.config": REDACTED},
        "threshold": "inf",
        "results_dir": "/tmp/results",
    }


def test_missing_file_is_no_baseline(tmp_path: Path) -> None:
    assert load_baseline(tmp_path / "absent.json") is None


def test_baseline_path_is_named_after_the_benchmark(tmp_path: Path) -> None:
    assert baseline_path(tmp_path, "uc2-window_1m") == tmp_path / "uc2-window_1m.json"
    with pytest.raises(ValueError, match="must be letters, digits"):
        baseline_path(tmp_path, "../uc1")


def test_a_file_of_another_benchmark_is_refused_when_the_name_is_given(tmp_path: Path) -> None:
    path = write_baseline(tmp_path / "uc2.json", make_baseline())
    with pytest.raises(BaselineError) as error:
        load_baseline(path, benchmark="uc2")
    assert str(error.value) == (
        f"{path}: holds the baseline of benchmark 'uc1', expected 'uc2'"
        ' (was the file copied without changing its "benchmark"?)'
    )


def test_an_invalid_baseline_is_refused_in_python_too() -> None:
    with pytest.raises(ValueError, match=r"demand\[1000\] = 0 is not a whole number of instances"):
        make_baseline({1000: 0})


# ------------------------------------------------------------------------------------------------------------
# Broken files: one BaselineError naming the file and the problem
# ------------------------------------------------------------------------------------------------------------


def _with(**changes: object) -> dict:
    document = valid_document()
    document.update(changes)
    return document


def _without(key: str) -> dict:
    document = valid_document()
    del document[key]
    return document


def _testbed_with(**changes: object) -> dict:
    document = valid_document()
    document["testbed"].update(changes)
    return document


BROKEN_DOCUMENTS = {
    "word as resources": (
        _with(demand={"1000": "two"}),
        'demand["1000"] is "two", expected a whole number of instances or null',
    ),
    "negative resources": (
        _with(demand={"1000": -1}),
        'demand["1000"] is -1, expected 1 or more instances or null',
    ),
    "zero resources": (
        _with(demand={"1000": 0}),
        'demand["1000"] is 0, expected 1 or more instances or null',
    ),
    "fractional resources": (
        _with(demand={"1000": 2.5}),
        'demand["1000"] is 2.5, expected a whole number of instances or null',
    ),
    "boolean resources": (
        _with(demand={"1000": True}),
        'demand["1000"] is true, expected a whole number of instances or null',
    ),
    "load not a number": (
        _with(demand={"1k": 1}),
        'demand key "1k" is not a load, expected a whole number such as "1000"',
    ),
    "fractional load": (
        _with(demand={"1000.5": 1}),
        'demand key "1000.5" is not a load, expected a whole number such as "1000"',
    ),
    "negative load": (
        _with(demand={"-5": 1}),
        'demand key "-5" is not a load, expected a whole number such as "1000"',
    ),
    "load with leading zero": (
        _with(demand={"0100": 1}),
        'demand key "0100" is not a load, expected a whole number such as "1000"',
    ),
    "demand a list": (_with(demand=[1, 2]), 'demand is a list, expected an object {"<load>": instances}'),
    "demand empty": (_with(demand={}), "demand is empty, expected at least one load"),
    "missing demand": (_without("demand"), "missing key demand"),
    "missing testbed": (_without("testbed"), "missing key testbed"),
    "typo key": (
        _with(demnad={}),
        "unknown key demnad (expected keys: benchmark, demand, format_version, settings, testbed)",
    ),
    "top level list": (
        [1, 2],
        (
            "the top level is a list, expected an object with keys benchmark, demand, format_version, settings,"
            " testbed"
        ),
    ),
    "version as text": (_with(format_version="1"), 'format_version is "1", expected 1'),
    "newer version": (
        _with(format_version=2),
        (
            "format_version is 2, written by a newer pytest-theodolite (this one reads 1): upgrade"
            " pytest-theodolite"
        ),
    ),
    "benchmark number": (
        _with(benchmark=1),
        "benchmark is 1, expected a name of letters, digits, '.', '_' or '-'",
    ),
    "settings a list": (_with(settings=[]), "settings is a list, expected an object"),
    "testbed text": (_with(testbed="8 cores"), 'testbed is the text "8 cores", expected an object'),
    "testbed cores text": (
        _testbed_with(cores="8"),
        'testbed.cores is "8", expected a whole number >= 1 or null',
    ),
    "testbed cpu zero": (
        _testbed_with(instance_cpu=0),
        "testbed.instance_cpu is 0, expected a number > 0 or null (unlimited)",
    ),
    "testbed master null": (_testbed_with(spark_master=None), "testbed.spark_master is null, expected text"),
    "testbed missing key": (
        {**valid_document(), "testbed": {k: v for k, v in TESTBED.to_dict().items() if k != "memory_gib"}},
        "missing key testbed.memory_gib",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN_DOCUMENTS))
def test_broken_file_names_file_and_problem(tmp_path: Path, case: str) -> None:
    document, problem = BROKEN_DOCUMENTS[case]
    path = write_document(tmp_path, document)

    with pytest.raises(BaselineError) as error:
        load_baseline(path)

    assert str(error.value) == f"{path}: {problem}"


def test_message_uses_the_path_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / "uc1.json").write_text(json.dumps(_with(demand={"1000": "two"})))
    monkeypatch.chdir(tmp_path)

    with pytest.raises(BaselineError) as error:
        load_baseline("baselines/uc1.json")

    assert str(error.value) == (
        'baselines/uc1.json: demand["1000"] is "two", expected a whole number of instances or null'
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "not valid JSON: Expecting value at line 1 column 1"),
        # the wording of json's message varies between Python versions; the position does not
        ('{"benchmark": "uc1",\n  "demand": {"1000": 1,}}', "not valid JSON: "),
        ('{"demand": {"1000": NaN}}', "not valid JSON: NaN is not a JSON number"),
        ('{"demand": {"1000": 1, "1000": 2}}', 'key "1000" appears twice in one object'),
    ],
)
def test_text_that_is_not_json_is_refused(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "uc1.json"
    path.write_text(text, encoding="utf-8")

    with pytest.raises(BaselineError) as error:
        load_baseline(path)

    assert str(error.value).startswith(f"{path}: {problem}")
    if "\n" in text:
        assert str(error.value).endswith(" at line 2 column 24")


def test_bytes_that_are_not_utf8_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "uc1.json"
    path.write_bytes(b'{"benchmark": "\xff"}')

    with pytest.raises(BaselineError) as error:
        load_baseline(path)

    assert str(error.value) == f"{path}: not UTF-8 text (invalid start byte at byte 15)"


def test_a_directory_in_place_of_the_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "uc1.json").mkdir()
    with pytest.raises(BaselineError, match=r"uc1\.json: cannot be read: "):
        load_baseline(tmp_path / "uc1.json")


def test_baseline_error_is_a_value_error() -> None:
    assert issubclass(BaselineError, ValueError)


# ------------------------------------------------------------------------------------------------------------
# Comparison of one point
# ------------------------------------------------------------------------------------------------------------

BASELINE = make_baseline({1000: 3, 2000: None})


@pytest.mark.parametrize(
    ("load", "measured", "tolerance", "verdict"),
    [
        (1000, 3, 0, Verdict.PASS),  # equal
        (1000, 4, 0, Verdict.REGRESSION),  # one more instance
        (1000, 4, 1, Verdict.PASS),  # within the tolerance
        (1000, 5, 1, Verdict.REGRESSION),  # beyond the tolerance
        (1000, 2, 0, Verdict.IMPROVEMENT),  # fewer instances: passes, baseline could be lowered
        (1000, None, 0, Verdict.REGRESSION),  # none is worse than any number
        (1000, None, 100, Verdict.REGRESSION),  # ... whatever the tolerance
        (2000, 4, 0, Verdict.IMPROVEMENT),  # baseline none, now solvable
        (2000, None, 0, Verdict.PASS),  # none both
        (1000, UNMEASURED, 0, Verdict.UNMEASURED),
        (2000, UNMEASURED, 0, Verdict.UNMEASURED),
        (8000, 2, 0, Verdict.NEW_LOAD),  # no baseline value for this load
        (8000, None, 0, Verdict.NEW_LOAD),
        (8000, UNMEASURED, 0, Verdict.UNMEASURED),  # a broken measurement matters more than a new load
    ],
)
def test_compare_point_rules(load: int, measured: object, tolerance: int, verdict: Verdict) -> None:
    point = compare_point(load, measured, BASELINE, tolerance)  # type: ignore[arg-type]

    assert point.verdict is verdict
    assert point.passed is (verdict in (Verdict.PASS, Verdict.IMPROVEMENT))
    assert (point.load, point.measured, point.tolerance) == (load, measured, tolerance)


def test_compare_point_without_any_baseline_is_a_new_load() -> None:
    point = compare_point(1000, 3, None)
    assert point.verdict is Verdict.NEW_LOAD and not point.in_baseline and point.baseline_text == "-"


def test_point_texts_tell_none_from_missing_from_unmeasured() -> None:
    assert compare_point(2000, None, BASELINE).baseline_text == "none"
    assert compare_point(1000, None, BASELINE).baseline_text == "3"
    assert compare_point(1000, None, BASELINE).measured_text == "none"
    assert compare_point(1000, None, BASELINE, skipped=True).measured_text == "none (skipped)"
    assert compare_point(1000, UNMEASURED, BASELINE).measured_text == "unmeasured"
    assert compare_point(1000, 2, BASELINE).measured_text == "2"


def test_point_descriptions() -> None:
    assert compare_point(1000, 4, BASELINE, 0).describe("uc1") == (
        "uc1 load 1000: measured 4 instances, baseline 3 instances: regression"
    )
    assert compare_point(1000, None, BASELINE, 1).describe() == (
        "load 1000: measured none (no tested instance count met the SLOs), baseline 3 instances"
        " (tolerance +1): regression"
    )
    assert compare_point(2000, 1, BASELINE).describe() == (
        "load 2000: measured 1 instance, baseline none: improvement: the baseline could be lowered"
    )
    assert compare_point(1000, UNMEASURED, BASELINE).describe() == (
        "load 1000: measured nothing (unmeasured), baseline 3 instances: unmeasured: an invalid or errored"
        " sub-experiment left this load unjudged"
    )


@pytest.mark.parametrize("tolerance", [-1, 0.5, True])
def test_tolerance_must_be_a_whole_number_of_instances(tolerance: object) -> None:
    with pytest.raises(ValueError, match="tolerance must be a whole number of instances >= 0"):
        compare_point(1000, 3, BASELINE, tolerance)  # type: ignore[arg-type]


@pytest.mark.parametrize("measured", [0, -2, 1.5, "3"])
def test_measured_value_must_be_instances_none_or_unmeasured(measured: object) -> None:
    with pytest.raises(ValueError, match="is not a whole number of instances >= 1, None"):
        compare_point(1000, measured, BASELINE)  # type: ignore[arg-type]


def test_verdict_labels() -> None:
    assert [v.label for v in Verdict] == [
        "PASS",
        "IMPROVEMENT",
        "REGRESSION",
        "UNMEASURED",
        "NEW LOAD",
        "NOT COMPARABLE",
        "COST REGRESSION",
    ]


# ------------------------------------------------------------------------------------------------------------
# Comparison of a demand function
# ------------------------------------------------------------------------------------------------------------


def test_compare_sorts_points_into_regressions_improvements_and_unmeasured() -> None:
    baseline = make_baseline({1000: 1, 2000: 2, 4000: 3, 8000: None, 16000: 4})
    measured = DemandResult(
        demand={1000: 1, 2000: 1, 4000: 4, 8000: None, 32000: 2},
        unmeasured=(16000,),
        loads=(1000, 2000, 4000, 8000, 16000, 32000),
    )

    comparison = compare(measured, baseline, measured_testbed=TESTBED)

    assert [(p.load, p.verdict) for p in comparison.points] == [
        (1000, Verdict.PASS),
        (2000, Verdict.IMPROVEMENT),
        (4000, Verdict.REGRESSION),
        (8000, Verdict.PASS),
        (16000, Verdict.UNMEASURED),
        (32000, Verdict.NEW_LOAD),
    ]
    assert [p.load for p in comparison.regressions] == [4000]
    assert [p.load for p in comparison.improvements] == [2000]
    assert [p.load for p in comparison.unmeasured] == [16000]
    assert [p.load for p in comparison.new_loads] == [32000]
    assert comparison.passed is False
    assert comparison.benchmark == "uc1" and comparison.not_run == ()
    assert comparison.point(4000).measured == 4 and comparison.point(4000).baseline == 3


def test_compare_passes_with_improvements_and_within_tolerance() -> None:
    baseline = make_baseline({1000: 2, 2000: 2})
    measured = DemandResult(demand={1000: 1, 2000: 3})

    assert compare(measured, baseline, 0, measured_testbed=None).passed is False
    comparison = compare(measured, baseline, 1, measured_testbed=None)
    assert comparison.passed is True
    assert [p.verdict for p in comparison.points] == [Verdict.IMPROVEMENT, Verdict.PASS]


def test_compare_fails_on_unmeasured_alone() -> None:
    measured = DemandResult(demand={1000: 1}, unmeasured=(2000,))
    comparison = compare(measured, make_baseline({1000: 1, 2000: 1}), measured_testbed=None)

    assert comparison.passed is False and comparison.regressions == ()
    assert [p.load for p in comparison.unmeasured] == [2000]


def test_compare_marks_skipped_loads_and_lists_baseline_loads_not_run() -> None:
    measured = DemandResult(demand={1000: None, 2000: None}, skipped=(2000,))
    comparison = compare(measured, make_baseline({1000: None, 2000: 1, 4000: 2}), measured_testbed=None)

    assert [(p.measured_text, p.verdict) for p in comparison.points] == [
        ("none", Verdict.PASS),
        ("none (skipped)", Verdict.REGRESSION),
    ]
    assert comparison.not_run == (4000,)


def test_compare_without_baseline_makes_every_load_new() -> None:
    measured = DemandResult(demand={1000: 1, 2000: None}, unmeasured=(4000,))
    comparison = compare(measured, None, measured_testbed=TESTBED, benchmark="uc1")

    assert comparison.benchmark == "uc1" and comparison.has_baseline is False
    assert [p.verdict for p in comparison.points] == [Verdict.NEW_LOAD, Verdict.NEW_LOAD, Verdict.UNMEASURED]
    assert comparison.testbed_differs is False


def test_compare_refuses_the_baseline_of_another_benchmark() -> None:
    with pytest.raises(ValueError, match="comparing benchmark 'uc2' with the baseline of 'uc1'"):
        compare(DemandResult(demand={1000: 1}), make_baseline(), measured_testbed=None, benchmark="uc2")


# ------------------------------------------------------------------------------------------------------------
# Testbed
# ------------------------------------------------------------------------------------------------------------


def _replace(testbed: Testbed, **changes: object) -> Testbed:
    return Testbed(**{**testbed.to_dict(), **changes})


def test_testbed_difference_sentence_for_cores() -> None:
    comparison = compare(
        DemandResult(demand={1000: 1}), make_baseline(), measured_testbed=_replace(TESTBED, cores=2)
    )

    assert comparison.testbed_differs is True
    assert comparison.testbed_differences == (TestbedDifference("cores", "8 cores", "2 cores"),)
    assert comparison.testbed_sentence == (
        "baseline recorded on 8 cores, this run has 2 cores; the comparison still runs"
    )
    assert comparison.passed is True  # a different testbed is reported, not failed


def test_testbed_difference_sentence_for_several_fields() -> None:
    now = _replace(
        TESTBED, cores=2, instance_cpu=None, kafka_provider="testcontainers", python_version="3.12.1"
    )

    assert describe_testbed_differences(TESTBED.differences(now)) == (
        "baseline recorded on 8 cores, 0.5 CPU per instance, Kafka embedded and Python 3.11.7,"
        " this run has 2 cores, unlimited CPU per instance, Kafka testcontainers and Python 3.12.1;"
        " the comparison still runs"
    )


def test_testbed_ignores_python_patch_releases_and_unknown_values() -> None:
    now = _replace(TESTBED, python_version="3.11.9", cores=None, memory_gib=None, pyspark_version=None)

    assert TESTBED.differences(now) == ()
    assert describe_testbed_differences(()) == ""
    assert (
        compare(DemandResult(demand={1000: 1}), make_baseline(), measured_testbed=now).testbed_sentence == ""
    )


def test_testbed_current_discovers_what_it_can() -> None:
    testbed = Testbed.current(kafka_provider="external", spark_master="spark://m:7077", instance_cpu=1)

    assert testbed.cores is not None and testbed.cores >= 1
    assert testbed.memory_gib is not None and testbed.memory_gib > 0
    assert testbed.instance_cpu == 1.0 and isinstance(testbed.instance_cpu, float)
    assert (testbed.kafka_provider, testbed.spark_master) == ("external", "spark://m:7077")
    assert testbed.python_version.count(".") == 2


def test_testbed_current_takes_given_values() -> None:
    testbed = Testbed.current(
        kafka_provider="embedded",
        spark_master="standalone",
        instance_cpu=None,
        cores=4,
        memory_gib=15.62,
        pyspark_version="9.9.9",
    )
    assert (testbed.cores, testbed.memory_gib, testbed.instance_cpu, testbed.pyspark_version) == (
        4,
        15.6,
        None,
        "9.9.9",
    )


# ------------------------------------------------------------------------------------------------------------
# Updating a baseline
# ------------------------------------------------------------------------------------------------------------


def test_update_replaces_measured_loads_and_keeps_unmeasured_and_unrun_ones() -> None:
    previous = make_baseline({1000: 2, 2000: 3, 4000: 4})
    measured = DemandResult(demand={1000: 1, 8000: None}, unmeasured=(2000,))
    now = _replace(TESTBED, cores=2)

    updated = baseline_from_measurement("uc1", measured, {"duration_s": 60}, now, previous)

    assert updated.demand == {1000: 1, 2000: 3, 4000: 4, 8000: None}
    assert updated.testbed == now and updated.settings == {"duration_s": 60}


def test_update_drops_loads_the_gate_no_longer_has() -> None:
    old = PointCost(1, CostEstimate(50.0))
    previous = Baseline("uc4", {2: 1, 3: 1, 4: 1}, {}, TESTBED, cost={2: old, 3: old, 4: old})
    measured = DemandResult(demand={5: 2}, unmeasured=(4,))

    updated = baseline_from_measurement("uc4", measured, {}, TESTBED, previous, loads=[4, 5])

    # 2 and 3 left the gate's loads; 4 is the gate's but unmeasured this time, so it keeps its figures
    assert updated.demand == {4: 1, 5: 2} and updated.cost == {4: old}


def test_update_without_previous_leaves_unmeasured_loads_out() -> None:
    measured = DemandResult(demand={1000: 1}, unmeasured=(2000,))
    assert baseline_from_measurement("uc1", measured, {}, TESTBED).demand == {1000: 1}


def test_update_with_nothing_measured_is_refused() -> None:
    with pytest.raises(ValueError, match="no load was measured"):
        baseline_from_measurement("uc1", DemandResult(demand={}, unmeasured=(1000,)), {}, TESTBED)


def test_numpy_integers_are_whole_numbers() -> None:
    numpy = pytest.importorskip("numpy")
    baseline = make_baseline({numpy.int64(1000): numpy.int64(2)})

    assert baseline.demand == {1000: 2} and type(next(iter(baseline.demand.values()))) is int
    assert baseline.to_json().count('"1000": 2') == 1
    point = compare_point(1000, numpy.int64(3), baseline)
    assert point.verdict is Verdict.REGRESSION and type(point.measured) is int


# ---- testbed calibration -------------------------------------------------------------------------------------


def test_a_calibrated_testbed_round_trips_and_an_old_file_reads_as_uncalibrated(tmp_path: Path) -> None:
    from dataclasses import replace

    calibrated = make_baseline({1000: 1})
    calibrated = replace(calibrated, testbed=replace(calibrated.testbed, calibration_rows_per_s=312000.0))
    path = write_baseline(tmp_path / "uc1.json", calibrated)
    assert '"calibration_rows_per_s": 312000.0' in path.read_text()
    assert load_baseline(path) == calibrated
    plain = write_baseline(tmp_path / "uc1.json", make_baseline({1000: 1}))
    assert "calibration" not in plain.read_text()
    assert load_baseline(plain).testbed.calibration_rows_per_s is None


def test_a_calibration_that_is_not_a_positive_number_is_refused(tmp_path: Path) -> None:
    document = json.loads(make_baseline({1000: 1}).to_json())
    document["testbed"]["calibration_rows_per_s"] = "fast"
    (tmp_path / "uc1.json").write_text(json.dumps(document))
    with pytest.raises(
        BaselineError,
        match=r'testbed.calibration_rows_per_s is "fast", expected a number > 0 or null \(not calibrated\)',
    ):
        load_baseline(tmp_path / "uc1.json")


def test_the_cpu_a_calibration_ran_on_is_recorded_and_read_before_any_inference(tmp_path: Path) -> None:
    """A gate of unlimited instances on a cluster that can limit them calibrates at the reference CPU: its
    baseline says so, and a run of the same gate on the same testbed compares with it (it never did before)."""
    from dataclasses import replace

    from pytest_theodolite.engine.calibration import (
        REFERENCE_CPU,
        Calibration,
        baseline_reference_cpu,
        calibration_mismatch,
    )

    made = make_baseline({1000: 1})
    unlimited = replace(made, testbed=replace(made.testbed, instance_cpu=None))
    recorded = replace(
        unlimited,
        testbed=replace(
            unlimited.testbed,
            calibration_rows_per_s=300000.0,
            calibration_instance_cpu=REFERENCE_CPU,
            calibration_cpu_recorded=True,
        ),
    )
    read = load_baseline(write_baseline(tmp_path / "uc1.json", recorded))
    assert read == recorded and baseline_reference_cpu(read) == REFERENCE_CPU
    same_testbed = Calibration(300000.0, 0.1, REFERENCE_CPU)
    assert calibration_mismatch(300000.0, same_testbed, baseline_reference_cpu(read)) is None
    # an unlimited calibration is recorded too, as null, and read as such
    whole_cores = replace(recorded, testbed=replace(recorded.testbed, calibration_instance_cpu=None))
    path = write_baseline(tmp_path / "uc1.json", whole_cores)
    assert '"calibration_instance_cpu": null' in path.read_text()
    assert baseline_reference_cpu(load_baseline(path)) is None
    # a baseline from before the key: inferred from its instances, as it was
    legacy = replace(recorded, testbed=replace(recorded.testbed, calibration_cpu_recorded=False))
    assert baseline_reference_cpu(load_baseline(write_baseline(tmp_path / "uc1.json", legacy))) is None


@pytest.mark.parametrize(
    "baseline_rate, measured_rate, baseline_cpu, expected",
    [
        (300000.0, 300000.0, 0.25, None),
        (300000.0, 390000.0, 0.25, None),  # 1.30x: within the 35 % margin
        (300000.0, 420000.0, 0.25, "this testbed runs the reference job at 1.40x the baseline's speed"),
        (
            300000.0,
            150000.0,
            0.25,
            "at 0.50x the baseline's speed (150,000 vs 300,000 rows/s), beyond the 35% margin",
        ),
        (
            300000.0,
            300000.0,
            None,
            "the baseline's calibration ran on None CPU per instance, this run's on 0.25",
        ),
        (None, 300000.0, 0.25, None),  # an old baseline: nothing to compare
    ],
)
def test_calibration_mismatch(baseline_rate, measured_rate, baseline_cpu, expected) -> None:
    from pytest_theodolite.engine.calibration import Calibration, calibration_mismatch

    reason = calibration_mismatch(baseline_rate, Calibration(measured_rate, 0.1, 0.25), baseline_cpu)
    if expected is None:
        assert reason is None
    else:
        assert expected in reason


def test_not_comparable_replaces_pass_regression_and_improvement_but_not_unmeasured() -> None:
    baseline = make_baseline({1000: 2, 2000: 2})
    for measured in (1, 2, 3, None):
        point = compare_point(1000, measured, baseline, not_comparable="host differs")
        assert point.verdict is Verdict.NOT_COMPARABLE and not point.passed and point.reason == "host differs"
        assert point.describe("uc1").endswith("not comparable: host differs")
    assert compare_point(1000, UNMEASURED, baseline, not_comparable="x").verdict is Verdict.UNMEASURED
    assert compare_point(5000, 1, baseline, not_comparable="x").verdict is Verdict.NEW_LOAD
    comparison = compare(
        DemandResult(demand={1000: 3, 2000: 2}),
        baseline,
        measured_testbed=None,
        not_comparable="host differs",
    )
    assert [p.load for p in comparison.not_comparable] == [1000, 2000] and not comparison.regressions


def test_on_a_testbed_of_known_speed_order_a_verdict_its_direction_decides_stands() -> None:
    baseline = make_baseline({1000: 2, 2000: 2})
    slower, faster = 0.57, 1.6

    def verdict(measured, speed):
        return compare_point(1000, measured, baseline, not_comparable="host differs", host_speed=speed)

    # slower: no more than the baseline's demand passes (fewer: an improvement), more may be the host's
    assert verdict(2, slower).verdict is Verdict.PASS and verdict(2, slower).reason.startswith(
        "judged one-sided"
    )
    assert "0.57x" in verdict(2, slower).reason
    assert verdict(1, slower).verdict is Verdict.IMPROVEMENT
    assert (
        verdict(3, slower).verdict is Verdict.NOT_COMPARABLE and verdict(3, slower).reason == "host differs"
    )
    assert verdict(None, slower).verdict is Verdict.NOT_COMPARABLE
    # faster: more than the baseline's demand is a regression, no more may be the host's
    assert verdict(3, faster).verdict is Verdict.REGRESSION and "faster (1.60x" in verdict(3, faster).reason
    assert verdict(None, faster).verdict is Verdict.REGRESSION
    assert (
        verdict(2, faster).verdict is Verdict.NOT_COMPARABLE
        and verdict(1, faster).verdict is Verdict.NOT_COMPARABLE
    )
    # unordered testbeds (other CPU limits) stay not comparable; an uncertain regression is never one
    assert verdict(2, None).verdict is Verdict.NOT_COMPARABLE
    uncertain = compare_point(
        1000, 3, baseline, not_comparable="host differs", host_speed=faster, uncertain="FAIL not certain"
    )
    assert uncertain.verdict is Verdict.NOT_COMPARABLE and uncertain.reason == "FAIL not certain"
    # a comparable testbed is judged as ever, whatever the speed ratio says
    assert compare_point(1000, 3, baseline, host_speed=0.9).verdict is Verdict.REGRESSION
    assert compare_point(1000, 2, baseline, host_speed=0.9).reason == ""


def test_a_regression_can_be_judged_where_comparable_or_on_a_faster_testbed_only() -> None:
    assert regression_judgeable(None, None)
    assert regression_judgeable(None, 0.9)  # within the margin: comparable
    assert regression_judgeable("host differs", 2.0)
    assert not regression_judgeable("host differs", 0.57)
    assert not regression_judgeable("instances of another size", None)


def test_a_load_weighs_at_least_the_baselines_only_where_even_the_fastest_host_allowed_is_offered_no_more():
    # offered its share, a slower testbed's load weighs what it weighed on the baseline's host at the
    # fastest speed the calibration allows
    for slower in (0.3, 0.5, 0.75):
        assert weighs_at_least_the_baselines(slower, offered_share(slower))
    # offered the full rate: up to 1 / 1.15 (0.87x) even the fastest host allowed is no faster than the baseline's
    assert weighs_at_least_the_baselines(0.86, offered_share(0.86))
    for as_fast in (0.88, 1.0, 1.2):
        assert not weighs_at_least_the_baselines(as_fast, offered_share(as_fast))
    # a share below the testbed's speed weighs less; an unread testbed is not known to weigh anything
    assert not weighs_at_least_the_baselines(0.5, 0.5)
    assert not weighs_at_least_the_baselines(None, 1.0)


def test_a_slower_testbed_is_offered_each_load_at_the_fastest_speed_its_calibration_allows() -> None:
    share = offered_share(0.5)
    assert share == pytest.approx(0.5 * (1 + SPEED_UNCERTAINTY))
    # inside the comparison margin too, where the calibration reads it slower than its uncertainty allows for
    # an equal host
    assert offered_share(0.75) == pytest.approx(0.75 * (1 + SPEED_UNCERTAINTY))
    # a testbed read as fast within that uncertainty, a faster and an unordered one get the full rate
    assert offered_share(1 - SPEED_UNCERTAINTY) == 1.0 and offered_share(0.9) == 1.0
    assert offered_share(2.0) == 1.0
    assert offered_share(None) == 1.0
    baseline = make_baseline({1000: 2})

    def verdict(measured, share):
        return compare_point(
            1000, measured, baseline, not_comparable="host differs", host_speed=0.5, offered_share=share
        )

    # a pass there is judged: the rate offered weighs at least the baseline's even on the fastest host the
    # calibration allows
    passed = verdict(2, share)
    assert passed.verdict is Verdict.PASS
    assert passed.reason.startswith(f"judged at {share:.2f}x each load's rate") and "0.50x" in passed.reason
    assert verdict(1, share).verdict is Verdict.IMPROVEMENT
    # a demand above the baseline's is not: the host may be slower than the rate assumes
    assert (
        verdict(3, share).verdict is Verdict.NOT_COMPARABLE and verdict(None, share).reason == "host differs"
    )
    assert not regression_judgeable("host differs", 0.5, share)
    # at a lower share a pass would rest on a host faster than the calibration allows
    assert verdict(2, 0.5).verdict is Verdict.NOT_COMPARABLE
    # a FAIL is measured once more at the slowest speed the calibration allows: failing there, it is judged
    again = regression_share(0.5)
    assert again == pytest.approx(0.5 * (1 - SPEED_UNCERTAINTY))
    assert regression_share(0.9) is None and regression_share(2.0) is None
    # a comparable testbed that the calibration reads slower than its uncertainty allows for an equal one: a
    # FAIL at the rate offered is measured once more at the slowest speed allowed there too
    assert regression_share(0.75) == pytest.approx(0.75 * (1 - SPEED_UNCERTAINTY))
    assert regression_share(1 - SPEED_UNCERTAINTY) is None and regression_share(None) is None
    regressed = verdict(None, again)
    assert regressed.verdict is Verdict.REGRESSION
    assert (
        regressed.reason.startswith(f"judged at {again:.2f}x each load's rate")
        and "at most" in regressed.reason
    )
    assert (
        verdict(3, again).verdict is Verdict.REGRESSION
        and verdict(2, again).verdict is Verdict.NOT_COMPARABLE
    )
    # ... unless the two runs disagreed
    uncertain = compare_point(
        1000,
        None,
        baseline,
        not_comparable="host differs",
        host_speed=0.5,
        offered_share=again,
        uncertain="repetitions disagreed",
    )
    assert uncertain.verdict is Verdict.NOT_COMPARABLE and uncertain.reason == "repetitions disagreed"
    assert offered_note(1.0, None) == ()
    assert f"offered at {share:.2f}x its rate" in offered_note(share, None)[0]
    assert "measured once more at" not in offered_note(share, None)[0]
    assert "measured once more at" in offered_note(share, again)[0]


def figure(us: float) -> PointCost:
    """A CPU-per-record figure at 2 instances, +-2 %."""
    return PointCost(2, CostEstimate(us, us * 0.98, us * 1.02, 5))


def test_a_cpu_per_record_measured_at_a_share_of_the_rate_is_reported_not_judged() -> None:
    baseline = Baseline("uc1", {1000: 2}, {}, TESTBED, cost={1000: figure(40.0)})
    point = compare_point(
        1000,
        2,
        baseline,
        not_comparable="host differs",
        host_speed=0.5,
        offered_share=0.6,
        measured_cost=figure(60.0),
        cost_tolerance=0.1,
    )
    assert point.verdict is Verdict.PASS and point.cost is not None
    assert point.cost.not_judged and point.cost.relative == pytest.approx(0.5)
    assert point.cost.reason.startswith("measured at 0.60x the load's rate")


def test_a_cost_regression_on_a_slower_testbed_is_not_comparable() -> None:
    baseline = Baseline("uc1", {1000: 2}, {}, TESTBED, cost={1000: figure(40.0)})
    point = compare_point(
        1000,
        2,
        baseline,
        not_comparable="host differs",
        host_speed=0.57,
        measured_cost=figure(60.0),
        cost_tolerance=0.1,
    )
    assert point.verdict is Verdict.NOT_COMPARABLE and point.reason == "host differs"


# ------------------------------------------------------------------------------------------------------------
# The CPU per record beside the demand
# ------------------------------------------------------------------------------------------------------------


def _cost_entry(resources: int = 2, **changes: object) -> dict:
    entry = {"resources": resources, "cpu_us_per_record": 37.1, "low": 36.0, "high": 38.2, "blocks": 5}
    entry.update(changes)
    return entry


def test_cost_and_cpu_calibration_round_trip(tmp_path: Path) -> None:
    document = valid_document()
    document["cost"] = {"2000": _cost_entry(reference_us_per_row=2.5, cpu_utilisation=0.88)}
    document["testbed"]["calibration_cpu_us_per_row"] = 2.5
    baseline = load_baseline(write_document(tmp_path, document))
    assert baseline is not None
    assert baseline.cost == {2000: PointCost(2, CostEstimate(37.1, 36.0, 38.2, 5), 2.5, 0.88)}
    assert baseline.testbed.calibration_cpu_us_per_row == 2.5
    path = write_baseline(tmp_path / "again.json", baseline)
    assert load_baseline(path) == baseline
    assert '"cost"' not in make_baseline().to_json()  # a baseline without figures keeps the old layout


def test_a_figure_recorded_while_a_backlog_was_worked_off_keeps_its_flag(tmp_path: Path) -> None:
    document = valid_document()
    document["cost"] = {"2000": _cost_entry(backlog=True)}
    baseline = load_baseline(write_document(tmp_path, document))
    assert baseline is not None
    assert baseline.cost[2000].backlog
    again = load_baseline(write_baseline(tmp_path / "again.json", baseline))
    assert again is not None and again.cost[2000].backlog


@pytest.mark.parametrize(
    ("cost", "problem"),
    [
        ({"3000": _cost_entry()}, 'cost["3000"]: not a load of demand'),
        ({"2000": _cost_entry(resources=3)}, 'cost["2000"].resources is 3, but demand["2000"] is 2'),
        (
            {"2000": _cost_entry(cpu_us_per_record=-1)},
            'cost["2000"].cpu_us_per_record is -1, expected a number',
        ),
        ({"2000": _cost_entry(low="x")}, 'cost["2000"].low is "x", expected a number >= 0'),
        ({"2000": _cost_entry(blocks=1.5)}, 'cost["2000"].blocks is 1.5, expected a whole number >= 0'),
        ({"2000": _cost_entry(typo=1)}, 'unknown key cost["2000"].typo'),
        ({"2000": _cost_entry(backlog="yes")}, 'cost["2000"].backlog is "yes", expected true or false'),
        ({"2000": 37.1}, 'cost["2000"] is the number 37.1, expected an object'),
        ([], "cost is a list, expected an object"),
    ],
)
def test_a_broken_cost_entry_names_the_problem(tmp_path: Path, cost: object, problem: str) -> None:
    with pytest.raises(BaselineError, match=re.escape(problem)):
        load_baseline(write_document(tmp_path, _with(cost=cost)))


def test_update_stores_each_measured_loads_cost_and_keeps_the_others() -> None:
    old = PointCost(3, CostEstimate(50.0))
    previous = Baseline("uc1", {1000: 2, 2000: 3, 4000: 4}, {}, TESTBED, cost={2000: old, 4000: old})
    measured = DemandResult(demand={1000: 1, 2000: 2, 4000: 4}, unmeasured=(4000,))
    new = PointCost(1, CostEstimate(40.0, 39.0, 41.0, 5))
    at_old_demand = PointCost(3, CostEstimate(45.0))  # measured at an instance count that is not the demand
    updated = baseline_from_measurement(
        "uc1", measured, {}, TESTBED, previous, cost={1000: new, 2000: at_old_demand}
    )
    # 1000: the new figure; 2000: re-measured without a figure at its demand, the old one is dropped;
    # 4000: unmeasured, keeps its figure
    assert updated.cost == {1000: new, 4000: old}


def test_a_cost_regression_needs_the_same_demand_and_fails_the_gate() -> None:
    baseline = Baseline(
        "uc1", {1000: 1, 2000: 2}, {}, TESTBED, cost={1000: PointCost(1, CostEstimate(50.0, 49.0, 51.0, 5))}
    )
    dearer = PointCost(1, CostEstimate(60.0, 59.0, 61.0, 5))
    point = compare_point(1000, 1, baseline, measured_cost=dearer, cost_tolerance=0.1)
    assert point.verdict is Verdict.COST_REGRESSION and not point.passed
    assert point.describe("uc1").startswith(
        "uc1 load 1000: measured 1 instance, baseline 1 instance: cost regression: CPU per record "
        "+20% (tolerance 10%, p "
    )
    # no tolerance: reported only; a demand regression stays a demand regression
    assert compare_point(1000, 1, baseline, measured_cost=dearer).verdict is Verdict.PASS
    assert (
        compare_point(1000, 2, baseline, measured_cost=dearer, cost_tolerance=0.1).verdict
        is Verdict.REGRESSION
    )
    comparison = compare(
        DemandResult(demand={1000: 1, 2000: 2}),
        baseline,
        measured_testbed=None,
        costs={1000: dearer},
        cost_tolerance=0.1,
    )
    assert [p.load for p in comparison.cost_regressions] == [1000] and not comparison.passed
    assert comparison.point(2000).cost is None  # neither side has a figure there
