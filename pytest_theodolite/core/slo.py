"""Service-level-objective checks over recorded series: pure functions, no broker, no Spark.

A sub-experiment (load l, resources r) is judged by a set of SLOs; each check returns an `SloVerdict`. The
lag-trend SLO is Theodolite's: fit a line to the total consumer lag after the warm-up and pass iff its slope
(records/s) is below a threshold (estimators.py). The event-time-latency trend, generator validity, bounds on
malformed records and on records dropped as late, and a micro-batch duration bound complete the set;
evaluation.py combines the verdicts into one outcome.

Four outcomes, not two: a sub-experiment whose generator did not produce the load is INVALID (it says nothing
about the system under test), one whose query/broker/executor died is ERRORED. Neither is ever a pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

from pytest_theodolite.core.estimators import (
    DEFAULT_CONFIDENCE,
    SlopeMethod,
    SlopeThreshold,
    TimeSeries,
    lag_trend_estimate,
    trend_slope,
)
from pytest_theodolite.core.outcomes import Outcome

# Theodolite's defaults (its slo-checker): 60 s warm-up, 2000 records/s.
DEFAULT_WARMUP_S = 60.0
DEFAULT_LAG_TREND_THRESHOLD = 2000.0
DEFAULT_GENERATOR_MIN_FRACTION = 0.98

# Names of the verdicts, used as keys when repetitions are combined and when results are written.
LAG_TREND = "lag-trend"
LATENCY_TREND = "event-time-latency-trend"
GENERATOR_RATE = "generator-rate"
MALFORMED_RECORDS = "malformed-records"
BATCH_DURATION = "batch-duration"
LATE_RECORDS = "late-records"

# SLOs whose per-repetition values are slopes; over repetitions their median decides (as in Theodolite).
TREND_SLOS: frozenset[str] = frozenset({LAG_TREND, LATENCY_TREND})


@dataclass(frozen=True)
class SloVerdict:
    """One SLO's verdict: `value` compared with `threshold` (units depend on the SLO), `detail` says why."""

    name: str
    outcome: Outcome
    value: float | None
    threshold: float | None
    detail: str = ""
    #: confidence interval of `value` (trend SLOs), None where none was computed
    low: float | None = None
    high: float | None = None

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.PASS

    def to_dict(self) -> dict[str, Any]:
        as_dict = asdict(self)
        as_dict["outcome"] = self.outcome.value
        # JSON has no inf/nan; write them as null and keep the reason in detail.
        for key in ("value", "threshold", "low", "high"):
            if as_dict[key] is not None and not math.isfinite(as_dict[key]):
                as_dict[key] = None
        if as_dict["low"] is None and as_dict["high"] is None:
            del as_dict["low"], as_dict["high"]
        return as_dict

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SloVerdict:
        return cls(
            name=str(data["name"]),
            outcome=Outcome(data["outcome"]),
            value=None if data.get("value") is None else float(data["value"]),
            threshold=None if data.get("threshold") is None else float(data["threshold"]),
            detail=str(data.get("detail", "")),
            low=None if data.get("low") is None else float(data["low"]),
            high=None if data.get("high") is None else float(data["high"]),
        )


# ------------------------------------------------------------------------------------------------------------
# Slopes
# ------------------------------------------------------------------------------------------------------------


# ------------------------------------------------------------------------------------------------------------
# Single SLO checks
# ------------------------------------------------------------------------------------------------------------


def errored_verdict(name: str, reason: str) -> SloVerdict:
    """A verdict for an SLO that could not be evaluated because the run or its measurement broke."""
    return SloVerdict(name, Outcome.ERRORED, None, None, reason)


def _trend_verdict(name: str, slope: float, threshold: float, unit: str, method: str) -> SloVerdict:
    outcome = Outcome.PASS if slope < threshold else Outcome.FAIL
    relation = "<" if outcome is Outcome.PASS else ">="
    return SloVerdict(
        name, outcome, slope, threshold, f"{method} slope {slope:.6g} {relation} {threshold:.6g} {unit}"
    )


