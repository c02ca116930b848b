"""The four use-case jobs against a real broker and a real Spark: a known input gives exactly the output a
pandas reference computes from the same records, and malformed records change nothing but are counted."""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from pytest_theodolite.engine.monitor import all_progress
from theodolite_spark_jobs import uc1, uc2, uc3, uc4

pytestmark = pytest.mark.integration

BASE_MS = 1_704_103_200_000  # 2024-01-01T10:00:00Z
SENSORS = [f"s_{i}" for i in range(4)]
QUERY_TIMEOUT_S = 180

# (key, value) pairs a job must drop and count: not JSON, missing field, wrong types, null key, bad time
MALFORMED: list[tuple[bytes | None, bytes]] = [
    (b"s_0", b"this is not json"),
    (b"s_1", json.dumps({"identifier": "s_1", "timestamp": BASE_MS + 1000}).encode()),
    (b"s_2", json.dumps({"identifier": "s_2", "timestamp": BASE_MS + 1000, "valueInW": "high"}).encode()),
    (b"s_3", json.dumps({"identifier": "s_3", "timestamp": "yesterday", "valueInW": 1.0}).encode()),
    (None, json.dumps({"identifier": "s_0", "timestamp": BASE_MS + 1000, "valueInW": 1.0}).encode()),
    (b"s_1", json.dumps({"identifier": "s_1", "timestamp": -5, "valueInW": 1.0}).encode()),
    (b"s_2", b"[1, 2, 3]"),
]


# -- helpers -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark(spark_cluster):
    """One SparkSession for the module: starting executors is the slow part."""
    with spark_cluster.session(instances=1) as session:
        yield session


#: the readings are timestamped in 2024: without this the broker's time-based retention (one hour on the
#: embedded broker) may delete them between the write and the job's read
KEEP_FOREVER = {"retention.ms": "-1"}


def fresh_topic(kafka_cluster, role: str, partitions: int = 1) -> str:
    name = f"jobs-{role}-{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(name, partitions, configs=KEEP_FOREVER)
    return name


def reading(identifier: str, timestamp_ms: int, value: float) -> dict[str, Any]:
    return {"identifier": identifier, "timestamp": timestamp_ms, "valueInW": value}


def produce(
    kafka_cluster,
    topic: str,
    readings: list[dict[str, Any]],
    malformed: list[tuple[bytes | None, bytes]] = (),
) -> None:
    """Write readings (key = identifier, Kafka timestamp = event time), malformed records interleaved, and
    check that the broker acknowledged every one (a silently lost record would fail a test much later)."""
    records_before = kafka_cluster.total_end_offset(topic)
    producer = KafkaProducer(**kafka_cluster.client_kwargs())
    try:
        bad = list(malformed)
        sent = []
        for index, record in enumerate(readings):
            sent.append(
                producer.send(
                    topic,
                    key=record["identifier"].encode(),
                    value=json.dumps(record).encode(),
                    timestamp_ms=record["timestamp"],
                )
            )
            if bad and index % 5 == 2:
                key, value = bad.pop()
                sent.append(producer.send(topic, key=key, value=value))
        sent.extend(producer.send(topic, key=key, value=value) for key, value in bad)
        producer.flush()
        for future in sent:
            future.get(timeout=30)
    finally:
        producer.close()
    assert kafka_cluster.total_end_offset(topic) == records_before + len(sent)


def consume_all(kafka_cluster, topic: str) -> list[tuple[str, dict[str, Any]]]:
    """Every record of ``topic`` in offset order (per partition): (key, parsed value)."""
    end = kafka_cluster.end_offsets(topic)
    consumer = KafkaConsumer(**kafka_cluster.client_kwargs(), enable_auto_commit=False)
    partitions = [TopicPartition(topic, p) for p in end]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    records: list[tuple[str, dict[str, Any]]] = []
    try:
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < end[tp.partition] for tp in partitions):
            assert time.monotonic() < deadline, f"could not read {topic} to its end"
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend((r.key.decode(), json.loads(r.value)) for r in batch)
    finally:
        consumer.close()
    return records


