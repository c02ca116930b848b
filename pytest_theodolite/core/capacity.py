"""Capacity per instance count, measured directly: mu(r), the records/s r instances sustain.

A micro-batch engine with a per-batch cost c0 and a per-record cost 1/mu settles, under a constant load l < mu,
at batches of duration c0 / (1 - l/mu); at l >= mu its batches grow without bound. The lag-trend verdict at
(l, r) therefore asks l < mu(r), up to its threshold: with a slope threshold of a share s of the load, the
lag grows by about l - mu(r) records/s and the SLO holds while mu(r) > l (1 - s). One measurement of mu(r)
answers every load at once (docs/how-it-works.md, "Capacity").

mu(r) is read from a job that has more input than it can take: the generator offers more than the instances
process, and the job reads with ``maxOffsetsPerTrigger``, so every micro-batch has the same size (a backlog
would otherwise make batches larger than a constant load does, amortising the per-batch cost over more
records and overstating mu). The estimate is the records of the counted batches over the wall time from the
end of the batch before them to the end of the last one -- the gaps between batches are the driver's work and
count -- with a confidence interval of the ratio estimator over the batches' cycles; full batches whose
cycles still fall are left out first (``settled_start``). The measurement stops when
the interval is narrow enough (``CapacityRule``). A job that empties its backlog (its batches fall below the
cap) takes more than was offered: the offered rate is then a lower bound of its capacity.

Pure functions over data: no broker, no Spark.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy import stats

from pytest_theodolite.core.estimators import TimeSeries

#: the per-batch series a capacity measurement writes, timestamped by each batch's start
SERIES_CAPACITY_ROWS = "capacity-rows"
SERIES_CAPACITY_MS = "capacity-ms"
SERIES_CAPACITY_ID = "capacity-id"

#: a batch counts as full when it holds this share of the per-batch cap (Kafka's source splits the cap over the
#: partitions by their backlog and rounds, so a full batch can miss the cap by a few records)
FULL_SHARE = 0.95
#: the instances are saturated when batches run this share of the wall time (the rest: the driver between them)
BUSY_SHARE = 0.9


@dataclass(frozen=True)
class MicroBatch:
    """One finished micro-batch, from the query's progress."""

    batch_id: int
    start_s: float  # epoch seconds
    duration_s: float  # triggerExecution
    input_rows: int

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


@dataclass(frozen=True)
class CapacityRule:
    """When a capacity measurement is certain enough to stop, and which batches it counts."""

    #: batches of the limited instances discarded before counting (JIT, caches, the first state commits)
    settle_batches: int = 2
    min_batches: int = 5
    #: stop once the interval's half-width is at most this share of the estimate
    precision: float = 0.05
    confidence: float = 0.95

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CapacityRule:
        return cls(
            **{k: data[k] for k in ("settle_batches", "min_batches", "precision", "confidence") if k in data}
        )

    def __post_init__(self) -> None:
        if self.settle_batches < 0 or self.min_batches < 3:
            raise ValueError(
                f"need settle_batches >= 0 and min_batches >= 3, got {self.settle_batches} and {self.min_batches}"
            )
        if not 0 < self.precision < 1 or not 0.5 <= self.confidence < 1:
            raise ValueError(
                f"need precision in (0, 1) and confidence in [0.5, 1), got {self.precision} and {self.confidence}"
            )


#: a capacity phase with long micro-batches may run up to this many times its bound in seconds (phase_bound_s)
LONGEST_PHASE_FACTOR = 2.0


def batches_needed(rule: CapacityRule) -> int:
    """The batches a phase needs at the least: the rule's settling ones, the one that opens the window, and
    the rule's fewest counted."""
    return rule.settle_batches + 1 + rule.min_batches


def phase_bound_s(durations: Sequence[float], rule: CapacityRule, max_measure_s: float) -> float:
    """How long a capacity phase may measure, its batches so far taking `durations` seconds: `max_measure_s`,
    or where batches are long, the time of ``batches_needed`` of them at their median, up to
    LONGEST_PHASE_FACTOR times `max_measure_s`. An estimate's precision comes from its batches, not its
    seconds: within 60 s, 10-13 s batches left four, too few for any estimate (the click-stream example on a
    quarter core). The lag-trend warm-up stretches alike (core/protocol.py, ``warmup_bound_s``)."""
    if not durations:
        return max_measure_s
    in_batches = batches_needed(rule) * float(np.median(durations))
    return min(LONGEST_PHASE_FACTOR * max_measure_s, max(max_measure_s, in_batches))


