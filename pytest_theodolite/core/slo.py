"""Service-level-objective checks over recorded series: pure functions, no broker, no Spark.

A sub-experiment (load l, resources r) is judged by a set of SLOs; each check returns an `SloVerdict`. The
lag-trend SLO is Theodolite's (seed 001, method 2.1): fit a line to the total consumer lag after the warm-up
and pass iff its slope (records/s) is below a threshold. Event-time-latency trend (method 2.2), generator
validity, bounds on malformed records and on records dropped as late, and a micro-batch duration bound complete
the set. `combine_verdicts` and `combine_repetitions` turn
many verdicts into one outcome.

Four outcomes, not two: a sub-experiment whose generator did not produce the load is INVALID (it says nothing
about the system under test), one whose query/broker/executor died is ERRORED. Neither is ever a pass.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
from scipy import stats

from pytest_theodolite.core.outcomes import Outcome

SlopeMethod = Literal["ols", "theil-sen", "batch-aligned"]
#: "batch-aligned": OLS over the first sample after each finished micro-batch (see `batch_aligned`)
SLOPE_METHODS: tuple[str, ...] = ("ols", "theil-sen", "batch-aligned")
DEFAULT_CONFIDENCE = 0.95

# Theodolite's defaults (seed 001/002 and its slo-checker): 60 s warm-up, 2000 records/s.
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


@dataclass(frozen=True)
class TimeSeries:
    """Samples of one quantity: `timestamps_s` in epoch seconds (float), `values` of the same length."""

    timestamps_s: np.ndarray
    values: np.ndarray

    @classmethod
    def of(
        cls, timestamps_s: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray
    ) -> TimeSeries:
        return cls(np.asarray(timestamps_s, dtype=float), np.asarray(values, dtype=float))

    def __len__(self) -> int:
        return int(self.timestamps_s.shape[0])


@dataclass(frozen=True)
class SlopeThreshold:
    """A trend threshold, absolute (records/s) or relative to the target load rate (e.g. 0.01 x records/s)."""

    absolute: float | None = None
    relative_to_load: float | None = None

    def __post_init__(self) -> None:
        if (self.absolute is None) == (self.relative_to_load is None):
            raise ValueError("give exactly one of absolute= or relative_to_load= for a slope threshold")
        if self.relative_to_load is not None and self.relative_to_load <= 0:
            raise ValueError(f"relative threshold must be > 0, got {self.relative_to_load}")

    def for_load(self, target_rate: float | None) -> float:
        """The threshold in records/s for a sub-experiment whose generator targets `target_rate` records/s."""
        if self.absolute is not None:
            return float(self.absolute)
        if target_rate is None or target_rate <= 0:
            raise ValueError(
                f"a relative threshold ({self.relative_to_load} x load) needs the target rate in records/s,"
                f" got {target_rate!r}: pass target_rate or use an absolute threshold"
            )
        return float(self.relative_to_load or 0.0) * float(target_rate)

    def describe(self) -> str:
        if self.absolute is not None:
            return f"{self.absolute:g} records/s"
        return f"{self.relative_to_load:g} x load"


# ------------------------------------------------------------------------------------------------------------
# Slopes
# ------------------------------------------------------------------------------------------------------------


def _samples_after_warmup(
    timestamps_s: Sequence[float] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    warmup_s: float,
    series_name: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Validate a series and keep the samples at or after first timestamp + warm-up (as Theodolite does)."""
    t = np.asarray(timestamps_s, dtype=float).ravel()
    y = np.asarray(values, dtype=float).ravel()
    if t.shape != y.shape:
        raise ValueError(
            f"{series_name}: {t.size} timestamps but {y.size} values: the series must pair every timestamp"
            " with one value"
        )
    if t.size == 0:
        raise ValueError(f"{series_name}: the series is empty: nothing was sampled (did the monitor run?)")
    if warmup_s < 0 or not math.isfinite(warmup_s):
        raise ValueError(f"{series_name}: warm-up must be a finite number of seconds >= 0, got {warmup_s}")
    bad = ~(np.isfinite(t) & np.isfinite(y))
    if bad.any():
        first_bad = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{series_name}: sample {first_bad} (timestamp {t[first_bad]!r}, value {y[first_bad]!r}) is not a"
            " finite number: drop or re-record missing samples"
        )
    order = np.argsort(t, kind="stable")  # tolerate out-of-order rows; the fit does not care about order
    t, y = t[order], y[order]
    keep = (t - t[0]) >= warmup_s
    t, y = t[keep], y[keep]
    if t.size < 2:
        got = "no sample" if t.size == 0 else "only 1 sample"
        raise ValueError(
            f"{series_name}: {got} after a {warmup_s:g} s warm-up ({int(keep.size)} in total):"
            " run longer or shorten the warm-up"
        )
    if t[-1] == t[0]:
        raise ValueError(
            f"{series_name}: all {t.size} samples after the warm-up share one timestamp ({t[0]:g}), so no"
            " trend can be fitted: sample on a clock (timestamps in seconds) over a longer run"
        )
    return t, y


