"""Stored baselines of demand functions, and the comparison that makes a scalability regression gate.

One reviewable JSON file per benchmark, `baselines/<benchmark>.json`: pretty-printed, keys sorted (loads in
numeric order), a trailing newline, so a baseline change reads well in a diff. It holds the demand function
(`{"<load>": instances | null}`, null = "none": no tested amount met the SLOs), the settings it was measured
with (secrets redacted) and the testbed it ran on.

Comparison rule per load l (tolerance t >= 0 instances):
    measured(l) <= baseline(l) + t   passes (PASS, or IMPROVEMENT when measured(l) < baseline(l))
    measured(l) >  baseline(l) + t   REGRESSION
"none" is worse than any number: baseline 3 / measured none is a REGRESSION, baseline none / measured 4 an
IMPROVEMENT, none / none PASS. A load whose sub-experiment was INVALID or ERRORED is UNMEASURED: neither pass
nor regression (the gate reports a test error). A load without a baseline value is NEW_LOAD (not a failure).

Pure functions over data: no pytest, Kafka or Spark imports.
"""

from __future__ import annotations

import enum
import json
import math
import numbers
import os
import platform
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Final

from pytest_theodolite.core.cost import REGRESSION as COST_REGRESSION_STATUS
from pytest_theodolite.core.cost import CostCheck, PointCost, check_cost
from pytest_theodolite.core.outcomes import UNMEASURED, MeasuredDemand, Verdict, instances_text
from pytest_theodolite.core.redaction import redact_secrets
from pytest_theodolite.core.scalability import DemandResult
from pytest_theodolite.store import host
from pytest_theodolite.store.results import write_atomically

FORMAT_VERSION: Final = 1
BASELINE_DIR: Final = "baselines"

_TOP_LEVEL_KEYS: Final = ("benchmark", "demand", "format_version", "settings", "testbed")
_TESTBED_KEYS: Final = (
    "cores",
    "instance_cpu",
    "kafka_provider",
    "memory_gib",
    "pyspark_version",
    "python_version",
    "spark_master",
)
_CALIBRATION_KEYS: Final = ("calibration_rows_per_s", "calibration_cpu_us_per_row")
_COST_KEYS: Final = ("resources", "cpu_us_per_record", "low", "high", "blocks")
_LOAD_KEY = re.compile(r"0|[1-9][0-9]*")  # canonical decimal: "010" or "+5" would be a second spelling
_BENCHMARK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # becomes a file name


class BaselineError(ValueError):
    """A baseline file that cannot be used; the message names the file and what is wrong with it."""


