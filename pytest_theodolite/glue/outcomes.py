"""What each outcome of a gate point is in pytest's terms and in the run's exit code: one table, which the gate
follows (gate.py) and the reference renders (docs/reference/outcomes.md, README's exit codes)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pytest_theodolite.core.outcomes import Verdict

#: pytest's own codes for a clean run and for failed tests, and the gate's for a run without a verdict somewhere
EXIT_OK, EXIT_REGRESSION, EXIT_NO_VERDICT = 0, 1, 7


class TestOutcome(str, enum.Enum):
    """How pytest reports a gate point's test."""

    __test__ = False  # a name pytest would otherwise collect

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    ERROR = "error"  # failed in setup, where the point is measured


@dataclass(frozen=True)
class GateOutcome:
    """One way a gate point ends: what happened, the test's outcome, the run's exit code (where nothing worse
    happened elsewhere in it) and what to do."""

    happened: str
    test: TestOutcome
    exit_code: int
    what_to_do: str

    @property
    def verdict_reached(self) -> bool:
        return self.exit_code != EXIT_NO_VERDICT


VERDICT_OUTCOMES: dict[Verdict, GateOutcome] = {
    Verdict.PASS: GateOutcome(
        "the demand is within its reference (+ `tolerance`), and the CPU per record within `cost_tolerance`",
        TestOutcome.PASSED,
        EXIT_OK,
        "nothing",
    ),
    Verdict.IMPROVEMENT: GateOutcome(
        "fewer instances than its reference",
        TestOutcome.PASSED,
        EXIT_OK,
        "the baseline could be recorded again",
    ),
    Verdict.REGRESSION: GateOutcome(
        "more instances than its reference (+ `tolerance`)",
        TestOutcome.FAILED,
        EXIT_REGRESSION,
        "fail the check; the table and the raw results say where",
    ),
    Verdict.COST_REGRESSION: GateOutcome(
        "the same instances, but a CPU per record beyond `cost_tolerance` and beyond its noise",
        TestOutcome.FAILED,
        EXIT_REGRESSION,
        "fail the check; the table and the raw results say where",
    ),
    Verdict.NOT_COMPARABLE: GateOutcome(
        "measured, but not comparable: a baseline from a machine of other speed or other CPU limits, a verdict "
        "at the edge of this machine's capacity, a paired read that gave no figure (the reason says which)",
        TestOutcome.SKIPPED,
        EXIT_NO_VERDICT,
        "do not merge on it: rerun, record the baseline on this machine, or use pull-request mode",
    ),
    Verdict.NEW_LOAD: GateOutcome(
        "the stored baseline has no value for this load",
        TestOutcome.SKIPPED,
        EXIT_NO_VERDICT,
        "record the baseline (`--theodolite-update-baselines`) and commit it",
    ),
    Verdict.UNMEASURED: GateOutcome(
        "not measured: an INVALID or ERRORED sub-experiment (the reason says why)",
        TestOutcome.ERROR,
        EXIT_NO_VERDICT,
        "do not merge on it: fix what the reason names and rerun",
    ),
}

#: a gate whose benchmark has no stored baseline at all (outside recording and pull-request mode)
NO_BASELINE = GateOutcome(
    "no stored baseline for the benchmark",
    TestOutcome.SKIPPED,
    EXIT_NO_VERDICT,
    "record one: the skip reason gives the command",
)
