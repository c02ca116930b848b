"""The testbed a baseline was recorded on: the machine, the setup and its calibration, and how two testbeds
differ."""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Final

from pytest_theodolite.store import host


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
    #: the CPU per instance the calibration ran on (None: unlimited), where recorded: a calibration runs limited
    #: wherever the cluster can limit it, whatever the benchmark's own instance CPU
    calibration_instance_cpu: float | None = None
    #: whether `calibration_instance_cpu` was recorded (baselines before 2026-12-07 did not: calibration.py infers it)
    calibration_cpu_recorded: bool = False
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
        keys = TESTBED_KEYS + tuple(key for key in CALIBRATION_KEYS if getattr(self, key) is not None)
        document = {key: getattr(self, key) for key in keys}
        if self.calibration_cpu_recorded:
            document[CALIBRATION_CPU_KEY] = self.calibration_instance_cpu
        if self.extra:
            document["extra"] = dict(sorted(self.extra.items()))
        return document

    def differences(self, other: Testbed) -> tuple[TestbedDifference, ...]:
        """Fields where `other` (this run) differs from `self` (the baseline), in a fixed order."""
        found = []
        for name, describe, comparable in TESTBED_FIELDS:
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


TESTBED_KEYS: Final = (
    "cores",
    "instance_cpu",
    "kafka_provider",
    "memory_gib",
    "pyspark_version",
    "python_version",
    "spark_master",
)


CALIBRATION_KEYS: Final = ("calibration_rows_per_s", "calibration_cpu_us_per_row")
#: written where recorded, also as null (an unlimited calibration): Testbed.calibration_instance_cpu
CALIBRATION_CPU_KEY: Final = "calibration_instance_cpu"


TESTBED_FIELDS: Final = (
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