# ------------------------------------------------------------------------------------------------------------
# Testbed
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Testbed:
    """The machine and services a demand function was measured on.

    None means "unknown" for cores, memory and pyspark (not compared), but "unlimited" for instance_cpu.
    """

    __test__ = False  # not a pytest test class, despite the name

    cores: int | None
    memory_gib: float | None
    instance_cpu: float | None  # CPU cores per Spark instance; None = unlimited
    kafka_provider: str
    spark_master: str
    pyspark_version: str | None
    python_version: str
    #: rows/s of the reference job on one CPU-limited instance (calibration.py); None: not calibrated
    calibration_rows_per_s: float | None = None
    #: the reference job's CPU microseconds per row (calibration.py), the cost figure's yardstick; None: unknown
    calibration_cpu_us_per_row: float | None = None
    #: facts a conftest adds with the ``pytest_theodolite_testbed`` hook (e.g. the CI runner type); compared
    #: like the other fields: a difference is named beside the verdict
    extra: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def current(
        cls,
        *,
        kafka_provider: str,
        spark_master: str,
        instance_cpu: float | None,
        cores: int | None = None,
        memory_gib: float | None = None,
        pyspark_version: str | None = None,
    ) -> Testbed:
        """This machine: cores, memory, pyspark and Python are discovered unless given; the rest is settings."""
        return cls(
            cores=cores if cores is not None else host.usable_cores(),
            memory_gib=_rounded_gib(memory_gib if memory_gib is not None else host.memory_gib()),
            instance_cpu=None if instance_cpu is None else float(instance_cpu),
            kafka_provider=kafka_provider,
            spark_master=spark_master,
            pyspark_version=pyspark_version if pyspark_version is not None else _installed_version("pyspark"),
            python_version=platform.python_version(),
        )

    def to_dict(self) -> dict[str, Any]:
        keys = _TESTBED_KEYS + tuple(key for key in _CALIBRATION_KEYS if getattr(self, key) is not None)
        document = {key: getattr(self, key) for key in keys}
        if self.extra:
            document["extra"] = dict(sorted(self.extra.items()))
        return document

    def differences(self, other: Testbed) -> tuple[TestbedDifference, ...]:
        """Fields where `other` (this run) differs from `self` (the baseline), in a fixed order."""
        found = []
        for name, describe, comparable in _TESTBED_FIELDS:
            mine, theirs = getattr(self, name), getattr(other, name)
            if comparable(mine) != comparable(theirs) and not _unknown(name, mine, theirs):
                found.append(TestbedDifference(name, describe(mine), describe(theirs)))
        for key in sorted(set(self.extra) | set(other.extra)):
            mine, theirs = self.extra.get(key), other.extra.get(key)
            if mine != theirs:
                found.append(
                    TestbedDifference(
                        f"extra.{key}", f"{key} {mine or 'unset'}", f"{key} {theirs or 'unset'}"
                    )
                )
        return tuple(found)


@dataclass(frozen=True)
class TestbedDifference:
    """One testbed field that differs, described for a sentence: e.g. field 'cores', '8 cores', '2 cores'."""

    __test__ = False

    field: str
    baseline: str
    measured: str


def _unknown(name: str, *values: Any) -> bool:
    # An unknown core count, memory size or pyspark version cannot be said to differ.
    return name in ("cores", "memory_gib", "pyspark_version") and any(v is None for v in values)


def _python_minor(version: str) -> str:
    # Patch releases do not change throughput enough to mention; 3.11 vs 3.12 might.
    return ".".join(str(version).split(".")[:2])


_TESTBED_FIELDS: Final = (
    ("cores", lambda v: f"{v} cores", lambda v: v),
    ("memory_gib", lambda v: f"{v:g} GiB memory", lambda v: v),
    (
        "instance_cpu",
        lambda v: "unlimited CPU per instance" if v is None else f"{v:g} CPU per instance",
        lambda v: v,
    ),
    ("kafka_provider", lambda v: f"Kafka {v}", lambda v: v),
    ("spark_master", lambda v: f"Spark master {v}", lambda v: v),
    ("pyspark_version", lambda v: f"pyspark {v}", lambda v: v),
    ("python_version", lambda v: f"Python {v}", _python_minor),
)


def describe_testbed_differences(differences: Iterable[TestbedDifference]) -> str:
    """'baseline recorded on 8 cores, this run has 2 cores; the comparison still runs', or '' if none differ."""
    differences = tuple(differences)
    if not differences:
        return ""
    before = _join_and([d.baseline for d in differences])
    now = _join_and([d.measured for d in differences])
    return f"baseline recorded on {before}, this run has {now}; the comparison still runs"


def _join_and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _rounded_gib(gib: float | None) -> float | None:
    # One decimal: enough to tell machines apart, few enough digits not to churn the file.
    return None if gib is None else round(float(gib), 1)


def _installed_version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


