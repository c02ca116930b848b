"""The load generator without a broker: records, schedule, hierarchy, and every refusal that needs no broker."""

import json
import queue
import subprocess
import sys
import threading
import time

import pytest

from theodolite_generator import (
    ActivePowerRecord,
    Hierarchy,
    LoadGenerator,
    SensorGroup,
    ValueTable,
    Workload,
    WorkloadError,
    build_sensor_registry,
    encode_record,
    librdkafka_config,
)
from theodolite_generator.records import record_prefix, value_suffix
from theodolite_generator.worker import WorkerPlan, _Errors, _ScheduledSender, poll_timeout_s

# -- records ---------------------------------------------------------------------------------------------


def test_record_is_theodolite_json_with_exactly_its_field_names():
    data = encode_record("s_42", 1_763_700_000_123, 417.263)
    doc = json.loads(data)
    assert doc == {"identifier": "s_42", "timestamp": 1_763_700_000_123, "valueInW": 417.263}
    assert list(doc) == ["identifier", "timestamp", "valueInW"]
    assert isinstance(doc["timestamp"], int) and isinstance(doc["valueInW"], float)
    assert ActivePowerRecord.from_json(data) == ActivePowerRecord("s_42", 1_763_700_000_123, 417.263)


def test_record_prefix_escapes_identifiers_and_values_must_be_finite():
    assert json.loads(record_prefix('a"b') + b"1" + value_suffix(1.0))["identifier"] == 'a"b'
    with pytest.raises(ValueError):
        value_suffix(float("nan"))


def test_values_are_reproducible_from_the_seed_and_differ_between_seeds():
    assert ValueTable(7).values() == ValueTable(7).values()
    assert ValueTable(7).values() != ValueTable(8).values()
    table = ValueTable(7)
    assert all(0.0 <= v < 1000.0 for v in table.values())
    # neighbouring keys and successive records of one key read different values
    assert table.value(0, 0) != table.value(1, 0)
    assert table.value(5, 0) != table.value(5, 1)


# -- schedule --------------------------------------------------------------------------------------------


def test_keys_are_s_0_to_s_n_minus_1_and_target_rate_is_keys_times_frequency():
    workload = Workload(keys=2000, period_ms=500)
    assert workload.target_rate == 4000.0
    assert Workload(10).target_rate == 10.0


def test_a_workload_sent_faster_keeps_its_keys_and_never_falls_below_the_factor():
    slower = Workload(keys=4000).sent_faster(0.575)
    assert slower.keys == 4000 and slower.period_ms == 1739  # 1000 / 0.575 = 1739.1: rounded down
    assert slower.target_rate >= 0.575 * 4000
    hierarchy = Workload.for_hierarchy(children=12, depth=2).sent_faster(2)
    assert hierarchy.hierarchy == Hierarchy(12, 2) and hierarchy.target_rate == 2 * 144
    with pytest.raises(WorkloadError, match="must be positive"):
        Workload(keys=10).sent_faster(0)


def test_phases_spread_evenly_over_the_period():
    workload = Workload(keys=1000, period_ms=1000)
    phases = [workload.phase_ms(i) for i in range(1000)]
    assert phases == list(range(1000))  # one key per ms: no burst at the start of each second
    few = Workload(keys=4, period_ms=1000)
    assert [few.phase_ms(i) for i in range(4)] == [0, 250, 500, 750]


def test_due_counts_are_smooth_and_exact_per_period():
    schedule = Workload(keys=1000, period_ms=1000).schedule()
    assert schedule.due(-1) == 0
    assert schedule.due(0) == 1  # s_0 is due at the start
    assert schedule.due(499) == 500
    assert schedule.due(999) == 1000
    assert schedule.due(60_000 - 1) == 60_000
    # every 100 ms window holds the same number of records: the rate is smooth
    assert {schedule.due(t + 99) - schedule.due(t - 1) for t in range(0, 5000, 100)} == {100}


