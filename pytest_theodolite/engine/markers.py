"""The ``theodolite`` marker: its keys, their defaults, and the typed GateSpec a marker (with the ini file's and
the command line's overrides) comes to. Bad values are a GateSpecError that names the key and what it takes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from pytest_theodolite.core.cost import parse_cost_tolerance
from pytest_theodolite.core.estimators import SlopeThreshold
from pytest_theodolite.core.evaluation import SloSettings
from pytest_theodolite.core.measurement_plan import MeasurementPlan
from pytest_theodolite.core.paired_cost import PAIRED_COST_TOLERANCE
from pytest_theodolite.core.search import Strategy, parse_strategy
from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
from pytest_theodolite.infra.spark.masters import MasterError, check_session_conf

#: a gate's settings when neither the marker, the ini file nor the command line gives them. A gate judges in
#: steady state and measures until its verdict is certain (protocol.py): the job is primed without the CPU
#: limit, the warm-up ends when its micro-batch durations stop falling (at most ``max_warmup`` s), and the
#: measurement lasts from ``duration`` s until the lag slope's ``confidence`` interval lies on one side of the
#: threshold, at most ``max_duration`` s. ``warmup=60, duration=300, max_duration=300, prime=False,
#: slope_method="ols"`` is Theodolite's own protocol.
GATE_DEFAULTS: dict[str, Any] = {
    "resources": (1, 2, 3, 4),
    "duration": 20.0,
    "max_duration": 120.0,
    "warmup": "auto",
    "max_warmup": 90.0,
    "prime": True,
    "confidence": 0.95,
    "slope_method": "batch-aligned",
    "threshold": "5%",
    "strategy": "baseline-guess+lower-bound",
    # a pass at the reference's demand ends a load's search (its demand is at most that); recording a baseline
    # always searches below it
    "exact_demand": False,
    "repetitions": 1,
    "tolerance": 0,
    # e.g. "20%"; None: the CPU per record is reported, not judged (cost.py); pull-request mode and the capacity
    # strategy: 10 % (JUDGED_COST_TOLERANCE)
    "cost_tolerance": None,
    "sample_interval": 1.0,
    "spark_conf": {},
    "instance_cpu": None,
    "max_batch_duration": None,  # seconds; None: only the lag trend decides
    "max_late_rate": None,  # records dropped as late per second; None: not checked (slo.check_late_records)
    # auto: read in pull-request mode wherever two instances exist (docs/gate-quality.md: why by default)
    "paired_cost": "auto",
    # the paired read's figure has its own tolerance: its noise is a few per cent on every shipped gate, while a
    # gate's cost_tolerance is set from the noise of the CPU per offered record (30 % on UC3 and UC4)
    "paired_cost_tolerance": f"{PAIRED_COST_TOLERANCE:.0%}",
    # the certificate of a pull-request verdict: REF failing one instance below the change's pass
    "ref_below": True,
}


#: the cost tolerance where the figure is judged by default -- pull-request mode (both sides on one host) and the
#: capacity strategy (the CPU per record at capacity): a change beyond 1.1x, and significant, fails the gate (asv's
#: default factor)
JUDGED_COST_TOLERANCE = 0.10

MARKER_KEYWORDS = ("loads", *GATE_DEFAULTS)
#: what each marker key means (the reference docs and ``pytest --markers`` are made from it)
MARKER_HELP: dict[str, str] = {
    "loads": "the loads the gate reports, one test per load (records/s or the benchmark's load unit)",
    "resources": "the instance counts a demand search may try, ascending",
    "duration": "seconds measured at least after the warm-up, per sub-experiment",
    "max_duration": "seconds measured at most: the measurement goes on past duration until the lag slope's "
    "confidence interval lies on one side of the threshold",
    "warmup": "auto (until the micro-batch durations stop falling) or seconds of lag dropped before fitting "
    "the trend",
    "max_warmup": "seconds an auto warm-up may take before the sub-experiment fails as not settled (up to twice "
    "that where few or long micro-batches finish)",
    "prime": "true: run the first micro-batches without the instances' CPU limit (JIT and code generation "
    "are set-up); false: under the limit from the start",
    "confidence": "confidence of the lag slope's interval, e.g. 0.95",
    "slope_method": "batch-aligned (one lag point per finished micro-batch), ols or theil-sen (every sample, "
    "as Theodolite)",
    "threshold": "largest lag slope that passes: a share of the load (5%: scales with it) or records/s (2000)",
    "strategy": (
        "demand search: linear, binary, initial-guess, baseline-guess, full, optionally +lower-bound; or capacity "
        "(each instance count's capacity measured, the demand derived, the lag trend run only at its boundary)"
    ),
    "exact_demand": "true: search below the reference's demand too, so that a lower demand (an improvement) is "
    "found, at the price of a failing sub-experiment per load; false: a pass at the reference's demand ends a "
    "load's search (reported as <=N). Recording a baseline always searches below it",
    "repetitions": "repetitions per sub-experiment (the median slope decides)",
    "tolerance": "instances a load's demand may exceed its reference before failing",
    "cost_tolerance": "fail a load whose CPU per record rose beyond this share of the reference's (e.g. 20%) "
    "and beyond its noise, at the same demand; unset: reported only, except in pull-request mode and under the "
    "capacity strategy (10%); the paired read's figure has its own (paired_cost_tolerance)",
    "sample_interval": "seconds between two lag samples",
    "spark_conf": "Spark settings for the job's session, e.g. {'spark.sql.shuffle.partitions': '8'}",
    "instance_cpu": "CPU cores per instance, e.g. 0.25, enforced with cgroups where they can be made; "
    "None: unlimited",
    "max_batch_duration": "largest median micro-batch duration (s) that passes; None: only the lag trend decides",
    "max_late_rate": "most records per second a stateful job may drop as later than its watermark after the "
    "warm-up (e.g. 0); None: not checked",
    "paired_cost": "pull-request mode: both revisions also read a backlog at the same time, each on one "
    "instance, and the change's time per record (inverse throughput) over REF's, batch by batch, fails the gate beyond "
    "paired_cost_tolerance where significant; a load whose demand passed needs its figure (none: not comparable, "
    "exit 7); auto (the default): in pull-request mode; false: not read, the demand judged alone (about 4-6 "
    "minutes less per benchmark)",
    "paired_cost_tolerance": "how far the paired read's figure (paired_cost) may rise before it fails the gate, "
    "where significant (e.g. 7%); off: reported only. Its own, whatever cost_tolerance says: the paired read's "
    "noise is a few per cent where the CPU per offered record's may be tens",
    "ref_below": "pull-request mode: true (the default): REF runs one instance below the change's pass at every "
    "load, which certifies that the change needs no more than REF; false: where the paired read is certain the "
    "change costs within paired_cost_tolerance and a stored baseline names the demand expected (its calibration "
    "reading this testbed at 0.87x its host or slower, where each load weighs at least the baseline's), the "
    "change's pass there is the verdict and REF does not run "
    "(REF's failing runs are about a third of a run; a change that moves a demand without moving its cost per "
    "record beyond the tolerance is not seen where REF needed fewer)",
}


class GateSpecError(ValueError):
    """A ``theodolite`` marker (or gate option) with a value that cannot be used."""


@dataclass(frozen=True)
class GateSpec:
    benchmark: Benchmark
    settings: ExperimentSettings
    tolerance: int
    cost_tolerance: float | None = None  # 0.2: fail when the CPU per record rose more than 20 %


def parse_threshold(text: Any) -> SlopeThreshold:
    """``2000`` -> 2000 records/s; ``"5%"`` -> 5 % of the load's rate."""
    raw = str(text).strip()
    try:
        if raw.endswith("%"):
            share = float(raw[:-1]) / 100
            if share <= 0:
                raise ValueError
            return SlopeThreshold(relative_to_load=share)
        value = float(raw)
        if value <= 0:
            raise ValueError
        return SlopeThreshold(absolute=value)
    except ValueError:
        raise GateSpecError(
            f"threshold {text!r} is neither a positive number of records/s (e.g. 2000) nor a "
            "positive share of the load (e.g. 5%)"
        ) from None


