"""Workloads along Theodolite's dimensions: number of keys, message frequency, and (UC4) the sensor hierarchy.

Schedule: key ``s_i`` of ``N`` keys sends its ``n``-th record at ``start + phase(i) + n * period`` with
``phase(i) = floor(i * period / N)`` ms. The phases are spread evenly over the period, so the total rate
``N * 1000 / period`` records/s is smooth, not a burst at every full second. The schedule depends only on the
workload, never on how many processes share it: a process owning keys ``w, w + W, w + 2W, ...`` (a stride,
not a contiguous range, so that every process's own share is as smooth as the total) sends exactly the
events of those keys.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from theodolite_generator.errors import WorkloadError
from theodolite_generator.factories import check_factory
from theodolite_generator.records import key_of


@dataclass(frozen=True)
class Hierarchy:
    """UC4's sensor hierarchy: ``depth`` levels of groups, each group with ``children`` members.

    The root is level 0; groups on levels 1 .. depth-1 hold groups, groups on the last level hold machine
    sensors, so there are ``children ** depth`` sensors and ``sum(children ** l for l < depth)`` groups.
    (Theodolite's ``SensorRegistryBuilder(numNestedGroups=depth, numSensors=children)``.)
    """

    children: int
    depth: int

    def __post_init__(self) -> None:
        if self.children < 1:
            raise WorkloadError(
                f"a sensor group needs at least 1 child, got children={self.children}; use >= 1"
            )
        if self.depth < 1:
            raise WorkloadError(f"a hierarchy needs at least 1 level, got depth={self.depth}; use >= 1")

    @property
    def sensor_count(self) -> int:
        return self.children**self.depth

    @property
    def group_count(self) -> int:
        return sum(self.children**level for level in range(self.depth))


@dataclass(frozen=True)
class Workload:
    """What to send: ``keys`` sensors ``s_0 .. s_{keys-1}``, each one record every ``period_ms``."""

    keys: int
    period_ms: int = 1000
    value_seed: int = 0
    hierarchy: Hierarchy | None = None
    #: your own records instead of ActivePowerRecord: a factory (key_index, event_time_ms, sequence) ->
    #: (key, value) bytes (generator/factories.py); None: Theodolite's records
    records: Callable[[int, int, int], tuple[bytes, bytes]] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if isinstance(self.keys, bool) or not isinstance(self.keys, int) or self.keys < 1:
            raise WorkloadError(f"a workload needs at least 1 key, got keys={self.keys!r}; use keys >= 1")
        if isinstance(self.period_ms, bool) or not isinstance(self.period_ms, int) or self.period_ms <= 0:
            raise WorkloadError(
                f"the period between two records of a key must be a positive whole number of ms, got "
                f"period_ms={self.period_ms!r}; use e.g. 1000 (one record per key and second)"
            )
        if self.records is not None:
            if self.hierarchy is not None:
                raise WorkloadError(
                    "a hierarchical (UC4) workload sends Theodolite's sensor readings; records= cannot replace them"
                )
            check_factory(self.records)
        if self.hierarchy is not None and self.keys != self.hierarchy.sensor_count:
            raise WorkloadError(
                f"a hierarchy of {self.hierarchy.children} children x {self.hierarchy.depth} levels has "
                f"{self.hierarchy.sensor_count} sensors, but keys={self.keys}; use Workload.for_hierarchy()"
            )

    @classmethod
    def for_hierarchy(cls, children: int, depth: int, period_ms: int = 1000, value_seed: int = 0) -> Workload:
        """UC4: one key per leaf sensor of a ``children ** depth`` hierarchy."""
        hierarchy = Hierarchy(children, depth)
        return cls(hierarchy.sensor_count, period_ms, value_seed, hierarchy)

    @property
    def target_rate(self) -> float:
        """Records per second the workload asks for."""
        return self.keys * 1000.0 / self.period_ms

    def sent_faster(self, factor: float) -> Workload:
        """The same keys (and so a stateful job's state), each sending `factor` times as often (0.5: half as
        often); the period rounds down, so the rate is never below `factor` times this one's."""
        if not factor > 0:
            raise WorkloadError(f"a rate factor must be positive, got {factor!r}")
        return replace(self, period_ms=max(1, math.floor(self.period_ms / factor)))

    def phase_ms(self, key_index: int) -> int:
        return key_index * self.period_ms // self.keys

    def schedule(self, first_key: int = 0, stride: int = 1) -> KeySchedule:
        return KeySchedule(self.keys, self.period_ms, first_key, stride)

    def sensor_registry(self) -> SensorGroup:
        if self.hierarchy is None:
            raise WorkloadError("this workload has no hierarchy; build it with Workload.for_hierarchy()")
        return build_sensor_registry(self.hierarchy)


@dataclass(frozen=True)
class KeySchedule:
    """The send times of the keys one process owns: ``first_key, first_key + stride, ... < total_keys``.

    Events of this process are numbered ``k = 0, 1, 2, ...``: ``k = n * key_count + m`` is the ``n``-th
    record of the ``m``-th owned key. Integer ms arithmetic throughout, so "due" has no rounding drift.
    """

    total_keys: int
    period_ms: int
    first_key: int = 0
    stride: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.first_key < self.total_keys or self.stride < 1:
            raise ValueError(f"no keys in schedule first_key={self.first_key} stride={self.stride}")

    @property
    def key_count(self) -> int:
        return len(range(self.first_key, self.total_keys, self.stride))

    def key_indices(self) -> range:
        return range(self.first_key, self.total_keys, self.stride)

    def phases_ms(self) -> list[int]:
        return [i * self.period_ms // self.total_keys for i in self.key_indices()]

    def due(self, elapsed_ms: int) -> int:
        """How many events of this process are due at ``start + elapsed_ms`` (inclusive)."""
        if elapsed_ms < 0:
            return 0
        cycles, rest_ms = divmod(elapsed_ms, self.period_ms)
        # phase(i) <= rest  <=>  i * period < (rest + 1) * total  <=>  i <= ((rest + 1) * total - 1) // period
        last_due_key = min(self.total_keys - 1, ((rest_ms + 1) * self.total_keys - 1) // self.period_ms)
        in_cycle = (
            0
            if last_due_key < self.first_key
            else min(self.key_count, (last_due_key - self.first_key) // self.stride + 1)
        )
        return cycles * self.key_count + in_cycle

    def offset_ms(self, event: int) -> int:
        """When event number ``event`` is due, in ms after the start."""
        cycle, owned = divmod(event, self.key_count)
        key_index = self.first_key + owned * self.stride
        return cycle * self.period_ms + key_index * self.period_ms // self.total_keys


# -- UC4 sensor registry ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class MachineSensor:
    """A leaf of the hierarchy: a real sensor, whose identifier is a key the generator sends (``s_<n>``)."""

    identifier: str
    name: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"identifier": self.identifier, "name": self.name}


@dataclass(frozen=True)
class SensorGroup:
    """An aggregated sensor: a group of groups or of machine sensors (Theodolite's ``AggregatedSensor``)."""

    identifier: str
    name: str = ""
    children: tuple[SensorGroup | MachineSensor, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "identifier": self.identifier,
            "name": self.name,
            "children": [child.to_dict() for child in self.children],
        }

    def to_json(self) -> str:
        """Theodolite's registry JSON: ``{"identifier", "name", "children": [...]}``; leaves have no children."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> SensorGroup:
        children: list[SensorGroup | MachineSensor] = []
        for child in doc.get("children", []):
            if "children" in child:
                children.append(cls.from_dict(child))
            else:
                children.append(MachineSensor(child["identifier"], child.get("name", "")))
        return cls(doc["identifier"], doc.get("name", ""), tuple(children))

    @classmethod
    def from_json(cls, text: str | bytes) -> SensorGroup:
        return cls.from_dict(json.loads(text))

    def groups(self) -> Iterator[SensorGroup]:
        """This group and every group below it, depth first."""
        yield self
        for child in self.children:
            if isinstance(child, SensorGroup):
                yield from child.groups()

    def machine_sensors(self) -> Iterator[MachineSensor]:
        for child in self.children:
            if isinstance(child, SensorGroup):
                yield from child.machine_sensors()
            else:
                yield child


ROOT_GROUP_ID = "group_lvl_0"
SENSOR_REGISTRY_EVENT_KEY = b"SENSOR_REGISTRY_CHANGED"  # the configuration event Theodolite publishes


def build_sensor_registry(hierarchy: Hierarchy) -> SensorGroup:
    """The full hierarchy with Theodolite's ids: root ``group_lvl_0``, inner groups ``g_<level>_<first leaf>``,
    leaves ``s_0 .. s_{children**depth - 1}`` numbered left to right (so they are the generator's keys)."""
    next_leaf = 0

    def members(level: int) -> tuple[SensorGroup | MachineSensor, ...]:
        nonlocal next_leaf
        built: list[SensorGroup | MachineSensor] = []
        for _ in range(hierarchy.children):
            if level == hierarchy.depth:
                built.append(MachineSensor(key_of(next_leaf)))
                next_leaf += 1
            else:
                group_id = (
                    f"g_{level}_{next_leaf}"  # the id of the first leaf below makes it unique per level
                )
                built.append(SensorGroup(group_id, "", members(level + 1)))
        return tuple(built)

    return SensorGroup(ROOT_GROUP_ID, "", members(1))