@pytest.mark.parametrize(
    "keys,period_ms,processes", [(10, 1000, 3), (1000, 1000, 2), (7, 300, 7), (5, 40, 1)]
)
def test_worker_schedules_partition_the_events_and_agree_with_the_whole(keys, period_ms, processes):
    workload = Workload(keys, period_ms)
    whole = workload.schedule()
    parts = [workload.schedule(w, processes) for w in range(processes)]
    assert sorted(i for p in parts for i in p.key_indices()) == list(range(keys))
    for elapsed in range(-1, 3 * period_ms + 7, 7):
        assert sum(p.due(elapsed) for p in parts) == whole.due(elapsed)
    for part in parts:  # each event is due at its own offset, not before
        for event in range(3 * part.key_count):
            offset = part.offset_ms(event)
            assert part.due(offset) >= event + 1 and part.due(offset - 1) <= event


def test_each_worker_share_is_spread_over_the_whole_period():
    # strided ownership: a worker of 2 owns every other key, so its sends are spread over the whole second
    part = Workload(1000, 1000).schedule(1, 2)
    assert part.due(499) == 250 and part.due(999) == 500


# -- UC4 hierarchy ---------------------------------------------------------------------------------------


def test_hierarchy_4_children_3_levels_has_64_sensors_and_21_groups():
    hierarchy = Hierarchy(children=4, depth=3)
    assert (hierarchy.sensor_count, hierarchy.group_count) == (64, 21)
    registry = build_sensor_registry(hierarchy)
    groups = list(registry.groups())
    sensors = [s.identifier for s in registry.machine_sensors()]
    assert len(groups) == 21 and len({g.identifier for g in groups}) == 21
    assert sensors == [f"s_{i}" for i in range(64)]
    assert registry.identifier == "group_lvl_0"
    assert all(len(g.children) == 4 for g in groups)
    workload = Workload.for_hierarchy(4, 3)
    assert workload.keys == 64 and workload.target_rate == 64.0


def test_registry_json_round_trips_in_theodolites_shape():
    registry = build_sensor_registry(Hierarchy(4, 3))
    text = registry.to_json()
    assert SensorGroup.from_json(text) == registry
    doc = json.loads(text)
    assert set(doc) == {"identifier", "name", "children"}
    leaf = doc["children"][0]["children"][0]["children"][0]
    assert leaf == {"identifier": "s_0", "name": ""}  # machine sensors carry no "children"
    assert doc["children"][1]["identifier"] == "g_1_16"


def test_depth_one_hierarchy_is_a_root_with_sensors():
    registry = build_sensor_registry(Hierarchy(3, 1))
    assert [c.identifier for c in registry.children] == ["s_0", "s_1", "s_2"]


# -- refusals before anything is produced ----------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,words",
    [
        ({"keys": 0}, "at least 1 key"),
        ({"keys": -3}, "at least 1 key"),
        ({"keys": 10, "period_ms": 0}, "positive"),
        ({"keys": 10, "period_ms": -5}, "positive"),
        ({"keys": 10, "period_ms": 0.5}, "whole number"),
        ({"keys": 10, "hierarchy": Hierarchy(4, 3)}, "64 sensors"),
    ],
)
def test_bad_workloads_are_refused_with_a_reason(kwargs, words):
    with pytest.raises(WorkloadError, match=words):
        Workload(**kwargs)
    assert issubclass(WorkloadError, ValueError)


@pytest.mark.parametrize("children,depth", [(0, 3), (4, 0)])
def test_bad_hierarchies_are_refused(children, depth):
    with pytest.raises(WorkloadError, match="at least 1"):
        Workload.for_hierarchy(children, depth)


def test_a_rate_above_the_measured_capacity_is_refused_before_connecting():
    # the address is never contacted: the capacity check comes first
    generator = LoadGenerator(
        "127.0.0.1:1",
        "input",
        Workload(keys=1_000_000, period_ms=1),
        processes=2,
        max_rate_per_process=100_000,
    )
    with pytest.raises(WorkloadError, match="more than this generator sustains") as refused:
        generator.start()
    assert "max_rate_per_process" in str(refused.value)
    assert generator.worker_pids == []