def gate_spec(
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    overrides: Mapping[str, str],
    job_options: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    pull_request: bool = False,
    update_baselines: bool = False,
) -> GateSpec:
    """Build a gate from ``@pytest.mark.theodolite(benchmark, loads=[...], ...)`` and the option overrides;
    ``job_options`` (benchmark name -> options) override the benchmark's job options. In `pull_request` mode a
    gate that names no cost tolerance gets JUDGED_COST_TOLERANCE; `update_baselines` makes every demand
    exact."""
    if len(args) != 1 or not isinstance(args[0], Benchmark):
        raise GateSpecError(
            "the theodolite marker takes one positional argument, a pytest_theodolite.Benchmark, "
            f"got {args!r}"
        )
    unknown = sorted(set(kwargs) - set(MARKER_KEYWORDS))
    if unknown:
        raise GateSpecError(
            f"unknown theodolite marker argument(s) {unknown}; known: {', '.join(MARKER_KEYWORDS)}"
        )
    if "loads" not in kwargs:
        raise GateSpecError("the theodolite marker needs loads=[...], the loads to measure the demand at")
    values = {**GATE_DEFAULTS, **kwargs, **overrides}
    try:
        loads = _whole_numbers(values["loads"], "loads")
        resources = _whole_numbers(values["resources"], "resources")
        strategy, lower_bound = parse_strategy(str(values["strategy"]))
        tolerance = _count(values["tolerance"], "tolerance", minimum=0)
        cost_tolerance = parse_cost_tolerance(values["cost_tolerance"])
        named_cost_tolerance = "cost_tolerance" in {**kwargs, **overrides}
        paired_cost_tolerance = parse_cost_tolerance(values["paired_cost_tolerance"], "paired_cost_tolerance")
        if (pull_request or strategy is Strategy.CAPACITY) and not named_cost_tolerance:
            # both sides on one host, or what a record costs saturated instances: judged by default, as asv does
            cost_tolerance = JUDGED_COST_TOLERANCE
        fixed_warmup = _warmup(values["warmup"])
        # a fixed warm-up is Theodolite's protocol: no early stop for growing batches either
        plan = MeasurementPlan(
            warmup_s=fixed_warmup,
            prime_unlimited=_flag(values["prime"], "prime"),
            falling_behind_batches=3 if fixed_warmup is None else 0,
            max_warmup_s=float(values["max_warmup"]),
            min_duration_s=float(values["duration"]),
            max_duration_s=max(float(values["duration"]), float(values["max_duration"])),
        )
        settings = ExperimentSettings(
            loads=loads,
            resources=resources,
            duration_s=float(values["duration"]),
            sample_interval_s=float(values["sample_interval"]),
            repetitions=_count(values["repetitions"], "repetitions", minimum=1),
            slo=SloSettings(
                warmup_s=fixed_warmup or 0.0,
                lag_trend_threshold=parse_threshold(values["threshold"]),
                slope_method=values["slope_method"],
                confidence=float(values["confidence"]),
                max_batch_duration_s=None
                if values["max_batch_duration"] in (None, "")
                else float(values["max_batch_duration"]),
                max_late_rate=_optional_number(values["max_late_rate"], "max_late_rate"),
            ),
            plan=plan,
            strategy=strategy,
            lower_bound=lower_bound,
            exact_demand=update_baselines or _flag(values["exact_demand"], "exact_demand"),
            paired_cost=_paired_cost(values["paired_cost"], pull_request),
            paired_cost_tolerance=paired_cost_tolerance,
            ref_below=_flag(values["ref_below"], "ref_below"),
            spark_conf=_spark_conf(values["spark_conf"]),
            instance_cpu=None if values["instance_cpu"] in (None, "") else float(values["instance_cpu"]),
        )
    except GateSpecError:
        raise
    except (TypeError, ValueError) as exc:
        raise GateSpecError(str(exc)) from None
    benchmark = args[0]
    extra = (job_options or {}).get(benchmark.name)
    if extra:
        benchmark = replace(benchmark, job_options={**benchmark.job_options, **extra})
    return GateSpec(benchmark, settings, tolerance, cost_tolerance)


