"""How often the gates' measurement, begun at an arbitrary moment of a steady run, reaches a *certain* verdict
that the long protocol's verdict of the same run contradicts.

A recording made under Theodolite's protocol (``protocol_reference.py --protocol theodolite``: a fixed 60 s
warm-up, then 300 s) is the reference: its own verdict (the lag trend's OLS slope over 300 s against 5 % of
the load and, where the run's SLO has one, the median batch against the batch-duration bound) is taken as the
truth of that point. The gates' measuring phase (core.protocol.MeasurementProtocol: from ``min_duration_s``
until the lag slope's interval -- and the median batch's, where there is a bound -- lies on one side, at most
``max_duration_s``) is replayed over the same samples, beginning every ``--step`` seconds from the end of the
recording's warm-up to where ``max_duration_s`` still fits. Each replay's verdict is counted as certain and
right, certain and wrong, or uncertain (stopped at its bound; the point estimates decide then).

Why: a job at the edge of its capacity lengthens and shortens its micro-batches over minutes (a longer batch
takes more records, so the next one is longer too), and both intervals treat consecutive batches as
independent. Where that overstates the gates' certainty, certain-and-wrong counts show it. Candidates:
``--confidence`` (wider intervals), ``--min-batches`` (the median batch decides only once that many
measured batches finished) and ``--min-duration`` (no verdict before that many seconds measured).

    python experiments/window_verdicts.py RESULTS_DIR... [--confidence 0.95 0.99] [--min-batches 0 6] \
        [--min-duration 20 30]

The falling-behind rule is off in these replays: a long-protocol recording starts under the CPU limit without
priming, and the rule would read that start transient as growth.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

from replay_protocol import samples

from pytest_theodolite.core.measurement_plan import MeasurementPlan
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.protocol import FAILING_STOPS, MeasurementProtocol, Phase, sides_decide
from pytest_theodolite.core.records import SERIES_BATCH_ID, SERIES_LAG
from pytest_theodolite.core.slo import BATCH_DURATION, LAG_TREND
from pytest_theodolite.store.results import iter_repetition_series, list_experiment_ids, read_results


@dataclasses.dataclass(frozen=True)
class WindowVerdict:
    """One replay of the gates' measuring phase from one starting moment."""

    start_s: float  # after the recording's first sample
    outcome: Outcome
    certain: bool
    measured_s: float


@dataclasses.dataclass(frozen=True)
class Candidate:
    confidence: float = 0.95
    min_batches: int = 0  # measured batches the median batch needs before it decides; 0: today's rule
    min_duration_s: float | None = None  # seconds measured before any verdict; None: the plan's (today's)

    def __str__(self) -> str:
        batches = f", median batch from >= {self.min_batches} batches" if self.min_batches else ""
        duration = "" if self.min_duration_s is None else f", >= {self.min_duration_s:g} s measured"
        return f"confidence {self.confidence:.2f}{batches}{duration}"


@dataclasses.dataclass
class MinBatchesProtocol(MeasurementProtocol):
    """The gates' protocol with the candidate rule: no side of the batch bound before `min_batches` measured."""

    min_batches: int = 0

    def batch_side(self) -> Outcome | None:
        if self.max_batch_s is not None and self.min_batches:
            if len(self.measured_batches()) < self.min_batches:
                return None
        return super().batch_side()


def reference_outcome(verdicts) -> Outcome | None:
    """The long protocol's verdict of a recorded repetition: FAIL where the lag trend or the batch bound
    failed; None where neither was judged."""
    judged = [v for v in verdicts if v.name in (LAG_TREND, BATCH_DURATION)]
    if not judged:
        return None
    return Outcome.FAIL if any(v.outcome is Outcome.FAIL for v in judged) else Outcome.PASS


def replay_from(
    rows: Sequence[tuple],
    start_s: float,
    threshold_rps: float,
    offered_rate: float,
    max_batch_s: float | None,
    candidate: Candidate,
    plan: MeasurementPlan | None = None,
) -> WindowVerdict | None:
    """The gates' measuring phase over `rows` (replay_protocol.samples), its warm-up ending `start_s` after the
    first sample; None where the rows end before it stops."""
    plan = dataclasses.replace(
        plan or MeasurementPlan(), warmup_s=start_s, prime_unlimited=False, falling_behind_batches=0
    )
    if candidate.min_duration_s is not None:
        plan = dataclasses.replace(plan, min_duration_s=candidate.min_duration_s)
    protocol = MinBatchesProtocol(
        plan,
        threshold_rps,
        confidence=candidate.confidence,
        offered_rate=offered_rate,
        max_batch_s=max_batch_s,
        min_batches=candidate.min_batches,
    )
    for t, lag, batch, finished, end, _ in rows:
        if protocol.feed(t, lag, batch, finished, end) is Phase.DONE:
            break
    if protocol.phase is not Phase.DONE or protocol.last_s is None:
        return None
    measured_s = protocol.last_s - (protocol.measure_from_s or protocol.last_s)
    if protocol.stop in FAILING_STOPS:
        return WindowVerdict(start_s, Outcome.FAIL, bool(protocol.certain), measured_s)
    sides = (
        protocol.estimate.side_of(threshold_rps) if protocol.estimate is not None else None,
        protocol.batch_side(),
    )
    if sides_decide(sides):
        outcome = Outcome.FAIL if Outcome.FAIL in sides else Outcome.PASS
    else:  # stopped at its bound: the lag's point estimate decides, as the gates report it
        slope_fails = protocol.estimate is not None and protocol.estimate.slope >= threshold_rps
        outcome = Outcome.FAIL if slope_fails else Outcome.PASS
    return WindowVerdict(start_s, outcome, bool(protocol.certain), measured_s)


