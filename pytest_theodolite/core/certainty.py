"""Whether a regression rests on certain verdicts: pure functions over sub-experiment records.

A demand rises above its reference (the stored baseline's, or REF's in pull-request mode) because the change
FAILed at the reference's instance count (plus the tolerance). Where that FAIL -- or REF's PASS there -- was
not certain (the point estimate decided at the measurement's bound, or the job reached no steady state and
its batches did not show it falling behind), the load sits at the edge of what this host's instances take,
and which side of the edge a run lands on is the host's doing, not the code's (docs/lab-notes/defaults.md
has the run that showed it). Such a load is not comparable (exit code 7), naming the verdicts that left it
open; never a regression.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_theodolite.core.outcomes import Outcome, instances_text
from pytest_theodolite.core.records import RepetitionRecord, SubExperimentRecord
from pytest_theodolite.core.slo import BATCH_DURATION, LAG_TREND, batch_bound_side


def verdict_text(record: SubExperimentRecord) -> str:
    """How an uncertain verdict came about, e.g. 'FAIL at 4 instances: no steady state within ...'."""
    head = f"{record.outcome.value.upper()} at {instances_text(record.resources)}"
    if len({r.outcome for r in record.repetitions}) > 1:
        # repetitions offered different rates (comparison.regression_share) say so
        rates = len({r.protocol.get("offered_rate") for r in record.repetitions}) > 1
        each = "; ".join(
            f"{r.outcome.value.upper()}{_offered(r) if rates else ''}{_repetition_detail(r)}"
            for r in record.repetitions
        )
        return f"{head}: its {len(record.repetitions)} repetitions disagreed ({each})"
    repetition = next((r for r in record.repetitions if not r.certain), record.repetitions[0])
    if repetition.protocol.get("failure"):
        return f"{head}: {repetition.protocol['failure']}"
    bound_ended = "the interval still across the threshold when the measurement's bound ended it"
    lag = next((v for v in record.verdicts if v.name == LAG_TREND), None)
    batches = next((v for v in record.verdicts if v.name == BATCH_DURATION), None)
    if (
        batches is not None
        and batches.value is not None
        and batches.low is not None
        and batches.high is not None
        and batches.threshold is not None
        and batch_bound_side(batches.low, batches.high, batches.threshold) is None
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


def _offered(repetition: RepetitionRecord) -> str:
    """' at 656 records/s': the rate a repetition was offered, where it recorded one."""
    rate = repetition.protocol.get("offered_rate")
    return "" if rate is None else f" at {rate:,.0f} records/s"


def _repetition_detail(repetition: RepetitionRecord) -> str:
    """', lag slope +693 [+603, +782]' or ', no steady state ...' for one repetition."""
    if repetition.protocol.get("failure"):
        return f", {repetition.protocol['failure']}"
    lag = next((v for v in repetition.verdicts if v.name == LAG_TREND), None)
    if lag is None or lag.value is None:
        return ""
    interval = "" if lag.low is None or lag.high is None else f" [{lag.low:+.0f}, {lag.high:+.0f}]"
    return f", lag slope {lag.value:+.0f}{interval}"


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
    within = [r for r in change if r.resources <= allowed]
    failed = [r for r in within if r.outcome is Outcome.FAIL]
    # a PASS within the allowed instances contradicts the regression: a confirming repetition turned it
    deciding = [f"the change's {verdict_text(r)}" for r in within if r.outcome is Outcome.PASS]
    if failed:  # searches run instance counts in any order: the FAIL at the most instances decides
        top = max(failed, key=lambda r: r.resources)
        if not top.certain:
            deciding.append(f"the change's {verdict_text(top)}")
    at_demand = [r for r in reference if r.resources == reference_demand and r.outcome.is_measured]
    deciding += [
        f"{reference_label}'s {verdict_text(r)}"
        for r in at_demand
        if r.outcome is not Outcome.PASS or not r.certain
    ]
    if not deciding:
        return None
    return (
        f"the verdicts that would make this a regression were not certain ({'; '.join(deciding)}): this load "
        "is at the edge of what this host's instances take, where noise decides; re-run it, or move the "
        "gate's load off the edge"
    )


def to_confirm(
    change: Sequence[SubExperimentRecord],
    change_demand: object,
    reference_demand: object,
    tolerance: int = 0,
    reference: Sequence[SubExperimentRecord] = (),
) -> tuple[int | None, int | None]:
    """Where a regression's deciding verdicts are to be measured once more before it is reported: (the
    instances of the change's FAIL, those of REF's PASS), each None where nothing is to be repeated.

    Why: a verdict certain by its own interval still carries run-to-run variation that one run cannot see
    (docs/lab-notes/defaults.md: unchanged code against itself, both sides certain, opposite verdicts). So a
    regression whose verdicts were certain is repeated once, each side in the reverse order of its first
    run; where a repetition disagrees, the record is no longer certain and `uncertain_regression` says so.
    Only where the demands say regression, the verdicts were certain (else it is not comparable already) and
    each rests on one repetition."""
    if not isinstance(reference_demand, int) or isinstance(reference_demand, bool):
        return None, None
    allowed = reference_demand + tolerance
    regressed = change_demand is None or (
        isinstance(change_demand, int) and not isinstance(change_demand, bool) and change_demand > allowed
    )
    if not regressed or uncertain_regression(change, reference_demand, tolerance, reference) is not None:
        return None, None
    failed = [r for r in change if r.outcome is Outcome.FAIL and r.resources <= allowed]
    if not failed:
        return None, None
    top = max(failed, key=lambda r: r.resources)
    passed = [
        r
        for r in reference
        if r.outcome is Outcome.PASS and r.resources == reference_demand and len(r.repetitions) == 1
    ]
    return (top.resources if len(top.repetitions) == 1 else None), (reference_demand if passed else None)


def uncertain_certificate(reference: Sequence[SubExperimentRecord], change_demand: object) -> str | None:
    """Where a pass rests on an uncertain verdict: the change needs `change_demand` instances, no more than REF,
    only because REF failed below that -- its FAIL at the most instances below it. Where that FAIL was not
    certain (and no certain FAIL of REF at as many instances or more stands beside it), REF may need no more
    than the change does there, and a regression of one instance count would not show. The verdict as
    `verdict_text` says it, or None."""
    if not isinstance(change_demand, int) or isinstance(change_demand, bool):
        return None
    failed = [r for r in reference if r.outcome is Outcome.FAIL]
    below = [r for r in failed if r.resources < change_demand]
    if not below:
        return None
    top = max(below, key=lambda r: r.resources)
    if any(r.certain for r in failed if r.resources >= top.resources):
        return None
    return verdict_text(top)
