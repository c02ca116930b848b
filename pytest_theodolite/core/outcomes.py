"""The one vocabulary of outcomes and verdicts, defined once: what a sub-experiment came to (Outcome), what a
gate point came to against its reference (Verdict), a demand that could not be measured (UNMEASURED), a search
step's and a cost check's status, and the words tables use for them."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, Final, Literal


class Outcome(str, enum.Enum):
    """Result of one SLO, one repetition or one sub-experiment."""

    PASS = "pass"
    FAIL = "fail"
    INVALID = "invalid"  # the generator did not produce the load: neither pass nor fail
    ERRORED = "errored"  # query, broker or executor died, or the measurement broke: never a pass

    @property
    def is_measured(self) -> bool:
        """True for PASS and FAIL: the system under test was really judged."""
        return self in (Outcome.PASS, Outcome.FAIL)


class _Unmeasured(enum.Enum):
    UNMEASURED = "unmeasured"

    def __repr__(self) -> str:
        return "UNMEASURED"


#: The measured value of a load whose sub-experiment was INVALID or ERRORED (distinct from None = "none").
UNMEASURED: Final = _Unmeasured.UNMEASURED


MeasuredDemand = int | None | Literal[_Unmeasured.UNMEASURED]


class Verdict(str, enum.Enum):
    """How one load's measured demand relates to its baseline."""

    PASS = "pass"  # measured <= baseline + tolerance, not below the baseline
    IMPROVEMENT = "improvement"  # measured < baseline: passes; the baseline could be lowered
    REGRESSION = "regression"  # measured > baseline + tolerance ("none" counts as more than any number)
    UNMEASURED = "unmeasured"  # an INVALID/ERRORED sub-experiment: neither pass nor regression
    NEW_LOAD = "new-load"  # no baseline value for this load: nothing to compare, no verdict (exit 7)
    #: the baseline's testbed calibration differs beyond the margin: neither pass nor regression (exit 7)
    NOT_COMPARABLE = "not-comparable"
    #: the same demand, but the CPU per record rose beyond the gate's cost_tolerance (cost.py)
    COST_REGRESSION = "cost-regression"

    @property
    def label(self) -> str:
        """Upper-case word for tables: PASS, IMPROVEMENT, REGRESSION, UNMEASURED, NEW LOAD."""
        return self.value.replace("-", " ").upper()

    @property
    def passes(self) -> bool:
        return self in (Verdict.PASS, Verdict.IMPROVEMENT)


def instances_text(value: int | None, explain_none: bool = False) -> str:
    if value is None:
        return "none (no tested instance count met the SLOs)" if explain_none else "none"
    return count_text(value, "instance")


class Phase(str, enum.Enum):
    """Where a repetition's measurement protocol is (core/protocol.py)."""

    PRIMING = "priming"
    SETTLING = "settling"
    MEASURING = "measuring"
    DONE = "done"


class Stop(str, enum.Enum):
    """Why a repetition's measurement ended (core/protocol.py)."""

    CERTAIN = "certain"  # the slope's interval lay wholly on one side of the threshold
    MAX_DURATION = "max-duration"  # the bound was reached with the interval straddling the threshold
    NOT_SETTLED = "not-settled"  # batch durations still falling when the warm-up bound was reached
    NO_BATCHES = "no-batches"  # too few micro-batches finished in the longest measurement to fit a trend
    FALLING_BEHIND = "falling-behind"  # every micro-batch markedly longer than the one before
    LAG_FALLING = "lag-falling"  # settling: the lag fell certainly under the CPU limit, a backlog worked off
    BEYOND_BATCH_BOUND = "beyond-batch-bound"  # batches under the limit beyond the bound, not shortening


#: stops whose repetition FAILs without a fitted trend
FAILING_STOPS = frozenset({Stop.NOT_SETTLED, Stop.NO_BATCHES, Stop.FALLING_BEHIND, Stop.BEYOND_BATCH_BOUND})
#: stops whose verdict is certain: the interval lay on one side of the threshold, or the batches show a job
#: that does not keep up. ``max-duration`` (the point estimate decided) is not; ``not-settled`` is only where
#: the batches under the limit at least doubled (``MeasurementProtocol.certain``).
CERTAIN_STOPS = frozenset(
    {Stop.CERTAIN, Stop.FALLING_BEHIND, Stop.NO_BATCHES, Stop.LAG_FALLING, Stop.BEYOND_BATCH_BOUND}
)


class StepStatus(enum.StrEnum):
    """What one x (a load for demand, a resource amount for capacity) came to in a search (search.Step.status)."""

    MEASURED = "measured"
    NONE = "none"
    UNMEASURED = "unmeasured"
    SKIPPED = "skipped"
    #: demand: passed at this many instances, fewer not run -- a gate needs no more to tell "not above its
    #: reference", and each failing run below a demand is the dearest sub-experiment there is
    AT_MOST = "at-most"
    #: demand: failed at the most instances run, more not run -- where no regression can be judged (a testbed
    #: much slower than its baseline's), a demand above the reference's stays not comparable however high it is
    ABOVE = "above"
    #: demand: failed one instance below this many, these not run -- the reference's side of pull-request mode's
    #: certified search, where the change passed at this many: all the verdict needs
    AT_LEAST = "at-least"
    #: demand: not run at this load -- the reference's side of pull-request mode's certified search where the
    #: paired read was certain the change costs no more per record than its tolerance allows and the change
    #: passed at the demand the stored baseline expects there (``ref_below=false``): this value is that
    #: expectation, not a measurement
    EXPECTED = "expected"


def most_failing(runs: Iterable[Any]) -> int | None:
    """The most instances (``.resources``) among `runs` whose ``.outcome`` is FAIL, None where none failed: where
    an ABOVE demand lies above."""
    return max((run.resources for run in runs if run.outcome is Outcome.FAIL), default=None)


class CapacityStatus(enum.StrEnum):
    """What one capacity measurement came to (engine/capacity_probe.py)."""

    CERTAIN = "certain"
    UNCERTAIN = "uncertain"
    ERRORED = Outcome.ERRORED.value
    INVALID = Outcome.INVALID.value

    @property
    def is_measured(self) -> bool:
        """True where an estimate was taken, certain or not."""
        return self in (CapacityStatus.CERTAIN, CapacityStatus.UNCERTAIN)


class CostStatus(enum.StrEnum):
    """A cost check's status (cost.CostCheck.status)."""

    PASS = "pass"
    REGRESSION = "regression"
    NOT_COMPARED = "not-compared"


def count_text(number: int, noun: str) -> str:
    """``1 load``, ``2 loads``: a count with its noun, plural where it is not one."""
    return f"{number} {noun}{'' if number == 1 else 's'}"
