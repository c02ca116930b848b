"""The lines under a benchmark's table: what its figures rest on, in words.

Pure functions over typed results; the experiments measure, this module says what their measurements mean.
Objects from the engine are read through the small protocols below, so the report layer imports no engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from pytest_theodolite.core.blind_spot import WIDE_BLIND_SPOT, BlindSpot
from pytest_theodolite.core.capacity import CapacityEstimate
from pytest_theodolite.core.scalability import DemandResult
from pytest_theodolite.core.task_cpu import TaskCpuPerRecord
from pytest_theodolite.judge.comparison import SPEED_UNCERTAINTY
from pytest_theodolite.store.baseline import Baseline


class Calibrated(Protocol):
    """A testbed calibration (engine/calibration.py) as the report reads it."""

    @property
    def rows_per_s(self) -> float: ...

    def describe(self) -> str: ...


class CapacityMeasured(Protocol):
    """One capacity measurement (engine/capacity_probe.py) as the report reads it."""

    @property
    def estimate(self) -> CapacityEstimate | None: ...
    @property
    def status(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def task_cpu(self) -> TaskCpuPerRecord | None: ...
    @property
    def timings(self) -> Mapping[str, float]: ...


def calibration_note(calibration: Calibrated | None, baseline: Baseline | None) -> str | None:
    """'testbed calibration: ... (baseline: ..., ratio ...)' for the summary, or None before any calibration."""
    if calibration is None:
        return None
    note = f"testbed calibration: {calibration.describe()}"
    recorded = baseline.testbed.calibration_rows_per_s if baseline is not None else None
    if recorded:
        ratio = calibration.rows_per_s / recorded
        note += f"; baseline's: {recorded:,.0f} rows/s (this testbed at {ratio:.2f}x)"
    elif baseline is not None:
        note += "; the baseline has none (recorded before calibration: re-record it to compare testbeds)"
    return note


def capacity_note(measurements: Mapping[int, CapacityMeasured]) -> str:
    """The capacities as one line of the report, with the seconds their measurement took."""
    parts = [
        f"{r}: {m.estimate.text() if m.estimate is not None else f'{m.status} ({m.reason})'}"
        + ("" if m.task_cpu is None or m.estimate is None else f", {m.task_cpu.text()}")
        for r, m in sorted(measurements.items())
    ]
    seconds = sum(sum(m.timings.values()) for m in measurements.values())
    return f"capacity per instance count, measured directly ({seconds:.0f} s): " + "; ".join(parts)


def recording_note(instance_cpu: float | None) -> str:
    """What a freshly recorded baseline needs of the runs that compare with it: the same CPU per instance."""
    if instance_cpu is None:
        return (
            "baseline recorded with unlimited CPU per instance: a run whose instances are CPU-limited (a gate's "
            "instance_cpu on a cluster that limits it, e.g. as root) is not comparable with it; record it where "
            "the gates run"
        )
    return (
        f"baseline recorded with {instance_cpu:g} CPU per instance: a run compares with it only where its "
        "instances are limited so too -- a cluster that can limit them (as root, with the cgroup cpu "
        "controller: docs/cpu-limits.md); elsewhere it is not comparable"
    )


def bound_notes(measured: DemandResult, reference: str = "baseline") -> tuple[str, ...]:
    """What '<=N' and '>N' in a table mean, where a load's search stopped at a pass at the reference's demand,
    or at a FAIL there on a testbed that cannot judge a higher demand."""
    notes = []
    if measured.at_most:
        loads = ", ".join(str(load) for load in measured.at_most)
        notes.append(
            f"<=N (loads {loads}): passed at the {reference}'s demand, fewer instances not run -- a gate needs no "
            "more, and the failing run below a demand is the dearest there is; exact_demand=true (or "
            "--theodolite-exact-demand=true) searches below it and finds improvements"
        )
    if measured.above:
        loads = ", ".join(str(load) for load in sorted(measured.above))
        notes.append(
            f">N (loads {loads}): failed at the {reference}'s demand on a testbed too slow to compare with the "
            "baseline's, more instances not run -- how many it needs would not change the verdict (not "
            "comparable, or a regression where a FAIL at a lower rate confirmed it); exact_demand=true (or "
            "--theodolite-exact-demand=true) measures them"
        )
    return tuple(notes)


def offered_note(share: float, again: float | None) -> tuple[str, ...]:
    """What the loads' rates were, where a gate offered them at a `share` (offered_share) and measured a FAIL
    once more at `again` (regression_share), for under the table."""
    if share == 1:  # a testbed read as fast (regression_share: nothing measured again), faster, or unordered
        return ()
    note = (
        f"every load was offered at {share:.2f}x its rate (the same keys, each sending less often): the "
        f"calibration reads this testbed slower than the baseline's, and {share:.2f}x is the fastest speed it "
        f"allows ({SPEED_UNCERTAINTY:.0%} over it) -- a pass there is judged"
    )
    if again is not None:
        note += (
            f"; a FAIL at the baseline's demand was measured once more at {again:.2f}x, the slowest speed it "
            "allows: failing there too it is a regression, passing there not comparable"
        )
    return (note,)


def blind_spot_warning(name: str, spots: Sequence[BlindSpot | None]) -> str | None:
    """A sentence when every load of a gate sits far below the capacity of its demand."""
    known = [spot for spot in spots if spot is not None]
    if not known or len(known) < len(spots) or min(s.share for s in known) < WIDE_BLIND_SPOT:
        return None
    least = min(s.share for s in known)
    return (
        f"{name}: every load sits far below what its instances can take (at least +{least:.0%} headroom): its "
        "demand cannot change until the job is that much dearer; move a load toward the capacity of its "
        "demand or gate the CPU per record with cost_tolerance"
    )


def loads_text(loads: Sequence[int]) -> str:
    return ", ".join(map(str, loads))
