"""Two revisions' time per record, read over the same minutes: batch k of the change against batch k of REF.

Where both sides read a backlog in equal capped micro-batches at the same time, each on its own instance, a
drift of the host or of the executors' warm-up falls on both, and the ratio of their k-th batches takes it out;
what is left is each instance's own batch-to-batch spread. The median of those ratios is the comparison's
figure. The figure pull-request mode reads is each batch's cycle per record -- the inverse of the instance's
wall-clock throughput -- which holds all the work a record costs, a Python UDF's in its worker process included
(the executors' task CPU, read before, leaves that out: docs/lab-notes/pull-request-mode.md). It is judged like
the other cost figures in pull-request mode -- beyond a tolerance and significant (check_paired_cost) -- with a
tolerance of its own by default, set from its spread between unchanged sides. Pure functions over data.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scipy import stats

from pytest_theodolite.core.cost import SIGNIFICANCE, CostCheck
from pytest_theodolite.core.outcomes import CostStatus

#: the change's rise batch by batch beyond which it fails a gate that names no cost tolerance: above what unchanged
#: code on both sides reads, below what a +15 % record does (docs/lab-notes/pull-request-mode.md)
PAIRED_COST_TOLERANCE = 0.07
#: fewer pairs of batches give no p-value: the figure is reported, not judged
MIN_JUDGED_PAIRS = 6
#: how a verdict names the figure
PAIRED_FIGURE = "time per record (inverse throughput), batch by batch"


@dataclass(frozen=True)
class PairedCost:
    """The change's cost per record over REF's, batch by batch."""

    ref_median: float  # REF's median batch, per record (the figure's unit: seconds)
    change_median: float
    batch_ratio: float  # the median of the batch-by-batch ratios, change over REF
    pairs: int
    #: how likely ratios this far above 1 are if the change costs what REF does (a one-sided Wilcoxon
    #: signed-rank test on their logarithms); None below MIN_JUDGED_PAIRS pairs
    p_value: float | None = None
    #: a read in legs (a new executor on each side for each): each leg's median batch ratio, in order
    leg_ratios: tuple[float, ...] = ()
    #: the batch-by-batch ratios the figure is the median of, in order (a second read is judged with them)
    ratios: tuple[float, ...] = ()

    @property
    def change(self) -> float:
        """The change's relative difference (+0.10: 10 % dearer per record)."""
        return self.batch_ratio - 1.0

    def text(self, figure: str = "time") -> str:
        return (
            f"{figure} per record, change over REF batch by batch: {self.change:+.1%} over {self.pairs} batches "
            f"(medians {self.ref_median * 1e6:.2f} and {self.change_median * 1e6:.2f} us"
            + ("" if self.p_value is None else f", p {self.p_value:.2g}")
            + (
                ""
                if len(self.leg_ratios) < 2
                else "; legs " + ", ".join(f"{r - 1:+.1%}" for r in self.leg_ratios)
            )
            + ")"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "ref_median": self.ref_median,
            "change_median": self.change_median,
            "batch_ratio": self.batch_ratio,
            "pairs": self.pairs,
            "p_value": self.p_value,
            "leg_ratios": list(self.leg_ratios),
        }


def paired_cost(ref: Sequence[float], change: Sequence[float]) -> PairedCost:
    """Each side's measured batches as cost per record, in order -> the comparison; a longer side is paired only
    as far as the shorter goes. Raises ValueError where a side has no batch (say which)."""
    return paired_cost_by_leg([ref], [change])


def paired_cost_by_leg(ref: Sequence[Sequence[float]], change: Sequence[Sequence[float]]) -> PairedCost:
    """`paired_cost` of a read in legs: each side's batches leg by leg, paired within each leg."""
    flat = {
        side: [value for leg in legs for value in leg]
        for side, legs in (("REF", ref), ("the change", change))
    }
    empty = [side for side, values in flat.items() if not values]
    if empty:
        raise ValueError(f"{' and '.join(empty)} measured no full batch: nothing to pair")
    if any(value <= 0 for values in flat.values() for value in values):
        raise ValueError("a batch's cost per record must be positive")
    by_leg = [leg for leg in batch_ratios_by_leg(ref, change) if leg]
    ratios = [ratio for leg in by_leg for ratio in leg]
    if not ratios:
        raise ValueError("no leg was read by both sides: nothing to pair")
    return PairedCost(
        statistics.median(flat["REF"]),
        statistics.median(flat["the change"]),
        statistics.median(ratios),
        len(ratios),
        rise_p_value(ratios),
        tuple(statistics.median(leg) for leg in by_leg),
        tuple(ratios),
    )