# ------------------------------------------------------------------------------------------------------------
# Baseline
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Baseline:
    """A benchmark's accepted demand function: load -> fewest instances meeting the SLOs (None = "none").

    `settings` is stored redacted and as plain JSON values, so a baseline equals itself after a round trip.
    """

    benchmark: str
    demand: Mapping[int, int | None]
    settings: Mapping[str, Any]
    testbed: Testbed
    format_version: int = FORMAT_VERSION
    #: load -> the CPU per record at its demand (cost.py), where it was measured
    cost: Mapping[int, PointCost] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_benchmark_name(self.benchmark)
        for load, resources in self.demand.items():
            if not _is_whole(load) or load < 0:
                raise ValueError(f"baseline {self.benchmark}: load {load!r} is not a whole number >= 0")
            if resources is not None and (not _is_whole(resources) or resources < 1):
                raise ValueError(
                    f"baseline {self.benchmark}: demand[{load}] = {resources!r} is not a whole number of"
                    " instances (1 or more) or None"
                )
        demand = {int(k): None if v is None else int(v) for k, v in self.demand.items()}
        object.__setattr__(self, "demand", dict(sorted(demand.items())))
        object.__setattr__(self, "cost", {int(load): self.cost[load] for load in sorted(self.cost)})
        object.__setattr__(self, "settings", _plain_json(redact_secrets(dict(self.settings))))

    @property
    def loads(self) -> tuple[int, ...]:
        return tuple(self.demand)

    def to_json(self) -> str:
        """The file's text: two-space indent, keys sorted, loads in numeric order, a trailing newline."""
        document = {
            "benchmark": self.benchmark,
            "demand": {str(load): value for load, value in self.demand.items()},  # already numeric order
            "format_version": self.format_version,
            "settings": _sorted_keys(self.settings),
            "testbed": self.testbed.to_dict(),
        }
        if self.cost:
            document["cost"] = {str(load): _sorted_keys(cost.to_dict()) for load, cost in self.cost.items()}
        # sort_keys=True would order loads as text ("10000" < "2000"); the dicts are built in order instead.
        return json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def check_benchmark_name(name: str) -> str:
    """A benchmark name becomes a file name: letters, digits, '.', '_', '-', not starting with '.'."""
    if not isinstance(name, str) or not _BENCHMARK_NAME.fullmatch(name):
        raise ValueError(
            f"benchmark name {name!r} must be letters, digits, '.', '_' or '-' (it names the baseline file)"
        )
    return name


def baseline_path(directory: str | os.PathLike[str], benchmark: str) -> Path:
    """`<directory>/<benchmark>.json`."""
    return Path(directory) / f"{check_benchmark_name(benchmark)}.json"


def baseline_from_measurement(
    benchmark: str,
    measured: DemandResult,
    settings: Mapping[str, Any],
    testbed: Testbed,
    previous: Baseline | None = None,
    cost: Mapping[int, PointCost | None] | None = None,
    loads: Iterable[int] | None = None,
) -> Baseline:
    """The baseline to write when updating: measured loads replace the previous values.

    An unmeasured load (INVALID/ERRORED) keeps its previous value (a broken run must not erase an accepted
    number) or stays out of the baseline; loads of the previous baseline not run this time are kept if they
    are among `loads` (the gate's loads now; None: all), and dropped if the gate no longer has them -- a
    stale figure of another load set would otherwise stay in the file for good. `cost` (load -> CPU per
    record at its demand) replaces the previous figure of every load measured again.
    """
    kept = None if loads is None else set(loads)
    demand: dict[int, int | None] = {}
    costs: dict[int, PointCost] = {}
    if previous is not None:
        demand = {load: value for load, value in previous.demand.items() if kept is None or load in kept}
        costs = {load: value for load, value in previous.cost.items() if load in demand}
    for load, resources in measured.demand.items():
        if load not in measured.unmeasured:
            demand[load] = resources
            costs.pop(load, None)
            figure = (cost or {}).get(load)
            if figure is not None and figure.resources == resources:
                costs[load] = figure
    if not demand:
        raise ValueError(
            f"benchmark {benchmark}: no load was measured (every sub-experiment was invalid or errored),"
            " so there is no demand function to record as a baseline"
        )
    return Baseline(benchmark, demand, settings, testbed, cost=costs)