def _spark_conf(value: Any) -> dict[str, str]:
    conf = {str(key): str(setting) for key, setting in dict(value or {}).items()}
    try:
        check_session_conf(conf, "the gate's spark_conf")
    except MasterError as exc:
        raise GateSpecError(str(exc)) from None
    return conf


def _warmup(value: Any) -> float | None:
    """``"auto"`` -> None (until the job settled); a number of seconds -> that fixed warm-up."""
    if str(value).strip().lower() == "auto":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise GateSpecError(f"warmup {value!r} is neither 'auto' nor a number of seconds") from None


def _optional_number(value: Any, name: str) -> float | None:
    """None or "" -> None (not checked); a number (the command line gives text) -> that number."""
    if value in (None, ""):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise GateSpecError(f"{name} {value!r} is not a number; leave it out not to check it") from None


def _flag(value: Any, name: str) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise GateSpecError(f"{name} {value!r} is neither true nor false")


def _paired_cost(value: Any, pull_request: bool) -> bool:
    """``auto`` reads in pull-request mode (a cluster of one instance is told in the report why nothing was
    read); true or false as given."""
    if str(value).strip().lower() == "auto":
        return pull_request
    try:
        return _flag(value, "paired_cost")
    except GateSpecError:
        raise GateSpecError(f"paired_cost {value!r} is neither true, false nor auto") from None


def _count(value: Any, name: str, minimum: int) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or int(text) < minimum:
        raise GateSpecError(f"{name} {value!r} is not a whole number >= {minimum}")
    return int(text)


def _whole_numbers(values: Any, name: str) -> tuple[int, ...]:
    try:
        numbers = tuple(values)
    except TypeError:
        raise GateSpecError(f"{name} must be a list of whole numbers, got {values!r}") from None
    if not numbers or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in numbers):
        raise GateSpecError(f"{name} must be a non-empty list of whole numbers >= 1, got {list(numbers)}")
    if list(numbers) != sorted(set(numbers)):
        raise GateSpecError(f"{name} must be ascending without repeats, got {list(numbers)}")
    return numbers