@dataclasses.dataclass
class Tally:
    right: int = 0
    wrong: int = 0
    uncertain: int = 0
    measured_s: float = 0.0

    def add(self, verdicts: Sequence[WindowVerdict], truth: Outcome) -> None:
        self.right += sum(v.certain and v.outcome is truth for v in verdicts)
        self.wrong += sum(v.certain and v.outcome is not truth for v in verdicts)
        self.uncertain += sum(not v.certain for v in verdicts)
        self.measured_s += sum(v.measured_s for v in verdicts)

    def __str__(self) -> str:
        n = self.right + self.wrong + self.uncertain
        certain = self.right + self.wrong
        return (
            f"{n} starts: certain and right {self.right}, certain and wrong {self.wrong}"
            f" ({self.wrong} of {certain} certain), uncertain {self.uncertain};"
            f" {self.measured_s / max(1, n):.0f} s measured on average"
        )


def starts_in(rows: Sequence[tuple], warmup_s: float, step_s: float, max_duration_s: float) -> list[float]:
    """The replays' starting moments: every `step_s` from the recording's warm-up on, while a whole measurement
    of at most `max_duration_s` still fits."""
    span = rows[-1][0] - rows[0][0] if rows else 0.0
    count = math.floor((span - max_duration_s - warmup_s) / step_s) + 1
    return [warmup_s + i * step_s for i in range(max(0, count))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("results", nargs="+", type=Path, help="results directories of long-protocol runs")
    parser.add_argument(
        "--confidence", type=float, nargs="+", default=[0.95], help="the intervals' confidence"
    )
    parser.add_argument(
        "--min-batches", type=int, nargs="+", default=[0], help="measured batches the median batch needs"
    )
    parser.add_argument(
        "--min-duration",
        type=float,
        nargs="+",
        default=[None],
        help="seconds measured before any verdict (default: the gates' plan)",
    )
    parser.add_argument("--step", type=float, default=5.0, help="seconds between replays' starting moments")
    args = parser.parse_args()
    candidates = [
        Candidate(c, k, d) for c in args.confidence for k in args.min_batches for d in args.min_duration
    ]
    plan = MeasurementPlan()
    totals = {candidate: Tally() for candidate in candidates}
    for directory in args.results:
        for experiment in list_experiment_ids(directory):
            results = read_results(directory, experiment)
            fixed = (results.settings.get("protocol") or {}).get("warmup_s")
            if fixed is None:
                continue  # only long-protocol recordings are references
            slo = results.slo_settings
            for sub in results.sub_experiments:
                threshold = slo.lag_trend_threshold.for_load(sub.target_rate)
                for repetition, series in iter_repetition_series(results, sub.load, sub.resources):
                    record = next((r for r in sub.repetitions if r.repetition == repetition), None)
                    truth = None if record is None else reference_outcome(record.verdicts)
                    if truth is None or SERIES_LAG not in series or SERIES_BATCH_ID not in series:
                        continue
                    rows = samples(series)
                    starts = starts_in(rows, float(fixed), args.step, plan.max_duration_s)
                    for candidate in candidates:
                        verdicts = [
                            verdict
                            for start in starts
                            if (
                                verdict := replay_from(
                                    rows,
                                    start,
                                    threshold,
                                    sub.target_rate,
                                    slo.max_batch_duration_s,
                                    candidate,
                                    plan,
                                )
                            )
                            is not None
                        ]
                        point = Tally()
                        point.add(verdicts, truth)
                        totals[candidate].add(verdicts, truth)
                        print(
                            f"{directory.name}/{experiment} {sub.load}@{sub.resources}, long protocol "
                            f"{truth.value.upper()} | {candidate}: {point}"
                        )
    for candidate, tally in totals.items():
        print(f"all | {candidate}: {tally}")


if __name__ == "__main__":
    main()