def check_lag_trend(
    lag: TimeSeries,
    *,
    warmup_s: float = DEFAULT_WARMUP_S,
    threshold: SlopeThreshold = SlopeThreshold(absolute=DEFAULT_LAG_TREND_THRESHOLD),
    target_rate: float | None = None,
    method: SlopeMethod = "ols",
    confidence: float = DEFAULT_CONFIDENCE,
    batch_ids: TimeSeries | None = None,
    batch_ends: TimeSeries | None = None,
) -> SloVerdict:
    """Lag-trend SLO: PASS iff the lag slope after the warm-up is below the threshold (records/s).

    The verdict carries the slope's confidence interval (`low`, `high`) and says how certain it is. A series
    too short to fit is a broken measurement, so ERRORED (with the reason), never a pass.
    """
    threshold_rps = threshold.for_load(target_rate)  # a wrong call raises: that is a bug, not a measurement
    try:
        estimate = lag_trend_estimate(
            lag,
            warmup_s=warmup_s,
            method=method,
            confidence=confidence,
            batch_ids=batch_ids,
            batch_ends=batch_ends,
            rate=target_rate,
        )
    except ValueError as error:
        return SloVerdict(LAG_TREND, Outcome.ERRORED, None, threshold_rps, str(error))
    outcome = Outcome.PASS if estimate.slope < threshold_rps else Outcome.FAIL
    return SloVerdict(
        LAG_TREND,
        outcome,
        estimate.slope,
        threshold_rps,
        estimate.describe(threshold_rps, "records/s"),
        estimate.low,
        estimate.high,
    )


def check_latency_trend(
    event_time_latency: TimeSeries,
    *,
    threshold: float,
    warmup_s: float = DEFAULT_WARMUP_S,
    method: SlopeMethod = "ols",
) -> SloVerdict:
    """Event-time-latency trend (Theodolite's second SLO): samples are (processing time s, latency s).

    PASS iff the latency grows by less than `threshold` seconds per second after the warm-up.
    """
    method = "ols" if method == "batch-aligned" else method  # latency samples need no batch alignment
    try:
        slope = trend_slope(
            event_time_latency.timestamps_s, event_time_latency.values, warmup_s, method, "event-time latency"
        )
    except ValueError as error:
        return SloVerdict(LATENCY_TREND, Outcome.ERRORED, None, threshold, str(error))
    return _trend_verdict(LATENCY_TREND, slope, threshold, "s/s", method)


def check_generator_rate(
    achieved_rate: TimeSeries,
    target_rate: float,
    *,
    warmup_s: float = DEFAULT_WARMUP_S,
    min_fraction: float = DEFAULT_GENERATOR_MIN_FRACTION,
) -> SloVerdict:
    """Generator validity: PASS iff the mean achieved rate after the warm-up is >= min_fraction x target.

    Falling short makes the sub-experiment INVALID (the load was not produced), never FAIL. No rate sample
    after the warm-up means the measurement broke: ERRORED.
    """
    if not target_rate > 0:
        raise ValueError(f"target rate must be > 0 records/s, got {target_rate!r}")
    if not 0 < min_fraction <= 1:
        raise ValueError(f"min_fraction must be in (0, 1], got {min_fraction!r}")
    required = min_fraction * target_rate
    t = achieved_rate.timestamps_s
    if len(achieved_rate) == 0:
        return SloVerdict(GENERATOR_RATE, Outcome.ERRORED, None, required, "no achieved-rate sample recorded")
    after = achieved_rate.values[(t - t.min()) >= warmup_s]
    if after.size == 0 or not np.isfinite(after).all():
        return SloVerdict(
            GENERATOR_RATE,
            Outcome.ERRORED,
            None,
            required,
            f"no usable achieved-rate sample after a {warmup_s:g} s warm-up:"
            " run longer or shorten the warm-up",
        )
    mean_rate = float(after.mean())
    if mean_rate >= required:
        return SloVerdict(
            GENERATOR_RATE,
            Outcome.PASS,
            mean_rate,
            required,
            f"generator achieved {mean_rate:.6g} of {target_rate:.6g} records/s (>= {min_fraction:.0%})",
        )
    return SloVerdict(
        GENERATOR_RATE,
        Outcome.INVALID,
        mean_rate,
        required,
        f"generator achieved only {mean_rate:.6g} of {target_rate:.6g} records/s (< {min_fraction:.0%}):"
        " the load was not produced, so this sub-experiment says nothing about the system under test",
    )