def ols_slope(t: np.ndarray, y: np.ndarray) -> float:
    """Ordinary least-squares slope, as sklearn's LinearRegression computes it (intercept fitted)."""
    # Centre the epoch-second timestamps first: squaring ~1.7e9 would lose precision.
    tc = t - t.mean()
    return float(np.dot(tc, y - y.mean()) / np.dot(tc, tc))


def theil_sen_slope(t: np.ndarray, y: np.ndarray) -> float:
    """Theil-Sen slope: median of the slopes of all pairs with distinct timestamps (robust to outliers)."""
    pair_slopes = []
    for i in range(t.size - 1):
        dt = t[i + 1 :] - t[i]
        distinct = dt != 0
        pair_slopes.append((y[i + 1 :][distinct] - y[i]) / dt[distinct])
    return float(np.median(np.concatenate(pair_slopes)))


@dataclass(frozen=True)
class SlopeEstimate:
    """A fitted trend with its uncertainty: `slope` and its two-sided `confidence` interval [low, high]."""

    slope: float
    low: float
    high: float
    stderr: float
    points: int
    confidence: float
    method: str

    def side_of(self, threshold: float) -> Outcome | None:
        """PASS or FAIL once the whole interval lies on one side of the threshold; None while it straddles it."""
        return trend_side(self.low, self.high, threshold)

    def certainty(self, threshold: float) -> float:
        """How sure the point verdict is: the one-sided probability (Student's t, points - 2 degrees of freedom)
        that the true slope lies on the same side of `threshold` as the estimate. 0.5 means a coin toss."""
        if self.points < 3 or not self.stderr > 0:
            return 1.0 if self.points >= 3 and self.slope != threshold and self.stderr == 0 else 0.5
        return float(stats.t.cdf(abs(self.slope - threshold) / self.stderr, self.points - 2))

    def describe(self, threshold: float, unit: str) -> str:
        relation = "<" if self.slope < threshold else ">="
        return (
            f"{self.method} slope {self.slope:.6g} {relation} {threshold:.6g} {unit} "
            f"({self.confidence:.0%} interval [{self.low:.6g}, {self.high:.6g}] over {self.points} points, "
            f"certainty {self.certainty(threshold):.1%})"
        )


def batch_aligned(
    lag: TimeSeries, batch_ids: TimeSeries, batch_ends: TimeSeries | None = None, rate: float | None = None
) -> TimeSeries:
    """One lag point per finished micro-batch: the lag just after the batch committed.

    Why: a micro-batch engine's lag saws with the batch period -- it grows while a batch runs and drops when
    the batch commits. Points at one phase of that saw-tooth leave the trend without the teeth, so a line fitted
    to them has nearly independent residuals and an honest confidence interval.

    `batch_ids` holds, at the lag's timestamps, the id of the last finished batch (samples without one are
    skipped); the first sample after an id changes is kept. A sample comes up to one sampling interval after
    the commit, and when the batch period is near a multiple of that interval the delay drifts slowly and would
    read as a trend; with `batch_ends` (epoch seconds each batch finished, at the same timestamps) and the
    offered `rate` (records/s), each point is moved back to the commit: (end, lag - rate x (sample - end))."""
    ids = dict(zip(batch_ids.timestamps_s.tolist(), batch_ids.values.tolist(), strict=True))
    ends = (
        {}
        if batch_ends is None or rate is None
        else dict(zip(batch_ends.timestamps_s.tolist(), batch_ends.values.tolist(), strict=True))
    )
    kept_t, kept_y, previous = [], [], None
    for t, y in zip(lag.timestamps_s.tolist(), lag.values.tolist(), strict=True):
        batch = ids.get(t)
        if batch is None or not math.isfinite(batch) or batch == previous:
            continue
        previous = batch
        end = ends.get(t)
        if end is not None and math.isfinite(end) and 0 <= t - end < 3600:
            kept_t.append(end)
            kept_y.append(y - rate * (t - end))
        else:
            kept_t.append(t)
            kept_y.append(y)
    return TimeSeries.of(kept_t, kept_y)


