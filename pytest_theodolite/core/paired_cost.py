"""Two revisions' cost per record, read over the same minutes: batch k of the change against batch k of REF.

Where both sides read a backlog in equal capped micro-batches at the same time, each on its own instance, a
drift of the host or of the executors' warm-up falls on both, and the ratio of their k-th batches takes it out;
what is left is each instance's own batch-to-batch spread. The median of those ratios is the comparison's
figure (docs/lab-notes/capacity.md, 2026-11-29: unchanged code within +5.2 % in nine rounds, two extra hashes a
record +8.4 % or more in eight, by the tasks' executor CPU per record; the batches' wall time could not tell them
apart). Pure functions over data.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PairedCost:
    """The change's cost per record over REF's, batch by batch."""

    ref_median: float  # REF's median batch, per record (the figure's unit: seconds)
    change_median: float
    batch_ratio: float  # the median of the batch-by-batch ratios, change over REF
    pairs: int

    @property
    def change(self) -> float:
        """The change's relative difference (+0.10: 10 % dearer per record)."""
        return self.batch_ratio - 1.0

    def text(self, figure: str = "task CPU") -> str:
        return (
            f"{figure} per record, change over REF batch by batch: {self.change:+.1%} over {self.pairs} batches "
            f"(medians {self.ref_median * 1e6:.2f} and {self.change_median * 1e6:.2f} us)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "ref_median": self.ref_median,
            "change_median": self.change_median,
            "batch_ratio": self.batch_ratio,
            "pairs": self.pairs,
        }


def paired_cost(ref: Sequence[float], change: Sequence[float]) -> PairedCost:
    """Each side's measured batches as cost per record, in order -> the comparison; a longer side is paired only
    as far as the shorter goes. Raises ValueError where a side has no batch (say which)."""
    empty = [side for side, values in (("REF", ref), ("the change", change)) if not values]
    if empty:
        raise ValueError(f"{' and '.join(empty)} measured no full batch: nothing to pair")
    if any(value <= 0 for value in (*ref, *change)):
        raise ValueError("a batch's cost per record must be positive")
    ratios = [c / r for c, r in zip(change, ref, strict=False)]
    return PairedCost(
        statistics.median(ref), statistics.median(change), statistics.median(ratios), len(ratios)
    )
