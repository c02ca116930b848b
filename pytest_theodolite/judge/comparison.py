"""demand(load) measured against a reference's: the verdict per load (pass, improvement, regression,
unmeasured, new load, not comparable, cost regression) and for a whole benchmark.

Comparison rule per load l (tolerance t >= 0 instances):
    measured(l) <= reference(l) + t   passes (PASS, or IMPROVEMENT when measured(l) < reference(l))
    measured(l) >  reference(l) + t   REGRESSION
"none" is worse than any number: reference 3 / measured none is a REGRESSION, reference none / measured 4 an
IMPROVEMENT, none / none PASS. A load whose sub-experiment was INVALID or ERRORED is UNMEASURED: neither pass
nor regression (the gate reports a test error). A load without a reference value is NEW_LOAD: no verdict either.

Pure functions over data: no pytest, Kafka or Spark imports."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from pytest_theodolite.core.cost import CostCheck, PointCost, check_cost
from pytest_theodolite.core.outcomes import UNMEASURED, CostStatus, MeasuredDemand, Verdict, instances_text
from pytest_theodolite.core.scalability import DemandResult
from pytest_theodolite.store.baseline import Baseline, is_whole
from pytest_theodolite.store.testbed import Testbed, TestbedDifference, describe_testbed_differences


@dataclass(frozen=True)
class PointComparison:
    """demand(load) measured against the baseline."""

    load: int
    baseline: int | None  # the baseline value; None is "none" if `in_baseline`, else there is no value
    in_baseline: bool
    measured: MeasuredDemand
    verdict: Verdict
    tolerance: int = 0
    skipped: bool = False  # "none" without running (lower-bound restriction after an unsolvable load)
    #: passed at `measured` instances, fewer not run (the search stopped at the reference)
    at_most: bool = False
    #: measured None: FAILed at this many instances, more not run (the testbed could not judge a higher demand)
    above: int | None = None
    #: why the point is NOT_COMPARABLE, or why its verdict holds on a testbed that is not (one_sided_verdict)
    reason: str = ""
    #: the CPU per record against the baseline's (None: no figure on either side was looked at)
    cost: CostCheck | None = None
    #: the reference failed one instance below `baseline`, which was not run: its demand is at least that
    #: (pull-request mode's certified search: REF is judged as that lower bound)
    baseline_at_least: bool = False
    #: the reference was not run at this load: `baseline` is the demand expected there (pull-request mode where
    #: the paired read was certain of the cost, ``ref_below=false``)
    baseline_expected: bool = False

    @property
    def passed(self) -> bool:
        return self.verdict.passes

    @property
    def baseline_text(self) -> str:
        """'3', 'none', or '-' when the baseline has no value for this load."""
        if not self.in_baseline:
            return "-"
        if self.baseline is None:
            return "none"
        if self.baseline_expected:
            return f"~{self.baseline}"
        return f">={self.baseline}" if self.baseline_at_least else str(self.baseline)

    @property
    def measured_text(self) -> str:
        """'3', '<=3' (fewer not run), '>3' (more not run), 'none', 'none (skipped)' or 'unmeasured'."""
        if self.measured is UNMEASURED:
            return "unmeasured"
        if self.above is not None:
            return f">{self.above}"
        if self.measured is None:
            return "none (skipped)" if self.skipped else "none"
        return f"<={self.measured}" if self.at_most else str(self.measured)

    def describe(self, benchmark: str = "", reference: str = "baseline") -> str:
        """One sentence for a test message, e.g. 'uc1 load 1000: measured 4 instances, baseline 3: regression'
        (`reference` names what it was compared with: 'REF origin/main' in pull-request mode)."""
        prefix = f"{benchmark} load {self.load}" if benchmark else f"load {self.load}"
        if self.measured is UNMEASURED:
            measured = "nothing (unmeasured)"
        else:
            measured = instances_text(self.measured, explain_none=True)
            if self.at_most and self.measured is not None:
                measured = f"at most {measured} (fewer not run)"
            elif self.above is not None:
                measured = f"more than {instances_text(self.above)} (more not run)"
        if not self.in_baseline:
            baseline = f"no {reference} value"
        else:
            baseline = f"{reference} {instances_text(self.baseline)}"
            if self.baseline_at_least and self.baseline is not None:
                # true both where it failed one below and where it was not run at all (the fewest instances)
                baseline = (
                    f"{reference} at least {instances_text(self.baseline)} (not run at {self.baseline} or more, "
                    "which the verdict does not need)"
                )
            elif self.baseline_expected:
                baseline = (
                    f"{reference} not run, expected to need {instances_text(self.baseline)} (the paired read "
                    "certain the change costs within its tolerance)"
                )
            if self.tolerance:
                baseline += f" (tolerance +{self.tolerance})"
        why = {
            Verdict.PASS: "pass",
            Verdict.IMPROVEMENT: "improvement"
            + (": the baseline could be lowered" if reference == "baseline" else ""),
            Verdict.REGRESSION: "regression",
            Verdict.UNMEASURED: "unmeasured: an invalid or errored sub-experiment left this load unjudged",
            Verdict.NEW_LOAD: "new load: record a baseline to gate it",
            Verdict.NOT_COMPARABLE: f"not comparable: {self.reason}",
            Verdict.COST_REGRESSION: f"cost regression: {self.cost.figure} {self.cost.text}"
            if self.cost
            else "cost regression",
        }[self.verdict]
        return f"{prefix}: measured {measured}, {baseline}: {why}"


def _check_tolerance(tolerance: int) -> int:
    if not is_whole(tolerance) or tolerance < 0:
        raise ValueError(f"tolerance must be a whole number of instances >= 0, got {tolerance!r}")
    return tolerance


def _verdict(measured: MeasuredDemand, baseline: int | None, in_baseline: bool, tolerance: int) -> Verdict:
    if measured is UNMEASURED:
        return Verdict.UNMEASURED
    if not in_baseline:
        return Verdict.NEW_LOAD
    if baseline is None:  # "none" in the baseline: any number is better, none is equal
        return Verdict.PASS if measured is None else Verdict.IMPROVEMENT
    if measured is None:  # none is worse than any number, whatever the tolerance
        return Verdict.REGRESSION
    if measured > baseline + tolerance:
        return Verdict.REGRESSION
    return Verdict.IMPROVEMENT if measured < baseline else Verdict.PASS


#: how far a job's speed on another host may lie from the calibrations' ratio, either way: the calibration
#: varies run to run by a coefficient of variation of 7-10 % (engine/calibration.py), and where a host ran it at
#: 0.50x, three jobs' CPU per record rose within 5 % of what it said (docs/lab-notes/transfer.md)
SPEED_UNCERTAINTY = 0.15


def one_sided_verdict(verdict: Verdict, host_speed: float | None, offered_share: float = 1.0) -> str | None:
    """Why `verdict` holds on a testbed whose speed, as a share of the baseline's, is `host_speed` (within
    SPEED_UNCERTAINTY), where each load was offered at `offered_share` of its rate -- or None where it does not.
    A job needs at least as many instances on a slower host as on a faster one, and at a higher rate as at a
    lower one: where the rate offered here weighs at least the baseline's even on the fastest host the
    calibration allows, needing no more than the baseline is a pass (fewer: an improvement); where it weighs
    at most the baseline's even on the slowest, needing more is a regression. The other verdicts could be the
    host's doing."""
    if host_speed is None:
        return None
    fastest, slowest = host_speed * (1 + SPEED_UNCERTAINTY), host_speed * (1 - SPEED_UNCERTAINTY)
    passing = verdict in (Verdict.PASS, Verdict.IMPROVEMENT)
    if passing and weighs_at_least_the_baselines(host_speed, offered_share):
        if offered_share < 1:
            return (
                f"judged at {offered_share:.2f}x each load's rate: this testbed is slower ({host_speed:.2f}x the "
                f"baseline's, at most {fastest:.2f}x), so the rate offered here weighs at least the baseline's"
            )
        return (
            f"judged one-sided: this testbed is slower ({host_speed:.2f}x the baseline's), and a slower host "
            "can only raise the demand"
        )
    if slowest >= offered_share and verdict is Verdict.REGRESSION:
        if offered_share < 1:
            return (
                f"judged at {offered_share:.2f}x each load's rate: this testbed is slower ({host_speed:.2f}x the "
                f"baseline's, at least {slowest:.2f}x), so the rate offered here weighs at most the baseline's"
            )
        return (
            f"judged one-sided: this testbed is faster ({host_speed:.2f}x the baseline's), and a faster host "
            "can only lower the demand"
        )
    return None


