"""Records of your own shape, sent on the same schedule, as smoothly and with the same rate check as the
built-in ``ActivePowerRecord``.

A record factory is any picklable callable ``(key_index, event_time_ms, sequence) -> (key, value)`` returning
bytes: ``key_index`` is the key's number (0 .. keys-1), ``event_time_ms`` the record's scheduled time (also
its Kafka timestamp), ``sequence`` its number in the whole workload's schedule (0, 1, 2, ... in send order;
``sequence // keys`` counts the records of one key). Give it as ``Workload(keys=..., records=factory)``.

It runs in the generator's worker processes (spawned), so it must be picklable: a module-level function, or
an instance of a class defined at module level -- such as the two here:

* ``JsonTemplate``: a JSON object per record from constants and value distributions (``Choice``,
  ``Uniform``, ``IntRange``) and the record's own ``EVENT_TIME``, ``KEY`` and ``SEQUENCE``. Values are drawn
  once into tables and picked per record by a hash of the sequence number, so a record costs a lookup and
  one ``%`` format, not a ``json.dumps`` (the generator must never be the bottleneck).
* ``AvroTemplate``: the same for Avro records of a schema (binary, as Spark's ``from_avro`` reads them).
* ``Replay``: the rows of a sample file (JSON lines or CSV) in file order, over and over, keyed by one of
  their fields, with one field rewritten to the record's event time.

The generator times a factory before it produces anything and refuses a load its processes cannot reach with
it (``LoadGenerator``), as it does for the built-in records.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import pickle
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro

from theodolite_generator.errors import WorkloadError

RecordFactory = Callable[[int, int, int], tuple[bytes, bytes]]

_TABLE_SIZE = 4096  # a power of two: the index is a bit mask
_TABLE_MASK = _TABLE_SIZE - 1
_SCATTER = 2654435761  # Knuth's multiplicative hash: consecutive records pick far-apart table entries


def check_factory(factory: Any) -> None:
    """Refuse a factory the worker processes could not use, before anything is produced."""
    if not callable(factory):
        raise WorkloadError(
            f"records={factory!r} is not callable: give a record factory "
            "(key_index, event_time_ms, sequence) -> (key, value)"
        )
    try:
        pickle.dumps(factory)
    except Exception as exc:
        raise WorkloadError(
            f"the record factory {factory!r} cannot be sent to the generator's worker processes ({exc}): use a "
            "function defined at module level, or an instance of a module-level class (not a lambda or a "
            "nested function)"
        ) from None
    try:
        record = factory(0, 0, 0)
    except Exception as exc:
        raise WorkloadError(f"the record factory {factory!r} failed on its first record: {exc!r}") from None
    if not (isinstance(record, tuple) and len(record) == 2 and all(isinstance(p, bytes) for p in record)):
        raise WorkloadError(
            f"the record factory {factory!r} returned {record!r} for its first record; it must return "
            "(key, value) as two bytes objects, e.g. (b'user-1', b'{...}')"
        )


def factory_cost_us(factory: RecordFactory, calls: int = 5_000) -> float:
    """CPU microseconds one call of `factory` takes here (the median of three timed rounds)."""
    rounds, make = [], record_function(factory)  # what the workers call
    for start in (0, calls, 2 * calls):
        began = time.process_time()
        for sequence in range(start, start + calls):
            make(sequence % 97, 1_700_000_000_000 + sequence, sequence)
        rounds.append((time.process_time() - began) / calls * 1e6)
    return sorted(rounds)[1]


# ------------------------------------------------------------------------------------------------------------
# JSON from a template
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Choice:
    """One of `values` (JSON-serialisable), with optional `weights`."""

    values: Sequence[Any]
    weights: Sequence[float] | None = None

    def draw(self, rng: random.Random, count: int) -> list[Any]:
        return rng.choices(list(self.values), weights=self.weights, k=count)


@dataclass(frozen=True)
class Uniform:
    """A number between `low` and `high`, rounded to `decimals`."""

    low: float
    high: float
    decimals: int = 2

    def draw(self, rng: random.Random, count: int) -> list[Any]:
        return [round(rng.uniform(self.low, self.high), self.decimals) for _ in range(count)]


@dataclass(frozen=True)
class IntRange:
    """A whole number from `low` to `high`, both included."""

    low: int
    high: int

    def draw(self, rng: random.Random, count: int) -> list[Any]:
        return [rng.randint(self.low, self.high) for _ in range(count)]


#: placeholders for what every record knows about itself
EVENT_TIME = "{event_time_ms}"
KEY = "{key}"
SEQUENCE = "{sequence}"
_OWN = (EVENT_TIME, KEY, SEQUENCE)  # compared by equality: a Choice of lists cannot be hashed


@dataclass(frozen=True)
class JsonTemplate:
    """A JSON object per record: ``fields`` maps each field to a constant, a distribution or one of
    ``EVENT_TIME`` (epoch ms), ``KEY`` (the key as text) and ``SEQUENCE``; the Kafka key is ``key_format``
    with ``{key_index}`` filled in.

        JsonTemplate({"user": KEY, "page": Choice(["/", "/cart", "/buy"], [8, 2, 1]),
                      "ms": IntRange(5, 900), "ts": EVENT_TIME}, key_format="user-{key_index}")
    """

    fields: Mapping[str, Any]
    key_format: str = "{key_index}"
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.fields:
            raise WorkloadError("a JsonTemplate needs at least one field")
        for name, spec in self.fields.items():
            if not isinstance(name, str):
                raise WorkloadError(f"field name {name!r} is not text")
            if not (isinstance(spec, (Choice, Uniform, IntRange)) or spec in _OWN):
                try:
                    json.dumps(spec)
                except (TypeError, ValueError):
                    raise WorkloadError(
                        f"field {name!r}: {spec!r} is neither a JSON constant, Choice, Uniform, IntRange, "
                        "EVENT_TIME, KEY nor SEQUENCE"
                    ) from None
        try:
            self.key_format.format(key_index=0)
        except (KeyError, IndexError, ValueError):
            raise WorkloadError(
                f"key_format {self.key_format!r} may only use {{key_index}}, e.g. 'user-{{key_index}}'"
            ) from None

    def __getstate__(self) -> dict[str, Any]:  # the tables are rebuilt in each worker, not pickled
        return {"fields": dict(self.fields), "key_format": self.key_format, "seed": self.seed}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)

    @functools.cached_property
    def _plan(self) -> tuple[bytes, bytes, list[tuple[str, list[bytes]]]]:
        """The key's bytes around its number, a ``%`` format of the whole object with constants filled in,
        and per remaining placeholder its kind and (for distributions) a table of pre-rendered JSON values."""
        rng = random.Random(self.seed)
        before, _, after = self.key_format.partition("{key_index}")
        quoted_before, quoted_after = (
            json.dumps(before)[1:-1],
            json.dumps(after)[1:-1],
        )  # the key as JSON text
        parts: list[str] = []
        slots: list[tuple[str, list[bytes]]] = []  # (kind, the table of a drawn field, else empty)
        for name, spec in self.fields.items():
            field = _percent(json.dumps(name)) + ":"
            if spec == KEY:
                field += f'"{_percent(quoted_before)}%d{_percent(quoted_after)}"'
                slots.append(("key", []))
            elif spec in (EVENT_TIME, SEQUENCE):
                field += "%d"
                slots.append(("time" if spec == EVENT_TIME else "sequence", []))
            elif isinstance(spec, (Choice, Uniform, IntRange)):
                field += "%s"
                slots.append(("table", [json.dumps(v).encode() for v in spec.draw(rng, _TABLE_SIZE)]))
            else:
                field += _percent(json.dumps(spec))
            parts.append(field)
        template = ("{" + ",".join(parts) + "}").encode()
        return _percent(before).encode() + b"%d" + _percent(after).encode(), template, slots

    @functools.cached_property
    def _make(self) -> RecordFactory:
        """The record function of this template, its fields unrolled: a loop deciding each field's kind per
        record took 0.82 us a record of 5 fields, this 0.49 us (the generator's per-core rate is the budget).
        Generated source, as dataclasses and namedtuple generate theirs; the names it uses are the plan's
        tables, never text from the template."""
        key_template, template, slots = self._plan
        namespace: dict[str, Any] = {"KEY_TEMPLATE": key_template, "TEMPLATE": template}
        body = [f"    pick = (sequence * {_SCATTER}) >> 7"]
        values = []
        drawn = [i for i, (kind, _) in enumerate(slots) if kind == "table"]
        for i, (kind, table) in enumerate(slots):
            if kind == "table":
                namespace[f"TABLE_{i}"] = table
                body.append(f"    value_{i} = TABLE_{i}[pick & {_TABLE_MASK}]")
                if i != drawn[-1]:  # mixed again: the next field's own entry
                    body.append(f"    pick = ((pick * {_SCATTER}) >> 9) & 0xFFFF_FFFF_FFFF")
                values.append(f"value_{i}")
            else:
                values.append({"key": "key_index", "time": "event_time_ms", "sequence": "sequence"}[kind])
        source = "\n".join(
            [
                "def make_record(key_index, event_time_ms, sequence):",
                *body,
                f"    return KEY_TEMPLATE % key_index, TEMPLATE % ({''.join(v + ', ' for v in values)})",
            ]
        )
        exec(source, namespace)  # the source holds slot numbers and names of its own only
        return namespace["make_record"]

    def __call__(self, key_index: int, event_time_ms: int, sequence: int) -> tuple[bytes, bytes]:
        return self._make(key_index, event_time_ms, sequence)


@dataclass(frozen=True)
class AvroTemplate:
    """Avro records of `schema` (a record schema as a dict), in Avro's binary encoding without a header --
    what Spark's ``from_avro(value, schema_json)`` reads, as Theodolite's own records are Avro. Field values
    as in ``JsonTemplate``: constants, ``Choice``/``Uniform``/``IntRange``, ``EVENT_TIME``, ``KEY``,
    ``SEQUENCE``; a schema field without a value takes its default."""

    schema: Mapping[str, Any]
    fields: Mapping[str, Any]
    key_format: str = "{key_index}"
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.schema, Mapping):
            raise WorkloadError(f"an AvroTemplate needs a record schema (a dict), got {self.schema!r}")
        try:
            parsed: Any = fastavro.parse_schema(dict(self.schema))
        except Exception as exc:  # fastavro raises several types for a bad schema
            raise WorkloadError(f"not an Avro schema: {exc}") from None
        if not isinstance(parsed, dict) or parsed.get("type") != "record":
            raise WorkloadError(f"an AvroTemplate needs a record schema, got {self.schema!r}")
        names = {f["name"] for f in parsed["fields"]}
        unknown = sorted(set(self.fields) - names)
        if unknown:
            raise WorkloadError(f"fields {unknown} are not in the Avro schema (its fields: {sorted(names)})")
        JsonTemplate(self.fields or {"_": 0}, self.key_format)  # the same checks of values and key format

    def __getstate__(self) -> dict[str, Any]:  # the parsed schema and tables are rebuilt in each worker
        return {
            "schema": dict(self.schema),
            "fields": dict(self.fields),
            "key_format": self.key_format,
            "seed": self.seed,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)

    @functools.cached_property
    def _plan(self) -> tuple[Any, list[tuple[str, str, list[Any]]]]:
        rng = random.Random(self.seed)
        slots: list[tuple[str, str, list[Any]]] = []
        for name, spec in self.fields.items():
            if spec in _OWN:
                slots.append((name, spec, []))
            elif isinstance(spec, (Choice, Uniform, IntRange)):
                slots.append((name, "table", spec.draw(rng, _TABLE_SIZE)))
            else:
                slots.append((name, "table", [spec] * _TABLE_SIZE))
        return fastavro.parse_schema(dict(self.schema)), slots

    def __call__(self, key_index: int, event_time_ms: int, sequence: int) -> tuple[bytes, bytes]:
        schema, slots = self._plan
        key = self.key_format.format(key_index=key_index)
        pick = (sequence * _SCATTER) >> 7
        record: dict[str, Any] = {}
        for name, kind, table in slots:
            if kind == "table":
                record[name] = table[pick & _TABLE_MASK]
                pick = ((pick * _SCATTER) >> 9) & 0xFFFF_FFFF_FFFF
            else:
                record[name] = key if kind == KEY else event_time_ms if kind == EVENT_TIME else sequence
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, schema, record)
        return key.encode(), buffer.getvalue()


def record_function(factory: RecordFactory) -> RecordFactory:
    """What a worker calls per record: a ``JsonTemplate``'s generated function itself (one Python call less
    per record than through its ``__call__``), any other factory as it is."""
    return factory._make if isinstance(factory, JsonTemplate) else factory


def _percent(text: str) -> str:
    """`text` inside a ``%`` format: its own percent signs doubled."""
    return text.replace("%", "%%")


# ------------------------------------------------------------------------------------------------------------
# Replay of a sample file
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Replay:
    """The rows of a sample file (``.jsonl``/``.json`` one object a line, or ``.csv`` with a header) in file
    order, repeated; the Kafka key is the row's `key_field`; `time_field` (if given) is rewritten to the
    record's event time in epoch ms. Each record is sent as a JSON object (CSV cells as text, except the
    time field)."""

    path: str
    key_field: str
    time_field: str | None = None

    def __post_init__(self) -> None:
        rows = self._rows  # read now: a missing file or field is refused before anything is produced
        for number, row in enumerate(rows[:1000], start=1):
            if self.key_field not in row:
                raise WorkloadError(
                    f"{self.path}: row {number} has no key field {self.key_field!r} (fields: {sorted(row)})"
                )

    def __getstate__(self) -> dict[str, Any]:  # the rows are read again in each worker
        return {"path": self.path, "key_field": self.key_field, "time_field": self.time_field}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)

    @functools.cached_property
    def _rows(self) -> list[dict[str, Any]]:
        path = Path(self.path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise WorkloadError(f"sample file {self.path}: {exc.strerror or exc}") from None
        if path.suffix.lower() == ".csv":
            rows: list[dict[str, Any]] = list(csv.DictReader(text.splitlines()))
        else:
            rows = []
            for number, line in enumerate(text.splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise WorkloadError(f"{self.path}: line {number} is not JSON ({exc.msg})") from None
                if not isinstance(row, dict):
                    raise WorkloadError(f"{self.path}: line {number} is not a JSON object")
                rows.append(row)
        if not rows:
            raise WorkloadError(f"sample file {self.path} has no rows")
        return rows

    @functools.cached_property
    def _encoded(self) -> list[tuple[bytes, bytes | None, bytes]]:
        """Per row: its key, and its JSON split around the time field (None: no time field)."""
        encoded: list[tuple[bytes, bytes | None, bytes]] = []
        for row in self._rows:
            key = str(row[self.key_field]).encode()
            if self.time_field is None:
                encoded.append((key, None, json.dumps(row, separators=(",", ":")).encode()))
                continue
            marker = "\x00time\x00"
            text = json.dumps({**row, self.time_field: marker}, separators=(",", ":"))
            before, _, after = text.partition(json.dumps(marker))
            encoded.append((key, before.encode(), after.encode()))
        return encoded

    def __call__(self, key_index: int, event_time_ms: int, sequence: int) -> tuple[bytes, bytes]:
        key, before, after = self._encoded[sequence % len(self._encoded)]
        if before is None:
            return key, after
        return key, b"%s%d%s" % (before, event_time_ms, after)
