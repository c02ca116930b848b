"""Records of the user's own shape (generator/factories.py): templates, replay, and the checks that refuse a
factory the generator's worker processes could not use -- without a broker."""

from __future__ import annotations

import json
import os
import pickle
import re

import pytest

from theodolite_generator import LoadGenerator, Workload, WorkloadError
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
    factory_cost_us,
    record_function,
)

CLICKS = JsonTemplate(
    {
        "user": KEY,
        "page": Choice(["/", "/cart", "/buy"], [8, 2, 1]),
        "ms": IntRange(5, 900),
        "price": Uniform(1.0, 99.0),
        "ts": EVENT_TIME,
        "n": SEQUENCE,
        "site": "shop",
    },
    key_format="user-{key_index}",
)


def raises(key_index: int, event_time_ms: int, sequence: int) -> tuple[bytes, bytes]:
    return b"", b"%d" % (1 // 0)


def module_level_factory(key_index: int, event_time_ms: int, sequence: int) -> tuple[bytes, bytes]:
    return b"k%d" % key_index, b"%d,%d" % (event_time_ms, sequence)


def test_a_template_makes_one_json_object_per_record_with_its_own_key_time_and_sequence() -> None:
    key, value = CLICKS(7, 1_700_000_000_123, 42)
    assert key == b"user-7"
    record = json.loads(value)
    assert list(record) == ["user", "page", "ms", "price", "ts", "n", "site"]
    assert record["user"] == "user-7" and record["ts"] == 1_700_000_000_123 and record["n"] == 42
    assert record["site"] == "shop"


def test_template_values_follow_their_distributions_and_repeat_for_the_same_record() -> None:
    records = [json.loads(CLICKS(i % 10, 0, i)[1]) for i in range(5000)]
    pages = [r["page"] for r in records]
    assert set(pages) == {"/", "/cart", "/buy"}
    assert pages.count("/") > pages.count("/cart") > pages.count("/buy")  # weights 8 : 2 : 1
    assert all(5 <= r["ms"] <= 900 for r in records) and len({r["ms"] for r in records}) > 100
    assert all(1.0 <= r["price"] <= 99.0 for r in records)
    assert CLICKS(3, 5, 99) == CLICKS(3, 5, 99)


def test_any_field_name_and_constant_renders_as_json_dumps_would() -> None:
    # the record function is generated source: names and texts of the template must not leak into it
    fields = {"class": "50% off", "a b": {"x": [1, None]}, '"q"': "100%d", "\u00e9": True, "1": 0.5}
    key, value = JsonTemplate(fields)(0, 0, 0)
    assert key == b"0" and json.loads(value) == fields and list(json.loads(value)) == list(fields)
    key, value = JsonTemplate({"t": EVENT_TIME, "%s": KEY}, key_format="%{key_index}%")(3, 17, 9)
    assert key == b"%3%" and json.loads(value) == {"t": 17, "%s": "%3%"}


def test_the_workers_call_the_same_records_with_one_call_less() -> None:
    make = record_function(CLICKS)
    assert make is not CLICKS  # the template's generated function
    assert [make(i % 7, 1000 + i, i) for i in range(200)] == [CLICKS(i % 7, 1000 + i, i) for i in range(200)]
    assert record_function(module_level_factory) is module_level_factory


def test_a_template_survives_the_trip_to_a_worker_process() -> None:
    copy = pickle.loads(pickle.dumps(CLICKS))
    assert [copy(i, 1000 + i, i) for i in range(50)] == [CLICKS(i, 1000 + i, i) for i in range(50)]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [({}, "at least one field"), ({"x": object()}, "neither a JSON constant")],
)
def test_a_broken_template_is_refused(fields: dict, problem: str) -> None:
    with pytest.raises(WorkloadError, match=problem):
        JsonTemplate(fields)


def test_a_key_format_with_other_names_is_refused() -> None:
    with pytest.raises(WorkloadError, match=re.escape("may only use {key_index}")):
        JsonTemplate({"a": 1}, key_format="{user}")


def test_replay_sends_the_rows_in_order_keyed_by_a_field_with_the_time_rewritten(tmp_path) -> None:
    sample = tmp_path / "orders.jsonl"
    sample.write_text(
        '{"order": 1, "customer": "c-9", "at": "2020-01-01T00:00:00", "total": 12.5}\n'
        "\n"
        '{"order": 2, "customer": "c-3", "at": "2020-01-01T00:00:01", "total": 7}\n'
    )
    replay = Replay(str(sample), key_field="customer", time_field="at")
    assert replay(0, 1_700_000_000_000, 0) == (
        b"c-9",
        b'{"order":1,"customer":"c-9","at":1700000000000,"total":12.5}',
    )
    assert replay(5, 1_700_000_000_001, 1)[0] == b"c-3"
    assert replay(0, 3, 2) == (
        b"c-9",
        b'{"order":1,"customer":"c-9","at":3,"total":12.5}',
    )  # from the start again
    assert pickle.loads(pickle.dumps(replay))(0, 3, 2) == replay(0, 3, 2)


def test_replay_reads_csv_cells_as_text(tmp_path) -> None:
    sample = tmp_path / "log.csv"
    sample.write_text("host,level,time\nweb-1,WARN,x\n")
    assert Replay(str(sample), key_field="host", time_field="time")(0, 8, 0) == (
        b"web-1",
        b'{"host":"web-1","level":"WARN","time":8}',
    )


