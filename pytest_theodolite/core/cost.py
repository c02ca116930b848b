"""What a job costs at a gate point, beside its demand: regressions smaller than an instance.

A demand function moves only when a change costs a whole instance at a tested load. The continuous figure
here is the CPU the instances spent per offered record while a passing sub-experiment was measured (from
their cgroups' CPU accounting), with a confidence interval from consecutive blocks of the measurement
window. A gate with ``cost_tolerance`` fails a point whose figure rose beyond the tolerance **and**
significantly -- a one-sided Welch t-test on the two figures, each with the standard error of its blocks,
p < 0.05 (as asv: a factor, and a significant difference) -- where both ran the same number of instances.

Why the figure rises less than the per-record cost: Spark starts the next micro-batch as soon as one ends, so
the instances spend most of their CPU quota whatever the load (part of it on per-batch work), and a dearer
record partly shows as bigger, fewer batches instead. The figure can never exceed the instances' quota per
offered record; how far below that ceiling it sits is the point's CPU headroom (``cpu_headroom``).

Across hosts, the figure is divided by the testbed calibration's CPU per reference row where the two hosts'
calibrations differ by more than the calibration's own run-to-run noise (``CALIBRATION_NOISE``); between two
runs of one host that noise (10 % per calibration, 15 % between two) would swamp the figure's (0.5-4 %), so
they are compared as measured.
Pure functions over data: no broker, no Spark.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from pytest_theodolite.core.estimators import TimeSeries
from pytest_theodolite.core.outcomes import CostStatus, Outcome
from pytest_theodolite.core.protocol import Stop
from pytest_theodolite.core.records import SubExperimentRecord

#: the stop of a repetition that worked off a backlog while it was measured (core/protocol.py)
LAG_FALLING_STOP = Stop.LAG_FALLING.value

#: the raw series a repetition writes while it measures: the instances' CPU seconds and the input topic's
#: end offset (records offered so far), both cumulative, sampled with the lag
SERIES_INSTANCE_CPU = "instance-cpu"
SERIES_INPUT_RECORDS = "input-records"
#: blocks of the measurement window the interval is computed from: at least this long (a few micro-batches
#: each, so that a block does not end mid-batch by chance), at most this many
BLOCK_S = 4.0
MAX_BLOCKS = 6
#: fewer blocks give no interval, and a figure without one is reported, not judged (a CI run judged unchanged
#: code +14 % dearer from two 8 s windows without one: per-batch work over few records)
MIN_BLOCKS = 3
CONFIDENCE = 0.95
#: how far two calibrations' CPU per reference row may differ by the calibration's own noise: over 5 runs on
#: one host it varied by a coefficient of variation of 10 % (max/min 1.27, calibration_spread.py), so two
#: calibrations differ by sqrt(2) x 10 % = 15 % (one standard deviation); this is 3 of them. 20 % was too
#: tight: a clean gate run on the baseline's host calibrated 0.79 vs 0.64 us per row (+23 %) while every
#: UC1-UC3 figure matched its baseline within 2 % -- divided, all read -19 %, and a calibration as far off the
#: other way would have failed them all at 8 %. Within this, a cost regression has to show both as measured
#: and divided by the calibrations (check_cost); beyond it, each figure is divided by its host's calibration
#: (and beyond the calibration margin the testbeds are not compared).
CALIBRATION_NOISE = 0.45
#: a rise counts as beyond the noise below this p-value (one-sided Welch t-test on the two figures)
SIGNIFICANCE = 0.05
#: how much a figure moves between runs beyond what its own blocks show (coefficient of variation), added to
#: each figure's variance in that test. A run's blocks see only the noise within its window, not that of the
#: host's state or of another machine of the same kind (docs/lab-notes/defaults.md).
RUN_TO_RUN_CV = 0.05


class CostToleranceError(ValueError):
    """A cost tolerance that cannot be used; the message says what to write instead."""


def _rounded(value: float | None) -> float | None:
    """Four decimals: what the figures' noise leaves meaningful, and readable in a baseline file."""
    return None if value is None else round(value, 4)