def batch_ratios(ref: Sequence[float], change: Sequence[float]) -> list[float]:
    """The change's batch k over REF's batch k, as far as the shorter side goes."""
    return [c / r for c, r in zip(change, ref, strict=False)]


def batch_ratios_by_leg(
    ref: Sequence[Sequence[float]], change: Sequence[Sequence[float]]
) -> list[list[float]]:
    """`batch_ratios` within each leg both sides read, leg by leg."""
    return [batch_ratios(r, c) for r, c in zip(ref, change, strict=False)]


def rise_p_value(ratios: Sequence[float]) -> float | None:
    """One-sided Wilcoxon signed-rank test that the ratios lie above 1 (on their logarithms: a batch half as
    dear weighs as much as one twice as dear); None below MIN_JUDGED_PAIRS ratios. A test on ranks, because a
    batch that one side's host stalled reads far off (+125 % beside +5 % in one clean run)."""
    if len(ratios) < MIN_JUDGED_PAIRS:
        return None
    logs = [math.log(ratio) for ratio in ratios]
    if not any(logs):
        return 1.0
    return float(stats.wilcoxon(logs, alternative="greater").pvalue)


def first_certain_pass(ratios: Sequence[float], tolerance: float) -> int | None:
    """The fewest leading pairs, from MIN_JUDGED_PAIRS on, whose ratios lie below ``1 + tolerance`` by the same
    one-sided test a rise is judged by (rise_p_value on ``(1 + tolerance) / ratio``, p < SIGNIFICANCE): where a
    read may stop as a pass. None where no prefix is that certain. Only a pass may stop early: a regression keeps
    the full read's rule, so that looking after every pair adds no false alarm (docs/lab-notes/capacity.md,
    2026-12-02: replayed over 25 recorded reads, every verdict kept)."""
    for pairs in range(MIN_JUDGED_PAIRS, len(ratios) + 1):
        p_value = rise_p_value([(1.0 + tolerance) / ratio for ratio in ratios[:pairs]])
        if p_value is not None and p_value < SIGNIFICANCE:
            return pairs
    return None


def rose_beyond(figure: PairedCost, tolerance: float | None) -> bool:
    """Whether a read's figure lies beyond `tolerance` with pairs enough to judge it, significant or not: such a
    read is read once more (check_paired_cost_twice)."""
    return tolerance is not None and figure.p_value is not None and figure.change > tolerance


def check_paired_cost(figure: PairedCost, tolerance: float | None) -> CostCheck:
    """The change's cost against REF's: a regression where it rose beyond `tolerance` batch by batch and
    significantly (p < SIGNIFICANCE); without a tolerance it is reported, never judged; with too few pairs for a
    p-value it is not judged."""
    if tolerance is not None and figure.p_value is None:
        return CostCheck(
            CostStatus.NOT_COMPARED,
            figure.change,
            tolerance=tolerance,
            reason=f"not judged: {figure.pairs} pairs of batches, fewer than the {MIN_JUDGED_PAIRS} a p-value needs",
            figure=PAIRED_FIGURE,
        )
    rose = (
        tolerance is not None
        and figure.change > tolerance
        and figure.p_value is not None
        and figure.p_value < SIGNIFICANCE
    )
    return CostCheck(
        CostStatus.REGRESSION if rose else CostStatus.PASS,
        figure.change,
        tolerance=tolerance,
        p_value=figure.p_value,
        figure=PAIRED_FIGURE,
    )


def check_paired_cost_twice(first: PairedCost, second: PairedCost, tolerance: float) -> CostCheck:
    """Two reads of one change, the second with the other side asked first, where the first rose beyond
    `tolerance` (rose_beyond): a regression only where the second rose beyond it too and both reads' pairs
    together rose significantly (rise_p_value over all their ratios) -- a read leans as a whole, so two reads
    must agree (docs/lab-notes/capacity.md, 2026-12-03), while a rise that twelve pairs of a bursty hour left
    just short of significance is judged on twice the pairs. The smaller rise is the figure. Where the second
    read did not rise beyond the tolerance, it decides as one read would (check_paired_cost)."""
    if not second.change > tolerance:
        return check_paired_cost(second, tolerance)
    p_value = rise_p_value(first.ratios + second.ratios)
    rose = p_value is not None and p_value < SIGNIFICANCE
    return CostCheck(
        CostStatus.REGRESSION if rose else CostStatus.PASS,
        min(first.change, second.change),
        tolerance=tolerance,
        p_value=p_value,
        figure=PAIRED_FIGURE,
    )
