"""A gate point's verdict, demand, slopes and CPU per record as JUnit properties (record_property), which CI
test reports show beside each test."""

from __future__ import annotations

from collections.abc import Mapping

from pytest_theodolite.core.blind_spot import BlindSpot
from pytest_theodolite.core.capacity import CapacityEstimate
from pytest_theodolite.core.cost import PointCost
from pytest_theodolite.core.outcomes import Verdict
from pytest_theodolite.judge.comparison import Comparison, PointComparison
from pytest_theodolite.report.summary import CostFigure, points_of

#: every JUnit property a gate point records (docs/reference/junit.md is made from it; <load> is a gate load in
#: records/s, <r> an instance count): name -> meaning
JUNIT_PROPERTIES: dict[str, str] = {
    "theodolite.benchmark": "the benchmark's name",
    "theodolite.demand.<load>": "the measured demand, in instances; `none` where no instance count up to the "
    "most the gate may use met the SLOs; `unmeasured` where a sub-experiment errored or was invalid",
    "theodolite.demand_at_most.<load>": "`true` where fewer instances were not run: the demand is at most that",
    "theodolite.demand_above.<load>": "the most instances that failed where more were not run: the demand is higher",
    "theodolite.baseline.<load>": "the stored baseline's demand, `none`, or `missing` (a load it does not have)",
    "theodolite.verdict.<load>": "pass, improvement, regression, unmeasured, new-load, not-comparable or "
    "cost-regression",
    "theodolite.tolerance": "the instances a demand may rise above the baseline's before it is a regression",
    "theodolite.testbed": "how this run's testbed differs from the baseline's, where it does",
    "theodolite.one_sided.<load>": "why a verdict holds on a testbed the calibration reads not comparable",
    "theodolite.cpu_us_per_record.<load>": "CPU microseconds per record at the demand (with `.low` and `.high`, "
    "its interval, where it has one)",
    "theodolite.baseline_cpu_us_per_record.<load>": "the baseline's figure (with `.low` and `.high`)",
    "theodolite.cpu_change.<load>": "the CPU per record's change against the baseline's (0.1: 10 % dearer); in "
    "pull-request mode against REF's",
    "theodolite.cpu_change_divided.<load>": "that change with each figure divided by its testbed calibration's "
    "CPU per reference row (across hosts)",
    "theodolite.cost_not_judged.<load>": "why the CPU per record's change was not judged",
    "theodolite.cost_tolerance": "how far the CPU per record may rise before it is a cost regression",
    "theodolite.blind_spot.<load>": "how much dearer the job could become before its demand changes (0.5: 50 %)",
    "theodolite.blind_spot_source.<load>": "what that blind spot was read from",
    "theodolite.capacity.<r>": "the capacity strategy's capacity of r instances, records/s (with `.low` and "
    "`.high` where the instances did not take all that was offered, else `.lower_bound` = 1: at least that)",
    "theodolite.compare_ref": "pull-request mode: the revision compared with",
    "theodolite.ref.<load>": "pull-request mode: REF's demand (`theodolite.demand.<load>` is the change's)",
    "theodolite.ref_at_least.<load>": "`true` where REF failed below it and was not run there",
    "theodolite.ref_expected.<load>": "`true` where REF was not run at this load: its value is the demand "
    "expected there",
    "theodolite.cpu_us_per_record.<side>.<load>": "pull-request mode: each side's (`ref`, `change`) CPU per record",
    "theodolite.baseline_verdict.<load>": "pull-request mode: the change's verdict against the stored baseline",
    "theodolite.paired_cost_change": "pull-request mode: the change's time per record over REF's from the "
    "paired read (0.1: 10 % dearer)",
    "theodolite.unmeasured": "the load of a point without a verdict (unmeasured or not comparable: exit code 7)",
    "theodolite.regression": "the load of a point that is a regression or cost regression",
}


def paired_junit_properties(
    load: int,
    reference: str,
    ref_text: str,
    cost: CostFigure,
    against_baseline: PointComparison | None,
    ref_at_least: bool = False,
    ref_expected: bool = False,
) -> list[tuple[str, str]]:
    """Pull-request mode's extra properties at one load: REF's demand (theodolite.demand.<load> is the
    change's; theodolite.ref_at_least.<load> 'true' where REF failed below it and it was not run;
    theodolite.ref_expected.<load> 'true' where REF was not run at this load and the value is the demand
    expected there), both sides' CPU microseconds per record and their relative difference, and the verdict
    against the stored baseline where there is one."""
    properties = [("theodolite.compare_ref", reference), (f"theodolite.ref.{load}", ref_text)]
    if ref_at_least:
        properties.append((f"theodolite.ref_at_least.{load}", "true"))
    if ref_expected:
        properties.append((f"theodolite.ref_expected.{load}", "true"))
    for side, value in (("ref", cost.ref_us), ("change", cost.change_us)):
        if value is not None:
            properties.append((f"theodolite.cpu_us_per_record.{side}.{load}", f"{value:.3f}"))
    if cost.relative is not None:
        properties.append((f"theodolite.cpu_change.{load}", f"{cost.relative:+.3f}"))
    if against_baseline is not None:
        properties.append((f"theodolite.baseline_verdict.{load}", against_baseline.verdict.value))
    return properties


