"""The bounds of a repetition's measurement protocol, as a gate sets them and a run records them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MeasurementPlan:
    """How long each phase of a repetition may take (core/protocol.py describes the phases)."""

    warmup_s: float | None = None  # a fixed warm-up (Theodolite's protocol); None: until the job settled
    prime_unlimited: bool = True
    prime_batches: int = 3
    max_prime_s: float = 30.0
    settle_batches: int = 4
    settle_tolerance: float = 0.2
    #: the settling phase's bound, counted from the end of priming (up to twice that for few or long batches)
    max_warmup_s: float = 90.0
    min_duration_s: float = 20.0
    max_duration_s: float = 120.0
    #: how many of the newest batches the settling test judged steady the measurement begins with (0: it
    #: begins after them, at the sample that ended the warm-up; results recorded before 2026-12-03 did so)
    measure_settled_batches: int = 2
    #: points of the fit before an interval may stop the measurement. Student's t allows 3, but three batches
    #: whose durations change by equal steps lie on a line whatever comes next, and one degree of freedom then
    #: gives an interval of no width: a "certain" verdict on three batches (docs/lab-notes/protocol.md,
    #: 2026-12-04). Results recorded before kept 3.
    min_points: int = 4
    falling_behind_batches: int = 3  # 0: never stop early for growing batch durations
    #: settling: a lag that falls certainly under the CPU limit ends the repetition as a certain PASS (a job
    #: whose capacity lies below the load cannot shrink its lag; results recorded before 2026-12-04 waited)
    pass_on_falling_lag: bool = True
    #: with a batch bound, the last batches under the limit beyond it and not shortening end the repetition as a
    #: certain FAIL (an adaptive warm-up only; results recorded before 2026-12-06 measured on)
    fail_beyond_batch_bound: bool = True

    def __post_init__(self) -> None:
        problems = []
        if self.warmup_s is not None and not (math.isfinite(self.warmup_s) and self.warmup_s >= 0):
            problems.append(f"warm-up must be 'auto' or seconds >= 0, got {self.warmup_s}")
        if not 0 < self.min_duration_s <= self.max_duration_s:
            problems.append(
                f"need 0 < duration <= max duration, got {self.min_duration_s:g} s and "
                f"{self.max_duration_s:g} s"
            )
        if self.max_warmup_s <= 0 or self.max_prime_s < 0:
            problems.append(
                f"warm-up bounds must be positive, got max warm-up {self.max_warmup_s:g} s, "
                f"max priming {self.max_prime_s:g} s"
            )
        if (
            self.prime_batches < 1
            or self.settle_batches < 2
            or self.min_points < 3
            or self.falling_behind_batches in (1, 2)
            or self.falling_behind_batches < 0
            or not 0 <= self.measure_settled_batches <= self.settle_batches
        ):
            problems.append(
                "need prime_batches >= 1, settle_batches >= 2, min_points >= 3 and "
                "falling_behind_batches 0 or >= 3, and 0 <= measure_settled_batches <= settle_batches"
            )
        if not 0 <= self.settle_tolerance < 1:
            problems.append(f"settle tolerance must be in [0, 1), got {self.settle_tolerance}")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def adaptive(self) -> bool:
        return self.warmup_s is None

    @property
    def longest_s(self) -> float:
        """The longest a repetition may take by these rules: priming, the settling phase at its stretched bound
        (twice ``max_warmup_s``) and the measurement at ``max_duration_s`` -- twice over for an adaptive warm-up,
        whose measurement may go back to settling once, the bound counted anew."""
        if self.warmup_s is not None:
            return self.max_prime_s + self.warmup_s + self.max_duration_s
        return self.max_prime_s + 2 * (2 * self.max_warmup_s + self.max_duration_s)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MeasurementPlan:
        """The plan a run recorded; one recorded before ``measure_settled_batches`` measured after them, one
        recorded before ``pass_on_falling_lag`` waited for the batches to settle, and one recorded before
        ``fail_beyond_batch_bound`` measured batches beyond the bound on."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        older = {"measure_settled_batches": 0, "pass_on_falling_lag": False, "fail_beyond_batch_bound": False}
        return cls(**{**older, **known})


__all__ = ("MeasurementPlan",)