def test_replay_refuses_a_missing_file_a_missing_key_field_and_bad_json(tmp_path) -> None:
    with pytest.raises(WorkloadError, match=r"sample file .*missing\.jsonl"):
        Replay(str(tmp_path / "missing.jsonl"), key_field="id")
    sample = tmp_path / "rows.jsonl"
    sample.write_text('{"id": 1}\n{"other": 2}\n')
    with pytest.raises(WorkloadError, match=r"row 2 has no key field 'id' \(fields: \['other'\]\)"):
        Replay(str(sample), key_field="id")
    sample.write_text('{"id": 1}\nnot json\n')
    with pytest.raises(WorkloadError, match="line 2 is not JSON"):
        Replay(str(sample), key_field="id")


def test_a_workload_takes_a_module_level_factory() -> None:
    workload = Workload(keys=10, records=module_level_factory)
    assert workload.records is module_level_factory
    assert pickle.loads(pickle.dumps(workload)).records is module_level_factory


@pytest.mark.parametrize(
    ("records", "problem"),
    [
        (lambda k, t, s: (b"k", b"v"), "cannot be sent to the generator's worker processes"),
        ("not callable", "is not callable"),
        (raises, "failed on its first record: ZeroDivisionError"),
    ],
)
def test_a_factory_the_workers_cannot_use_is_refused_before_anything_is_produced(records, problem) -> None:
    with pytest.raises(WorkloadError, match=problem):
        Workload(keys=10, records=records)


def returns_text(key_index: int, event_time_ms: int, sequence: int):
    return "key", "value"


def test_a_factory_must_return_two_bytes_objects() -> None:
    with pytest.raises(WorkloadError, match=r"must return \(key, value\) as two bytes objects"):
        Workload(keys=10, records=returns_text)


def test_records_cannot_replace_a_hierarchys_sensor_readings() -> None:
    with pytest.raises(WorkloadError, match="hierarchical"):
        Workload.for_hierarchy(2, 2).__class__(
            keys=4, hierarchy=Workload.for_hierarchy(2, 2).hierarchy, records=CLICKS
        )


def test_the_generator_measures_a_factory_and_refuses_a_load_it_cannot_reach() -> None:
    assert factory_cost_us(CLICKS, calls=500) > 0
    generator = LoadGenerator("127.0.0.1:9", "t", Workload(keys=100, records=CLICKS))
    assert (
        0
        < generator.rate_per_process
        < LoadGenerator("127.0.0.1:9", "t", Workload(keys=100)).rate_per_process
    )
    too_much = Workload(keys=int(generator.rate_per_process * (os.cpu_count() or 1) * 2), records=CLICKS)
    with pytest.raises(WorkloadError, match=r"with this record factory .*make the record factory cheaper"):
        LoadGenerator("127.0.0.1:9", "t", too_much).start()


ORDER_SCHEMA = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "items", "type": "int"},
        {"name": "at", "type": "long"},
        {"name": "channel", "type": "string", "default": "web"},
    ],
}


def test_an_avro_template_writes_binary_records_of_its_schema() -> None:
    import io

    import fastavro

    orders = AvroTemplate(
        ORDER_SCHEMA,
        {
            "customer": KEY,
            "amount": Uniform(1, 500),
            "items": IntRange(1, 9),
            "at": EVENT_TIME,
            "channel": Choice(["web", "app"]),  # a Choice holds a list: unhashable, compared by equality
        },
        key_format="c-{key_index}",
    )
    key, value = orders(4, 1_700_000_000_042, 17)
    assert key == b"c-4"
    record = fastavro.schemaless_reader(io.BytesIO(value), fastavro.parse_schema(ORDER_SCHEMA))
    assert (
        record["customer"] == "c-4"
        and record["at"] == 1_700_000_000_042
        and record["channel"] in ("web", "app")
    )
    assert 1 <= record["amount"] <= 500 and 1 <= record["items"] <= 9
    copy = pickle.loads(pickle.dumps(orders))
    assert [copy(i, i, i) for i in range(20)] == [orders(i, i, i) for i in range(20)]
    assert Workload(keys=10, records=orders).records is orders


@pytest.mark.parametrize(
    ("schema", "fields", "problem"),
    [
        ({"type": "nope"}, {}, "not an Avro schema"),
        ("string", {}, "needs a record schema"),
        (ORDER_SCHEMA, {"cost": 1}, r"fields \['cost'\] are not in the Avro schema"),
    ],
)
def test_a_broken_avro_template_is_refused(schema, fields, problem) -> None:
    with pytest.raises(WorkloadError, match=problem):
        AvroTemplate(schema, fields)


def test_a_value_the_schema_cannot_hold_is_refused_before_anything_is_produced() -> None:
    wrong = AvroTemplate(ORDER_SCHEMA, {"customer": KEY, "amount": "lots", "items": 1, "at": EVENT_TIME})
    with pytest.raises(WorkloadError, match="failed on its first record"):
        Workload(keys=10, records=wrong)


def test_an_avro_field_without_a_value_takes_its_schema_default() -> None:
    import io

    import fastavro

    orders = AvroTemplate(ORDER_SCHEMA, {"customer": KEY, "amount": 1.5, "items": 1, "at": EVENT_TIME})
    record = fastavro.schemaless_reader(io.BytesIO(orders(0, 7, 0)[1]), fastavro.parse_schema(ORDER_SCHEMA))
    assert record == {"customer": "0", "amount": 1.5, "items": 1, "at": 7, "channel": "web"}