@dataclass(frozen=True)
class CapacityEstimate:
    """mu(r) with its interval, from the batches counted."""

    instances: int
    records_per_s: float
    low: float
    high: float
    batches: int
    window_s: float
    #: False: the job emptied its backlog (batches below the cap): it takes at least ``records_per_s``
    saturated: bool
    batch_cap: int
    #: the estimate's standard error (records/s)
    standard_error: float = math.nan
    #: c0, the seconds a micro-batch costs whatever its size, where two batch sizes separated it
    per_batch_s: float | None = None

    @property
    def relative_half_width(self) -> float:
        if not self.records_per_s > 0 or not math.isfinite(self.high - self.low):
            return math.inf
        return (self.high - self.low) / 2 / self.records_per_s

    def certain(self, rule: CapacityRule) -> bool:
        """Narrow enough to stop: the rule's precision on at least its number of batches; a job that emptied
        its backlog is certain at once (it took all that was offered)."""
        if not self.saturated:
            return self.batches >= 2
        return self.batches >= rule.min_batches and self.relative_half_width <= rule.precision

    def text(self) -> str:
        if not self.saturated:
            return f">= {self.records_per_s:,.0f} records/s (not saturated: a lower bound)"
        return f"{self.records_per_s:,.0f} [{self.low:,.0f}, {self.high:,.0f}] records/s ({self.batches} batches)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "instances": self.instances,
            "records_per_s": round(self.records_per_s, 3),
            "low": round(self.low, 3) if math.isfinite(self.low) else None,
            "high": round(self.high, 3) if math.isfinite(self.high) else None,
            "batches": self.batches,
            "window_s": round(self.window_s, 3),
            "saturated": self.saturated,
            "batch_cap": self.batch_cap,
            "standard_error": round(self.standard_error, 3) if math.isfinite(self.standard_error) else None,
            "per_batch_s": None if self.per_batch_s is None else round(self.per_batch_s, 4),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CapacityEstimate:
        return cls(
            instances=int(data["instances"]),
            records_per_s=float(data["records_per_s"]),
            low=-math.inf if data.get("low") is None else float(data["low"]),
            high=math.inf if data.get("high") is None else float(data["high"]),
            batches=int(data["batches"]),
            window_s=float(data["window_s"]),
            saturated=bool(data["saturated"]),
            batch_cap=int(data["batch_cap"]),
            standard_error=math.nan if data.get("standard_error") is None else float(data["standard_error"]),
            per_batch_s=None if data.get("per_batch_s") is None else float(data["per_batch_s"]),
        )


def counted_batches(
    batches: Iterable[MicroBatch],
    rule: CapacityRule,
    batch_cap: int,
    limited_from_s: float | None = None,
    before_s: float | None = None,
) -> list[MicroBatch]:
    """The batches a capacity estimate counts, in order, the first of them opening the window (only its end
    counts): those that started after the instances were limited (``limited_from_s``), less the rule's settling
    batches, from the batch before the first full one on (a backlog that priming at full speed emptied takes a
    few batches to build up again). Where no batch is full, all of them: the job takes what is offered.
    Batches that held nothing (a trigger with no new offsets) are left out."""
    ordered = sorted({b.batch_id: b for b in batches if b.input_rows > 0}.values(), key=lambda b: b.batch_id)
    if limited_from_s is not None:
        ordered = [b for b in ordered if b.start_s >= limited_from_s]
    if before_s is not None:
        ordered = [b for b in ordered if b.start_s < before_s]
    ordered = ordered[rule.settle_batches :]
    first_full = next((i for i, b in enumerate(ordered) if b.input_rows >= FULL_SHARE * batch_cap), None)
    if first_full is None:
        return ordered
    return ordered[max(0, first_full - 1) :]


def settled_start(cycles: Sequence[float], confidence: float, tolerance: float, keep: int) -> int:
    """The first of `cycles` (one batch's time each, equal batches) from which they no longer fall: the fewest
    leading cycles to drop so that a line through the rest shows no fall beyond `tolerance` of their mean whose
    interval lies wholly below zero. Keeps at least `keep` cycles.

    Why: each measurement starts a new query, and where no CPU limit lets a priming phase take the code
    generation and JIT at full speed, the first full batches take longer, falling over ten or more batches
    (the click-stream example on a whole core: 3.1 s down to 1.9-2.2 s in 170 000-record batches); counted,
    they bias the capacity low and widen its interval."""
    start = 0
    while len(cycles) - start > keep:
        tail = np.asarray(cycles[start:], dtype=float)
        fit = stats.linregress(np.arange(tail.size, dtype=float), tail)
        high = fit.slope + float(stats.t.ppf(0.5 + confidence / 2, tail.size - 2)) * fit.stderr
        if not (high < 0 and -fit.slope * (tail.size - 1) > tolerance * float(tail.mean())):
            break
        start += 1
    return start


