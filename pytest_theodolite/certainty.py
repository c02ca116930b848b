"""Whether a regression rests on certain verdicts: pure functions over sub-experiment records.

A demand rises above its reference (the stored baseline's, or REF's in pull-request mode) because the change
FAILed at the reference's instance count (plus the tolerance). Where that FAIL -- or REF's PASS there -- was
not certain (the point estimate decided at the measurement's bound, or the job reached no steady state and
its batches did not show it falling behind), the load sits at the edge of what this host's instances take,
and which side of the edge a run lands on is the host's doing, not the code's. Measured on a fresh 2-core
machine calibrated at 0.74x the baselines' host: UC1 at 20 000 records/s on 4 instances, REF passed with a
lag slope of +977 [+256, +1698] vs 1 000 records/s at the 120 s bound, and the very same code failed without
settling (batches of 16-22 s) -- reported as a regression. Such a load is not comparable (exit code 7),
naming the verdicts that left it open; never a regression.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_theodolite.baseline import _instances
from pytest_theodolite.results import SubExperimentRecord
from pytest_theodolite.slo import BATCH_DURATION, LAG_TREND, Outcome


def verdict_text(record: SubExperimentRecord) -> str:
    """How an uncertain verdict came about, e.g. 'FAIL at 4 instances: no steady state within ...'."""
    head = f"{record.outcome.value.upper()} at {_instances(record.resources)}"
    repetition = next((r for r in record.repetitions if not r.certain), record.repetitions[0])
    if repetition.protocol.get("failure"):
        return f"{head}: {repetition.protocol['failure']}"
    bound_ended = "the interval still across the threshold when the measurement's bound ended it"
    lag = next((v for v in record.verdicts if v.name == LAG_TREND), None)
    batches = next((v for v in record.verdicts if v.name == BATCH_DURATION), None)
    if (
        batches is not None
        and None not in (batches.value, batches.low, batches.high, batches.threshold)
        and batches.low <= batches.threshold < batches.high  # type: ignore[operator]
    ):
        return (
            f"{head}: median micro-batch duration {batches.value:.2f} [{batches.low:.2f}, {batches.high:.2f}] "
            f"vs {batches.threshold:g} s, {bound_ended}"
        )
    if lag is not None and lag.value is not None and lag.low is not None and lag.high is not None:
        threshold = "" if lag.threshold is None else f" vs {lag.threshold:.0f}"
        slope = f"{lag.value:+.0f} [{lag.low:+.0f}, {lag.high:+.0f}]{threshold}"
        return f"{head}: lag slope {slope} records/s, {bound_ended}"
    return f"{head}: stopped {repetition.protocol.get('stop') or 'without a stop reason'}"


def uncertain_regression(
    change: Sequence[SubExperimentRecord],
    reference_demand: object,
    tolerance: int = 0,
    reference: Sequence[SubExperimentRecord] = (),
    reference_label: str = "the baseline",
) -> str | None:
    """Why a regression of the change against `reference_demand` (an instance count; anything else -- none,
    unmeasured -- cannot be regressed from by a number) rests on an uncertain verdict, or None where it does
    not (or there is no regression to rest on: the caller asks only when the demands say regression).

    The deciding verdicts: the change's FAIL at the most instances up to ``reference_demand + tolerance``
    that it ran, and REF's PASS at ``reference_demand`` (its records in `reference`; none for a stored
    baseline)."""
    if not isinstance(reference_demand, int) or isinstance(reference_demand, bool):
        return None
    allowed = reference_demand + tolerance
    failed = [r for r in change if r.outcome is Outcome.FAIL and r.resources <= allowed]
    deciding = []
    if failed:  # searches run instance counts in any order: the FAIL at the most instances decides
        top = max(failed, key=lambda r: r.resources)
        if not top.certain:
            deciding.append(f"the change's {verdict_text(top)}")
    passed = [r for r in reference if r.outcome is Outcome.PASS and r.resources == reference_demand]
    deciding += [f"{reference_label}'s {verdict_text(r)}" for r in passed if not r.certain]
    if not deciding:
        return None
    return (
        f"the verdicts that would make this a regression were not certain ({'; '.join(deciding)}): this load "
        "is at the edge of what this host's instances take, where noise decides; re-run it, or move the "
        "gate's load off the edge"
    )