def check_malformed_records(
    malformed: int,
    total: int,
    *,
    max_count: int | None = None,
    max_fraction: float | None = None,
) -> SloVerdict:
    """Dropped/malformed records bound: PASS iff malformed <= bound (absolute count or fraction of total)."""
    if (max_count is None) == (max_fraction is None):
        raise ValueError("give exactly one of max_count= or max_fraction= for the malformed-records bound")
    if malformed < 0 or total < 0:
        raise ValueError(f"record counts must be >= 0, got malformed={malformed}, total={total}")
    bound = float(max_count) if max_count is not None else float(max_fraction) * total  # type: ignore[arg-type]
    outcome = Outcome.PASS if malformed <= bound else Outcome.FAIL
    relation = "<=" if outcome is Outcome.PASS else ">"
    return SloVerdict(
        MALFORMED_RECORDS,
        outcome,
        float(malformed),
        bound,
        f"{malformed} malformed of {total} records {relation} bound {bound:g}",
    )


def batch_duration_interval(
    durations_s: Sequence[float], confidence: float = DEFAULT_CONFIDENCE
) -> tuple[float, float] | None:
    """Confidence interval of the median micro-batch duration (s) from finished batches' durations, or None
    for fewer than 2: Student's t over the logarithms (a batch time is a sum of positive delays, right-skewed;
    the log-normal's median is exp of the logs' mean). It weighs how far the batches are from a bound, which a
    sign test over the few batches of a measurement cannot (5 of 5 batches at 2.5x the bound: p 0.03)."""
    logs = np.log(np.asarray([d for d in durations_s if d > 0], dtype=float))
    if logs.size < 2:
        return None
    half = float(stats.t.ppf(0.5 + confidence / 2, logs.size - 1)) * float(np.std(logs, ddof=1))
    half /= math.sqrt(logs.size)
    centre = float(np.mean(logs))
    return math.exp(centre - half), math.exp(centre + half)


def batch_bound_side(low: float, high: float, max_s: float) -> Outcome | None:
    """The median batch's interval against the batch-duration bound: PASS at or below it, FAIL wholly above,
    None across it (the check's own relation: a median equal to the bound passes)."""
    if high <= max_s:
        return Outcome.PASS
    if low > max_s:
        return Outcome.FAIL
    return None


def finished_batch_durations_s(
    batch_duration_ms: TimeSeries, batch_ids: TimeSeries, from_s: float
) -> list[float]:
    """Each finished micro-batch's duration (s), from samples at or after `from_s`: the batch-duration series
    holds the longer of the last finished batch and the running one, so the first sample that names a new
    last-finished batch id holds that batch's duration (the next one has barely begun)."""
    at = dict(zip(batch_duration_ms.timestamps_s.tolist(), batch_duration_ms.values.tolist(), strict=True))
    durations, seen = [], set()
    for t, batch_id in zip(batch_ids.timestamps_s.tolist(), batch_ids.values.tolist(), strict=True):
        ms = at.get(t)
        if t >= from_s and batch_id not in seen and ms is not None and math.isfinite(ms):
            seen.add(batch_id)
            durations.append(ms / 1000.0)
    return durations[1:]  # the first id seen finished before `from_s` or straddles it