def weighs_at_least_the_baselines(host_speed: float | None, offered_share: float = 1.0) -> bool:
    """Whether a load offered at `offered_share` of its rate weighs at least what it weighed on the baseline's
    host, even on the fastest host the calibration allows (`host_speed` within SPEED_UNCERTAINTY): then the job
    needs at least the baseline's demands here -- a pass at them is judged (one_sided_verdict), and the
    baseline's code is expected to fail one instance below them. A testbed read at 0.87x or slower."""
    return host_speed is not None and host_speed * (1 + SPEED_UNCERTAINTY) <= offered_share


def offered_share(host_speed: float | None) -> float:
    """The share of each load's rate a gate offers: on a testbed the calibration reads slower than its
    uncertainty allows for an equal one (beyond the comparison margin or inside it), the fastest speed its
    calibration allows -- the lowest rate at which a pass is still judged (one_sided_verdict), where the full
    rate asks it to do what the baseline's host did in less time; else (a testbed as fast, faster, or of
    unknown speed) 1. Inside the margin, the full rate made a pass at the baseline's demand hang on how far
    this host's true speed lay below the calibration's reading (docs/lab-notes/transfer.md, 2026-12-03)."""
    if host_speed is None or host_speed >= 1 - SPEED_UNCERTAINTY:
        return 1.0
    return min(1.0, host_speed * (1 + SPEED_UNCERTAINTY))


