"""Stored baselines of demand functions: the file format, written and read back.

One reviewable JSON file per benchmark, `baselines/<benchmark>.json`: pretty-printed, keys sorted (loads in
numeric order), a trailing newline, so a baseline change reads well in a diff. It holds the demand function
(`{"<load>": instances | null}`, null = "none": no tested amount met the SLOs), the settings it was measured
with (secrets redacted) and the testbed it ran on.

The comparison with it is judge/comparison.py's.
"""

from __future__ import annotations

import enum
import json
import math
import numbers
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pytest_theodolite.core.capacity import CapacityEstimate
from pytest_theodolite.core.cost import PointCost
from pytest_theodolite.core.redaction import redact_secrets
from pytest_theodolite.core.scalability import DemandResult
from pytest_theodolite.store.results import write_atomically
from pytest_theodolite.store.testbed import CALIBRATION_CPU_KEY, CALIBRATION_KEYS, TESTBED_KEYS, Testbed

FORMAT_VERSION: Final = 1
BASELINE_DIR: Final = "baselines"

_TOP_LEVEL_KEYS: Final = ("benchmark", "demand", "format_version", "settings", "testbed")
_COST_KEYS: Final = ("resources", "cpu_us_per_record", "low", "high", "blocks")
_CAPACITY_KEYS: Final = (
    "instances",
    "records_per_s",
    "low",
    "high",
    "batches",
    "window_s",
    "saturated",
    "batch_cap",
)
_CAPACITY_OPTIONAL_KEYS: Final = ("standard_error", "per_batch_s")
_LOAD_KEY = re.compile(r"0|[1-9][0-9]*")  # canonical decimal: "010" or "+5" would be a second spelling
_BENCHMARK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # becomes a file name


class BaselineError(ValueError):
    """A baseline file that cannot be used; the message names the file and what is wrong with it."""