def estimate_capacity(
    batches: Iterable[MicroBatch],
    *,
    instances: int,
    batch_cap: int,
    rule: CapacityRule,
    limited_from_s: float | None = None,
    before_s: float | None = None,
) -> CapacityEstimate | None:
    """mu(r) from the counted batches (``counted_batches``; the first opens the window); None with fewer than
    four (three cycles).

    The ratio estimator R = sum(rows) / sum(cycle times), its standard error from the linearised residuals
    rows_i - R cycle_i (the delta method), a Student-t interval. Saturated when the last half of the window's
    batches were full (at least ``FULL_SHARE`` of the cap) and ran ``BUSY_SHARE`` of its wall time."""
    window = counted_batches(batches, rule, batch_cap, limited_from_s, before_s)
    if len(window) < 4:
        return None
    cycles = [b.end_s - a.end_s for a, b in itertools.pairwise(window)]
    # only a window of full batches can be settled by its cycles: batches below the cap are shorter by design
    if all(b.input_rows >= FULL_SHARE * batch_cap for b in window[1:]):
        window = window[settled_start(cycles, rule.confidence, rule.precision, keep=3) :]
    rows = [float(b.input_rows) for b in window[1:]]
    cycles = [b.end_s - a.end_s for a, b in itertools.pairwise(window)]
    if any(c <= 0 for c in cycles):
        raise ValueError("micro-batches must end one after another (a batch ended before the one before it)")
    m, total_rows, total_s = len(rows), sum(rows), sum(cycles)
    ratio = total_rows / total_s
    mean_cycle = total_s / m
    residual_ss = sum((n - ratio * c) ** 2 for n, c in zip(rows, cycles, strict=True))
    se = math.sqrt(residual_ss / (m * (m - 1))) / mean_cycle
    t = float(stats.t.ppf(0.5 + rule.confidence / 2, m - 1))
    recent = window[1 + m // 2 :]
    # a job on a trigger interval idles between batches that end early: full batches alone do not saturate it
    busy = sum(b.duration_s for b in recent) / (recent[-1].end_s - window[m // 2].end_s)
    saturated = all(b.input_rows >= FULL_SHARE * batch_cap for b in recent) and busy >= BUSY_SHARE
    return CapacityEstimate(
        instances=instances,
        records_per_s=ratio,
        low=ratio - t * se,
        high=ratio + t * se,
        batches=m,
        window_s=total_s,
        saturated=saturated,
        batch_cap=batch_cap,
        standard_error=se,
    )


def without_per_batch_cost(
    large: CapacityEstimate, small: CapacityEstimate, confidence: float
) -> CapacityEstimate:
    """mu with the per-batch cost taken out, from two batch sizes: a batch of n records takes T = c0 + n / mu,
    so mu = (n_large - n_small) / (T_large - T_small) and c0 = T_large - n_large / mu.

    This is the capacity a constant load meets near its boundary, where batches grow long and c0 is spread over
    ever more records; one batch size alone understates it by about c0 / T. Returns `large` as it was where the
    two sizes do not separate c0 (either not saturated, the small batches not shorter, or c0 < 0 within noise)."""
    if not (large.saturated and small.saturated) or large.batch_cap <= small.batch_cap:
        return large
    cycle_large, cycle_small = large.window_s / large.batches, small.window_s / small.batches
    rows_large, rows_small = large.records_per_s * cycle_large, small.records_per_s * cycle_small
    if cycle_large <= cycle_small or rows_large <= rows_small:
        return large
    mu = (rows_large - rows_small) / (cycle_large - cycle_small)
    c0 = cycle_large - rows_large / mu
    if c0 < 0:
        return large
    se_large = cycle_large * large.standard_error / large.records_per_s
    se_small = cycle_small * small.standard_error / small.records_per_s
    se = mu * math.hypot(se_large, se_small) / (cycle_large - cycle_small)
    t = float(stats.t.ppf(0.5 + confidence / 2, min(large.batches, small.batches) - 1))
    return CapacityEstimate(
        instances=large.instances,
        records_per_s=mu,
        low=mu - t * se,
        high=mu + t * se,
        batches=large.batches + small.batches,
        window_s=large.window_s + small.window_s,
        saturated=True,
        batch_cap=large.batch_cap,
        standard_error=se,
        per_batch_s=c0,
    )


@dataclass(frozen=True)
class DerivedDemand:
    """demand(load) read off the capacities and the lag-trend verdicts that certified its boundary; or the
    instance count whose verdict at this load must be measured next (its capacity lies within the guard band of
    the load, so the capacities cannot tell)."""

    load: int
    rate: float  # records/s the load offers
    resources: int | None  # the demand once decided; None: no measured instance count takes the load
    #: the instance count to run a lag-trend sub-experiment at before the demand is decided; None: decided
    to_certify: int | None = None
    #: instance counts whose verdict came from a lag-trend sub-experiment rather than the capacities
    certified: tuple[int, ...] = ()

    @property
    def decided(self) -> bool:
        return self.to_certify is None


def predicted_pass(
    capacity: CapacityEstimate, rate: float, threshold_share: float, guard: float
) -> bool | None:
    """The lag-trend verdict at `rate` predicted from `capacity`: True (passes), False (fails), None where the
    load's bar lies within the guard band around the capacity's interval. The bar is rate (1 - threshold
    share): below it the lag grows slower than the threshold. A capacity that took all it was offered passes
    every rate up to that offer."""
    bar = rate * (1.0 - threshold_share)
    if not capacity.saturated:
        return True if capacity.records_per_s * (1.0 - guard) >= bar else None
    if capacity.low * (1.0 - guard) > bar:
        return True
    if capacity.high * (1.0 + guard) < bar:
        return False
    return None


def derive_demand(
    load: int,
    rate: float,
    capacities: Mapping[int, CapacityEstimate],
    *,
    threshold_share: float,
    guard: float,
    certified: Mapping[int, bool] | None = None,
) -> DerivedDemand:
    """The fewest instances that pass `rate`, assuming capacity grows with the instances. Each count's verdict
    is the lag-trend one where `certified` holds it, else the capacities' prediction; the first count whose
    prediction is uncertain must be certified before the demand is decided (``to_certify``)."""
    certified = dict(certified or {})
    used = tuple(sorted(r for r in certified if r in capacities))
    for r in sorted(capacities):
        verdict = (
            certified[r] if r in certified else predicted_pass(capacities[r], rate, threshold_share, guard)
        )
        if verdict is None:
            return DerivedDemand(load, rate, None, to_certify=r, certified=used)
        if verdict:
            return DerivedDemand(load, rate, r, certified=used)
    return DerivedDemand(load, rate, None, certified=used)


def two_phase_capacity(
    batches: Iterable[MicroBatch],
    *,
    instances: int,
    large_cap: int,
    small_cap: int | None,
    limited_from_s: float | None,
    small_from_s: float | None,
    rule: CapacityRule,
) -> tuple[CapacityEstimate | None, CapacityEstimate | None, CapacityEstimate | None]:
    """(the capacity, the large batches' estimate, the small batches') of a two-phase measurement: batches of
    `large_cap` from `limited_from_s`, then of `small_cap` from `small_from_s` (the small phase settles one
    batch). What the probe computes as it measures, and what the results files give again."""
    batches = list(batches)
    large = estimate_capacity(
        batches,
        instances=instances,
        batch_cap=large_cap,
        rule=rule,
        limited_from_s=limited_from_s,
        before_s=small_from_s,
    )
    if small_cap is None or small_from_s is None:
        return large, large, None
    small = estimate_capacity(
        batches,
        instances=instances,
        batch_cap=small_cap,
        rule=replace(rule, settle_batches=1),
        limited_from_s=small_from_s,
    )
    if large is None or small is None:
        return large, large, small
    return without_per_batch_cost(large, small, rule.confidence), large, small


def scaling_curve(capacities: Mapping[int, CapacityEstimate]) -> dict[int, float]:
    """mu(r) / mu(1) for the saturated capacities (scalability proper: independent of the host's speed to the
    extent that every instance slows alike)."""
    base = capacities.get(1)
    if base is None or not base.saturated or base.records_per_s <= 0:
        return {}
    return {r: c.records_per_s / base.records_per_s for r, c in sorted(capacities.items()) if c.saturated}


def capacity_from_series(
    measurement: Mapping[str, Any], rows: TimeSeries, durations_ms: TimeSeries, ids: TimeSeries
) -> CapacityEstimate | None:
    """A recorded capacity measurement (its results-JSON entry) recomputed from its batch series."""
    batches = [
        MicroBatch(int(i), float(t), float(d) / 1000.0, int(n))
        for t, i, d, n in zip(ids.timestamps_s, ids.values, durations_ms.values, rows.values, strict=True)
    ]
    estimate, _, _ = two_phase_capacity(
        batches,
        instances=int(measurement["instances"]),
        large_cap=int(measurement["batch_records"]),
        small_cap=measurement.get("small_batch_records"),
        limited_from_s=measurement.get("limited_from_s"),
        small_from_s=measurement.get("small_from_s"),
        rule=CapacityRule.from_dict(measurement.get("rule") or {}),
    )
    return estimate