def parse_cost_tolerance(value: Any, name: str = "cost_tolerance") -> float | None:
    """``"20%"`` -> 0.2; ``None``/``""``/``"off"`` -> None (the figure is reported, never judged). `name`: the
    setting the value was given for, as the error names it."""
    if value is None:
        return None
    text = str(value).strip().lower()
    if text in ("", "off", "none"):
        return None
    try:
        if not text.endswith("%"):
            raise ValueError
        share = float(text[:-1]) / 100
    except ValueError:
        raise CostToleranceError(
            f"{name} {value!r} is not a percentage: write e.g. {name}='20%' (fail when the CPU per record rose "
            "more than 20 %), or 'off'"
        ) from None
    if not 0 < share < 10 or not math.isfinite(share):
        raise CostToleranceError(f"{name} {value!r} must be above 0 % and below 1000 %, e.g. '20%'")
    return share


# ------------------------------------------------------------------------------------------------------------
# The figure of one repetition, and of a sub-experiment
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CostEstimate:
    """CPU microseconds per offered record over a measurement window, with its interval (None: too few
    blocks to tell)."""

    cpu_us_per_record: float
    low: float | None = None
    high: float | None = None
    blocks: int = 0

    @property
    def has_interval(self) -> bool:
        """Whether the figure's noise is known (an interval over at least two blocks or repetitions)."""
        return self.low is not None and self.high is not None and self.blocks >= 2

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpu_us_per_record": _rounded(self.cpu_us_per_record),
            "low": _rounded(self.low),
            "high": _rounded(self.high),
            "blocks": self.blocks,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CostEstimate:
        low, high = data.get("low"), data.get("high")
        return cls(
            float(data["cpu_us_per_record"]),
            None if low is None else float(low),
            None if high is None else float(high),
            int(data.get("blocks", 0)),
        )