def cost_junit_properties(
    load: int,
    cost: PointCost | None,
    baseline: PointCost | None,
    spot: BlindSpot | None,
    tolerance: float | None,
) -> list[tuple[str, str]]:
    """The CPU per record at one load (theodolite.cpu_us_per_record.<load>, with .low/.high), the baseline's,
    the blind spot (theodolite.blind_spot.<load>: 0.5 = the job could become 50 % dearer before the demand
    changes) and the cost tolerance."""
    properties = []
    for prefix, figure in (
        ("theodolite.cpu_us_per_record", cost),
        ("theodolite.baseline_cpu_us_per_record", baseline),
    ):
        if figure is not None:
            properties.append((f"{prefix}.{load}", f"{figure.cpu_us_per_record:.3f}"))
            if figure.estimate.low is not None and figure.estimate.high is not None:
                properties += [
                    (f"{prefix}.{load}.low", f"{figure.estimate.low:.3f}"),
                    (f"{prefix}.{load}.high", f"{figure.estimate.high:.3f}"),
                ]
    if spot is not None:
        properties += [
            (f"theodolite.blind_spot.{load}", f"{spot.share:.3f}"),
            (f"theodolite.blind_spot_source.{load}", spot.source),
        ]
    if tolerance is not None:
        properties.append(("theodolite.cost_tolerance", f"{tolerance:.3f}"))
    return properties


def junit_properties(benchmark: str, comparison: Comparison | PointComparison) -> list[tuple[str, str]]:
    """(name, value) pairs for JUnit XML: theodolite.demand.<load> is the measured value, 'none' or
    'unmeasured' (theodolite.demand_at_most.<load> 'true' where fewer instances were not run: the demand is at
    most that; theodolite.demand_above.<load> the most instances that failed where more were not run: the demand
    is higher); theodolite.baseline.<load> the baseline value, 'none' or 'missing';
    theodolite.cpu_change.<load> the CPU per record's change against the baseline's (0.1 = 10 % dearer);
    theodolite.cost_not_judged.<load> why that change was not judged; theodolite.one_sided.<load> why a verdict
    holds on a testbed that is not comparable."""
    properties = [("theodolite.benchmark", benchmark)]
    tolerance = comparison.tolerance
    for point in points_of(comparison):
        measured = (
            "unmeasured"
            if point.verdict is Verdict.UNMEASURED
            else "none"
            if point.measured is None
            else str(point.measured)
        )
        baseline = point.baseline_text if point.in_baseline else "missing"
        properties += [
            (f"theodolite.demand.{point.load}", measured),
            (f"theodolite.baseline.{point.load}", baseline),
            (f"theodolite.verdict.{point.load}", point.verdict.value),
        ]
        if point.at_most:
            properties.append((f"theodolite.demand_at_most.{point.load}", "true"))
        if point.above is not None:
            properties.append((f"theodolite.demand_above.{point.load}", str(point.above)))
        if point.cost is not None and point.cost.relative is not None:
            properties.append((f"theodolite.cpu_change.{point.load}", f"{point.cost.relative:+.3f}"))
        if point.cost is not None and point.cost.divided is not None:
            properties.append((f"theodolite.cpu_change_divided.{point.load}", f"{point.cost.divided:+.3f}"))
        if point.reason and point.verdict is not Verdict.NOT_COMPARABLE:  # a verdict the speed order decided
            properties.append((f"theodolite.one_sided.{point.load}", point.reason))
        if point.cost is not None and point.cost.not_judged:  # could not fail, or could not tell: not made
            properties.append((f"theodolite.cost_not_judged.{point.load}", point.cost.reason))
    properties.append(("theodolite.tolerance", str(tolerance)))
    if isinstance(comparison, Comparison) and comparison.testbed_differs:
        properties.append(("theodolite.testbed", comparison.testbed_sentence))
    return properties


def capacity_junit_properties(capacities: Mapping[int, CapacityEstimate]) -> list[tuple[str, str]]:
    """Each instance count's capacity (theodolite.capacity.<r>, records/s, with .low/.high where the job did
    not take all that was offered, and .lower_bound = 1 where it did)."""
    properties = []
    for r, estimate in sorted(capacities.items()):
        properties.append((f"theodolite.capacity.{r}", f"{estimate.records_per_s:.0f}"))
        if estimate.saturated:
            properties += [
                (f"theodolite.capacity.{r}.low", f"{estimate.low:.0f}"),
                (f"theodolite.capacity.{r}.high", f"{estimate.high:.0f}"),
            ]
        else:
            properties.append((f"theodolite.capacity.{r}.lower_bound", "1"))
    return properties
