"""Estimators over a recorded series: the samples after the warm-up, the lag trend's slope (OLS, Theil-Sen, or
one point per finished micro-batch) with its confidence interval, and the threshold it is compared with."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

from pytest_theodolite.core.outcomes import Outcome

SlopeMethod = Literal["ols", "theil-sen", "batch-aligned"]


#: "batch-aligned": OLS over the first sample after each finished micro-batch (see `batch_aligned`)
SLOPE_METHODS: tuple[str, ...] = ("ols", "theil-sen", "batch-aligned")


DEFAULT_CONFIDENCE = 0.95


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


def samples_after_warmup(
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
        t, y = samples_after_warmup(
            aligned.timestamps_s,
            aligned.values,
            max(0.0, warmup_s - (float(aligned.timestamps_s.min()) - origin)) if len(aligned) else warmup_s,
            "lag (batch-aligned)",
        )
    else:
        t, y = samples_after_warmup(lag.timestamps_s, lag.values, warmup_s, "lag")
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
    t, y = samples_after_warmup(timestamps_s, values, warmup_s, series_name)
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


def trend_side(low: float, high: float, threshold: float) -> Outcome | None:
    """A trend's interval against its threshold: PASS wholly below, FAIL at or above, None across it."""
    if high < threshold:
        return Outcome.PASS
    if low >= threshold:
        return Outcome.FAIL
    return None