def run_available_now(query) -> None:
    """Wait for an ``available_now`` query to finish; fail with its error if it had one."""
    try:
        finished = query.awaitTermination(QUERY_TIMEOUT_S)
    finally:
        if query.isActive:
            query.stop()
    assert query.exception() is None, query.exception()
    assert finished, f"query did not finish within {QUERY_TIMEOUT_S} s"


def observed_totals(query, metric: str = "records") -> dict[str, int]:
    """Sum a per-batch observation over the query's progress reports."""
    totals = {"total": 0, "malformed": 0}
    for progress in all_progress(query):
        row = (progress.get("observedMetrics") or {}).get(metric)  # pyspark 3.5 leaves an empty one out
        if row is not None:
            totals["total"] += row["total"] or 0
            totals["malformed"] += row["malformed"] or 0
    return totals


def checkpoint_conf(checkpoint_dir: str) -> dict[str, str]:
    """The SQL settings a query recorded with its first micro-batch (line 2 of the first offset-log file)."""
    offset_log = (Path(checkpoint_dir) / "offsets" / "0").read_text().splitlines()
    return json.loads(offset_log[1])["conf"]


def statistics_frame(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    grouped = frame.groupby(keys)["valueInW"]
    return pd.DataFrame(
        {
            "count": grouped.count(),
            "sumInW": grouped.sum(),
            "minInW": grouped.min(),
            "maxInW": grouped.max(),
            "meanInW": grouped.mean(),
            "populationVarianceInW": grouped.var(ddof=0),
        }
    ).reset_index()


def assert_same_statistics(expected: pd.DataFrame, actual: pd.DataFrame, keys: list[str]) -> None:
    expected = expected.sort_values(keys).reset_index(drop=True)
    actual = actual.sort_values(keys).reset_index(drop=True)
    assert len(actual) == len(expected), (len(actual), len(expected))
    pd.testing.assert_frame_equal(actual[keys], expected[keys], check_dtype=False)
    assert actual["count"].tolist() == expected["count"].tolist()
    for column in ("sumInW", "minInW", "maxInW", "meanInW", "populationVarianceInW"):
        assert actual[column].tolist() == pytest.approx(expected[column].tolist(), rel=1e-9, abs=1e-9), column


def random_readings(seed: int, start_ms: int, seconds: int, step_ms: int = 1000) -> list[dict[str, Any]]:
    """Each sensor every ``step_ms``, each with its own phase, values in [0, 1000)."""
    generator = random.Random(seed)
    readings = [
        reading(sensor, start_ms + t + phase * 37, round(generator.uniform(0, 1000), 3))
        for t in range(0, seconds * 1000, step_ms)
        for phase, sensor in enumerate(SENSORS)
    ]
    generator.shuffle(readings)  # out of order within the run: windows must not care
    return readings


# -- UC1 -----------------------------------------------------------------------------------------------------


def test_uc1_converts_every_valid_record_and_counts_malformed(spark, kafka_cluster, tmp_path):
    input_topic, output_topic = fresh_topic(kafka_cluster, "uc1-in", 2), fresh_topic(kafka_cluster, "uc1-out")
    readings = random_readings(seed=1, start_ms=BASE_MS, seconds=10)
    produce(kafka_cluster, input_topic, readings, MALFORMED)

    query = uc1.start_query(
        spark,
        bootstrap_servers=kafka_cluster.bootstrap_servers,
        input_topic=input_topic,
        output_topic=output_topic,
        checkpoint_dir=str(tmp_path / "checkpoint"),
        available_now=True,
    )
    run_available_now(query)

    output = consume_all(kafka_cluster, output_topic)
    actual = sorted(
        (key, value["sensorId"], value["epochMillis"], value["activePowerW"], value["time"])
        for key, value in output
    )
    expected = sorted(
        (
            r["identifier"],
            r["identifier"],
            r["timestamp"],
            r["valueInW"],
            pd.Timestamp(r["timestamp"], unit="ms", tz="UTC").strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        )
        for r in readings
    )
    assert observed_totals(query) == {"total": len(readings) + len(MALFORMED), "malformed": len(MALFORMED)}
    assert actual == expected


def test_uc1_noop_sink_writes_nothing(spark, kafka_cluster, tmp_path):
    input_topic, output_topic = fresh_topic(kafka_cluster, "uc1n-in"), fresh_topic(kafka_cluster, "uc1n-out")
    readings = random_readings(seed=2, start_ms=BASE_MS, seconds=3)
    produce(kafka_cluster, input_topic, readings)
    query = uc1.start_query(
        spark,
        bootstrap_servers=kafka_cluster.bootstrap_servers,
        input_topic=input_topic,
        output_topic=output_topic,
        checkpoint_dir=str(tmp_path / "checkpoint"),
        available_now=True,
        sink="noop",
    )
    run_available_now(query)
    assert kafka_cluster.total_end_offset(output_topic) == 0
    assert observed_totals(query) == {"total": len(readings), "malformed": 0}


def test_unknown_option_is_an_error(spark, kafka_cluster, tmp_path):
    with pytest.raises(TypeError, match="trigger_intreval"):
        uc1.start_query(
            spark,
            bootstrap_servers=kafka_cluster.bootstrap_servers,
            input_topic="x",
            output_topic="y",
            checkpoint_dir=str(tmp_path / "checkpoint"),
            trigger_intreval="1 second",
        )


@pytest.mark.parametrize("job", [uc1, uc2, uc3, uc4], ids=["uc1", "uc2", "uc3", "uc4"])
def test_extra_hash_rounds_must_be_a_whole_number_of_at_least_zero(spark, kafka_cluster, tmp_path, job):
    topics = {"config_topic": "c", "feedback_topic": "f"} if job is uc4 else {}
    with pytest.raises(ValueError, match="extra_hash_rounds must be a whole number >= 0, got -1"):
        job.start_query(
            spark,
            bootstrap_servers=kafka_cluster.bootstrap_servers,
            input_topic="x",
            output_topic="y",
            checkpoint_dir=str(tmp_path / "checkpoint"),
            extra_hash_rounds=-1,
            **topics,
        )
    assert not spark.streams.active  # refused before any query started (UC4's registry query too)


# -- UC2 -----------------------------------------------------------------------------------------------------


def test_uc2_tumbling_window_statistics_match_pandas(spark, kafka_cluster, tmp_path):
    input_topic, output_topic = fresh_topic(kafka_cluster, "uc2-in", 2), fresh_topic(kafka_cluster, "uc2-out")
    readings = random_readings(seed=3, start_ms=BASE_MS, seconds=35)
    # one reading far ahead moves the watermark past every window above, so all of them are written
    flush = reading("flush", BASE_MS + 3_600_000, 0.0)
    produce(kafka_cluster, input_topic, [*readings, flush], MALFORMED)

    session_partitions = spark.conf.get("spark.sql.shuffle.partitions")
    checkpoint_dir = str(tmp_path / "checkpoint")
    query = uc2.start_query(
        spark,
        bootstrap_servers=kafka_cluster.bootstrap_servers,
        input_topic=input_topic,
        output_topic=output_topic,
        checkpoint_dir=checkpoint_dir,
        window_size="10 seconds",
        watermark_delay="0 seconds",
        available_now=True,
        shuffle_partitions=3,
        extra_hash_rounds=2,  # dearer per record, the same output
    )
    assert (
        spark.conf.get("spark.sql.shuffle.partitions") == session_partitions
    )  # the caller's session is untouched
    run_available_now(query)
    # ... while the query ran with its own setting, recorded in its checkpoint
    assert checkpoint_conf(checkpoint_dir)["spark.sql.shuffle.partitions"] == "3"

    frame = pd.DataFrame(readings)
    frame["windowStart"] = frame["timestamp"] // 10_000 * 10_000
    expected = statistics_frame(frame, ["identifier", "windowStart"])
    output = consume_all(kafka_cluster, output_topic)
    assert all(key == value["identifier"] for key, value in output)
    actual = pd.DataFrame([value for _, value in output])
    assert (actual["windowEnd"] - actual["windowStart"] == 10_000).all()
    assert_same_statistics(expected, actual, ["identifier", "windowStart"])
    assert observed_totals(query) == {
        "total": len(readings) + 1 + len(MALFORMED),
        "malformed": len(MALFORMED),
    }


# -- UC3 -----------------------------------------------------------------------------------------------------


def test_uc3_hour_of_day_sliding_windows_match_pandas_on_rocksdb(spark, kafka_cluster, tmp_path):
    input_topic, output_topic = fresh_topic(kafka_cluster, "uc3-in"), fresh_topic(kafka_cluster, "uc3-out")
    # Kathmandu is UTC+05:45: its hours change at hh:15 UTC, which these readings straddle (all one UTC hour)
    zone = "Asia/Kathmandu"
    readings = random_readings(seed=4, start_ms=BASE_MS + 14 * 60_000 + 40_000, seconds=40, step_ms=2000)
    flush = reading("flush", BASE_MS + 3_600_000 * 5, 0.0)
    produce(kafka_cluster, input_topic, [*readings, flush], MALFORMED)

    checkpoint_dir = str(tmp_path / "checkpoint")
    query = uc3.start_query(
        spark,
        bootstrap_servers=kafka_cluster.bootstrap_servers,
        input_topic=input_topic,
        output_topic=output_topic,
        checkpoint_dir=checkpoint_dir,
        window_size="20 seconds",
        window_advance="10 seconds",
        time_zone=zone,
        output_mode="append",
        watermark_delay="0 seconds",
        available_now=True,
        state_store="rocksdb",
        extra_hash_rounds=2,  # dearer per record, the same output
    )
    run_available_now(query)
    assert checkpoint_conf(checkpoint_dir)["spark.sql.streaming.stateStore.providerClass"].endswith(
        "RocksDBStateStoreProvider"
    )

    frame = pd.DataFrame(readings)
    frame["hourOfDay"] = pd.to_datetime(frame["timestamp"], unit="ms", utc=True).dt.tz_convert(zone).dt.hour
    assert frame["hourOfDay"].nunique() == 2  # the test means something only if the hour changes
    # every reading lies in the two 20 s windows that start at the 10 s boundaries at or before it
    latest_start = frame["timestamp"] // 10_000 * 10_000
    frame = pd.concat(
        [frame.assign(windowStart=latest_start), frame.assign(windowStart=latest_start - 10_000)]
    )
    expected = statistics_frame(frame, ["identifier", "hourOfDay", "windowStart"])

    output = consume_all(kafka_cluster, output_topic)
    assert all(key == f"{v['identifier']};{v['hourOfDay']}" and v["timeZone"] == zone for key, v in output)
    actual = pd.DataFrame([value for _, value in output])
    assert (actual["windowEnd"] - actual["windowStart"] == 20_000).all()
    assert_same_statistics(expected, actual, ["identifier", "hourOfDay", "windowStart"])
    assert observed_totals(query) == {
        "total": len(readings) + 1 + len(MALFORMED),
        "malformed": len(MALFORMED),
    }


# -- UC4 -----------------------------------------------------------------------------------------------------


def registry(children_per_group: int, levels: int, moved: dict[str, str] | None = None) -> dict[str, Any]:
    """Theodolite-shaped registry: groups ``group_lvl_<level>_<index>``, leaf sensors ``s_<n>``;
    ``moved`` re-parents sensors (sensor -> group) to model a registry change."""
    moved = moved or {}
    sensor_counter = iter(range(children_per_group**levels))
    group_index = {level: iter(range(children_per_group**level)) for level in range(levels)}

    def group(level: int) -> dict[str, Any]:
        identifier = f"group_lvl_{level}_{next(group_index[level])}"
        if level == levels - 1:
            children = [
                {"identifier": f"s_{n}", "name": f"sensor {n}"}
                for n in (next(sensor_counter) for _ in range(children_per_group))
            ]
        else:
            children = [group(level + 1) for _ in range(children_per_group)]
        return {"identifier": identifier, "name": identifier, "children": children}

    root = group(0)

    def relocate(node: dict[str, Any]) -> None:
        node["children"] = [c for c in node.get("children", []) if c["identifier"] not in moved]
        node["children"] += [
            {"identifier": s, "name": s} for s, g in moved.items() if g == node["identifier"]
        ]
        for child in node["children"]:
            if "children" in child:
                relocate(child)

    relocate(root)
    return root


def leaves_by_group(node: dict[str, Any]) -> dict[str, set[str]]:
    """Every group -> the sensors anywhere below it."""
    result: dict[str, set[str]] = {}

    def visit(n: dict[str, Any]) -> set[str]:
        if "children" not in n:
            return {n["identifier"]}
        below = set().union(*(visit(c) for c in n["children"])) if n["children"] else set()
        result[n["identifier"]] = below
        return below

    visit(node)
    return result


def expected_group_sums(readings: list[dict[str, Any]], tree: dict[str, Any], window_ms: int) -> dict:
    """(group, windowStart) -> sum over the group's sensors of each sensor's latest value in the window."""
    frame = pd.DataFrame(readings)
    frame["windowStart"] = frame["timestamp"] // window_ms * window_ms
    latest = frame.sort_values("timestamp").groupby(["identifier", "windowStart"])["valueInW"].last()
    sums = {}
    for group, sensors in leaves_by_group(tree).items():
        for window_start in sorted(frame["windowStart"].unique()):
            values = [latest[(s, window_start)] for s in sensors if (s, window_start) in latest.index]
            if values:
                sums[(group, int(window_start))] = sum(values)
    return sums


def run_until_feedback_settles(query, kafka_cluster, feedback_topic: str) -> None:
    """Process all input, then again while the feedback loop still produces records (one pass per level)."""
    previous = -1
    deadline = time.monotonic() + QUERY_TIMEOUT_S
    while (current := kafka_cluster.total_end_offset(feedback_topic)) != previous:
        assert time.monotonic() < deadline, "UC4's feedback loop did not settle"
        assert query.exception() is None, query.exception()
        previous = current
        query.processAllAvailable()


def publish_registry(kafka_cluster, uc4_topics, tree: dict[str, Any]) -> None:
    """The sensor registry as UC4 reads it: one record on its config topic."""
    producer = KafkaProducer(**kafka_cluster.client_kwargs())
    producer.send(uc4_topics["config"], key=b"registry", value=json.dumps(tree).encode())
    producer.flush()
    producer.close()


def start_uc4(
    spark, kafka_cluster, uc4_topics, tmp_path, *, watermark_delay: str, extra_hash_rounds: int = 0
):
    """UC4 on the test's topics with 10 s windows and a fast trigger."""
    return uc4.start_query(
        spark,
        bootstrap_servers=kafka_cluster.bootstrap_servers,
        input_topic=uc4_topics["input"],
        output_topic=uc4_topics["output"],
        checkpoint_dir=str(tmp_path / "checkpoint"),
        config_topic=uc4_topics["config"],
        feedback_topic=uc4_topics["feedback"],
        window_size="10 seconds",
        watermark_delay=watermark_delay,
        trigger_interval="100 milliseconds",
        extra_hash_rounds=extra_hash_rounds,
    )


def latest_results(kafka_cluster, output_topic: str) -> dict[tuple[str, int], dict[str, Any]]:
    """Update-mode output as a table: the last record per (group, windowStart) wins."""
    return {(key, value["windowStart"]): value for key, value in consume_all(kafka_cluster, output_topic)}


class ScriptedGroupState:
    """What ``applyInPandasWithState`` hands the function, for one key: the subset of GroupState UC4 uses."""

    def __init__(self, watermark_ms: int = 0) -> None:
        self.value: tuple[Any, ...] | None = None
        self.hasTimedOut = False
        self.timeout_ms: int | None = None
        self.watermark_ms = watermark_ms

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple[Any, ...]:
        assert self.value is not None
        return self.value

    def update(self, value: tuple[Any, ...]) -> None:
        self.value = value

    def remove(self) -> None:
        self.value = None

    def setTimeoutTimestamp(self, timestamp_ms: int) -> None:
        if timestamp_ms < self.watermark_ms:  # as PySpark refuses it (INVALID_TIMEOUT_TIMESTAMP)
            raise ValueError(f"timeout {timestamp_ms} is earlier than the watermark {self.watermark_ms}")
        self.timeout_ms = timestamp_ms

    def getCurrentWatermarkMs(self) -> int:
        return self.watermark_ms


def test_uc4_state_keeps_one_version_per_child_however_many_readings_arrive():
    state = ScriptedGroupState()
    key = (3, 0, 10_000)  # (bucket, window)
    rng = random.Random(4)
    batches: list[pd.DataFrame] = []
    for batch in range(50):
        readings = pd.DataFrame(
            {
                "identifier": ["g"] * 40,
                "child": [f"s_{rng.randrange(4)}" for _ in range(40)],
                "timestamp": [rng.randrange(10_000) for _ in range(40)],
                "offset": [batch * 40 + n for n in range(40)],
                "valueInW": [float(batch * 40 + n) for n in range(40)],
            }
        )
        [result] = list(uc4.latest_per_child(key, iter([readings[:20], readings[20:]]), state))
        batches.append(readings)
        everything = pd.concat(batches)
        newest = everything.sort_values(["timestamp", "offset"]).groupby("child").last()
        assert result.to_dict("records") == [
            {
                "identifier": "g",
                "timestamp": int(everything["timestamp"].max()),
                "sumInW": newest["valueInW"].sum(),
                "childCount": len(newest),
                "windowStart": 0,
                "windowEnd": 10_000,
            }
        ]
        # bounded by the children, not the readings
        assert (
            list(json.loads(state.get[0])) == ["g"] and len(json.loads(state.get[0])["g"]) == len(newest) <= 4
        )
    assert state.timeout_ms == 10_000  # dropped once the watermark passes the window's end
    state.hasTimedOut = True
    assert list(uc4.latest_per_child(key, iter([]), state)) == [] and not state.exists


def test_uc4_sums_each_group_of_a_bucket_and_emits_only_the_groups_that_got_readings():
    def readings(rows: list[tuple[str, str, int, float]]) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "identifier": [group for group, _, _, _ in rows],
                "child": [child for _, child, _, _ in rows],
                "timestamp": [timestamp for _, _, timestamp, _ in rows],
                "offset": list(range(len(rows))),
                "valueInW": [value for _, _, _, value in rows],
            }
        )

    state, key = ScriptedGroupState(), (0, 0, 10_000)
    first = readings([("a", "s_0", 1_000, 1.0), ("b", "s_2", 1_500, 10.0), ("a", "s_1", 2_000, 2.0)])
    [result] = list(uc4.latest_per_child(key, iter([first]), state))
    assert result.to_dict("records") == [
        {
            "identifier": "a",
            "timestamp": 2_000,
            "sumInW": 3.0,
            "childCount": 2,
            "windowStart": 0,
            "windowEnd": 10_000,
        },
        {
            "identifier": "b",
            "timestamp": 1_500,
            "sumInW": 10.0,
            "childCount": 1,
            "windowStart": 0,
            "windowEnd": 10_000,
        },
    ]
    # a newer version of a's s_0; b got nothing in this micro-batch and is not written again
    [result] = list(uc4.latest_per_child(key, iter([readings([("a", "s_0", 3_000, 5.0)])]), state))
    assert result[["identifier", "sumInW", "childCount"]].values.tolist() == [["a", 7.0, 2]]
    assert json.loads(state.get[0])["b"] == {"s_2": [1_500, 1, 10.0]} and state.timeout_ms == 10_000