# ------------------------------------------------------------------------------------------------------------
# Testbed
# ------------------------------------------------------------------------------------------------------------


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
    #: instances -> the capacity measured directly (core/capacity.py), where the capacity strategy ran
    capacity: Mapping[int, CapacityEstimate] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_benchmark_name(self.benchmark)
        for load, resources in self.demand.items():
            if not is_whole(load) or load < 0:
                raise ValueError(f"baseline {self.benchmark}: load {load!r} is not a whole number >= 0")
            if resources is not None and (not is_whole(resources) or resources < 1):
                raise ValueError(
                    f"baseline {self.benchmark}: demand[{load}] = {resources!r} is not a whole number of"
                    " instances (1 or more) or None"
                )
        demand = {int(k): None if v is None else int(v) for k, v in self.demand.items()}
        object.__setattr__(self, "demand", dict(sorted(demand.items())))
        object.__setattr__(self, "cost", {int(load): self.cost[load] for load in sorted(self.cost)})
        object.__setattr__(self, "capacity", {int(r): self.capacity[r] for r in sorted(self.capacity)})
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
        if self.capacity:
            document["capacity"] = {str(r): _sorted_keys(c.to_dict()) for r, c in self.capacity.items()}
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
    capacity: Mapping[int, CapacityEstimate] | None = None,
) -> Baseline:
    """The baseline to write when updating: measured loads replace the previous values.

    An unmeasured load (INVALID/ERRORED) keeps its previous value (a broken run must not erase an accepted
    number) or stays out of the baseline; loads of the previous baseline not run this time are kept if they
    are among `loads` (the gate's loads now; None: all), and dropped if the gate no longer has them -- a
    stale figure of another load set would otherwise stay in the file for good. `cost` (load -> CPU per
    record at its demand) replaces the previous figure of every load measured again; `capacity` (instances ->
    capacity) replaces the previous capacities where given.
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
    capacities = dict(capacity) if capacity else dict(previous.capacity) if previous is not None else {}
    return Baseline(benchmark, demand, settings, testbed, cost=costs, capacity=capacities)


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
    _check_keys(document, _TOP_LEVEL_KEYS, "", fail, optional=("cost", "capacity"))

    version = document["format_version"]
    if not is_whole(version) or version < 1:
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
        if value is not None and not is_whole(value):
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
        capacity=_parse_capacity(document.get("capacity", {}), fail),
    )


def _parse_capacity(document: Any, fail: Any) -> dict[int, CapacityEstimate]:
    """``"capacity": {"<instances>": {"records_per_s": 7663.2, "low": .., "high": .., "saturated": true, ...}}``."""
    if not isinstance(document, dict):
        raise fail(f'capacity is {_json_type(document)}, expected an object {{"<instances>": {{...}}}}')
    capacities = {}
    for key, entry in document.items():
        where = f"capacity[{_show(key)}]"
        if not _LOAD_KEY.fullmatch(key) or int(key) < 1:
            raise fail(f'{where}: not an instance count, expected a whole number >= 1 such as "2"')
        if not isinstance(entry, dict):
            raise fail(f"{where} is {_json_type(entry)}, expected an object")
        _check_keys(entry, _CAPACITY_KEYS, f"{where}.", fail, optional=_CAPACITY_OPTIONAL_KEYS)
        if entry["instances"] != int(key):
            raise fail(f"{where}.instances is {_show(entry['instances'])}, expected {key}")
        for name in ("records_per_s", "low", "high", "standard_error", "per_batch_s", "window_s"):
            value: Any = entry.get(name)
            if (name == "records_per_s" or value is not None) and (
                not _is_number(value) or not math.isfinite(value)
            ):
                raise fail(f"{where}.{name} is {_show(value)}, expected a number")
        if not isinstance(entry["saturated"], bool):
            raise fail(f"{where}.saturated is {_show(entry['saturated'])}, expected true or false")
        for name in ("batches", "batch_cap"):
            if not is_whole(entry[name]) or entry[name] < 0:
                raise fail(f"{where}.{name} is {_show(entry[name])}, expected a whole number >= 0")
        capacities[int(key)] = CapacityEstimate.from_dict(entry)
    return capacities


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
            entry,
            _COST_KEYS,
            f"{where}.",
            fail,
            optional=("reference_us_per_row", "cpu_utilisation", "backlog"),
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
        if not is_whole(entry["blocks"]) or entry["blocks"] < 0:
            raise fail(f"{where}.blocks is {_show(entry['blocks'])}, expected a whole number >= 0")
        if not isinstance(entry.get("backlog", False), bool):
            raise fail(f"{where}.backlog is {_show(entry['backlog'])}, expected true or false")
        costs[int(key)] = PointCost.from_dict(entry)
    return costs


def _parse_testbed(document: Any, fail: Any) -> Testbed:
    if not isinstance(document, dict):
        raise fail(f"testbed is {_json_type(document)}, expected an object")
    _check_keys(
        document, TESTBED_KEYS, "testbed.", fail, optional=(*CALIBRATION_KEYS, CALIBRATION_CPU_KEY, "extra")
    )
    extra = document.get("extra", {})
    if not isinstance(extra, dict) or not all(isinstance(v, str) for v in extra.values()):
        raise fail(
            f"testbed.extra is {_show(extra)}, expected an object of texts (from pytest_theodolite_testbed)"
        )

    def whole_or_null(key: str) -> int | None:
        value = document[key]
        if value is not None and (not is_whole(value) or value < 1):
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
        calibration_instance_cpu=positive_or_null(CALIBRATION_CPU_KEY, "unlimited")
        if CALIBRATION_CPU_KEY in document
        else None,
        calibration_cpu_recorded=CALIBRATION_CPU_KEY in document,
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


def is_whole(value: Any) -> bool:
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


__all__ = [
    "BASELINE_DIR",
    "FORMAT_VERSION",
    "Baseline",
    "BaselineError",
    "baseline_from_measurement",
    "baseline_path",
    "check_benchmark_name",
    "load_baseline",
    "write_baseline",
]