def lag_trend_estimate(
    lag: TimeSeries,
    *,
    warmup_s: float,
    method: SlopeMethod = "ols",
    confidence: float = DEFAULT_CONFIDENCE,
    batch_ids: TimeSeries | None = None,
    batch_ends: TimeSeries | None = None,
    rate: float | None = None,
) -> SlopeEstimate:
    """The lag trend after the warm-up with its confidence interval (records/s).

    ``ols`` and ``theil-sen`` fit every sample (as Theodolite does); their intervals assume independent
    residuals, which a micro-batch saw-tooth violates, so they are optimistic there. ``batch-aligned`` fits one
    sample per finished batch (see `batch_aligned`) and needs `batch_ids` (`batch_ends` and the offered `rate`
    to place each point at its batch's commit). Raises ValueError as
    `lag_trend_slope` does, and for a missing batch-id series."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), e.g. 0.95, got {confidence!r}")
    if method not in SLOPE_METHODS:
        raise ValueError(f"unknown slope method {method!r}: use one of {', '.join(SLOPE_METHODS)}")
    if method == "batch-aligned":
        if batch_ids is None or len(batch_ids) == 0:
            raise ValueError(
                "lag: the batch-aligned slope needs the batch-id series (recorded since 0.2): "
                "use --method ols for older results"
            )
        origin = float(np.min(lag.timestamps_s)) if len(lag) else 0.0
        aligned = batch_aligned(lag, batch_ids, batch_ends, rate)
        # the warm-up counts from the first lag sample, not from the first finished batch
        t, y = _samples_after_warmup(
            aligned.timestamps_s,
            aligned.values,
            max(0.0, warmup_s - (float(aligned.timestamps_s.min()) - origin)) if len(aligned) else warmup_s,
            "lag (batch-aligned)",
        )
    else:
        t, y = _samples_after_warmup(lag.timestamps_s, lag.values, warmup_s, "lag")
    n = int(t.size)
    if method == "theil-sen":
        slope, _, low, high = stats.theilslopes(y, t - t.mean(), alpha=confidence)
        quantile = stats.t.ppf(0.5 + confidence / 2, n - 2) if n > 2 else math.inf
        stderr = (high - low) / (2 * quantile) if math.isfinite(quantile) else math.inf
        return SlopeEstimate(float(slope), float(low), float(high), float(stderr), n, confidence, method)
    slope = ols_slope(t, y)
    if n < 3:  # two points fit exactly: no residual, no interval
        return SlopeEstimate(slope, -math.inf, math.inf, math.inf, n, confidence, method)
    fit = stats.linregress(t - t.mean(), y)
    quantile = float(stats.t.ppf(0.5 + confidence / 2, n - 2))
    # points exactly on a line (e.g. a lag of 0 after every commit) leave no residual: an exact slope
    stderr = float(fit.stderr) if math.isfinite(fit.stderr) else 0.0
    return SlopeEstimate(
        slope, slope - quantile * stderr, slope + quantile * stderr, stderr, n, confidence, method
    )


def trend_slope(
    timestamps_s: Sequence[float] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    warmup_s: float,
    method: SlopeMethod = "ols",
    series_name: str = "series",
) -> float:
    """Slope (value units per second) of a line fitted to the samples after the warm-up."""
    if method not in ("ols", "theil-sen"):
        raise ValueError(
            f"unknown slope method {method!r} for a plain series: use ols or theil-sen "
            "(batch-aligned needs batch ids: lag_trend_estimate)"
        )
    t, y = _samples_after_warmup(timestamps_s, values, warmup_s, series_name)
    return ols_slope(t, y) if method == "ols" else theil_sen_slope(t, y)


def lag_trend_slope(
    timestamps_s: Sequence[float] | np.ndarray,
    lag: Sequence[float] | np.ndarray,
    warmup_s: float,
    method: SlopeMethod = "ols",
) -> float:
    """Theodolite's lag trend in records/s: drop samples before first timestamp + warm-up, fit a line.

    Raises ValueError (saying what to change) for an empty series, < 2 samples after the warm-up, a zero time
    span, non-finite samples or mismatched lengths.
    """
    return trend_slope(timestamps_s, lag, warmup_s, method, series_name="lag")


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
    """Event-time-latency trend (seed 001, method 2.2): samples are (processing time s, latency s).

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


def trend_side(low: float, high: float, threshold: float) -> Outcome | None:
    """A trend's interval against its threshold: PASS wholly below, FAIL at or above, None across it."""
    if high < threshold:
        return Outcome.PASS
    if low >= threshold:
        return Outcome.FAIL
    return None


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
    thresholds = {v.threshold for v in repetition_verdicts}
    if len(thresholds) != 1 or None in thresholds:
        raise ValueError(
            f"{name}: repetitions were judged against different thresholds {sorted(map(str, thresholds))}"
        )
    threshold = float(repetition_verdicts[0].threshold)  # type: ignore[arg-type]
    # a FAIL without a slope (no steady state, falling behind, too few batches): a lag that grows without bound
    slopes = [math.inf if v.value is None else float(v.value) for v in repetition_verdicts]
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


# ------------------------------------------------------------------------------------------------------------
# One repetition from its recorded series (shared by the live runner and the offline `analyse`)
# ------------------------------------------------------------------------------------------------------------


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
) -> tuple[SloVerdict, ...]:
    """All SLO verdicts of one repetition from its recorded series.

    `warmup_s` is the warm-up this repetition really used (an adaptive warm-up ends when the job settled);
    None: the settings' fixed warm-up. `not_settled` is the reason a repetition never reached steady state
    within its bound: its lag trend FAILs with that reason instead of being fitted.

    The lag trend is always checked. Generator validity is checked when the achieved-rate series and a target
    rate are given; latency trend, malformed and late-records bounds when their series/counts and settings are
    present (a job without stateful operators drops nothing as late and records no late-rows series).
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
    if settings.max_batch_duration_s is not None and batch_duration is not None:
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