def test_uc4_drops_a_late_reading_of_a_closed_window_also_before_its_timeout_fired_and_counts_it():
    late = pd.DataFrame(
        {"identifier": ["g"], "child": ["s_0"], "timestamp": [5_000], "offset": [1], "valueInW": [1.0]}
    )
    state = ScriptedGroupState()
    assert len(list(uc4.latest_per_child((0, 0, 10_000), iter([late]), state))) == 1
    state.watermark_ms = 20_000  # the window closed; its state waits for its timeout (found by bench_jobs.py)
    [counted] = list(uc4.latest_per_child((0, 0, 10_000), iter([late, late]), state))
    assert not state.exists
    # no result, only the count of what was dropped, as a negative childCount: aggregate_groups observes it
    # as LATE_ROWS_METRIC and removes the row
    assert counted.to_dict("records") == [
        {
            "identifier": "",
            "timestamp": 0,
            "sumInW": 0.0,
            "childCount": -2,
            "windowStart": 0,
            "windowEnd": 10_000,
        }
    ]
    [counted] = list(uc4.latest_per_child((0, 0, 10_000), iter([late]), ScriptedGroupState(20_000)))
    assert counted["childCount"].tolist() == [-1]
    assert list(uc4.latest_per_child((0, 0, 10_000), iter([]), ScriptedGroupState(20_000))) == []