def write_baseline(path: str | os.PathLike[str], baseline: Baseline) -> Path:
    """Write atomically (a temporary file beside `path`, then rename): readers never see half a file."""
    path = Path(path)
    text = baseline.to_json()
    _parse(text, str(path))  # never write a file that load_baseline would refuse
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, text)
    return path


def load_baseline(path: str | os.PathLike[str], benchmark: str | None = None) -> Baseline | None:
    """The baseline stored at `path`, None if there is no such file.

    Raises BaselineError naming the file and the problem for anything else: unreadable, not JSON, wrong
    types, missing or unknown keys, loads that are not whole numbers, resource counts that are not whole
    numbers >= 1 or null, or (when `benchmark` is given) a file that belongs to another benchmark.
    """
    shown = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as error:
        raise BaselineError(f"{shown}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise BaselineError(f"{shown}: cannot be read: {error.strerror or error}") from None
    baseline = _parse(text, shown)
    if benchmark is not None and baseline.benchmark != benchmark:
        raise BaselineError(
            f"{shown}: holds the baseline of benchmark {baseline.benchmark!r}, expected {benchmark!r}"
            ' (was the file copied without changing its "benchmark"?)'
        )
    return baseline


def _parse(text: str, shown: str) -> Baseline:
    def fail(problem: str) -> BaselineError:
        return BaselineError(f"{shown}: {problem}")

    try:
        document = json.loads(text, object_pairs_hook=_refuse_duplicate_keys, parse_constant=_refuse_constant)
    except _DuplicateKey as error:
        raise fail(f"key {_show(error.key)} appears twice in one object") from None
    except json.JSONDecodeError as error:
        raise fail(f"not valid JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    except ValueError as error:  # NaN/Infinity
        raise fail(f"not valid JSON: {error}") from None
    if not isinstance(document, dict):
        raise fail(f"the top level is {_json_type(document)}, expected an object with keys {_keys_text()}")
    _check_keys(document, _TOP_LEVEL_KEYS, "", fail, optional=("cost",))

    version = document["format_version"]
    if not _is_whole(version) or version < 1:
        raise fail(f"format_version is {_show(version)}, expected {FORMAT_VERSION}")
    if version > FORMAT_VERSION:
        raise fail(
            f"format_version is {version}, written by a newer pytest-theodolite (this one reads"
            f" {FORMAT_VERSION}): upgrade pytest-theodolite"
        )

    benchmark = document["benchmark"]
    if not isinstance(benchmark, str) or not _BENCHMARK_NAME.fullmatch(benchmark):
        raise fail(f"benchmark is {_show(benchmark)}, expected a name of letters, digits, '.', '_' or '-'")

    demand_document = document["demand"]
    if not isinstance(demand_document, dict):
        raise fail(f'demand is {_json_type(demand_document)}, expected an object {{"<load>": instances}}')
    if not demand_document:
        raise fail("demand is empty, expected at least one load")
    demand: dict[int, int | None] = {}
    for key, value in demand_document.items():
        if not _LOAD_KEY.fullmatch(key):
            raise fail(f'demand key {_show(key)} is not a load, expected a whole number such as "1000"')
        if value is not None and not _is_whole(value):
            raise fail(
                f"demand[{_show(key)}] is {_show(value)}, expected a whole number of instances or null"
            )
        if value is not None and value < 1:
            raise fail(f"demand[{_show(key)}] is {_show(value)}, expected 1 or more instances or null")
        demand[int(key)] = value

    settings = document["settings"]
    if not isinstance(settings, dict):
        raise fail(f"settings is {_json_type(settings)}, expected an object")

    return Baseline(
        benchmark=benchmark,
        demand=demand,
        settings=settings,
        testbed=_parse_testbed(document["testbed"], fail),
        format_version=version,
        cost=_parse_cost(document.get("cost", {}), demand, fail),
    )


def _parse_cost(document: Any, demand: Mapping[int, int | None], fail: Any) -> dict[int, PointCost]:
    """``"cost": {"<load>": {"resources": 2, "cpu_us_per_record": 37.1, "low": .., "high": .., ...}}``."""
    if not isinstance(document, dict):
        raise fail(f'cost is {_json_type(document)}, expected an object {{"<load>": {{...}}}}')
    costs = {}
    for key, entry in document.items():
        where = f"cost[{_show(key)}]"
        if not _LOAD_KEY.fullmatch(key) or int(key) not in demand:
            raise fail(f"{where}: not a load of demand (cost is recorded only where the demand was measured)")
        if not isinstance(entry, dict):
            raise fail(f"{where} is {_json_type(entry)}, expected an object")
        _check_keys(
            entry, _COST_KEYS, f"{where}.", fail, optional=("reference_us_per_row", "cpu_utilisation")
        )
        if entry["resources"] != demand[int(key)]:
            raise fail(
                f"{where}.resources is {_show(entry['resources'])}, but demand[{_show(key)}] is "
                f"{_show(demand[int(key)])}: the figure belongs to the demand's instance count"
            )
        for name in ("cpu_us_per_record", "low", "high", "reference_us_per_row", "cpu_utilisation"):
            value: Any = entry.get(name)
            if (name == "cpu_us_per_record" or value is not None) and (
                not _is_number(value) or not math.isfinite(value) or value < 0
            ):
                raise fail(f"{where}.{name} is {_show(value)}, expected a number >= 0")
        if not _is_whole(entry["blocks"]) or entry["blocks"] < 0:
            raise fail(f"{where}.blocks is {_show(entry['blocks'])}, expected a whole number >= 0")
        costs[int(key)] = PointCost.from_dict(entry)
    return costs


def _parse_testbed(document: Any, fail: Any) -> Testbed:
    if not isinstance(document, dict):
        raise fail(f"testbed is {_json_type(document)}, expected an object")
    _check_keys(document, _TESTBED_KEYS, "testbed.", fail, optional=(*_CALIBRATION_KEYS, "extra"))
    extra = document.get("extra", {})
    if not isinstance(extra, dict) or not all(isinstance(v, str) for v in extra.values()):
        raise fail(
            f"testbed.extra is {_show(extra)}, expected an object of texts (from pytest_theodolite_testbed)"
        )

    def whole_or_null(key: str) -> int | None:
        value = document[key]
        if value is not None and (not _is_whole(value) or value < 1):
            raise fail(f"testbed.{key} is {_show(value)}, expected a whole number >= 1 or null")
        return value

    def positive_or_null(key: str, meaning_of_null: str) -> float | None:
        value = document[key]
        if value is not None and (not _is_number(value) or value <= 0):
            raise fail(f"testbed.{key} is {_show(value)}, expected a number > 0 or null ({meaning_of_null})")
        return None if value is None else float(value)

    def text(key: str, nullable: bool = False) -> str | None:
        value = document[key]
        if not (isinstance(value, str) or (nullable and value is None)):
            raise fail(f"testbed.{key} is {_show(value)}, expected text{' or null' if nullable else ''}")
        return value

    return Testbed(
        cores=whole_or_null("cores"),
        memory_gib=positive_or_null("memory_gib", "unknown"),
        instance_cpu=positive_or_null("instance_cpu", "unlimited"),
        kafka_provider=text("kafka_provider"),  # type: ignore[arg-type]
        spark_master=text("spark_master"),  # type: ignore[arg-type]
        pyspark_version=text("pyspark_version", nullable=True),
        python_version=text("python_version"),  # type: ignore[arg-type]
        calibration_rows_per_s=positive_or_null("calibration_rows_per_s", "not calibrated")
        if "calibration_rows_per_s" in document
        else None,
        calibration_cpu_us_per_row=positive_or_null("calibration_cpu_us_per_row", "not calibrated")
        if "calibration_cpu_us_per_row" in document
        else None,
        extra=extra,
    )


def _check_keys(
    document: dict[str, Any],
    expected: tuple[str, ...],
    prefix: str,
    fail: Any,
    optional: tuple[str, ...] = (),
) -> None:
    missing = [key for key in expected if key not in document]
    if missing:
        raise fail(f"missing key {prefix}{missing[0]}")
    unknown = sorted(key for key in document if key not in expected + optional)
    if unknown:  # most likely a typo; silently ignoring it would hide the intended change
        raise fail(f"unknown key {prefix}{unknown[0]} (expected keys: {', '.join(expected)})")


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of two equal keys silently; in a hand-edited baseline that hides a mistake.
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _is_whole(value: Any) -> bool:
    # numbers.Integral admits numpy integers from computed results; bool is an int but never a count.
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {_show(value)}"
    if isinstance(value, str):
        return f"the text {_show(value)}"
    return "a list" if isinstance(value, list) else "an object"


def _keys_text() -> str:
    return ", ".join(_TOP_LEVEL_KEYS)


def _plain_json(value: Any) -> Any:
    """Settings as plain JSON values: tuples become lists, non-finite floats text, other objects their str."""
    if isinstance(value, Mapping):
        return {str(key): _plain_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_json(item) for item in value]
    if isinstance(value, enum.Enum):
        return _plain_json(value.value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    return str(value)  # Path, Decimal, ...: readable in a review, and JSON


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(item) for item in value]
    return value


# ------------------------------------------------------------------------------------------------------------
# Comparison
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PointComparison:
    """demand(load) measured against the baseline."""

    load: int
    baseline: int | None  # the baseline value; None is "none" if `in_baseline`, else there is no value
    in_baseline: bool
    measured: MeasuredDemand
    verdict: Verdict
    tolerance: int = 0
    skipped: bool = False  # "none" without running (lower-bound restriction after an unsolvable load)
    reason: str = ""  # why the point is NOT_COMPARABLE
    #: the CPU per record against the baseline's (None: no figure on either side was looked at)
    cost: CostCheck | None = None

    @property
    def passed(self) -> bool:
        return self.verdict.passes

    @property
    def baseline_text(self) -> str:
        """'3', 'none', or '-' when the baseline has no value for this load."""
        if not self.in_baseline:
            return "-"
        return "none" if self.baseline is None else str(self.baseline)

    @property
    def measured_text(self) -> str:
        """'3', 'none', 'none (skipped)' or 'unmeasured'."""
        if self.measured is UNMEASURED:
            return "unmeasured"
        if self.measured is None:
            return "none (skipped)" if self.skipped else "none"
        return str(self.measured)

    def describe(self, benchmark: str = "", reference: str = "baseline") -> str:
        """One sentence for a test message, e.g. 'uc1 load 1000: measured 4 instances, baseline 3: regression'
        (`reference` names what it was compared with: 'REF origin/main' in pull-request mode)."""
        prefix = f"{benchmark} load {self.load}" if benchmark else f"load {self.load}"
        if self.measured is UNMEASURED:
            measured = "nothing (unmeasured)"
        else:
            measured = instances_text(self.measured, explain_none=True)
        if not self.in_baseline:
            baseline = f"no {reference} value"
        else:
            baseline = f"{reference} {instances_text(self.baseline)}"
            if self.tolerance:
                baseline += f" (tolerance +{self.tolerance})"
        why = {
            Verdict.PASS: "pass",
            Verdict.IMPROVEMENT: "improvement"
            + (": the baseline could be lowered" if reference == "baseline" else ""),
            Verdict.REGRESSION: "regression",
            Verdict.UNMEASURED: "unmeasured: an invalid or errored sub-experiment left this load unjudged",
            Verdict.NEW_LOAD: "new load: record a baseline to gate it",
            Verdict.NOT_COMPARABLE: f"not comparable: {self.reason}",
            Verdict.COST_REGRESSION: f"cost regression: CPU per record {self.cost.text if self.cost else ''}",
        }[self.verdict]
        return f"{prefix}: measured {measured}, {baseline}: {why}"


def _check_tolerance(tolerance: int) -> int:
    if not _is_whole(tolerance) or tolerance < 0:
        raise ValueError(f"tolerance must be a whole number of instances >= 0, got {tolerance!r}")
    return tolerance


def _verdict(measured: MeasuredDemand, baseline: int | None, in_baseline: bool, tolerance: int) -> Verdict:
    if measured is UNMEASURED:
        return Verdict.UNMEASURED
    if not in_baseline:
        return Verdict.NEW_LOAD
    if baseline is None:  # "none" in the baseline: any number is better, none is equal
        return Verdict.PASS if measured is None else Verdict.IMPROVEMENT
    if measured is None:  # none is worse than any number, whatever the tolerance
        return Verdict.REGRESSION
    if measured > baseline + tolerance:
        return Verdict.REGRESSION
    return Verdict.IMPROVEMENT if measured < baseline else Verdict.PASS


def compare_point(
    load: int,
    measured: MeasuredDemand,
    baseline: Baseline | None,
    tolerance: int = 0,
    *,
    skipped: bool = False,
    not_comparable: str | None = None,
    measured_cost: PointCost | None = None,
    cost_tolerance: float | None = None,
    uncertain: str | None = None,
) -> PointComparison:
    """One load's verdict: `measured` is the fewest passing instances, None ("none") or UNMEASURED.

    `not_comparable` (why the baseline's testbed cannot be compared with this one) makes every measured point
    NOT_COMPARABLE that has a baseline value. Where the demand passed, `measured_cost` is checked against the
    baseline's figure (cost.check_cost): beyond `cost_tolerance` the point is a COST_REGRESSION. `uncertain`
    (certainty.uncertain_regression: why the verdicts behind a regression were not certain) makes a
    REGRESSION NOT_COMPARABLE."""
    _check_tolerance(tolerance)
    if measured is not None and measured is not UNMEASURED and (not _is_whole(measured) or measured < 1):
        raise ValueError(
            f"load {load}: measured demand {measured!r} is not a whole number of instances >= 1, None"
            " (none) or UNMEASURED"
        )
    if measured is not None and measured is not UNMEASURED:
        measured = int(measured)
    in_baseline = baseline is not None and load in baseline.demand
    baseline_value = baseline.demand[load] if in_baseline else None  # type: ignore[union-attr]
    verdict = _verdict(measured, baseline_value, in_baseline, tolerance)
    cost = None
    if in_baseline and measured is not UNMEASURED and (measured_cost is not None or load in baseline.cost):  # type: ignore[union-attr]
        cost = check_cost(baseline.cost.get(load), measured_cost, cost_tolerance)  # type: ignore[union-attr]
        if verdict is Verdict.PASS and cost.status == COST_REGRESSION_STATUS:
            verdict = Verdict.COST_REGRESSION
    if not_comparable and verdict not in (Verdict.UNMEASURED, Verdict.NEW_LOAD):
        verdict = Verdict.NOT_COMPARABLE
    elif uncertain and verdict is Verdict.REGRESSION:
        verdict, not_comparable = Verdict.NOT_COMPARABLE, uncertain
    return PointComparison(
        load=load,
        baseline=baseline_value,
        in_baseline=in_baseline,
        measured=measured,
        verdict=verdict,
        tolerance=tolerance,
        skipped=skipped and measured is None,
        reason=(not_comparable or "") if verdict is Verdict.NOT_COMPARABLE else "",
        cost=cost,
    )


@dataclass(frozen=True)
class Comparison:
    """A measured demand function against a baseline, point by point (loads ascending)."""

    benchmark: str
    points: tuple[PointComparison, ...]
    tolerance: int = 0
    testbed_differences: tuple[TestbedDifference, ...] = ()
    not_run: tuple[int, ...] = ()  # baseline loads this run did not measure (deselected, or newly dropped)
    has_baseline: bool = True
    cost_tolerance: float | None = None

    def point(self, load: int) -> PointComparison:
        for point in self.points:
            if point.load == load:
                return point
        raise KeyError(
            f"{self.benchmark}: load {load} was not compared (loads: {[p.load for p in self.points]})"
        )

    def _with(self, verdict: Verdict) -> tuple[PointComparison, ...]:
        return tuple(p for p in self.points if p.verdict is verdict)

    @property
    def regressions(self) -> tuple[PointComparison, ...]:
        return self._with(Verdict.REGRESSION)

    @property
    def cost_regressions(self) -> tuple[PointComparison, ...]:
        return self._with(Verdict.COST_REGRESSION)

    @property
    def improvements(self) -> tuple[PointComparison, ...]:
        return self._with(Verdict.IMPROVEMENT)

    @property
    def unmeasured(self) -> tuple[PointComparison, ...]:
        return self._with(Verdict.UNMEASURED)

    @property
    def not_comparable(self) -> tuple[PointComparison, ...]:
        return self._with(Verdict.NOT_COMPARABLE)

    @property
    def new_loads(self) -> tuple[PointComparison, ...]:
        return self._with(Verdict.NEW_LOAD)

    @property
    def passed(self) -> bool:
        """The gate holds: no regression and no unmeasured load (improvements and new loads pass)."""
        return all(p.passed for p in self.points)

    @property
    def testbed_differs(self) -> bool:
        return bool(self.testbed_differences)

    @property
    def testbed_sentence(self) -> str:
        return describe_testbed_differences(self.testbed_differences)


def compare(
    measured: DemandResult,
    baseline: Baseline | None,
    tolerance: int = 0,
    *,
    measured_testbed: Testbed | None,
    benchmark: str | None = None,
    not_comparable: str | None = None,
    costs: Mapping[int, PointCost | None] | None = None,
    cost_tolerance: float | None = None,
    uncertain: Mapping[int, str | None] | None = None,
) -> Comparison:
    """Every load of `measured` (its demand and its unmeasured loads) against `baseline`.

    Without a baseline every load is NEW_LOAD (then `benchmark` names it); without `measured_testbed` the
    testbeds are not compared. `costs` (load -> CPU per record at its demand) are checked against the
    baseline's with `cost_tolerance`; `uncertain` (load -> why its regression would rest on uncertain
    verdicts) as in `compare_point`.
    """
    _check_tolerance(tolerance)
    if baseline is not None and benchmark is not None and benchmark != baseline.benchmark:
        raise ValueError(f"comparing benchmark {benchmark!r} with the baseline of {baseline.benchmark!r}")
    name = benchmark if benchmark is not None else baseline.benchmark if baseline is not None else ""
    loads = sorted(set(measured.demand) | set(measured.unmeasured))
    points = tuple(
        compare_point(
            load,
            UNMEASURED if load in measured.unmeasured else measured.demand[load],
            baseline,
            tolerance,
            skipped=load in measured.skipped,
            not_comparable=not_comparable,
            measured_cost=(costs or {}).get(load),
            cost_tolerance=cost_tolerance,
            uncertain=(uncertain or {}).get(load),
        )
        for load in loads
    )
    differences = (
        baseline.testbed.differences(measured_testbed)
        if baseline is not None and measured_testbed is not None
        else ()
    )
    not_run = tuple(load for load in baseline.demand if load not in loads) if baseline is not None else ()
    return Comparison(
        benchmark=name,
        points=points,
        tolerance=tolerance,
        testbed_differences=differences,
        not_run=not_run,
        has_baseline=baseline is not None,
        cost_tolerance=cost_tolerance,
    )


__all__ = [
    "BASELINE_DIR",
    "FORMAT_VERSION",
    "UNMEASURED",
    "Baseline",
    "BaselineError",
    "Comparison",
    "MeasuredDemand",
    "PointComparison",
    "Testbed",
    "TestbedDifference",
    "Verdict",
    "baseline_from_measurement",
    "baseline_path",
    "check_benchmark_name",
    "compare",
    "compare_point",
    "describe_testbed_differences",
    "load_baseline",
    "write_baseline",
]
