"""A run's figures in the formats of the dashboards users already keep (``python -m pytest_theodolite export``):
Bencher's Metric Format (BMF) and github-action-benchmark's custom JSON.

Per benchmark and load: the demand (instances) and the CPU per record at the demand; per instance count: the
capacity (records/s) the capacity strategy measured, or the capacity metric's load. Pure: over results read back
with ``store.results.read_results``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_theodolite.core.capacity import CapacityEstimate
from pytest_theodolite.core.cost import point_cost
from pytest_theodolite.store.results import ExperimentResults

DEMAND = "demand"
CPU_PER_RECORD = "cpu-per-record"
CAPACITY = "capacity"
#: every measure, and whether less of it is better
MEASURES: dict[str, bool] = {DEMAND: True, CPU_PER_RECORD: True, CAPACITY: False}
UNITS = {DEMAND: "instances", CPU_PER_RECORD: "us CPU per record", CAPACITY: "records/s"}
FORMATS = ("bmf", "github-action-benchmark")


class ExportError(ValueError):
    """Asked for what a format cannot hold."""


@dataclass(frozen=True)
class Figure:
    """One measure of one point: ``uc1-keys`` at ``load=4000``, its ``demand`` 2 (interval, where known)."""

    benchmark: str
    point: str  # "load=4000" or "instances=2"
    measure: str
    value: float
    low: float | None = None
    high: float | None = None

    @property
    def name(self) -> str:
        return f"{self.benchmark}/{self.point}"


def figures(results: ExperimentResults) -> list[Figure]:
    """Every figure of one experiment that has a number: a load whose demand is 'none', '>N' or unmeasured has
    no demand and no CPU per record; an at-most demand '<=N' is N with the interval [fewest run, N]."""
    found: list[Figure] = []
    name = results.experiment_id
    demand = results.demand
    if demand is not None:
        fewest = min(demand.resources, default=1)
        for load in sorted(demand.demand):
            instances = demand.demand[load]
            if instances is None or load in demand.unmeasured:
                continue
            point = f"load={load}"
            if load in demand.at_most:
                found.append(
                    Figure(
                        name, point, DEMAND, float(instances), float(min(fewest, instances)), float(instances)
                    )
                )
            else:
                found.append(Figure(name, point, DEMAND, float(instances)))
            records = [r for r in results.sub_experiments if r.load == load]
            cost = point_cost(records, instances, None, None)
            if cost is not None:
                estimate = cost.estimate
                found.append(
                    Figure(
                        name, point, CPU_PER_RECORD, estimate.cpu_us_per_record, estimate.low, estimate.high
                    )
                )
    found.extend(_capacities(results))
    return found


def _capacities(results: ExperimentResults) -> list[Figure]:
    """The capacity strategy's saturated estimates (the last per instance count: a measurement repeated at a
    higher rate supersedes the first), else the capacity metric's loads."""
    latest: dict[int, CapacityEstimate] = {}
    for measurement in results.capacity_measurements:
        if measurement.get("estimate"):
            estimate = CapacityEstimate.from_dict(measurement["estimate"])
            if estimate.saturated:
                latest[int(measurement["instances"])] = estimate
    if latest:
        return [
            Figure(
                results.experiment_id,
                f"instances={instances}",
                CAPACITY,
                estimate.records_per_s,
                _finite(estimate.low),
                _finite(estimate.high),
            )
            for instances, estimate in sorted(latest.items())
        ]
    capacity = results.capacity
    if capacity is None:
        return []
    return [
        Figure(results.experiment_id, f"instances={instances}", CAPACITY, float(load))
        for instances, load in sorted(capacity.capacity.items())
        if load is not None and instances not in capacity.unmeasured
    ]


def _finite(value: float) -> float | None:
    return value if value == value and abs(value) != float("inf") else None


def bmf(found: Iterable[Figure]) -> dict[str, dict[str, dict[str, float]]]:
    """Bencher Metric Format: ``{"uc1-keys/load=4000": {"demand": {"value": 2.0}, ...}}``, an interval as
    ``lower_value`` / ``upper_value``."""
    document: dict[str, dict[str, dict[str, float]]] = {}
    for figure in found:
        entry = {"value": figure.value}
        if figure.low is not None and figure.high is not None:
            entry.update(lower_value=figure.low, upper_value=figure.high)
        document.setdefault(figure.name, {})[figure.measure] = entry
    return document


def check_one_direction(measures: Iterable[str]) -> None:
    """github-action-benchmark takes one direction per file (``customSmallerIsBetter`` or ``...Bigger...``)."""
    if len({MEASURES[measure] for measure in measures}) > 1:
        raise ExportError(
            "github-action-benchmark takes one direction per file: export the capacity (bigger is better) into "
            "a file of its own with --measures capacity, and demand,cpu-per-record into another"
        )


def github_action_benchmark(found: Sequence[Figure]) -> list[dict[str, Any]]:
    """github-action-benchmark's ``customSmallerIsBetter`` / ``customBiggerIsBetter`` list; an interval as
    its ``range`` text."""
    check_one_direction(figure.measure for figure in found)
    entries = []
    for figure in found:
        entry: dict[str, Any] = {"name": f"{figure.name} {figure.measure}", "unit": UNITS[figure.measure]}
        entry["value"] = figure.value
        if figure.low is not None and figure.high is not None:
            entry["range"] = f"{figure.low:.4g}..{figure.high:.4g}"
        entries.append(entry)
    return entries


def tool_name(found: Sequence[Figure]) -> str:
    """The ``tool`` input github-action-benchmark needs for these figures."""
    bigger = any(not MEASURES[figure.measure] for figure in found)
    return "customBiggerIsBetter" if bigger else "customSmallerIsBetter"
