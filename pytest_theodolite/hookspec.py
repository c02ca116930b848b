"""Hooks pytest-theodolite calls, for a conftest.py or another plugin to implement (as pytest-xdist's
``newhooks.py`` and pytest-benchmark's ``hookspec.py`` declare theirs)."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec
def pytest_theodolite_sub_experiment(
    config: pytest.Config, benchmark: str, record: Any, timings: Any
) -> None:
    """A sub-experiment of a gate finished (after its results are on disk).

    ``record`` is its `pytest_theodolite.core.records.SubExperimentRecord` (load, resources, outcome, verdicts with
    the lag slope's interval, the measurement protocol per repetition); ``timings`` maps ``(load, resources,
    repetition)`` to the `PhaseTimings` of every repetition measured so far. Under the capacity strategy it is
    also called with each capacity measurement (``record`` a
    `pytest_theodolite.engine.capacity_probe.CapacityMeasurement`, ``timings`` empty). pytest-theodolite's own
    implementation prints the progress line; return values are ignored."""


@pytest.hookspec
def pytest_theodolite_testbed(config: pytest.Config) -> dict[str, str] | None:
    """Facts about this testbed to record with results and baselines, beside the ones the plugin measures
    (cores, memory, instance CPU, calibration), e.g. ``{"runner": "ubuntu-24.04-2core"}``.

    Every implementation's dict is merged (keys and values are text). A baseline recorded with a different
    value is still compared, and the difference is named beside the verdict."""
