"""pytest-theodolite: Theodolite scalability benchmarks as pytest regression gates.

The public API: everything a gate, a job or a script needs is importable from here. Names resolve on first
use, so ``python -m pytest_theodolite``, the generator and the executors' Python workers import no Kafka
client, Spark or Docker by importing this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pytest_theodolite._compat import install_old_module_paths

if TYPE_CHECKING:
    from pytest_theodolite.core.errors import TheodoliteSetupError
    from pytest_theodolite.core.estimators import SlopeThreshold
    from pytest_theodolite.core.evaluation import SloSettings
    from pytest_theodolite.core.outcomes import Outcome, Verdict
    from pytest_theodolite.core.scalability import CapacityResult, DemandResult
    from pytest_theodolite.engine.benchmark import Benchmark
    from pytest_theodolite.infra.kafka.version import KAFKA_VERSION
    from pytest_theodolite.store.baseline import Baseline, load_baseline
    from pytest_theodolite.store.results import ExperimentResults, read_results
    from theodolite_generator.errors import WorkloadError
    from theodolite_generator.factories import (
        EVENT_TIME,
        KEY,
        SEQUENCE,
        AvroTemplate,
        Choice,
        IntRange,
        JsonTemplate,
        Replay,
        Uniform,
    )
    from theodolite_generator.workload import Hierarchy, Workload

__version__ = "0.1.0"

#: public name -> the module that defines it
_PUBLIC = {
    "Benchmark": "pytest_theodolite.engine.benchmark",
    "Workload": "theodolite_generator.workload",
    "Hierarchy": "theodolite_generator.workload",
    "WorkloadError": "theodolite_generator.errors",
    "JsonTemplate": "theodolite_generator.factories",
    "AvroTemplate": "theodolite_generator.factories",
    "Replay": "theodolite_generator.factories",
    "Choice": "theodolite_generator.factories",
    "Uniform": "theodolite_generator.factories",
    "IntRange": "theodolite_generator.factories",
    "EVENT_TIME": "theodolite_generator.factories",
    "KEY": "theodolite_generator.factories",
    "SEQUENCE": "theodolite_generator.factories",
    "SloSettings": "pytest_theodolite.core.evaluation",
    "SlopeThreshold": "pytest_theodolite.core.estimators",
    "Outcome": "pytest_theodolite.core.outcomes",
    "Verdict": "pytest_theodolite.core.outcomes",
    "DemandResult": "pytest_theodolite.core.scalability",
    "CapacityResult": "pytest_theodolite.core.scalability",
    "Baseline": "pytest_theodolite.store.baseline",
    "load_baseline": "pytest_theodolite.store.baseline",
    "ExperimentResults": "pytest_theodolite.store.results",
    "read_results": "pytest_theodolite.store.results",
    "TheodoliteSetupError": "pytest_theodolite.core.errors",
    "KAFKA_VERSION": "pytest_theodolite.infra.kafka.version",
}

__all__ = [
    "EVENT_TIME",
    "KAFKA_VERSION",
    "KEY",
    "SEQUENCE",
    "AvroTemplate",
    "Baseline",
    "Benchmark",
    "CapacityResult",
    "Choice",
    "DemandResult",
    "ExperimentResults",
    "Hierarchy",
    "IntRange",
    "JsonTemplate",
    "Outcome",
    "Replay",
    "SloSettings",
    "SlopeThreshold",
    "TheodoliteSetupError",
    "Uniform",
    "Verdict",
    "Workload",
    "WorkloadError",
    "load_baseline",
    "read_results",
]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_theodolite' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])


install_old_module_paths()