def regression_share(host_speed: float | None) -> float | None:
    """The share of a load's rate at which a FAIL at the baseline's demand is measured once more: on a testbed
    the calibration reads slower than its uncertainty allows for an equal one (where loads are offered at a
    share: offered_share), the slowest speed the calibration allows. Failing there too, the demand above the
    baseline's is a regression (one_sided_verdict); a FAIL at the rate offered alone may be the host's doing.
    None where a FAIL at the load's rate is judged as it is."""
    if host_speed is None or host_speed >= 1 - SPEED_UNCERTAINTY:
        return None
    return host_speed * (1 - SPEED_UNCERTAINTY)


def regression_judgeable(
    not_comparable: str | None, host_speed: float | None, offered_share: float = 1.0
) -> bool:
    """Whether a demand above the reference's can be judged a regression on this testbed: yes where the
    baseline is comparable, or where it is not but the rate offered weighs no more than the baseline's
    (one_sided_verdict: a faster testbed); on a slower or unknown one it stays not comparable whatever more
    runs show."""
    return (
        not_comparable is None or one_sided_verdict(Verdict.REGRESSION, host_speed, offered_share) is not None
    )


def compare_point(
    load: int,
    measured: MeasuredDemand,
    baseline: Baseline | None,
    tolerance: int = 0,
    *,
    skipped: bool = False,
    at_most: bool = False,
    above: int | None = None,
    not_comparable: str | None = None,
    host_speed: float | None = None,
    offered_share: float = 1.0,
    measured_cost: PointCost | None = None,
    cost_tolerance: float | None = None,
    uncertain: str | None = None,
    baseline_at_least: bool = False,
    baseline_expected: bool = False,
) -> PointComparison:
    """One load's verdict: `measured` is the fewest passing instances, None ("none") or UNMEASURED; `at_most`:
    it passed there and fewer were not run (a demand at most `measured`: judged as that, it can pass or
    regress, and an improvement is seen only below the reference); `above` (measured None): it failed at that
    many instances and more were not run; `baseline_at_least`: the reference's demand is at least its value
    (judged as that: a change at most that passes); `baseline_expected`: the reference was not run, its value
    is the demand expected (judged as that).

    `not_comparable` (why the baseline's testbed cannot be compared with this one) makes every measured point
    NOT_COMPARABLE that has a baseline value -- except a demand verdict the testbeds' speed order alone
    decides (`host_speed`, this testbed's over the baseline's, and `offered_share`, the share of the load's rate
    offered: one_sided_verdict). Where the demand passed, `measured_cost` is checked against the baseline's
    figure (cost.check_cost): beyond `cost_tolerance` the point is a COST_REGRESSION -- not where it was
    measured at a share of the load's rate. `uncertain` (certainty.uncertain_regression: why the verdicts
    behind a regression were not certain) makes a REGRESSION NOT_COMPARABLE."""
    _check_tolerance(tolerance)
    if measured is not None and measured is not UNMEASURED and (not is_whole(measured) or measured < 1):
        raise ValueError(
            f"load {load}: measured demand {measured!r} is not a whole number of instances >= 1, None"
            " (none) or UNMEASURED"
        )
    if measured is not None and measured is not UNMEASURED:
        measured = int(measured)
    in_baseline = baseline is not None and load in baseline.demand
    baseline_value = baseline.demand[load] if in_baseline else None  # type: ignore[union-attr]
    verdict = _verdict(measured, baseline_value, in_baseline, tolerance)
    cost = None
    if in_baseline and measured is not UNMEASURED and (measured_cost is not None or load in baseline.cost):  # type: ignore[union-attr]
        cost = check_cost(baseline.cost.get(load), measured_cost, cost_tolerance)  # type: ignore[union-attr]
        if offered_share != 1 and cost.relative is not None:
            cost = replace(
                cost,
                status=CostStatus.NOT_COMPARED,
                reason=f"measured at {offered_share:.2f}x the load's rate, where each micro-batch's own cost falls "
                "on fewer records than at the baseline's full rate",
            )
        if verdict is Verdict.PASS and cost.status == CostStatus.REGRESSION:
            verdict = Verdict.COST_REGRESSION
    one_sided = one_sided_verdict(verdict, host_speed, offered_share) if not_comparable else None
    if not_comparable and verdict not in (Verdict.UNMEASURED, Verdict.NEW_LOAD) and one_sided is None:
        verdict = Verdict.NOT_COMPARABLE
    elif uncertain and verdict is Verdict.REGRESSION:
        verdict, not_comparable = Verdict.NOT_COMPARABLE, uncertain
    return PointComparison(
        load=load,
        baseline=baseline_value,
        in_baseline=in_baseline,
        measured=measured,
        verdict=verdict,
        tolerance=tolerance,
        skipped=skipped and measured is None,
        at_most=at_most and is_whole(measured),
        above=above if measured is None else None,
        reason=(not_comparable or "") if verdict is Verdict.NOT_COMPARABLE else (one_sided or ""),
        cost=cost,
        baseline_at_least=baseline_at_least and baseline_value is not None,
        baseline_expected=baseline_expected and baseline_value is not None,
    )


