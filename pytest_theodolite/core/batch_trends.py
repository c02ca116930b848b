"""What a job's micro-batch durations say while it runs: growing (falling behind), rising (not yet settled),
settled. The measurement protocol decides its phases by them."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from itertools import pairwise

import numpy as np
from scipy import stats

from pytest_theodolite.core.estimators import DEFAULT_CONFIDENCE


def batch_durations_growing(
    durations_s: Sequence[float], batches: int, overall: float = 2.0, floor_s: float = 3.0
) -> bool:
    """True when the last `batches` durations rise by increments that do not shrink (each at least 90 % of the
    one before) to `overall` times the first and at least `floor_s`: a micro-batch engine that falls further
    behind with every batch. (Sub-second batches jitter by tens of per cent; the fit judges those quickly.)

    Why increments: batch k+1 processes what arrived during batch k, so d(k+1) = a + rho d(k) with rho the
    load over the processing rate. A job that keeps up (rho < 1) may also lengthen its batches for a while after
    the CPU limit is applied, but towards a fixed point, by ever smaller steps; only rho >= 1 keeps the
    steps from shrinking."""
    if batches < 3 or len(durations_s) < batches:
        return False
    recent = list(durations_s)[-batches:]
    steps = [b - a for a, b in pairwise(recent)]
    return (
        all(step > 0 for step in steps)
        and all(later >= 0.9 * earlier for earlier, later in pairwise(steps))
        and recent[-1] >= max(overall * recent[0], floor_s)
    )


#: how far the batches under the limit must have grown from the shortest of them before the falling-behind rule
#: may end a repetition: recorded start transients of jobs that keep up rose 2.7-3.3x from their shortest batch,
#: up to three batches by growing steps, before they slowed (docs/lab-notes/protocol.md)
FALLING_BEHIND_GROWTH = 4.0


def batch_durations_rising(
    durations_s: Sequence[float],
    ends_s: Sequence[float],
    batches: int,
    offered_rate: float,
    threshold_rps: float,
    window_s: float,
    confidence: float = DEFAULT_CONFIDENCE,
) -> bool:
    """True while the batch durations still rise faster than the lag-trend SLO allows: the lag at a commit is
    what arrived while the batch ran (rate x duration), so batches that lengthen by dd/dt seconds per second
    raise the lag by rate x dd/dt records/s whether or not the job keeps up -- a job that lengthens its batches
    towards a fixed point is not yet in steady state.

    dd/dt is the slope of a line through (end, duration) of the batches that ended in the last `window_s` (at
    least the last `batches` of them): rising means rate x slope above the threshold *and* a slope whose
    interval lies above zero. Over a few sub-second batches, or one pair of halves, the jitter alone reads as
    a rise of hundreds of records/s (docs/lab-notes/protocol.md); over the window the measurement itself
    judges, it does not.
    Ends that are not known (NaN) are taken as back to back."""
    if len(durations_s) < max(batches, 3):
        return False
    ends = np.asarray(ends_s, dtype=float)
    if ends.size != len(durations_s) or not np.all(np.isfinite(ends)):
        ends = np.cumsum(durations_s)
    take = max(batches, int(np.count_nonzero(ends >= ends[-1] - window_s)))
    t, d = ends[-take:], np.asarray(durations_s, dtype=float)[-take:]
    if np.ptp(t) <= 0:
        return False
    fit = stats.linregress(t - t.mean(), d)
    low = fit.slope - float(stats.t.ppf(0.5 + confidence / 2, take - 2)) * fit.stderr
    return bool(offered_rate * fit.slope > threshold_rps and low > 0)


#: the last batches whose rise `durations_diverging` compares, in thirds
DIVERGENCE_BATCHES = 6


def durations_diverging(durations_s: Sequence[float]) -> bool:
    """The batches at least doubled and their rise is not slowing -- of the last DIVERGENCE_BATCHES, split in
    thirds (means, which average out the jitter of single batches), the last third rose at least as much over the
    middle one as that over the first: a job falling behind, not one whose batches rise towards a fixed point by
    ever smaller steps (a start transient, whose first rise may well be steeper than linear: only its recent
    batches tell). Two batches cannot tell the two apart; there doubling alone decides."""
    if not durations_doubled(durations_s):
        return False
    recent = list(durations_s)[-DIVERGENCE_BATCHES:]
    if len(recent) < 3:
        return True
    third = len(recent) // 3
    first, middle, last = (
        statistics.fmean(part)
        for part in (recent[:third], recent[third : len(recent) - third], recent[-third:])
    )
    return last - middle >= middle - first


def durations_doubled(durations_s: Sequence[float]) -> bool:
    """At least two batch durations, the last at least twice the first: a job falling behind, though too
    slowly (or in too few batches) for `batch_durations_growing`."""
    return len(durations_s) >= 2 and durations_s[-1] >= 2 * durations_s[0]


#: how many of the newest batches under the limit `durations_beyond_bound` judges
BEYOND_BOUND_BATCHES = 3


def durations_beyond_bound(durations_s: Sequence[float], bound_s: float, margin: float) -> bool:
    """The last BEYOND_BOUND_BATCHES batch durations each lie beyond `bound_s` by `margin` (0.2: 20 %), and the
    newest is no shorter than the oldest of them: the job's steady batch time lies beyond the bound. Batch k+1
    takes what arrived during batch k, d(k+1) = a + rho d(k); batches that lengthen approach their fixed point
    from below (or grow past it, rho >= 1), so it lies at or above them -- `margin` covers the jitter of single
    batches. Falling batches (a backlog worked off) may still settle within the bound: they wait."""
    if len(durations_s) < BEYOND_BOUND_BATCHES:
        return False
    recent = list(durations_s)[-BEYOND_BOUND_BATCHES:]
    return min(recent) >= (1 + margin) * bound_s and recent[-1] >= recent[0]


def batch_durations_settled(durations_s: Sequence[float], batches: int, tolerance: float) -> bool:
    """True once the last `batches` finished batch durations stop falling: the newer half's mean is at least
    (1 - tolerance) x the older half's longest (growing durations count as settled: that job falls behind).
    The longest, not the mean: a transient peaks and then falls, and a mean over the peak hides the fall."""
    if len(durations_s) < batches:
        return False
    recent = list(durations_s)[-batches:]
    half = batches // 2
    older, newer = recent[:half], recent[-half:]
    return sum(newer) / len(newer) >= (1 - tolerance) * max(older)