@pytest.fixture
def uc4_topics(kafka_cluster) -> Iterator[dict[str, str]]:
    yield {
        role: fresh_topic(kafka_cluster, f"uc4-{role}") for role in ("input", "output", "config", "feedback")
    }


def test_uc4_counts_the_readings_it_drops_as_late_and_writes_no_result_for_them(
    spark, kafka_cluster, uc4_topics, tmp_path
):
    """Readings of a window the watermark has passed are dropped, and every one is counted -- by Spark's state
    operator or, where Spark's filter (the previous batch's watermark) let it through, by UC4's own
    ``late_rows`` observation -- as the runner adds them up (monitor.late_rows_per_batch). Which of the two
    drops a reading depends on where Spark cuts the micro-batches; UC4's own count is tested on its function
    above (test_uc4_drops_a_late_reading_...), here that its observation is reported with every batch."""
    from pytest_theodolite.engine.monitor import late_rows_per_batch

    publish_registry(kafka_cluster, uc4_topics, registry(4, 1))
    query = start_uc4(spark, kafka_cluster, uc4_topics, tmp_path, watermark_delay="5 seconds")
    try:
        query.registry.processAllAvailable()
        produce(kafka_cluster, uc4_topics["input"], [reading(s, BASE_MS + 100_000, 1.0) for s in SENSORS])
        run_until_feedback_settles(query, kafka_cluster, uc4_topics["feedback"])
        for _ in range(2):
            produce(kafka_cluster, uc4_topics["input"], [reading(s, BASE_MS + 1000, 2.0) for s in SENSORS])
            run_until_feedback_settles(query, kafka_cluster, uc4_topics["feedback"])
        progresses = all_progress(query)
    finally:
        query.stop()
    counted = sum(rows for _, rows in late_rows_per_batch(progresses))
    assert counted == 2 * len(SENSORS), progresses[-3:]
    with_data = [p for p in progresses if p["numInputRows"] > 0]
    assert with_data and all("rows" in p["observedMetrics"]["late_rows"] for p in with_data), with_data
    results = consume_all(kafka_cluster, uc4_topics["output"])
    assert {value["windowStart"] for _, value in results} == {BASE_MS + 100_000}
    assert all(value["childCount"] > 0 for _, value in results), results


