"""One repetition judged from its recorded series under a gate's SLO settings, and verdicts combined: over
the SLOs of one repetition (all must hold) and over repetitions (the median slope decides, as in Theodolite)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pytest_theodolite.core.contention import HostUsage, check_instance_quota
from pytest_theodolite.core.estimators import (
    DEFAULT_CONFIDENCE,
    SLOPE_METHODS,
    SlopeMethod,
    SlopeThreshold,
    TimeSeries,
)
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.slo import (
    BATCH_DURATION,
    DEFAULT_GENERATOR_MIN_FRACTION,
    DEFAULT_LAG_TREND_THRESHOLD,
    DEFAULT_WARMUP_S,
    LAG_TREND,
    TREND_SLOS,
    SloVerdict,
    check_batch_duration,
    check_generator_rate,
    check_lag_trend,
    check_late_records,
    check_latency_trend,
    check_malformed_records,
    errored_verdict,
)


def combine_outcomes(outcomes: Collection[Outcome]) -> Outcome:
    """All must hold: any ERRORED -> ERRORED, else any INVALID -> INVALID, else all PASS -> PASS, else FAIL"""
    if not outcomes:
        raise ValueError(
            "no SLO verdict to combine: at least one SLO must be checked (an empty set is not a pass)"
        )
    for dominant in (Outcome.ERRORED, Outcome.INVALID, Outcome.FAIL):
        if dominant in outcomes:
            return dominant
    return Outcome.PASS


def combine_verdicts(verdicts: Sequence[SloVerdict]) -> Outcome:
    """The outcome of one repetition or sub-experiment: every SLO must hold (see `combine_outcomes`)."""
    return combine_outcomes([verdict.outcome for verdict in verdicts])


def median_trend_verdict(repetition_verdicts: Sequence[SloVerdict]) -> SloVerdict:
    """One trend SLO over repetitions: the median slope decides, as in Theodolite's slo-checker.

    Any ERRORED repetition -> ERRORED and any INVALID one -> INVALID: a median over a broken or load-less run
    would mix in a number that does not describe the system, so the sub-experiment is not judged at all.
    """
    if not repetition_verdicts:
        raise ValueError("no repetition to combine")
    name = repetition_verdicts[0].name
    if any(v.name != name for v in repetition_verdicts):
        raise ValueError(f"median over different SLOs: {sorted({v.name for v in repetition_verdicts})}")
    outcome = combine_outcomes(
        [v.outcome for v in repetition_verdicts if not v.outcome.is_measured] or [Outcome.PASS]
    )
    if outcome is not Outcome.PASS:  # an ERRORED or INVALID repetition
        broken = [i for i, v in enumerate(repetition_verdicts) if v.outcome is outcome]
        reasons = "; ".join(f"repetition {i}: {repetition_verdicts[i].detail}" for i in broken)
        return SloVerdict(name, outcome, None, repetition_verdicts[0].threshold, reasons)
    if len(repetition_verdicts) == 1:  # nothing to combine: keep its interval and detail
        return repetition_verdicts[0]
    thresholds = [v.threshold for v in repetition_verdicts]
    each_threshold = [float(t) for t in thresholds if t is not None]
    if len(each_threshold) < len(thresholds) or (len(set(each_threshold)) > 1 and min(each_threshold) <= 0):
        raise ValueError(
            f"{name}: repetitions were judged against thresholds {thresholds}: a median needs one threshold, or "
            "positive ones to divide by"
        )
    threshold = each_threshold[0]
    # a FAIL without a slope (no steady state, falling behind, too few batches): a lag that grows without bound
    slopes = [math.inf if v.value is None else float(v.value) for v in repetition_verdicts]
    if len(set(each_threshold)) > 1:
        return _median_relative_verdict(name, slopes, each_threshold)
    median = statistics.median(
        slopes
    )  # even count: mean of the middle two, like statistics.median in Theodolite
    outcome = Outcome.PASS if median < threshold else Outcome.FAIL
    relation = "<" if outcome is Outcome.PASS else ">="
    slopes_text = ", ".join(f"{s:.6g}" for s in slopes)
    return SloVerdict(
        name,
        outcome,
        median,
        threshold,
        f"median of {len(slopes)} slopes [{slopes_text}] = {median:.6g} {relation} {threshold:.6g}",
    )


def _median_relative_verdict(name: str, slopes: Sequence[float], thresholds: Sequence[float]) -> SloVerdict:
    """Repetitions offered different rates (a FAIL measured once more at a lower one) were each judged against
    its rate's threshold: the median of slope / threshold decides, shown against the first's threshold."""
    ratios = [slope / threshold for slope, threshold in zip(slopes, thresholds, strict=True)]
    median = statistics.median(ratios)
    outcome = Outcome.PASS if median < 1 else Outcome.FAIL
    relation = "<" if outcome is Outcome.PASS else ">="
    each = ", ".join(f"{s:.6g}/{t:.6g}" for s, t in zip(slopes, thresholds, strict=True))
    return SloVerdict(
        name,
        outcome,
        median * thresholds[0],
        thresholds[0],
        f"median of {len(slopes)} slopes over their rates' thresholds [{each}] = {median:.3g} {relation} 1",
    )


def combine_repetitions(
    per_repetition: Sequence[Sequence[SloVerdict]],
    *,
    median_slos: Collection[str] = TREND_SLOS,
) -> tuple[SloVerdict, ...]:
    """Combine the verdicts of the repetitions of one sub-experiment into one verdict per SLO.

    Trend SLOs (`median_slos`) use `median_trend_verdict`. Every other SLO must hold in every repetition: its
    outcome is `combine_outcomes` over the repetitions and its value is that of the worst repetition.
    An SLO missing from a repetition (e.g. the run died before it could be checked) counts as ERRORED there.
    """
    if not per_repetition:
        raise ValueError("no repetition to combine: run at least one repetition")
    names: list[str] = []
    for verdicts in per_repetition:
        for verdict in verdicts:
            if verdict.name not in names:
                names.append(verdict.name)
    combined = []
    for name in names:
        of_this = [
            next(
                (v for v in verdicts if v.name == name),
                errored_verdict(name, f"not checked in repetition {index}"),
            )
            for index, verdicts in enumerate(per_repetition)
        ]
        if name in median_slos:
            combined.append(median_trend_verdict(of_this))
            continue
        outcome = combine_outcomes([v.outcome for v in of_this])
        worst = next(v for v in of_this if v.outcome is outcome)
        detail = worst.detail if len(of_this) == 1 else f"worst of {len(of_this)} repetitions: {worst.detail}"
        combined.append(
            SloVerdict(name, outcome, worst.value, worst.threshold, detail, worst.low, worst.high)
        )
    return tuple(combined)


@dataclass(frozen=True)
class SloSettings:
    """Every knob of the SLO evaluation; written to the results JSON so `analyse` can re-apply it."""

    warmup_s: float = DEFAULT_WARMUP_S
    lag_trend_threshold: SlopeThreshold = field(
        default_factory=lambda: SlopeThreshold(absolute=DEFAULT_LAG_TREND_THRESHOLD)
    )
    slope_method: SlopeMethod = "ols"
    confidence: float = DEFAULT_CONFIDENCE  # of the lag slope's interval
    generator_min_fraction: float = DEFAULT_GENERATOR_MIN_FRACTION
    latency_trend_threshold: float | None = None  # s/s; None: the latency-trend SLO is not checked
    malformed_max_count: int | None = None  # at most one of the two malformed bounds; none: not checked
    malformed_max_fraction: float | None = None
    max_batch_duration_s: float | None = None  # None: the batch-duration SLO is not checked
    max_late_rate: float | None = (
        None  # records dropped as late per s; None: the late-records SLO is not checked
    )

    def __post_init__(self) -> None:
        if self.slope_method not in SLOPE_METHODS:
            raise ValueError(
                f"unknown slope method {self.slope_method!r}: use one of {', '.join(SLOPE_METHODS)}"
            )
        if self.malformed_max_count is not None and self.malformed_max_fraction is not None:
            raise ValueError("give at most one of malformed_max_count and malformed_max_fraction")
        if self.max_late_rate is not None and not (0 <= self.max_late_rate < math.inf):
            raise ValueError(
                f"max_late_rate {self.max_late_rate!r} is not a rate >= 0 of records dropped as late per second"
                " (0: none may be; leave it out not to check)"
            )

    def dilated(self, share: float) -> SloSettings:
        """These settings for a run offered `share` of each load's rate on a testbed slower than the one its
        bounds were set for (judge.comparison): a bound in seconds stretched by 1/share. In steady state a
        micro-batch holds what arrived during the one before: with a per-batch cost c and load over capacity
        rho there, a testbed uniformly at speed s runs batches of d = c/s + (share/s) rho d, the other host
        d' = c / (1 - rho) (up to its trigger interval, where batches wait for one). Where s <= share (the run
        that judges a pass, offered the fastest speed the calibration allows), d' <= s d: a batch within the
        stretched bound is within the bound there (or within its trigger interval); where s >= share (the run
        that is to show a regression, at the slowest) d' >= s d: one beyond it is beyond it there. The same
        assumption of a uniform slowdown the offered rate makes for the lag trend, whose threshold follows that
        rate already (SlopeThreshold.for_load)."""
        if share == 1 or self.max_batch_duration_s is None:
            return self
        return replace(self, max_batch_duration_s=self.max_batch_duration_s / share)

    def to_dict(self) -> dict[str, Any]:
        return {
            "warmup_s": self.warmup_s,
            "lag_trend_threshold": self.lag_trend_threshold.absolute,
            "lag_trend_threshold_relative": self.lag_trend_threshold.relative_to_load,
            "slope_method": self.slope_method,
            "confidence": self.confidence,
            "generator_min_fraction": self.generator_min_fraction,
            "latency_trend_threshold": self.latency_trend_threshold,
            "malformed_max_count": self.malformed_max_count,
            "malformed_max_fraction": self.malformed_max_fraction,
            "max_batch_duration_s": self.max_batch_duration_s,
            "max_late_rate": self.max_late_rate,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SloSettings:
        relative = data.get("lag_trend_threshold_relative")
        absolute = data.get("lag_trend_threshold")
        if relative is None and absolute is None:
            absolute = DEFAULT_LAG_TREND_THRESHOLD
        return cls(
            warmup_s=float(data.get("warmup_s", DEFAULT_WARMUP_S)),
            lag_trend_threshold=SlopeThreshold(
                absolute=None if relative is not None else float(absolute),  # type: ignore[arg-type]
                relative_to_load=None if relative is None else float(relative),
            ),
            slope_method=data.get("slope_method", "ols"),
            confidence=float(data.get("confidence", DEFAULT_CONFIDENCE)),
            generator_min_fraction=float(data.get("generator_min_fraction", DEFAULT_GENERATOR_MIN_FRACTION)),
            latency_trend_threshold=data.get("latency_trend_threshold"),
            malformed_max_count=data.get("malformed_max_count"),
            malformed_max_fraction=data.get("malformed_max_fraction"),
            max_batch_duration_s=data.get("max_batch_duration_s"),
            max_late_rate=data.get("max_late_rate"),
        )


def evaluate_repetition(
    settings: SloSettings,
    *,
    lag: TimeSeries,
    target_rate: float | None,
    generator_rate: TimeSeries | None = None,
    event_time_latency: TimeSeries | None = None,
    records_total: int | None = None,
    records_malformed: int | None = None,
    batch_duration: TimeSeries | None = None,
    batch_ids: TimeSeries | None = None,
    batch_ends: TimeSeries | None = None,
    warmup_s: float | None = None,
    not_settled: str | None = None,
    late_rows: TimeSeries | None = None,
    host_usage: HostUsage | None = None,
    beyond_batch_bound: str | None = None,
) -> tuple[SloVerdict, ...]:
    """All SLO verdicts of one repetition from its recorded series.

    `warmup_s` is the warm-up this repetition really used (an adaptive warm-up ends when the job settled);
    None: the settings' fixed warm-up. `not_settled` is the reason a repetition never reached steady state
    within its bound: its lag trend FAILs with that reason instead of being fitted. `beyond_batch_bound` is the
    reason its batches lay beyond the batch bound for good (core.protocol, ``beyond-batch-bound``): the
    batch-duration SLO FAILs with it (the repetition ended before a median was measured in steady state).

    The lag trend is always checked. Generator validity is checked when the achieved-rate series and a target
    rate are given; latency trend, malformed and late-records bounds when their series/counts and settings are
    present (a job without stateful operators drops nothing as late and records no late-rows series). With
    the measurement window's `host_usage`, a lag-trend FAIL of instances the host starved of their CPU quota is
    INVALID (contention.check_instance_quota).
    """
    warmup = settings.warmup_s if warmup_s is None else warmup_s
    if not_settled is not None:
        # the run ended before any warm-up was over: the generator is judged on every sample it has
        warmup = 0.0 if warmup_s is None else warmup
        lag_verdict = SloVerdict(
            LAG_TREND, Outcome.FAIL, None, settings.lag_trend_threshold.for_load(target_rate), not_settled
        )
    else:
        lag_verdict = check_lag_trend(
            lag,
            warmup_s=warmup,
            threshold=settings.lag_trend_threshold,
            target_rate=target_rate,
            method=settings.slope_method,
            confidence=settings.confidence,
            batch_ids=batch_ids,
            batch_ends=batch_ends,
        )
    verdicts = [lag_verdict]
    if (
        host_usage is not None
        and (quota := check_instance_quota(host_usage, lag_verdict.outcome)) is not None
    ):
        verdicts.append(quota)
    if generator_rate is not None and target_rate is not None:
        verdicts.append(
            check_generator_rate(
                generator_rate,
                target_rate,
                warmup_s=warmup,
                min_fraction=settings.generator_min_fraction,
            )
        )
    if event_time_latency is not None and settings.latency_trend_threshold is not None:
        verdicts.append(
            check_latency_trend(
                event_time_latency,
                threshold=settings.latency_trend_threshold,
                warmup_s=warmup,
                method=settings.slope_method,
            )
        )
    if settings.max_batch_duration_s is not None and beyond_batch_bound is not None:
        verdicts.append(
            SloVerdict(BATCH_DURATION, Outcome.FAIL, None, settings.max_batch_duration_s, beyond_batch_bound)
        )
    elif settings.max_batch_duration_s is not None and batch_duration is not None:
        verdicts.append(
            check_batch_duration(
                batch_duration,
                max_s=settings.max_batch_duration_s,
                warmup_s=warmup,
                batch_ids=batch_ids,
                confidence=settings.confidence,
            )
        )
    if settings.max_late_rate is not None and late_rows is not None and len(lag):
        # the window the lag trend is judged over: from the first lag sample + the warm-up to the last one
        start = float(np.min(lag.timestamps_s))
        verdicts.append(
            check_late_records(
                late_rows,
                max_rate=settings.max_late_rate,
                from_s=start + warmup,
                to_s=float(np.max(lag.timestamps_s)),
            )
        )
    bounded = settings.malformed_max_count is not None or settings.malformed_max_fraction is not None
    if bounded and records_malformed is not None and records_total is not None:
        verdicts.append(
            check_malformed_records(
                records_malformed,
                records_total,
                max_count=settings.malformed_max_count,
                max_fraction=settings.malformed_max_fraction,
            )
        )
    return tuple(verdicts)