def check_batch_duration(
    batch_duration_ms: TimeSeries,
    *,
    max_s: float,
    warmup_s: float,
    batch_ids: TimeSeries | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
) -> SloVerdict:
    """Micro-batch latency bound: PASS iff the median sampled batch duration after the warm-up is <= max_s.
    With the batch ids (sampled with the durations), the verdict carries the median's interval over the
    finished batches (`batch_duration_interval`): certain where it lies on the verdict's side of the bound.

    Why beside the lag trend: a micro-batch engine takes all pending input into its next batch, so when it
    falls behind its batches grow and amortise more overhead. The lag then saws up and down with a few large
    teeth instead of growing steadily, and a short measurement can fit any slope to them; the batch duration
    (sampled each second as the longer of the last finished and the running batch) rises at once.
    """
    if max_s <= 0:
        raise ValueError(f"the batch-duration bound must be positive, got {max_s} s")
    t = np.asarray(batch_duration_ms.timestamps_s, dtype=float)
    v = np.asarray(batch_duration_ms.values, dtype=float)
    kept = v[t >= t[0] + warmup_s] if len(t) else v
    if len(kept) == 0:
        return SloVerdict(
            BATCH_DURATION,
            Outcome.FAIL,
            float("inf"),
            max_s,
            "no micro-batch duration was sampled after the warm-up",
        )
    median_s = float(np.median(kept)) / 1000.0
    outcome = Outcome.PASS if median_s <= max_s else Outcome.FAIL
    relation = "<=" if outcome is Outcome.PASS else ">"
    interval = None
    if batch_ids is not None and len(t):
        interval = batch_duration_interval(
            finished_batch_durations_s(batch_duration_ms, batch_ids, t[0] + warmup_s), confidence
        )
    shown = "" if interval is None else f" [{interval[0]:.2f}, {interval[1]:.2f}]"
    return SloVerdict(
        BATCH_DURATION,
        outcome,
        median_s,
        max_s,
        f"median micro-batch duration {median_s:.2f} s{shown} {relation} {max_s:g} s",
        *(interval or (None, None)),
    )


def check_late_records(late_rows: TimeSeries, *, max_rate: float, from_s: float, to_s: float) -> SloVerdict:
    """Records dropped as late: PASS iff the input rows dropped as older than the watermark (Spark's
    ``numRowsDroppedByWatermark`` plus the job's own ``late_rows`` count, one value per micro-batch at the
    batch's end: monitor.late_rows_per_batch) in the measured window (`from_s`, `to_s`] come to at most
    `max_rate` per second of it.

    Why beside the lag trend: a micro-batch engine that falls behind stretches its batches, and its lag can stay
    bounded while the watermark moves on by whole batches; what arrives behind it -- UC4's results, fed back one
    level of the hierarchy per micro-batch -- is dropped and never shows in the lag. Theodolite judges the same
    with its dropped-records SLO (the rate of late records a Kafka Streams or Flink job dropped, at most 100/s in
    its benchmark definitions); here the rate is the mean over the measured window, not the peak of 30 s rates.
    """
    if not max_rate >= 0 or not math.isfinite(max_rate):
        raise ValueError(f"the late-records bound must be a finite rate >= 0 records/s, got {max_rate}")
    if not to_s > from_s:
        return SloVerdict(
            LATE_RECORDS,
            Outcome.FAIL,
            None,
            max_rate,
            "no measured window to count late records in (the run ended before its warm-up was over)",
        )
    t = np.asarray(late_rows.timestamps_s, dtype=float)
    dropped = float(np.asarray(late_rows.values, dtype=float)[(t > from_s) & (t <= to_s)].sum())
    rate = dropped / (to_s - from_s)
    outcome = Outcome.PASS if rate <= max_rate else Outcome.FAIL
    relation = "<=" if outcome is Outcome.PASS else ">"
    return SloVerdict(
        LATE_RECORDS,
        outcome,
        rate,
        max_rate,
        f"{dropped:.0f} records dropped as late in {to_s - from_s:.0f} s: {rate:.3g}/s {relation} {max_rate:g}/s",
    )


# ------------------------------------------------------------------------------------------------------------
# Combining
# ------------------------------------------------------------------------------------------------------------


# ------------------------------------------------------------------------------------------------------------
# One repetition from its recorded series (shared by the live runner and the offline `analyse`)
# ------------------------------------------------------------------------------------------------------------
