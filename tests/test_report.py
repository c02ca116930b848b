"""Rendering of gate results: exact table lines, Markdown, JUnit properties, the PNG plot. Pure: no broker."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

from pytest_theodolite.core.outcomes import Outcome, Verdict
from pytest_theodolite.core.records import SubExperimentRecord
from pytest_theodolite.core.scalability import DemandResult
from pytest_theodolite.core.slo import LAG_TREND, SloVerdict
from pytest_theodolite.judge.comparison import Comparison, compare, compare_point
from pytest_theodolite.pull_request.paired import compare_sides
from pytest_theodolite.report.junit import junit_properties
from pytest_theodolite.report.plot import PlotDependencyMissing, capacity_plot, scalability_plot
from pytest_theodolite.report.summary import (
    BenchmarkReport,
    CostFigure,
    benchmark_status,
    failure_table,
    format_slope,
    lag_slopes_text,
    markdown_summary,
    slopes_and_outcomes,
    terminal_summary,
)
from pytest_theodolite.store.baseline import Baseline
from pytest_theodolite.store.testbed import Testbed

BASELINE_TESTBED = Testbed(8, 31.3, 0.5, "embedded", "standalone", "4.0.0", "3.11.7")
RUN_TESTBED = Testbed(2, 31.3, 0.5, "embedded", "standalone", "4.0.0", "3.11.7")

BASELINE = Baseline(
    "uc1", {1000: 1, 2000: 2, 4000: 3, 8000: None, 16000: 4}, {"duration_s": 300}, BASELINE_TESTBED
)
MEASURED = DemandResult(
    demand={1000: 1, 2000: 1, 4000: 4, 8000: None, 32000: 2},
    unmeasured=(16000,),
    loads=(1000, 2000, 4000, 8000, 16000, 32000),
    resources=(1, 2, 3, 4),
)
COMPARISON = compare(MEASURED, BASELINE, measured_testbed=RUN_TESTBED)

SLOPES = {(2000, 1): 3.25, (4000, 3): 5321.4, (4000, 4): -12.2, (16000, 4): None}
OUTCOMES = {
    (2000, 1): Outcome.PASS,
    (4000, 3): Outcome.FAIL,
    (4000, 4): Outcome.PASS,
    (16000, 4): Outcome.ERRORED,
}


# ------------------------------------------------------------------------------------------------------------
# Pieces
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("slope", "text"),
    [
        (5321.4, "+5321/s"),
        (-12.2, "-12/s"),
        (0.44, "+0.4/s"),
        (-3.06, "-3.1/s"),
        (None, "n/a"),
        (float("nan"), "n/a"),
        (float("inf"), "+inf/s"),
    ],
)
def test_format_slope(slope: float | None, text: str) -> None:
    assert format_slope(slope) == text


def test_lag_slopes_text_lists_the_sub_experiments_of_one_load_by_resources() -> None:
    slopes = {(4000, 4): -12.2, (4000, 3): 5321.4, (2000, 1): 3.25}
    assert lag_slopes_text(4000, slopes, OUTCOMES) == "r=3: +5321/s FAIL, r=4: -12/s ok"
    assert lag_slopes_text(4000, slopes) == "r=3: +5321/s, r=4: -12/s"  # without outcomes: no marks
    assert lag_slopes_text(1000, slopes, OUTCOMES) == "-"


def test_slopes_and_outcomes_from_records() -> None:
    records = [
        SubExperimentRecord(4000, 3, 4000.0, (), (SloVerdict(LAG_TREND, Outcome.FAIL, 5321.4, 2000.0),)),
        SubExperimentRecord(
            4000,
            4,
            4000.0,
            (),
            (
                SloVerdict(LAG_TREND, Outcome.PASS, -12.2, 2000.0),
                SloVerdict("generator-rate", Outcome.INVALID, 3000.0, 3920.0),
            ),
        ),
    ]

    slopes, outcomes = slopes_and_outcomes(records)

    assert slopes == {(4000, 3): 5321.4, (4000, 4): -12.2}
    assert outcomes == {(4000, 3): Outcome.FAIL, (4000, 4): Outcome.INVALID}
    assert lag_slopes_text(4000, slopes, outcomes) == "r=3: +5321/s FAIL, r=4: -12/s INVALID"


def test_benchmark_status_names_the_worst_verdict() -> None:
    assert benchmark_status(COMPARISON) == "REGRESSION"
    tolerant = compare(MEASURED, BASELINE, 1, measured_testbed=None)
    assert benchmark_status(tolerant) == "UNMEASURED"
    measured = DemandResult(demand={1000: 1, 2000: 1})
    assert benchmark_status(compare(measured, BASELINE, measured_testbed=None)) == "IMPROVEMENT"
    assert (
        benchmark_status(compare(DemandResult(demand={1000: 1}), BASELINE, measured_testbed=None)) == "PASS"
    )


# ------------------------------------------------------------------------------------------------------------
# Failure table
# ------------------------------------------------------------------------------------------------------------


def test_failure_table_of_a_whole_comparison() -> None:
    assert failure_table(COMPARISON, SLOPES, OUTCOMES).splitlines() == [
        " load | baseline |   measured | lag slopes",
        "------+----------+------------+---------------------------------",
        " 1000 |        1 |          1 | -",
        " 2000 |        2 |          1 | r=1: +3.2/s ok",
        " 4000 |        3 |          4 | r=3: +5321/s FAIL, r=4: -12/s ok",
        " 8000 |     none |       none | -",
        "16000 |        4 | unmeasured | r=4: n/a ERRORED",
        "32000 |        - |          2 | -",
    ]


def test_failure_table_of_one_failing_point() -> None:
    point = compare_point(4000, None, BASELINE, skipped=False)
    slopes = {(4000, 3): 5321.4, (4000, 4): 2400.0}
    outcomes = {(4000, 3): Outcome.FAIL, (4000, 4): Outcome.FAIL}

    assert failure_table(point, slopes, outcomes) == (
        "load | baseline | measured | lag slopes\n"
        "-----+----------+----------+-------------------------------------\n"
        "4000 |        3 |     none | r=3: +5321/s FAIL, r=4: +2400/s FAIL"
    )


def test_failure_table_shows_a_skipped_none() -> None:
    point = compare_point(8000, None, BASELINE, skipped=True)
    assert failure_table(point, {}).splitlines()[2] == "8000 |     none | none (skipped) | -"


# ------------------------------------------------------------------------------------------------------------
# Summaries
# ------------------------------------------------------------------------------------------------------------


def _report(**changes: object) -> BenchmarkReport:
    fields = {
        "name": "uc1",
        "comparison": COMPARISON,
        "measured": MEASURED,
        "baseline": BASELINE,
        "plot_path": None,
        "notes": (),
    }
    fields.update(changes)
    return BenchmarkReport(**fields)  # type: ignore[arg-type]


def test_terminal_summary_lines() -> None:
    new = compare(DemandResult(demand={1000: 1}), None, measured_testbed=None, benchmark="uc2")
    reports = [
        _report(plot_path=Path("results/uc1.png"), notes=("strategy linear",)),
        BenchmarkReport("uc2", new, DemandResult(demand={1000: 1}), None),
    ]

    assert terminal_summary(reports) == [
        "uc1: REGRESSION (1 regression, 1 unmeasured load)",
        "   load | baseline |   measured | verdict",
        "  ------+----------+------------+------------",
        "   1000 |        1 |          1 | PASS",
        "   2000 |        2 |          1 | IMPROVEMENT",
        "   4000 |        3 |          4 | REGRESSION",
        "   8000 |     none |       none | PASS",
        "  16000 |        4 | unmeasured | UNMEASURED",
        "  32000 |        - |          2 | NEW LOAD",
        "  no baseline value for load 32000: record one to gate it",
        "  unmeasured: load 16000 (an invalid or errored sub-experiment)",
        "  improvement: load 2000 needs 1 (baseline 2); the baseline could be lowered",
        "  testbed: baseline recorded on 8 cores, this run has 2 cores; the comparison still runs",
        "  plot: results/uc1.png",
        "  strategy linear",
        "",
        "uc2: NEW LOAD",
        "  load | baseline | measured | verdict",
        "  -----+----------+----------+---------",
        "  1000 |        - |        1 | NEW LOAD",
        "  no baseline stored yet: record one to gate this benchmark",
    ]


def test_terminal_summary_of_a_clean_pass_has_no_commentary() -> None:
    measured = DemandResult(demand={1000: 1, 2000: 2})
    comparison = compare(measured, BASELINE, 1, measured_testbed=BASELINE_TESTBED)
    lines = terminal_summary([BenchmarkReport("uc1", comparison, measured, BASELINE)])

    assert lines[0] == "uc1: PASS (tolerance +1)"
    assert lines[1:] == [
        "  load | baseline | measured | verdict",
        "  -----+----------+----------+--------",
        "  1000 |        1 |        1 | PASS",
        "  2000 |        2 |        2 | PASS",
        "  not run this time: baseline load 4000, 8000, 16000",
    ]


def test_terminal_summary_of_nothing_measured() -> None:
    empty = DemandResult(demand={})
    comparison = compare(empty, BASELINE, measured_testbed=None)
    assert terminal_summary([BenchmarkReport("uc1", comparison, empty, BASELINE)])[:2] == [
        "uc1: UNMEASURED",
        "  no load was measured",
    ]
    assert terminal_summary([]) == []


def test_markdown_summary() -> None:
    markdown = markdown_summary([_report(plot_path=Path("results/uc1.png"), notes=("a | b",))])

    assert markdown == (
        "## Scalability gates (pytest-theodolite)\n"
        "\n"
        "### `uc1`: REGRESSION\n"
        "\n"
        "| load | baseline | measured | status |\n"
        "| ---: | ---: | ---: | :--- |\n"
        "| 1000 | 1 | 1 | PASS |\n"
        "| 2000 | 2 | 1 | IMPROVEMENT |\n"
        "| 4000 | 3 | 4 | REGRESSION |\n"
        "| 8000 | none | none | PASS |\n"
        "| 16000 | 4 | unmeasured | UNMEASURED |\n"
        "| 32000 | - | 2 | NEW LOAD |\n"
        "\n"
        "- no baseline value for load 32000: record one to gate it\n"
        "- unmeasured: load 16000 (an invalid or errored sub-experiment)\n"
        "- improvement: load 2000 needs 1 (baseline 2); the baseline could be lowered\n"
        "- testbed: baseline recorded on 8 cores, this run has 2 cores; the comparison still runs\n"
        "- a \\| b\n"
    )
    assert not any(ord(character) > 127 for character in markdown)  # no emoji, plain ASCII


def test_markdown_summary_of_several_benchmarks_and_of_none() -> None:
    measured = DemandResult(demand={1000: 1})
    passing = BenchmarkReport(
        "uc2", compare(measured, BASELINE, 2, measured_testbed=None), measured, BASELINE
    )
    markdown = markdown_summary([_report(), passing])

    headings = [line for line in markdown.splitlines() if line.startswith("### ")]
    assert headings == ["### `uc1`: REGRESSION", "### `uc2`: PASS"]
    assert markdown.endswith(
        "| 1000 | 1 | 1 | PASS |\n\n- tolerance: +2 instances\n- not run this time: baseline load"
        " 2000, 4000, 8000, 16000\n"
    )
    assert markdown_summary([]) == "## Scalability gates (pytest-theodolite)\n\nNo benchmark ran.\n"


# ------------------------------------------------------------------------------------------------------------
# JUnit properties
# ------------------------------------------------------------------------------------------------------------


def test_junit_properties_of_a_comparison() -> None:
    properties = junit_properties("uc1", compare(MEASURED, BASELINE, 1, measured_testbed=RUN_TESTBED))

    assert properties == [
        ("theodolite.benchmark", "uc1"),
        ("theodolite.demand.1000", "1"),
        ("theodolite.baseline.1000", "1"),
        ("theodolite.verdict.1000", "pass"),
        ("theodolite.demand.2000", "1"),
        ("theodolite.baseline.2000", "2"),
        ("theodolite.verdict.2000", "improvement"),
        ("theodolite.demand.4000", "4"),
        ("theodolite.baseline.4000", "3"),
        ("theodolite.verdict.4000", "pass"),
        ("theodolite.demand.8000", "none"),
        ("theodolite.baseline.8000", "none"),
        ("theodolite.verdict.8000", "pass"),
        ("theodolite.demand.16000", "unmeasured"),
        ("theodolite.baseline.16000", "4"),
        ("theodolite.verdict.16000", "unmeasured"),
        ("theodolite.demand.32000", "2"),
        ("theodolite.baseline.32000", "missing"),
        ("theodolite.verdict.32000", "new-load"),
        ("theodolite.tolerance", "1"),
        (
            "theodolite.testbed",
            "baseline recorded on 8 cores, this run has 2 cores; the comparison still runs",
        ),
    ]


def test_junit_properties_of_one_point() -> None:
    point = compare_point(8000, None, BASELINE, skipped=True)
    assert junit_properties("uc1", point) == [
        ("theodolite.benchmark", "uc1"),
        ("theodolite.demand.8000", "none"),
        ("theodolite.baseline.8000", "none"),
        ("theodolite.verdict.8000", "pass"),
        ("theodolite.tolerance", "0"),
    ]


def test_an_at_most_demand_keeps_its_number_and_says_so_in_its_own_property() -> None:
    point = compare_point(2000, 2, BASELINE, at_most=True)
    properties = dict(junit_properties("uc1", point))
    assert properties["theodolite.demand.2000"] == "2"  # a number, as tools reading it expect
    assert properties["theodolite.demand_at_most.2000"] == "true"
    assert "theodolite.demand_at_most.2000" not in dict(
        junit_properties("uc1", compare_point(2000, 2, BASELINE))
    )


def test_a_ref_certified_from_below_keeps_its_number_and_says_so_in_its_own_property() -> None:
    from pytest_theodolite.report.junit import paired_junit_properties
    from pytest_theodolite.report.summary import CostFigure

    point = compare_sides("uc1", 2000, 2, 2, at_most=True, ref_at_least=True)
    assert point.verdict is Verdict.PASS and (point.baseline_text, point.measured_text) == (">=2", "<=2")
    properties = dict(
        paired_junit_properties(2000, "REF main", "2", CostFigure(None, 9.5, None), None, ref_at_least=True)
    )
    assert properties["theodolite.ref.2000"] == "2" and properties["theodolite.ref_at_least.2000"] == "true"
    assert "theodolite.cpu_change.2000" not in properties  # REF did not run at the change's demand
    exact = dict(paired_junit_properties(2000, "REF main", "2", CostFigure(9.0, 9.5, 0.05), None))
    assert "theodolite.ref_at_least.2000" not in exact


def test_a_demand_above_the_instances_run_says_so_beside_none() -> None:
    point = compare_point(
        2000, None, BASELINE, above=2, not_comparable="this testbed is slower", host_speed=0.5
    )
    assert point.verdict is Verdict.NOT_COMPARABLE
    assert point.measured_text == ">2"
    assert "more than 2 instances (more not run)" in point.describe("uc1")
    properties = dict(junit_properties("uc1", point))
    assert properties["theodolite.demand.2000"] == "none"  # no instance count run met the SLOs
    assert properties["theodolite.demand_above.2000"] == "2"


# ------------------------------------------------------------------------------------------------------------
# Plot
# ------------------------------------------------------------------------------------------------------------

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_plot_is_written_as_a_png(tmp_path: Path) -> None:
    path = scalability_plot(tmp_path / "plots" / "uc1.png", "uc1", MEASURED, BASELINE)

    assert path == tmp_path / "plots" / "uc1.png"
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    assert path.stat().st_size > 10_000  # axes, labels, lines and legend, not an empty canvas
    assert _png_size(path) == (800, 500)
    assert [p.name for p in path.parent.iterdir()] == ["uc1.png"]  # no temporary file left behind


def test_plot_without_baseline_and_with_nothing_measured(tmp_path: Path) -> None:
    first = scalability_plot(tmp_path / "first.png", "uc1", DemandResult(demand={1000: None}), None)
    empty = scalability_plot(tmp_path / "empty.png", "uc1", DemandResult(demand={}), None)

    assert _png_size(first) == (800, 500) and first.stat().st_size > 10_000
    assert _png_size(empty) == (800, 500)


def test_an_at_most_demand_is_drawn_apart_from_an_exact_one(tmp_path: Path) -> None:
    exact = DemandResult(demand={1000: 1, 2000: 2}, resources=(1, 2))
    bounded = DemandResult(demand={1000: 1, 2000: 2}, resources=(1, 2), at_most=(2000,))
    drawn = {
        name: scalability_plot(tmp_path / f"{name}.png", "uc1", result, None).read_bytes()
        for name, result in (("exact", exact), ("bounded", bounded))
    }
    assert drawn["exact"] != drawn["bounded"]  # the bound's marker (and its legend entry) are drawn
    none = DemandResult(demand={1000: 1, 2000: None}, resources=(1, 2))
    above = DemandResult(demand={1000: 1, 2000: None}, resources=(1, 2), above={2000: 1})
    assert (
        scalability_plot(tmp_path / "none.png", "uc1", none, None).read_bytes()
        != scalability_plot(tmp_path / "above.png", "uc1", above, None).read_bytes()
    )


def test_the_capacity_plot_draws_each_instance_count_against_the_reference(tmp_path: Path) -> None:
    from pytest_theodolite.core.capacity import CapacityEstimate

    def mu(r: int, value: float, saturated: bool = True) -> CapacityEstimate:
        return CapacityEstimate(r, value, value * 0.95, value * 1.05, 8, 20.0, saturated, 20_000)

    measured = {1: mu(1, 6_343), 2: mu(2, 14_563), 3: mu(3, 13_075), 4: mu(4, 23_361, saturated=False)}
    reference = {1: mu(1, 7_967), 2: mu(2, 13_283)}
    loads = {4000: 4000.0, 12000: 12000.0, 20000: 20000.0}
    path = capacity_plot(tmp_path / "uc1_capacity.png", "uc1", measured, reference, loads)
    alone = capacity_plot(tmp_path / "alone.png", "uc1", measured)
    empty = capacity_plot(tmp_path / "empty.png", "uc1", {})

    assert _png_size(path) == (800, 500) and path.stat().st_size > 10_000
    assert path.read_bytes() != alone.read_bytes()  # the reference and the loads are drawn
    assert _png_size(empty) == (800, 500)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alone.png", "empty.png", "uc1_capacity.png"]


def test_plot_leaves_no_pyplot_figure_open(tmp_path: Path) -> None:
    scalability_plot(tmp_path / "uc1.png", "uc1", MEASURED, BASELINE)
    pyplot = sys.modules.get("matplotlib.pyplot")
    assert pyplot is None or pyplot.get_fignums() == []


def test_plot_without_matplotlib_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)  # None in sys.modules makes the import fail

    with pytest.raises(PlotDependencyMissing) as error:
        scalability_plot(tmp_path / "uc1.png", "uc1", MEASURED, BASELINE)

    assert str(error.value) == (
        "the scalability plot needs matplotlib, which is not installed: pip install 'pytest-theodolite[plot]'"
    )
    assert isinstance(error.value, ImportError)
    assert not (tmp_path / "uc1.png").exists()


def test_pull_request_mode_tables_show_both_sides_and_the_cpu_figure():
    points = (compare_sides("uc1", 4000, 1, 1), compare_sides("uc1", 12000, 2, 3))
    comparison = Comparison(benchmark="uc1", points=points)
    report = BenchmarkReport(
        "uc1",
        comparison,
        DemandResult(demand={4000: 1, 12000: 3}, loads=(4000, 12000), resources=(1, 2, 3, 4)),
        None,
        reference="REF main (abc1234)",
        costs={4000: CostFigure(40.0, 60.0, 0.5), 12000: CostFigure(41.0, 62.0, None)},
    )
    lines = terminal_summary([report])
    assert lines[0] == "uc1: REGRESSION (1 regression)"
    assert [cell.strip() for cell in lines[1].split(" | ")] == [
        "load",
        "REF main (abc1234)",
        "change",
        "verdict",
        "CPU per record",
    ]
    assert lines[3].split(" | ")[-1] == "40.0 -> 60.0 us (+50%)"
    assert lines[4].split(" | ")[-1] == "41.0 -> 62.0 us"  # different instances: no relative figure
    markdown = markdown_summary([report])
    assert "| load | REF main (abc1234) | change | status | CPU per record |" in markdown
    assert "| 4000 | 1 | 1 | PASS | 40.0 -> 60.0 us (+50%) |" in markdown


def test_a_cost_check_that_could_not_fail_is_reported_as_not_made():
    from pytest_theodolite.core.cost import CostEstimate, PointCost
    from pytest_theodolite.core.outcomes import CostStatus

    def spent(us: float, utilisation: float) -> PointCost:
        return PointCost(1, CostEstimate(us, us - 1, us + 1, 5), None, utilisation)

    blind = compare_sides(
        "own", 2000, 1, 1, ref_cost=spent(103.5, 0.97), change_cost=spent(103.0, 0.98), cost_tolerance=0.1
    )
    judged = compare_sides(
        "own", 5000, 1, 1, ref_cost=spent(40.0, 0.7), change_cost=spent(40.4, 0.71), cost_tolerance=0.1
    )
    assert (
        blind.cost is not None
        and blind.cost.status == CostStatus.NOT_COMPARED
        and blind.verdict.label == "PASS"
    )
    report = BenchmarkReport(
        "own",
        Comparison(benchmark="own", points=(blind, judged), cost_tolerance=0.1),
        DemandResult(demand={2000: 1, 5000: 1}, loads=(2000, 5000), resources=(1, 2)),
        None,
        reference="REF main (abc1234)",
        costs={2000: CostFigure(103.5, 103.0, -0.005), 5000: CostFigure(40.0, 40.4, 0.01)},
    )
    lines = terminal_summary([report])
    assert any(line.strip().startswith("cost not judged at load 2000: ") for line in lines), lines
    assert not any("load 2000, 5000" in line or "load 5000:" in line for line in lines)
    properties = dict(junit_properties("own", report.comparison))
    assert "97% of their CPU quota" in properties["theodolite.cost_not_judged.2000"]
    assert "theodolite.cost_not_judged.5000" not in properties


def test_a_cost_check_without_an_interval_is_reported_as_not_made():
    from pytest_theodolite.core.cost import CostEstimate, PointCost
    from pytest_theodolite.core.outcomes import CostStatus

    short = compare_sides(
        "uc1-pr",
        300,
        1,
        1,
        ref_cost=PointCost(1, CostEstimate(1335.8)),
        change_cost=PointCost(1, CostEstimate(1525.0)),
        cost_tolerance=0.1,
    )
    assert (
        short.cost is not None
        and short.cost.status == CostStatus.NOT_COMPARED
        and short.verdict.label == "PASS"
    )
    report = BenchmarkReport(
        "uc1-pr",
        Comparison(benchmark="uc1-pr", points=(short,), cost_tolerance=0.1),
        DemandResult(demand={300: 1}, loads=(300,), resources=(1, 2)),
        None,
        reference="REF main (abc1234)",
        costs={300: CostFigure(1335.8, 1525.0, 0.142)},
    )
    lines = [line.strip() for line in terminal_summary([report])]
    assert "cost not judged at load 300: the reference's and this run's figure has no interval" in "\n".join(
        lines
    )
    assert not any("quota" in line for line in lines)  # not the saturated instances' sentence
    properties = dict(junit_properties("uc1-pr", report.comparison))
    assert "duration=12" in properties["theodolite.cost_not_judged.300"]
    assert properties["theodolite.verdict.300"] == "pass"


def test_cost_junit_properties_give_both_figures_the_blind_spot_and_the_tolerance() -> None:
    from pytest_theodolite.core.blind_spot import BlindSpot
    from pytest_theodolite.core.cost import CostEstimate, PointCost
    from pytest_theodolite.report.junit import cost_junit_properties

    measured = PointCost(2, CostEstimate(41.25, 40.0, 42.5, 5))
    baseline = PointCost(2, CostEstimate(37.0))
    properties = cost_junit_properties(12000, measured, baseline, BlindSpot(12000, 2, 0.25, "cpu"), 0.1)
    assert properties == [
        ("theodolite.cpu_us_per_record.12000", "41.250"),
        ("theodolite.cpu_us_per_record.12000.low", "40.000"),
        ("theodolite.cpu_us_per_record.12000.high", "42.500"),
        ("theodolite.baseline_cpu_us_per_record.12000", "37.000"),
        ("theodolite.blind_spot.12000", "0.250"),
        ("theodolite.blind_spot_source.12000", "cpu"),
        ("theodolite.cost_tolerance", "0.100"),
    ]
    assert cost_junit_properties(12000, None, None, None, None) == []


def test_a_cost_read_both_as_measured_and_divided_shows_both_readings() -> None:
    from dataclasses import replace

    from pytest_theodolite.core.cost import CostCheck, CostEstimate, PointCost
    from pytest_theodolite.core.outcomes import CostStatus
    from pytest_theodolite.report.summary import cost_text

    check = CostCheck(CostStatus.PASS, relative=0.253, tolerance=0.08, p_value=0.001, divided=-0.089)
    point = replace(compare_point(8000, 2, BASELINE), cost=check)
    properties = dict(junit_properties("uc1", point))
    assert properties["theodolite.cpu_change.8000"] == "+0.253"
    assert properties["theodolite.cpu_change_divided.8000"] == "-0.089"
    figure = PointCost(2, CostEstimate(44.9, 42.4, 47.3, 5), 0.88)
    assert cost_text(point, figure).endswith("(+25%; -9% divided)")


def test_a_recorded_baseline_says_which_cpu_per_instance_a_comparison_needs(tmp_path: Path) -> None:
    from dataclasses import replace

    from pytest_theodolite.report.benchmark import StoredModeResult, stored_mode_report
    from pytest_theodolite.report.formats import render_summary

    def recorded(instance_cpu: float | None) -> StoredModeResult:
        baseline = replace(BASELINE, testbed=replace(BASELINE_TESTBED, instance_cpu=instance_cpu))
        return StoredModeResult("uc1", COMPARISON, MEASURED, baseline, tmp_path, {}, {}, {}, recording=True)

    limited = stored_mode_report(recorded(0.5)).notes
    assert "baseline recorded with 0.5 CPU per instance: a run compares with it only where its instances" in (
        " ".join(limited)
    )
    unlimited = stored_mode_report(recorded(None)).notes
    assert any(note.startswith("baseline recorded with unlimited CPU per instance") for note in unlimited)
    # not said where nothing was recorded; every summary format renders the same result
    plain = stored_mode_report(replace(recorded(0.5), recording=False)).notes
    assert not any("baseline recorded with" in note for note in plain)
    rendered = render_summary([recorded(0.5)])
    assert set(rendered) == {"lines", "markdown", "benchmarks"}
    assert any("baseline recorded with 0.5 CPU" in line for line in rendered["lines"])
    assert "baseline recorded with 0.5 CPU" in rendered["markdown"]
