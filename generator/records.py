"""The records the generator writes: Theodolite's ``ActivePowerRecord`` as one JSON object per Kafka record.

Why JSON and not Avro (which Theodolite uses): Spark parses JSON natively with ``from_json`` and a schema, so
the jobs under test need no schema registry and no extra jar, and the bytes are readable in a console
consumer. The document is flat with exactly Theodolite's field names::

    {"identifier":"s_42","timestamp":1763700000123,"valueInW":417.263}

    identifier  string   the sensor id, also the Kafka key (UTF-8 bytes)
    timestamp   long     event time in epoch milliseconds, also the Kafka record timestamp (CreateTime)
    valueInW    double   the reading; seeded and reproducible, see ``ValueTable``

Spark schema: ``identifier STRING, timestamp LONG, valueInW DOUBLE``.

Encoding must stay cheap (the generator must never be the bottleneck): a record is three byte strings glued
with one ``%`` format -- a per-key prefix made once, the timestamp digits, and a value suffix taken from a
pre-formatted table -- instead of ``json.dumps`` of a dict per record.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass

#: the Spark SQL DDL schema of the value, for ``from_json``
SPARK_SCHEMA_DDL = "identifier STRING, timestamp LONG, valueInW DOUBLE"

VALUE_TABLE_SIZE = 4096  # a power of two: the index is a bit mask, not a modulo
_KEY_SCATTER = (
    2654435761  # Knuth's multiplicative hash constant: neighbouring keys start far apart in the table
)


def key_of(index: int) -> str:
    """The identifier (and Kafka key) of sensor number ``index``: ``s_0``, ``s_1``, ... as in Theodolite."""
    return f"s_{index}"


@dataclass(frozen=True)
class ActivePowerRecord:
    """One reading of one sensor, as Theodolite's ``ActivePowerRecord``."""

    identifier: str
    timestamp: int  # epoch ms
    valueInW: float  # Theodolite's field name, kept verbatim

    def to_json(self) -> bytes:
        return encode_record(self.identifier, self.timestamp, self.valueInW)

    @classmethod
    def from_json(cls, data: bytes | str) -> ActivePowerRecord:
        doc = json.loads(data)
        if set(doc) != {"identifier", "timestamp", "valueInW"}:
            raise ValueError(f"not an ActivePowerRecord: fields {sorted(doc)}")
        return cls(str(doc["identifier"]), int(doc["timestamp"]), float(doc["valueInW"]))


def encode_record(identifier: str, timestamp_ms: int, value_in_w: float) -> bytes:
    """The JSON bytes of one record (the slow, obvious path; the generator uses ``RecordEncoder``)."""
    return b"%s%d%s" % (record_prefix(identifier), timestamp_ms, value_suffix(value_in_w))


def record_prefix(identifier: str) -> bytes:
    # identifiers are generated (``s_<n>``), but escape anyway so any id yields valid JSON
    return b'{"identifier":%s,"timestamp":' % json.dumps(identifier).encode()


def value_suffix(value_in_w: float) -> bytes:
    if not math.isfinite(value_in_w):
        raise ValueError(f"valueInW must be finite for JSON, got {value_in_w}")
    return b',"valueInW":%s}' % repr(float(value_in_w)).encode()


@dataclass(frozen=True)
class ValueTable:
    """Reproducible readings: the value of key ``i``'s ``n``-th record depends only on (seed, i, n).

    Not on timing, not on how many processes share the keys -- so two runs with the same seed send the same
    values. A table of ``VALUE_TABLE_SIZE`` seeded values in [0, 1000) W, indexed by ``(i * K + n) mod size``,
    costs one add and one mask per record instead of a random draw.
    """

    seed: int = 0

    def values(self) -> list[float]:
        rng = random.Random(self.seed)
        return [round(rng.uniform(0.0, 1000.0), 3) for _ in range(VALUE_TABLE_SIZE)]

    def suffixes(self) -> list[bytes]:
        """The table pre-encoded as the record's JSON tail (``,"valueInW":<v>}``)."""
        return [value_suffix(v) for v in self.values()]

    @staticmethod
    def offset(key_index: int) -> int:
        return (key_index * _KEY_SCATTER) & (VALUE_TABLE_SIZE - 1)

    @staticmethod
    def index(key_index: int, sequence: int) -> int:
        return (ValueTable.offset(key_index) + sequence) & (VALUE_TABLE_SIZE - 1)

    def value(self, key_index: int, sequence: int) -> float:
        return self.values()[self.index(key_index, sequence)]
