"""A gate point in pull-request mode: the change judged against REF, measured beside it on this host."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_theodolite.core.cost import SIGNIFICANCE, PointCost
from pytest_theodolite.core.outcomes import Verdict
from pytest_theodolite.engine.gate import GatePoint
from pytest_theodolite.judge.comparison import PointComparison
from pytest_theodolite.pull_request.paired import CHANGE, REF
from pytest_theodolite.report.junit import junit_properties, paired_junit_properties
from pytest_theodolite.report.summary import lag_slopes_text, slopes_and_outcomes

if TYPE_CHECKING:
    from pytest_theodolite.pull_request.point import PairedPoint


@dataclass
class PairedGatePoint(GatePoint):
    """demand(load) of the change against REF's; the stored baseline, where there is one, is reported beside."""

    paired: PairedPoint | None = None
    label: str = "REF"

    @property
    def reference(self) -> str:
        return self.label

    def _paired(self) -> PairedPoint:
        assert self.paired is not None
        return self.paired

    def comparison(self) -> PointComparison:
        return self._paired().comparison(
            self.spec.benchmark.name, self.spec.tolerance, self.spec.cost_tolerance
        )

    def junit_properties(self, comparison: PointComparison) -> list[tuple[str, Any]]:
        against = self.baseline_comparison() if self.baseline is not None else None
        stored = against.baseline_text if against is not None and against.in_baseline else "missing"
        # theodolite.baseline.<load> is the stored baseline's; the CPU change against REF comes once, with REF's
        # figures below
        properties = [
            (key, stored if key.startswith("theodolite.baseline.") else value)
            for key, value in junit_properties(self.spec.benchmark.name, comparison)
            if not key.startswith("theodolite.cpu_change.")
        ]
        # REF's demand a number, as theodolite.demand.<load> is, with its bound in a property of its own
        bounded = comparison.baseline_at_least or comparison.baseline_expected
        ref_text = str(comparison.baseline) if bounded else comparison.baseline_text
        properties += paired_junit_properties(
            self.point.load,
            self.reference,
            ref_text,
            self._paired().cost_figure(),
            against,
            ref_at_least=comparison.baseline_at_least,
            ref_expected=comparison.baseline_expected,
        )
        paired = self._paired().paired_cost
        if paired is not None and paired.relative is not None:
            properties.append(("theodolite.paired_cost_change", f"{paired.relative:+.3f}"))
        return properties

    def failure_message(self, comparison: PointComparison) -> str:
        paired = self._paired().paired_cost
        if comparison.verdict is Verdict.COST_REGRESSION and paired is not None and comparison.cost is paired:
            return (
                f"{comparison.describe(self.spec.benchmark.name, self.reference)}\n"
                f"both sides read a backlog at the same time, one instance each; the median of batch k of the "
                f"change over batch k of {self.reference}, a regression where it lies beyond the tolerance and a "
                f"one-sided signed-rank test on the ratios gives p < {SIGNIFICANCE:g}"
            )
        message = super().failure_message(comparison)
        if comparison.verdict is Verdict.REGRESSION:
            ref_slopes, ref_outcomes = slopes_and_outcomes(self._paired().sides[REF].sub_experiments)
            message += f"\n{self.reference}: {lag_slopes_text(self.point.load, ref_slopes, ref_outcomes)}"
            message += f"\nCPU per record: {self._paired().cost_figure().text}"
        return message

    def costs_compared(self) -> tuple[PointCost | None, PointCost | None]:
        return self._paired().point_cost(REF), self._paired().point_cost(CHANGE)