def test_uc4_hierarchical_sums_match_reference_and_follow_a_registry_change(
    spark, kafka_cluster, uc4_topics, tmp_path
):
    tree = registry(children_per_group=4, levels=3)
    assert len(leaves_by_group(tree)) == 21 and len(leaves_by_group(tree)["group_lvl_0_0"]) == 64
    publish_registry(kafka_cluster, uc4_topics, tree)

    window_ms = 10_000
    generator = random.Random(5)
    # every sensor three times in the first window, twice in the second: only the latest value counts
    readings = [
        reading(f"s_{n}", BASE_MS + window * window_ms + 1000 * k + n, round(generator.uniform(0, 100), 2))
        for window, repeats in ((0, 3), (1, 2))
        for k in range(repeats)
        for n in range(64)
    ]
    generator.shuffle(readings)
    readings.append(reading("s_unknown", BASE_MS + 500, 1e6))  # in no group: must not count anywhere
    produce(kafka_cluster, uc4_topics["input"], readings, MALFORMED)

    # dearer per reading, the same output
    query = start_uc4(
        spark, kafka_cluster, uc4_topics, tmp_path, watermark_delay="1 hour", extra_hash_rounds=2
    )
    try:
        run_until_feedback_settles(query, kafka_cluster, uc4_topics["feedback"])
        expected = expected_group_sums(readings[:-1], tree, window_ms)
        actual = latest_results(kafka_cluster, uc4_topics["output"])
        assert len(expected) == 21 * 2
        assert set(actual) == set(expected)
        for key, total in expected.items():
            assert actual[key]["sumInW"] == pytest.approx(total, rel=1e-9), key
        # the root and level 1 are groups of groups: their sums came through the feedback topic
        assert actual[("group_lvl_0_0", BASE_MS)]["childCount"] == 4
        assert observed_totals(query)["malformed"] == len(MALFORMED)
        assert observed_totals(query)["total"] == len(readings) + len(MALFORMED)

        # a new registry moves two sensors; the running query must apply it to the next window
        moved = {"s_0": "group_lvl_2_15", "s_63": "group_lvl_1_0"}
        new_tree = registry(children_per_group=4, levels=3, moved=moved)
        publish_registry(kafka_cluster, uc4_topics, new_tree)
        # a new registry is in force once UC4's registry query has read it (within a second); readings sent
        # before that may still go to the old groups, as in Theodolite's UC4
        query.registry.processAllAvailable()
        later = [reading(f"s_{n}", BASE_MS + 2 * window_ms + n, float(n + 1)) for n in range(64)]
        produce(kafka_cluster, uc4_topics["input"], later)
        run_until_feedback_settles(query, kafka_cluster, uc4_topics["feedback"])

        # the registry was read once per record, by its own query; no micro-batch of the aggregation scans
        # the registry topic (a static Kafka read would name the topic in the plan)
        registry_reads = sum(p["numInputRows"] for p in all_progress(query.registry))
        assert registry_reads == 2
        plan = query._jsq.streamingQuery().lastExecution().executedPlan().toString()
        assert "LocalTableScan" in plan and uc4_topics["config"] not in plan
    finally:
        query.stop()
    # stopping UC4 stops its registry query and drops the registry's in-memory table
    assert spark.streams.active == []
    assert not spark.catalog.tableExists(query.registry.name)

    actual = latest_results(kafka_cluster, uc4_topics["output"])
    expected_later = expected_group_sums(later, new_tree, window_ms)
    later_window = BASE_MS + 2 * window_ms
    assert {k for k in actual if k[1] == later_window} == set(expected_later)
    for key, total in expected_later.items():
        assert actual[key]["sumInW"] == pytest.approx(total, rel=1e-9), key
    # s_n's value here is n + 1: s_0 has left group_lvl_2_0 for group_lvl_2_15, whose s_63 left for group_lvl_1_0
    assert actual[("group_lvl_2_0", later_window)]["sumInW"] == 2 + 3 + 4
    assert actual[("group_lvl_2_15", later_window)]["sumInW"] == 61 + 62 + 63 + 1
    assert actual[("group_lvl_1_0", later_window)]["childCount"] == 5  # four groups and s_63