@dataclass(frozen=True)
class Comparison:
    """A measured demand function against a baseline, point by point (loads ascending)."""

    benchmark: str
    points: tuple[PointComparison, ...]
    tolerance: int = 0
    testbed_differences: tuple[TestbedDifference, ...] = ()
    not_run: tuple[int, ...] = ()  # baseline loads this run did not measure (deselected, or newly dropped)
    has_baseline: bool = True
    cost_tolerance: float | None = None
    #: loads whose measurement began but did not end (the run was interrupted or broke off): no verdict, and
    #: what their search found so far is not compared
    unfinished: tuple[int, ...] = ()

    def point(self, load: int) -> PointComparison:
        for point in self.points:
            if point.load == load:
                return point
        raise KeyError(
            f"{self.benchmark}: load {load} was not compared (loads: {[p.load for p in self.points]})"
        )

    def _with(self, verdict: Verdict) -> tuple[PointComparison, ...]:
        return tuple(p for p in self.points if p.verdict is verdict)

    @property
    def regressions(self) -> tuple[PointComparison, ...]:
        return self._with(Verdict.REGRESSION)

    @property
    def cost_regressions(self) -> tuple[PointComparison, ...]:
        return self._with(Verdict.COST_REGRESSION)

    @property
    def improvements(self) -> tuple[PointComparison, ...]:
        return self._with(Verdict.IMPROVEMENT)

    @property
    def unmeasured(self) -> tuple[PointComparison, ...]:
        return self._with(Verdict.UNMEASURED)

    @property
    def not_comparable(self) -> tuple[PointComparison, ...]:
        return self._with(Verdict.NOT_COMPARABLE)

    @property
    def new_loads(self) -> tuple[PointComparison, ...]:
        return self._with(Verdict.NEW_LOAD)

    @property
    def passed(self) -> bool:
        """The gate holds: every load passed or improved (a new, unmeasured or unfinished load is no pass)."""
        return not self.unfinished and all(p.passed for p in self.points)

    @property
    def testbed_differs(self) -> bool:
        return bool(self.testbed_differences)

    @property
    def testbed_sentence(self) -> str:
        return describe_testbed_differences(self.testbed_differences)


