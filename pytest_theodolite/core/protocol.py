"""When a sub-experiment's warm-up ends and when its measurement may stop: a pure state machine over samples.

A verdict is judged only in steady state and only once it is certain, so that it follows the code and not the
host (docs/how-it-works.md says why). One repetition goes through four phases, fed one lag sample at a time:

1. **priming** -- the job runs its first micro-batches on the real load with the instances' CPU limit lifted:
   class loading, code generation and JIT compilation are set-up, not the processing under test (a
   long-running job in production is always warm), and at a quarter core they alone take minutes
   (docs/lab-notes/protocol.md). Ends after ``prime_batches`` finished batches or ``max_prime_s``.
2. **settling** -- the limit is applied; the warm-up ends once the batch durations stop falling (the backlog
   primed at full speed, or left by the limit, is worked off): the mean of the newer half of the last
   ``settle_batches`` durations is at least ``1 - settle_tolerance`` times the older half's longest -- and
   stop rising faster than the lag-trend threshold allows (the lag at a commit is the load times the batch's
   duration, so lengthening batches raise it whether or not the job keeps up; the rise is fitted over the
   batches of the last ``min_duration_s``, `batch_durations_rising`). A job near its capacity can take a
   minute or more to lengthen its batches to their fixed point after the limit, at first by growing steps
   (docs/lab-notes/protocol.md); measured inside that rise, identical code FAILed and PASSed by turns. Never
   settling within
   ``max_warmup_s`` fails the repetition, saying so; certain only where the batches doubled and their recent
   rise is not slowing (a job falling behind, not one rising towards a fixed point) -- unless fewer than
   ``settle_batches`` batches finished under the limit by then: batches of 20-40 s (a job at or past the edge
   of its capacity) leave too few in 90 s to tell settling from falling behind, and such a verdict was a
   guess. Unless those few already doubled, they get the bound once more (``2 x max_warmup_s``), so that the
   batches decide: they settle and the lag trend is measured, or grow and the job falls behind. Batches too
   long for ``2 x settle_batches`` of them to fit the bound (batches of more than 11 s at the gates' 90 s)
   get as long as that many take, up to the same ``2 x max_warmup_s``, unless they already diverge. A lag
   that falls certainly over the batches under the limit (``pass_on_falling_lag``) ends the repetition as a
   certain PASS, ``lag-falling``: a micro-batch engine takes all pending input into its next batch, so its lag
   shrinks only while it processes more than the load -- the backlog priming left, worked off -- which a job
   whose capacity lies below the load cannot do. A fixed ``warmup_s`` (Theodolite's protocol) replaces this
   phase.
3. **measuring** -- begins where the older of the newest ``measure_settled_batches`` batches the settling
   test judged steady began: they are steady state already, and waiting past them cost every point their
   length (docs/lab-notes/protocol.md, 2026-12-03). At least ``min_duration_s``; from then on the lag trend's
   confidence interval is computed after every sample, and the measurement stops as soon as it lies wholly on
   one side of the threshold
   (``certain``), or at ``max_duration_s`` (``max-duration``: the point estimate decides, with the certainty it
   had). Batches that begin to rise while measuring (the warm-up ended at a dip after priming) send the
   repetition back to settling, once, with its bound counted anew. Where the job's micro-batches are bounded too
   (``max_batch_s``, the batch-duration SLO), the median batch's interval must also lie on one side of that bound
   -- a certain FAIL of either SLO decides at once, a PASS needs both. A job that falls far behind is told
   sooner: a micro-batch engine takes all pending input into its next batch, so when the load exceeds what it can
   process each batch is longer than the last, without bound (one that keeps up converges to a fixed batch time,
   by ever smaller steps). ``falling_behind_batches`` finished batches that grow by steps that do not shrink, the
   last at least twice the first and ``FALLING_BEHIND_GROWTH`` times the shortest batch under the limit (more
   than the start transients above rose), end the measurement as ``falling-behind`` -- a FAIL -- instead of
   waiting minutes for batches long enough to fit. Likewise, with a batch bound, the last three batches under the
   limit each beyond it by ``settle_tolerance`` and not shortening (``fail_beyond_batch_bound``) end the
   repetition as ``beyond-batch-bound``, a certain FAIL, in settling or measuring: lengthening batches approach
   their fixed point from below, so the steady batch lies beyond the bound too (`durations_beyond_bound`) --
   where the median's interval needed minutes of such batches to say so.
4. **done**.

Nothing here talks to Kafka or Spark: the runner feeds samples and applies the CPU limit when asked.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_theodolite.core.batch_trends import (
    BEYOND_BOUND_BATCHES,
    FALLING_BEHIND_GROWTH,
    batch_durations_growing,
    batch_durations_rising,
    batch_durations_settled,
    durations_beyond_bound,
    durations_diverging,
    durations_doubled,
)
from pytest_theodolite.core.estimators import (
    DEFAULT_CONFIDENCE,
    SlopeEstimate,
    SlopeMethod,
    TimeSeries,
    lag_trend_estimate,
    trend_side,
)
from pytest_theodolite.core.measurement_plan import MeasurementPlan
from pytest_theodolite.core.outcomes import CERTAIN_STOPS, FAILING_STOPS, Outcome, Phase, Stop
from pytest_theodolite.core.slo import batch_bound_side, batch_duration_interval


@dataclass
class MeasurementProtocol:
    """Feed it every sample (`feed`); it says which phase the repetition is in and why it stopped."""

    plan: MeasurementPlan
    threshold_rps: float
    method: SlopeMethod = "batch-aligned"
    confidence: float = DEFAULT_CONFIDENCE
    offered_rate: float | None = None  # records/s: places batch-aligned points at their batch's commit
    max_batch_s: float | None = None  # the batch-duration SLO's bound; None: the lag trend alone decides
    phase: Phase = field(init=False)
    start_s: float | None = field(default=None, init=False)
    limited_at_s: float | None = field(default=None, init=False)
    measure_from_s: float | None = field(default=None, init=False)
    #: when the settling test passed (the measurement may begin before it: ``measure_settled_batches``)
    settled_at_s: float | None = field(default=None, init=False)
    last_s: float | None = field(default=None, init=False)
    stop: Stop | None = field(default=None, init=False)
    estimate: SlopeEstimate | None = field(default=None, init=False)
    _t: list[float] = field(default_factory=list, init=False, repr=False)
    _lag: list[float] = field(default_factory=list, init=False, repr=False)
    _ids_t: list[float] = field(default_factory=list, init=False, repr=False)
    _ids: list[float] = field(default_factory=list, init=False, repr=False)
    _ends: list[float] = field(default_factory=list, init=False, repr=False)
    #: finished batch id -> duration (s), in the order first seen
    _batches: dict[int, float] = field(default_factory=dict, init=False, repr=False)
    #: finished batch id -> its end (epoch s; NaN where not known)
    _batch_ends: dict[int, float] = field(default_factory=dict, init=False, repr=False)
    #: when the settling phase's bound is counted from: the end of priming, or where a measurement that began
    #: at a dip went back to settling (once a repetition, so that a rise cannot keep it from ever judging)
    _settle_from_s: float | None = field(default=None, init=False, repr=False)
    _went_back: bool = field(default=False, init=False, repr=False)
    _first_limited_batch: int | None = field(default=None, init=False, repr=False)
    _first_measured_batch: int | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.phase = Phase.PRIMING if self.plan.prime_unlimited else Phase.SETTLING

    def feed(
        self,
        timestamp_s: float,
        lag: float,
        batch_id: int | None,
        batch_ms: float | None,
        batch_end_s: float | None = None,
    ) -> Phase:
        """One sample: the total lag, and the id, duration and end (epoch s) of the last finished micro-batch
        (None before the first one). Returns the phase after it; the caller applies the CPU limit when the phase leaves
        PRIMING and stops sampling at DONE."""
        if self.phase is Phase.DONE:
            return self.phase
        if self.start_s is None:
            self.start_s = timestamp_s
            if self.phase is Phase.SETTLING:
                self.limited_at_s = timestamp_s
        self.last_s = timestamp_s
        self._t.append(timestamp_s)
        self._lag.append(lag)
        if batch_id is not None:
            self._ids_t.append(timestamp_s)
            self._ids.append(float(batch_id))
            self._ends.append(math.nan if batch_end_s is None else batch_end_s)
            if batch_id not in self._batches and batch_ms is not None:
                self._batches[batch_id] = batch_ms / 1000.0
                self._batch_ends[batch_id] = math.nan if batch_end_s is None else batch_end_s
        if self.phase is Phase.PRIMING:
            self._prime(timestamp_s)
        elif self.phase is Phase.SETTLING:
            self._settle(timestamp_s)
        elif self.phase is Phase.MEASURING:
            self._measure(timestamp_s)
        return self.phase

    # -- phases ------------------------------------------------------------------------------------------
    def _prime(self, now: float) -> None:
        assert self.start_s is not None  # set by the first feed()
        if len(self._batches) >= self.plan.prime_batches or now - self.start_s >= self.plan.max_prime_s:
            self.phase, self.limited_at_s = Phase.SETTLING, now
            # the batch running now started without the limit: settling counts the ones after it
            self._first_limited_batch = max(self._batches, default=-1) + 2

    def _settle(self, now: float) -> None:
        if self._failed_early():
            return
        assert self.start_s is not None and self.limited_at_s is not None  # set by feed() and _prime()
        if self.plan.warmup_s is not None:  # Theodolite's fixed warm-up
            if now - self.start_s >= self.plan.warmup_s:
                self._start_measuring(now)
            return
        if self._first_limited_batch is None:
            self._first_limited_batch = max(self._batches, default=-1) + 2
        falling = self._falling_lag() if self.plan.pass_on_falling_lag else None
        if falling is not None:
            self.estimate, (self.measure_from_s, self._first_measured_batch) = falling
            self._finish(Stop.LAG_FALLING)
            return
        limited = self.limited_durations()
        if batch_durations_settled(
            limited, self.plan.settle_batches, self.plan.settle_tolerance
        ) and not self._rising(self._first_limited_batch):
            self._start_measuring(now, self.plan.measure_settled_batches)
        elif now - (self._settle_from_s or self.limited_at_s) >= self.warmup_bound_s:
            self._finish(Stop.NOT_SETTLED)

    @property
    def warmup_bound_s(self) -> float:
        """The settling phase's bound now: ``max_warmup_s``, twice that while fewer than ``settle_batches``
        batches have finished under the CPU limit (too few to tell; see the module docstring) and they have
        not yet doubled (which already tells a job falling behind). Long batches get the time of
        ``2 x settle_batches`` of them at their median, up to that same twice, unless they already diverge: a
        start transient lasts batches, not seconds, and the settling test judges the last ``settle_batches``."""
        limited = self.limited_durations()
        longest = 2 * self.plan.max_warmup_s
        if len(limited) < self.plan.settle_batches and not durations_doubled(limited):
            return longest
        if durations_diverging(limited):
            return self.plan.max_warmup_s
        in_batches = 2 * self.plan.settle_batches * statistics.median(limited)
        return min(longest, max(self.plan.max_warmup_s, in_batches))

    def _start_measuring(self, now: float, settled_batches: int = 0) -> None:
        self.phase, self.measure_from_s, self.settled_at_s = Phase.MEASURING, now, now
        self._first_measured_batch = max(self._batches, default=-1) + 1
        limited = [b for b in self._batches if b >= (self._first_limited_batch or 0)]
        if settled_batches and len(limited) >= settled_batches:
            # the settled batches were judged steady: the measurement begins where the oldest of them began
            first = limited[-settled_batches]
            began = self._batch_ends[first] - self._batches[first]
            if math.isfinite(began) and self.limited_at_s is not None and began >= self.limited_at_s:
                self.measure_from_s, self._first_measured_batch = began, first

    def _falling_lag(self) -> tuple[SlopeEstimate, tuple[float, int]] | None:
        """The lag fitted over the batches under the CPU limit, with where that fit begins (seconds, first
        batch), where it falls certainly (its interval lies below zero, over at least ``min_points`` batches
        and ``min_duration_s``) and their median batch meets the batch bound; else None. A micro-batch engine
        takes all pending input into its next batch, so its lag shrinks only while it processes more than the
        load: a job working off the backlog that priming left, which one whose capacity lies below the load
        cannot do (docs/how-it-works.md)."""
        first = self._first_limited_batch
        if first is None or self.start_s is None or self.last_s is None:
            return None
        ids = [b for b in self._batches if b >= first]
        if len(ids) < self.plan.min_points:
            return None
        began = self._batch_ends[ids[0]] - self._batches[ids[0]]
        if not math.isfinite(began) or self.last_s - began < self.plan.min_duration_s:
            return None
        start = max(began, self.start_s)
        estimate = self._estimate(start - self.start_s)
        if (
            estimate is None
            or estimate.points < self.plan.min_points
            or not estimate.high < 0
            or self._batch_side_from(ids[0]) is not Outcome.PASS
        ):
            return None
        return estimate, (start, ids[0])

    def limited_batches(self) -> dict[int, float]:
        """Batch id -> seconds of every batch finished under the CPU limit so far."""
        return self._batches_from(self._first_limited_batch if self._first_limited_batch is not None else 0)

    def measured_batches(self) -> dict[int, float]:
        """Batch id -> seconds of every batch finished since the measurement began (none before it did)."""
        return {} if self._first_measured_batch is None else self._batches_from(self._first_measured_batch)

    def _batches_from(self, first: int) -> dict[int, float]:
        return {b: d for b, d in self._batches.items() if b >= first}

    def limited_durations(self) -> list[float]:
        """The seconds of every batch finished under the CPU limit so far, oldest first."""
        return list(self.limited_batches().values())

    def _rising(self, first_batch: float) -> bool:
        """The batches from `first_batch` on still lengthen faster than the lag-trend threshold allows
        (batch_durations_rising), over the shortest window the measurement judges."""
        if self.offered_rate is None:
            return False
        ids = [b for b in self._batches if b >= first_batch]
        return batch_durations_rising(
            [self._batches[b] for b in ids],
            [self._batch_ends[b] for b in ids],
            self.plan.settle_batches,
            self.offered_rate,
            self.threshold_rps,
            window_s=self.plan.min_duration_s,
            confidence=self.confidence,
        )

    def _failed_early(self) -> bool:
        """Ends the repetition as a FAIL its batches under the limit already tell (falling behind, or beyond the
        batch bound for good); whether it did."""
        if self.falling_behind():
            self._finish(Stop.FALLING_BEHIND)
        elif self._beyond_batch_bound():
            self._finish(Stop.BEYOND_BATCH_BOUND)
        return self.phase is Phase.DONE

    def _beyond_batch_bound(self) -> bool:
        return (
            self.plan.fail_beyond_batch_bound
            and self.plan.adaptive
            and self.max_batch_s is not None
            and durations_beyond_bound(self.limited_durations(), self.max_batch_s, self.plan.settle_tolerance)
        )

    def falling_behind(self) -> bool:
        """The falling-behind rule, once the batches under the limit grew beyond what a start transient does
        (a subclass may widen it: experiments/replay_protocol.py replays candidate rules)."""
        limited = self.limited_durations()
        return batch_durations_growing(limited, self.plan.falling_behind_batches) and (
            not self.plan.adaptive or limited[-1] >= FALLING_BEHIND_GROWTH * min(limited)
        )

    def _measure(self, now: float) -> None:
        if self._failed_early():
            return
        assert self.measure_from_s is not None  # set by _start_measuring()
        first = self._first_measured_batch if self._first_measured_batch is not None else math.inf
        if self.plan.adaptive and not self._went_back and self._rising(first):
            # the batches began to lengthen after the warm-up ended (it ended at a dip): not steady state yet
            self.phase, self.measure_from_s, self._first_measured_batch = Phase.SETTLING, None, None
            self.settled_at_s = None
            self.estimate, self._settle_from_s, self._went_back = None, now, True
            return
        elapsed = now - self.measure_from_s
        if elapsed < self.plan.min_duration_s:
            return
        self.estimate = self._estimate()
        fitted = self.estimate is not None and self.estimate.points >= self.plan.min_points
        lag = self.estimate.side_of(self.threshold_rps) if fitted and self.estimate is not None else None
        decided = fitted and sides_decide((lag, self.batch_side()))
        if decided:
            self._finish(Stop.CERTAIN)
        elif elapsed >= self.plan.max_duration_s:
            self._finish(Stop.MAX_DURATION if self.estimate is not None else Stop.NO_BATCHES)

    def batch_side(self) -> Outcome | None:
        """PASS or FAIL once the median measured batch duration's interval lies on one side of ``max_batch_s``
        (always PASS without that bound); None while it straddles it or too few batches finished."""
        return self._batch_side_from(
            self._first_measured_batch if self._first_measured_batch is not None else math.inf
        )

    def _batch_side_from(self, first: float) -> Outcome | None:
        if self.max_batch_s is None:
            return Outcome.PASS
        interval = batch_duration_interval(
            [d for b, d in self._batches.items() if b >= first], self.confidence
        )
        return None if interval is None else batch_bound_side(*interval, self.max_batch_s)

    def _estimate(self, warmup_s: float | None = None) -> SlopeEstimate | None:
        """The lag trend after `warmup_s` (default: the warm-up this repetition used)."""
        try:
            return lag_trend_estimate(
                TimeSeries.of(self._t, self._lag),
                warmup_s=(self.warmup_used_s or 0.0) if warmup_s is None else warmup_s,
                method=self.method,
                confidence=self.confidence,
                batch_ids=TimeSeries.of(self._ids_t, self._ids),
                batch_ends=TimeSeries.of(self._ids_t, self._ends),
                rate=self.offered_rate,
            )
        except ValueError:  # too few finished batches after the warm-up so far
            return None

    def _finish(self, stop: Stop) -> None:
        self.phase, self.stop = Phase.DONE, stop

    # -- what the record keeps ---------------------------------------------------------------------------
    @property
    def certain(self) -> bool | None:
        """Whether the verdict is certain (None until done). Not settled is certain only where the batches
        under the CPU limit at least doubled and their recent rise is not slowing (`durations_diverging`) -- a job
        falling behind that the falling-behind rule did not end within the warm-up bound; where they fell, or
        grew by less, or rose towards a fixed point, or too few finished to tell, the job was at the edge of
        what it can take, and a verdict either way is a guess."""
        if self.stop is None:
            return None
        if self.stop is Stop.NOT_SETTLED:
            return durations_diverging(self.limited_durations())
        return self.stop in CERTAIN_STOPS

    @property
    def warmup_used_s(self) -> float | None:
        """Seconds from the first sample to the start of the measurement; None if it never started."""
        if self.measure_from_s is None or self.start_s is None:
            return None
        return self.measure_from_s - self.start_s

    @property
    def failure_reason(self) -> str | None:
        """Why the repetition FAILs without a fitted trend, or None."""
        if self.stop is Stop.NOT_SETTLED:
            limited = self.limited_durations()
            last = ", ".join(f"{d:.1f}" for d in limited[-self.plan.settle_batches :])
            if not limited:
                why = "no micro-batch finished under the CPU limit"
            elif len(limited) < self.plan.settle_batches:
                why = (
                    f"only {len(limited)} micro-batch{'' if len(limited) == 1 else 'es'} finished under the "
                    f"CPU limit ({last} s), too few to tell"
                )
            elif limited[-1] > limited[-self.plan.settle_batches]:
                why = f"micro-batch durations were still changing ({last} s)"
            else:
                why = f"micro-batch durations were still falling ({last} s)"
            settled_for = (self.last_s or 0.0) - (self.limited_at_s or 0.0)
            extended = (
                f" (extended to {settled_for:.0f} s for its long batches)"
                if settled_for > self.plan.max_warmup_s + 1
                else ""
            )
            return f"no steady state within the {self.plan.max_warmup_s:g} s warm-up bound{extended}: {why}"
        if self.stop is Stop.FALLING_BEHIND:
            recent = [f"{d:.1f}" for d in self.limited_durations()[-self.plan.falling_behind_batches :]]
            return (
                f"the job falls behind: each micro-batch took longer than the last ({', '.join(recent)} s), "
                "as when the load exceeds what the instances process"
            )
        if self.stop is Stop.BEYOND_BATCH_BOUND:
            recent = [f"{d:.1f}" for d in self.limited_durations()[-BEYOND_BOUND_BATCHES:]]
            return (
                f"micro-batches beyond the {self.max_batch_s:.3g} s batch bound for good: under the CPU limit they "
                f"took {', '.join(recent)} s, each over {1 + self.plan.settle_tolerance:.1f}x the bound and not "
                "shortening -- lengthening batches approach their steady length from below"
            )
        if self.stop is Stop.NO_BATCHES:
            return (
                f"fewer than 2 micro-batches finished in {self.plan.max_duration_s:g} s of measurement: "
                "the job does not keep up"
            )
        return None

    def summary(self) -> dict[str, Any]:
        """The repetition's protocol for the results: phases' lengths, stop reason, points fitted."""
        primed = (
            None
            if self.limited_at_s is None or self.start_s is None or not self.plan.prime_unlimited
            else self.limited_at_s - self.start_s
        )
        measured = (
            None
            if self.measure_from_s is None
            else (self.last_s or self.measure_from_s) - self.measure_from_s
        )
        return {
            "primed_s": primed,
            "warmup_s": self.warmup_used_s,
            "measured_s": measured,
            "stop": None if self.stop is None else self.stop.value,
            "certain": self.certain,
            "points": None if self.estimate is None else self.estimate.points,
            "batches": len(self._batches),
            "failure": self.failure_reason,
            "offered_rate": self.offered_rate,
        }


def stop_of(
    estimate_low: float | None,
    estimate_high: float | None,
    threshold: float | None,
    recorded: str | None,
    batch_interval: tuple[float, float] | None = None,
    max_batch_s: float | None = None,
) -> str | None:
    """The stop reason a recomputed interval implies: a failing stop as recorded, ``certain`` where the
    interval lies on one side of the threshold, else ``max-duration`` (the bound was what ended it). With the
    batch-duration SLO's bound and its median's interval, as the live protocol decides: a certain FAIL of
    either is certain, a PASS needs both."""
    if recorded in {s.value for s in FAILING_STOPS}:
        return recorded
    if estimate_low is None or estimate_high is None or threshold is None:
        return recorded
    sides = [trend_side(estimate_low, estimate_high, threshold)]
    if max_batch_s is not None and batch_interval is not None:
        sides.append(batch_bound_side(*batch_interval, max_batch_s))
    if recorded == Stop.LAG_FALLING.value and estimate_high < 0 and all(s is Outcome.PASS for s in sides):
        return recorded  # the re-fit still falls certainly
    return Stop.CERTAIN.value if sides_decide(sides) else Stop.MAX_DURATION.value


def sides_decide(sides: Sequence[Outcome | None]) -> bool:
    """Whether the SLOs' certain sides decide the verdict: one certain FAIL does, a PASS needs all of them."""
    return Outcome.FAIL in sides or all(side is Outcome.PASS for side in sides)