def test_more_processes_than_keys_and_uc4_without_config_topic_are_refused():
    with pytest.raises(WorkloadError, match="without keys"):
        LoadGenerator("127.0.0.1:1", "input", Workload(keys=2), processes=3).start()
    with pytest.raises(WorkloadError, match="config_topic"):
        LoadGenerator("127.0.0.1:1", "input", Workload.for_hierarchy(2, 2)).start()


def test_client_settings_map_to_librdkafka_and_never_show_in_repr():
    settings = {
        "bootstrap_servers": ["h:1"],
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "u",
        "sasl_plain_password": "s3cret-pw",
        "ssl.ca.location": "/ca.pem",
    }
    assert librdkafka_config(settings) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "u",
        "sasl.password": "s3cret-pw",
        "ssl.ca.location": "/ca.pem",
    }
    with pytest.raises(WorkloadError, match="unknown client setting"):
        librdkafka_config({"no_such_thing": 1})
    generator = LoadGenerator("h:1", "t", Workload(10), client_config=settings)
    assert "s3cret-pw" not in repr(generator) and "s3cret-pw" not in str(generator)


def test_the_generator_package_never_imports_pytest():
    code = (
        "import sys, theodolite_generator, theodolite_generator.__main__, theodolite_generator.producer; "
        "bad = [m for m in sys.modules if m == 'pytest' or m.startswith(('_pytest', 'pytest_theodolite'))]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "args,words",
    [
        (["--keys", "0"], "at least 1 key"),
        (["--keys", "10", "--period-ms", "0"], "positive"),
        (["--keys", "100000000", "--period-ms", "1"], "sustains"),
        (["--children", "4"], "both --children and --depth"),
        ([], "--keys N"),
    ],
)
def test_cli_refusals_print_one_line_and_exit_2(args, words):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "theodolite_generator",
            "--bootstrap-servers",
            "127.0.0.1:1",
            "--topic",
            "t",
            "--duration-s",
            "1",
            *args,
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr


# -- pacing: the hot loop waits, it never spins ----------------------------------------------------------


@pytest.mark.parametrize("wait_ms", [0.001, 0.3, 0.999, 1.0, 1.2, 7.5, 999.9])
def test_a_wait_is_rounded_up_to_the_whole_milliseconds_librdkafka_takes(wait_ms):
    now = 1_763_700_000.0
    timeout = poll_timeout_s(now + wait_ms / 1000.0, now)
    assert timeout >= wait_ms / 1000.0  # never wakes before the record is due
    assert timeout - wait_ms / 1000.0 < 0.001 + 1e-9  # and at most 1 ms after
    assert int(timeout * 1000) >= 1  # what confluent-kafka hands librdkafka: a real wait, not 0 (a spin)


def test_nothing_to_wait_for_is_no_wait():
    assert poll_timeout_s(100.0, 100.0) == 0.0
    assert poll_timeout_s(99.0, 100.0) == 0.0


class _MillisecondProducer:
    """librdkafka's poll() as confluent-kafka calls it: the timeout truncated to whole ms, then slept."""

    def __init__(self):
        self.polls = 0
        self.produced = 0

    def poll(self, timeout_s):
        self.polls += 1
        time.sleep(int(timeout_s * 1000) / 1000.0)
        return 0

    def produce(self, topic, value, key, timestamp):
        self.produced += 1

    def __len__(self):
        return 0


def test_the_sender_wakes_at_most_about_twice_a_millisecond_whatever_the_load():
    # 5 000 records/s: a record is due every millisecond, the case that used to spin a core between records
    workload = Workload(keys=5_000)
    plan = WorkerPlan(0, 1, "input", workload, producer_config={})
    producer = _MillisecondProducer()
    start = time.time() + 0.05
    sender = _ScheduledSender(plan, producer, _Errors(), queue.Queue(), start)
    stop = threading.Event()
    timer = threading.Timer(0.55, stop.set)
    timer.start()
    try:
        began = time.time()
        sender.run(stop)
        elapsed_ms = (time.time() - began) * 1000.0
    finally:
        timer.cancel()
    assert producer.produced > 0
    # one wait per millisecond at most, one poll(0) after each send; a spinning loop polls thousands of times
    assert producer.polls <= 2 * elapsed_ms + 20, (producer.polls, elapsed_ms)