def compare(
    measured: DemandResult,
    baseline: Baseline | None,
    tolerance: int = 0,
    *,
    measured_testbed: Testbed | None,
    benchmark: str | None = None,
    not_comparable: str | None = None,
    host_speed: float | None = None,
    offered_shares: Mapping[int, float] | None = None,
    costs: Mapping[int, PointCost | None] | None = None,
    cost_tolerance: float | None = None,
    uncertain: Mapping[int, str | None] | None = None,
    unfinished: Collection[int] = (),
) -> Comparison:
    """Every load of `measured` (its demand and its unmeasured loads) against `baseline`, but for the
    `unfinished` ones (their measurement began and did not end), which are named apart and judged not at all.

    Without a baseline every load is NEW_LOAD (then `benchmark` names it); without `measured_testbed` the
    testbeds are not compared; `offered_shares` (load -> the share of its rate its verdict rests on, 1 where
    missing) as in `compare_point`. `costs` (load -> CPU per record at its demand) are checked against the
    baseline's with `cost_tolerance`; `uncertain` (load -> why its regression would rest on uncertain
    verdicts) as in `compare_point`.
    """
    _check_tolerance(tolerance)
    if baseline is not None and benchmark is not None and benchmark != baseline.benchmark:
        raise ValueError(f"comparing benchmark {benchmark!r} with the baseline of {baseline.benchmark!r}")
    name = benchmark if benchmark is not None else baseline.benchmark if baseline is not None else ""
    measured = measured.without(unfinished)
    loads = sorted(set(measured.demand) | set(measured.unmeasured))
    points = tuple(
        compare_point(
            load,
            UNMEASURED if load in measured.unmeasured else measured.demand[load],
            baseline,
            tolerance,
            skipped=load in measured.skipped,
            at_most=load in measured.at_most,
            above=measured.above.get(load),
            not_comparable=not_comparable,
            host_speed=host_speed,
            offered_share=(offered_shares or {}).get(load, 1.0),
            measured_cost=(costs or {}).get(load),
            cost_tolerance=cost_tolerance,
            uncertain=(uncertain or {}).get(load),
        )
        for load in loads
    )
    differences = (
        baseline.testbed.differences(measured_testbed)
        if baseline is not None and measured_testbed is not None
        else ()
    )
    not_run = (
        tuple(load for load in baseline.demand if load not in loads and load not in unfinished)
        if baseline is not None
        else ()
    )
    return Comparison(
        benchmark=name,
        points=points,
        tolerance=tolerance,
        testbed_differences=differences,
        not_run=not_run,
        has_baseline=baseline is not None,
        cost_tolerance=cost_tolerance,
        unfinished=tuple(sorted(unfinished)),
    )