def cost_estimate(
    times: Sequence[float] | np.ndarray,
    cpu_seconds: Sequence[float] | np.ndarray,
    records: Sequence[float] | np.ndarray,
    block_s: float = BLOCK_S,
    max_blocks: int = MAX_BLOCKS,
    confidence: float = CONFIDENCE,
) -> CostEstimate | None:
    """The figure over the samples (time, cumulative CPU s, cumulative records): total CPU over total
    records, and a Student-t interval from the spread of the same ratio over consecutive blocks of at least
    `block_s` seconds. None where no record was offered."""
    t, cpu, offered = (np.asarray(v, dtype=float) for v in (times, cpu_seconds, records))
    if not (len(t) == len(cpu) == len(offered)):
        raise ValueError(
            f"samples of different lengths: {len(t)} times, {len(cpu)} CPU, {len(offered)} records"
        )
    if len(t) < 2 or offered[-1] <= offered[0]:
        return None
    figure = (cpu[-1] - cpu[0]) / (offered[-1] - offered[0]) * 1e6
    span = t[-1] - t[0]
    count = min(max_blocks, int(span // block_s))
    if count < MIN_BLOCKS:
        return CostEstimate(figure)
    edges = np.searchsorted(t, t[0] + span * np.arange(count + 1) / count)
    edges[-1] = len(t) - 1
    ratios = [
        (cpu[b] - cpu[a]) / (offered[b] - offered[a]) * 1e6
        for a, b in itertools.pairwise(edges)
        if b > a and offered[b] > offered[a]
    ]
    if len(ratios) < MIN_BLOCKS:
        return CostEstimate(figure)
    half = (
        float(stats.t.ppf(0.5 + confidence / 2, len(ratios) - 1))
        * statistics.stdev(ratios)
        / math.sqrt(len(ratios))
    )
    return CostEstimate(figure, figure - half, figure + half, len(ratios))


def cost_from_series(
    cpu: TimeSeries | None, records: TimeSeries | None, from_s: float | None = None
) -> CostEstimate | None:
    """The figure recomputed from a repetition's raw ``instance-cpu`` and ``input-records`` series (sampled
    together; samples only one of them has are dropped), from `from_s` (epoch s: the measurement's start; the
    series begin at the CPU limit) on. None where either is missing."""
    if cpu is None or records is None:
        return None
    common, in_cpu, in_records = np.intersect1d(cpu.timestamps_s, records.timestamps_s, return_indices=True)
    # a sample written at the measurement's start, as read back from its CSV, may differ in the last digit
    kept = slice(None) if from_s is None else common >= from_s - 1e-6
    return cost_estimate(common[kept], cpu.values[in_cpu][kept], records.values[in_records][kept])


def sub_experiment_cost(record: SubExperimentRecord) -> CostEstimate | None:
    """One sub-experiment's figure: its repetition's estimate, or over several repetitions their mean with a
    t-interval over the repetitions (run-to-run spread, which a single window cannot see)."""
    estimates = [estimate for r in record.repetitions if (estimate := repetition_cost(r.counters, r.cost))]
    if not estimates:
        return None
    if len(estimates) == 1:
        return estimates[0]
    figures = [e.cpu_us_per_record for e in estimates]
    mean = statistics.fmean(figures)
    half = (
        float(stats.t.ppf(0.5 + CONFIDENCE / 2, len(figures) - 1))
        * statistics.stdev(figures)
        / math.sqrt(len(figures))
    )
    return CostEstimate(mean, mean - half, mean + half, len(figures))


def repetition_cost(counters: Mapping[str, int], recorded: Mapping[str, Any] | None) -> CostEstimate | None:
    """A repetition's estimate as recorded, or from its counters alone (results written before the interval
    was recorded)."""
    if recorded:
        return CostEstimate.from_dict(recorded)
    if counters.get("records_measured") and "instance_cpu_ms" in counters:
        return CostEstimate(counters["instance_cpu_ms"] * 1000 / counters["records_measured"])
    return None


# ------------------------------------------------------------------------------------------------------------
# A gate point's cost against its baseline
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PointCost:
    """The figure at one load, measured at its demand; `reference_us_per_row` is the testbed calibration's
    CPU per reference row on the host it was measured on (None: not calibrated by CPU)."""

    resources: int
    estimate: CostEstimate
    reference_us_per_row: float | None = None
    #: the instances' CPU used over what their limit allowed while measuring (None: not CPU-limited)
    cpu_utilisation: float | None = None
    #: measured while the instances worked off a backlog (a repetition that ended ``lag-falling``): they processed
    #: more records than were offered, so the CPU per offered record reads high -- reported, never judged
    backlog: bool = False

    @property
    def cpu_us_per_record(self) -> float:
        return self.estimate.cpu_us_per_record

    def to_dict(self) -> dict[str, Any]:
        return {
            "resources": self.resources,
            **self.estimate.to_dict(),
            "reference_us_per_row": _rounded(self.reference_us_per_row),
            "cpu_utilisation": _rounded(self.cpu_utilisation),
            **({"backlog": True} if self.backlog else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PointCost:
        reference, utilisation = data.get("reference_us_per_row"), data.get("cpu_utilisation")
        return cls(
            int(data["resources"]),
            CostEstimate.from_dict(data),
            None if reference is None else float(reference),
            None if utilisation is None else float(utilisation),
            bool(data.get("backlog", False)),
        )


@dataclass(frozen=True)
class CostCheck:
    """The figure against the baseline's at one load. `relative`: 0.2 = 20 % dearer; `normalised`: divided by
    each host's calibration CPU per reference row."""

    status: CostStatus
    relative: float | None = None
    normalised: bool = False
    tolerance: float | None = None
    reason: str = ""
    #: how likely a rise this large is from the two figures' noise alone (None: an interval is missing)
    p_value: float | None = None
    #: where the hosts' calibrations differ, but by no more than their own noise: the change with each figure
    #: divided by its calibration, a second reading that has to show the regression too (None: not read)
    divided: float | None = None
    #: where the reference's instances spent nearly all their CPU quota: the most the figure could rise (its
    #: headroom, 0.03 = +3 %), below the tolerance -- the check could not fail, so it was not made
    ceiling: float | None = None
    #: what was compared, as a verdict names it
    figure: str = "CPU per record"
    #: not judged because a figure was measured while a backlog was worked off (PointCost.backlog)
    backlog: bool = False

    @property
    def not_judged(self) -> bool:
        """A change was measured but a check with a tolerance could not be made (`reason` says why)."""
        return self.status == CostStatus.NOT_COMPARED and self.relative is not None

    @property
    def text(self) -> str:
        """'+9% (tolerance 5%, p 0.01)', '+9%', or why it was not compared."""
        if self.relative is None:
            return self.reason or "n/a"
        text = f"{self.relative:+.0%}"
        if self.ceiling is not None:
            return text + f" (not judged: the reference spent {1 / (1 + self.ceiling):.0%} of its CPU quota)"
        if self.not_judged:
            return text + (
                " (not judged: measured while a backlog was worked off)"
                if self.backlog
                else " (not judged: no interval)"
            )
        details = [f"tolerance {self.tolerance:.0%}"] if self.tolerance is not None else []
        if self.tolerance is not None and self.p_value is not None:
            details.append(f"p {self.p_value:.2g}")
        if self.divided is not None:
            details.append(f"{self.divided:+.0%} divided by the calibrations")
        return text + (f" ({', '.join(details)})" if details else "")


def check_cost(baseline: PointCost | None, measured: PointCost | None, tolerance: float | None) -> CostCheck:
    """A regression when the figure rose by more than `tolerance` and significantly (a one-sided Welch test,
    p < SIGNIFICANCE); only at the same instance count (otherwise the demand verdict says it all). Without a
    tolerance the change is reported, never judged; nor where the reference's CPU headroom is below the
    tolerance (``rise_ceiling``): a check that could not fail is reported as not made; nor where either figure
    has no interval (a window of fewer than MIN_BLOCKS blocks): a rise its noise could make is not a finding.

    Hosts whose calibrations differ by more than CALIBRATION_NOISE are compared with each figure divided by
    its calibration. Within it the calibrations cannot tell a slower host from their own noise, so the figures
    are compared as measured *and* divided, and a regression has to show in both readings: a host up to that
    much slower than the baseline's reads as a rise as measured (unchanged code at UC1 20 000 on a host
    calibrated 0.88 vs 0.64 us per row: +25 %, p < 0.05; divided, -9 %), a calibration that is merely off
    reads as one divided."""
    if baseline is None or measured is None:
        missing = "the baseline has" if baseline is None else "this run has"
        return CostCheck(CostStatus.NOT_COMPARED, tolerance=tolerance, reason=f"{missing} no CPU figure here")
    if baseline.resources != measured.resources:
        return CostCheck(
            CostStatus.NOT_COMPARED,
            tolerance=tolerance,
            reason=f"measured at {measured.resources} instances, the baseline's at {baseline.resources}",
        )
    b, m = baseline.estimate, measured.estimate

    def not_judged(why: str, **check: Any) -> CostCheck:
        """The change as measured, reported and not judged (`why` says why)."""
        relative = m.cpu_us_per_record / b.cpu_us_per_record - 1
        return CostCheck(
            CostStatus.NOT_COMPARED, relative, False, tolerance, reason=f"not judged: {why}", **check
        )

    worked_off = [side for side, c in (("the reference's", baseline), ("this run's", measured)) if c.backlog]
    if tolerance is not None and worked_off:
        return not_judged(
            f"{' and '.join(worked_off)} figure was measured while the instances worked off a backlog (the lag "
            "fell), processing more records than were offered",
            backlog=True,
        )
    ceiling = rise_ceiling(baseline)
    if tolerance is not None and ceiling is not None and ceiling < tolerance:
        return not_judged(
            f"the reference's instances spent {1 / (1 + ceiling):.0%} of their CPU quota, so the figure could "
            f"rise {max(ceiling, 0):.0%} at most, less than the {tolerance:.0%} tolerance",
            ceiling=ceiling,
        )

    without_interval = [side for side, e in (("the reference's", b), ("this run's", m)) if not e.has_interval]
    if tolerance is not None and without_interval:
        return not_judged(
            f"{' and '.join(without_interval)} figure has no interval to tell a change from noise (a window "
            f"shorter than {MIN_BLOCKS} blocks of {BLOCK_S:.0f} s; measure at least "
            f"{MIN_BLOCKS * BLOCK_S:.0f} s: duration={MIN_BLOCKS * BLOCK_S:.0f})"
        )

    def reading(scale_b: float, scale_m: float) -> tuple[float, float | None, bool]:
        """(relative change, p-value, beyond the tolerance and significant) with the figures so scaled."""
        relative = (m.cpu_us_per_record * scale_m) / (b.cpu_us_per_record * scale_b) - 1
        p_value = rise_p_value(b, m, scale_b, scale_m, RUN_TO_RUN_CV)
        significant = p_value is not None and p_value < SIGNIFICANCE
        return relative, p_value, tolerance is not None and relative > tolerance and significant

    reference_b, reference_m = baseline.reference_us_per_row, measured.reference_us_per_row
    relative, p_value, rose = reading(1.0, 1.0)
    if reference_b is None or reference_m is None or reference_b == reference_m:
        return CostCheck(
            CostStatus.REGRESSION if rose else CostStatus.PASS, relative, False, tolerance, p_value=p_value
        )
    divided, divided_p, divided_rose = reading(1 / reference_b, 1 / reference_m)
    if abs(reference_m / reference_b - 1) > CALIBRATION_NOISE:  # clearly different hosts
        return CostCheck(
            CostStatus.REGRESSION if divided_rose else CostStatus.PASS,
            divided,
            True,
            tolerance,
            p_value=divided_p,
        )
    status = CostStatus.REGRESSION if rose and divided_rose else CostStatus.PASS
    return CostCheck(status, relative, False, tolerance, p_value=p_value, divided=divided)


def rise_ceiling(reference: PointCost) -> float | None:
    """The most the CPU per offered record can rise from `reference` at the same instances and load: the
    instances cannot spend more than their quota, so at most 1 / utilisation - 1 (None: not CPU-limited, or no
    utilisation recorded). A job whose instances spend their quota reads quota / load whatever a record costs:
    a dearer record makes its micro-batches bigger, not its figure higher."""
    if reference.cpu_utilisation is None or reference.cpu_utilisation <= 0:
        return None
    return 1.0 / reference.cpu_utilisation - 1.0


def rise_p_value(
    b: CostEstimate,
    m: CostEstimate,
    scale_b: float = 1.0,
    scale_m: float = 1.0,
    run_to_run_cv: float = 0.0,
) -> float | None:
    """One-sided Welch t-test that `m` is above `b`: each figure's standard error from its recorded interval
    (a Student-t over its blocks), Welch-Satterthwaite degrees of freedom. `run_to_run_cv` adds to each
    figure's variance (cv x figure)^2, a variance taken as known (no degrees of freedom of its own). None where
    either has no interval."""
    if not (b.has_interval and m.has_interval):
        return None
    se_b = (b.high - b.cpu_us_per_record) * scale_b / float(stats.t.ppf(0.5 + CONFIDENCE / 2, b.blocks - 1))  # type: ignore[operator]
    se_m = (m.high - m.cpu_us_per_record) * scale_m / float(stats.t.ppf(0.5 + CONFIDENCE / 2, m.blocks - 1))  # type: ignore[operator]
    figure_b, figure_m = b.cpu_us_per_record * scale_b, m.cpu_us_per_record * scale_m
    difference = figure_m - figure_b
    between = (run_to_run_cv * figure_b) ** 2 + (run_to_run_cv * figure_m) ** 2
    variance = se_b**2 + se_m**2 + between
    if variance <= 0:
        return 0.0 if difference > 0 else 1.0
    within = se_b**4 / (b.blocks - 1) + se_m**4 / (m.blocks - 1)
    freedom = variance**2 / within if within > 0 else math.inf
    return float(stats.t.sf(difference / math.sqrt(variance), freedom))


def point_cost(
    records: Iterable[SubExperimentRecord],
    demand: Any,
    instance_cpu: float | None,
    reference_us_per_row: float | None,
) -> PointCost | None:
    """The figure of the passing sub-experiment at `demand` (None where there is no such run or figure)."""
    if not isinstance(demand, int) or isinstance(demand, bool):
        return None
    record = next((r for r in records if r.resources == demand and r.outcome is Outcome.PASS), None)
    estimate = None if record is None else sub_experiment_cost(record)
    if record is None or estimate is None:
        return None
    backlog = any(r.protocol.get("stop") == LAG_FALLING_STOP for r in record.repetitions)
    return PointCost(demand, estimate, reference_us_per_row, cpu_utilisation(record, instance_cpu), backlog)


def cpu_utilisation(record: SubExperimentRecord, instance_cpu: float | None) -> float | None:
    """The instances' CPU over what their limit allowed while measuring (mean over repetitions)."""
    if not instance_cpu:
        return None
    shares = []
    for repetition in record.repetitions:
        counters = repetition.counters
        window_ms = counters.get("cost_window_ms") or 1000 * float(repetition.protocol.get("measured_s") or 0)
        if "instance_cpu_ms" in counters and window_ms > 0:
            shares.append(counters["instance_cpu_ms"] / (window_ms * instance_cpu * record.resources))
    return statistics.fmean(shares) if shares else None


# ------------------------------------------------------------------------------------------------------------
# Blind spots: how much dearer the job could become before a point's demand changes
# ------------------------------------------------------------------------------------------------------------
