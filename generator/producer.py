"""Produce a workload into Kafka from several worker processes, and measure the rate really achieved.

Why it is built this way (the generator must never be the bottleneck -- Theodolite's first study lost its
largest load to exactly that):

* ``confluent-kafka`` (librdkafka) batches in C threads; Python only formats bytes and enqueues them.
  Producer settings: ``linger.ms=5`` and batches up to 1 MiB / 10 000 records, no compression (records are
  small and compressing costs generator CPU), ``acks=all`` (Kafka's own default; on the single-node benchmark
  broker it costs the same as ``acks=1``), Java's murmur2 partitioner so keys land on the partitions a Java
  client would pick. Any of these can be overridden with ``client_config``.
* Several processes (``multiprocessing``, spawn: safe next to JVM gateways and librdkafka threads) each own a
  disjoint set of keys (a stride ``w, w + W, ...``, so each share is as smooth as the whole) and pace by the
  schedule: they compute how many records are due by now and send them in a tight loop, never a sleep per
  record, and in between wait in ``poll()`` for whole milliseconds (``poll_timeout_s``), never a spin.
* Achieved rate: records acknowledged by the broker per wall-clock second. Success delivery reports would
  cost a Python callback per record (~40 % of the per-record CPU), so the producer asks librdkafka for error
  reports only (``delivery.report.only.error``) and counts ``acknowledged = handed over - still queued or in
  flight (len(producer)) - failed``. Every worker reports each completed second to the parent; the
  integration test checks the totals against the topic's end offsets.

Client settings (security protocol, SASL, SSL) are passed through to librdkafka and never printed, logged
or put into an error message.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import math
import multiprocessing as mp
import os
import queue as queue_module
import re
import signal
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from generator.factories import factory_cost_us, record_function
from generator.records import ValueTable, key_of, record_prefix
from generator.workload import SENSOR_REGISTRY_EVENT_KEY, Workload, WorkloadError

LOG = logging.getLogger("generator")
LOG.addHandler(logging.NullHandler())  # a library: the host application decides whether librdkafka logs show

#: Records/s one worker process is trusted to sustain. ``benchmarks/scripts/bench_generator.py`` measured one
#: process flat out at 250 000 - 335 000 records/s (1.9 - 2.1 CPU-µs/record) against the embedded broker on
#: the shared 2-core development machine (broker on the same cores), and two processes sustained 300 000
#: records/s when the machine was otherwise quiet. Half the single-process figure leaves headroom for the
#: Spark job that shares the machine during a benchmark. Loads above ``processes x this`` are refused before
#: anything is produced; pass ``max_rate_per_process`` with a figure measured on another machine.
MEASURED_RATE_PER_PROCESS = 150_000.0
#: CPU microseconds per built-in record in one worker flat out (1e6 / 300 000, the same measurement): with a
#: record factory, a worker is trusted with half of ``1e6 / (this + the factory's own cost)`` records/s
BUILTIN_US_PER_RECORD = 3.3

DEFAULT_PRODUCER_CONFIG: dict[str, Any] = {
    "linger.ms": 5,
    "batch.size": 1_048_576,
    "batch.num.messages": 10_000,
    "compression.type": "none",
    "acks": "all",
    "partitioner": "murmur2_random",
    "queue.buffering.max.messages": 2_000_000,  # headroom so a short broker stall does not raise BufferError
    "queue.buffering.max.kbytes": 1_048_576,
    "delivery.report.only.error": True,
}

# kafka-python keyword names (what ``KafkaCluster.client_kwargs()`` returns) -> librdkafka property names
_KAFKA_PYTHON_NAMES = {
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "sasl_kerberos_service_name": "sasl.kerberos.service.name",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "ssl_password": "ssl.key.password",
    "ssl_crlfile": "ssl.crl.location",
    "ssl_check_hostname": "ssl.endpoint.identification.algorithm",
    "client_id": "client.id",
}

_JAAS_FIELD = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')  # JAAS quoting: \" and \\
_MAX_CHUNK = 2_000  # records sent between two looks at the clock, the stop flag and the report boundary
_START_MARGIN_S = 0.3  # time between "all workers ready" and the first record, so every worker starts on time
_LATE_TOLERANCE_S = 0.1  # a record handed over this late still counts for the second it was due in
_ACK_GRACE_S = 2.0  # how long a closed second waits for its acknowledgements before it is reported short


def librdkafka_config(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """Client settings as librdkafka properties: dotted names pass through, kafka-python names are mapped.

    So both ``{"security.protocol": "SASL_SSL", ...}`` and a ``kafka_cluster.client_kwargs()`` dict work.
    ``bootstrap_servers`` is dropped (the generator sets its own).
    """
    config: dict[str, Any] = {}
    for name, value in (settings or {}).items():
        if name in ("bootstrap_servers", "bootstrap.servers"):
            continue
        if name == "sasl.jaas.config":  # a Java client's form: librdkafka takes the user and password
            for field_name, field_value in _JAAS_FIELD.findall(str(value)):
                config.setdefault(f"sasl.{field_name}", re.sub(r"\\(.)", r"\1", field_value))
            continue
        if "." in name:
            config[name] = value
        elif name in _KAFKA_PYTHON_NAMES:
            target = _KAFKA_PYTHON_NAMES[name]
            if name == "ssl_check_hostname":
                value = "https" if value else "none"
            config[target] = value
        else:
            raise WorkloadError(
                f"unknown client setting {name!r}: use librdkafka property names (e.g. 'security.protocol', "
                f"'sasl.username') or the kafka-python names {sorted(_KAFKA_PYTHON_NAMES)}"
            )
    return config


class RateSample(NamedTuple):
    """Records acknowledged by the broker during the wall-clock second starting at ``epoch_s``."""

    epoch_s: int
    records_per_s: float


@dataclass(frozen=True)
class RateSummary:
    """How the achieved rate compares with the target, over the seconds after ``skip_s``."""

    target_rate: float
    seconds: int
    mean_rate: float
    min_rate: float
    max_rate: float
    tolerance: float = 0.02

    @property
    def shortfall(self) -> float:
        """Fraction of the target the mean fell short by (negative when above target)."""
        return 1.0 - self.mean_rate / self.target_rate

    @property
    def ok(self) -> bool:
        return self.seconds > 0 and self.shortfall <= self.tolerance

    @classmethod
    def of(
        cls, samples: list[RateSample], target_rate: float, skip_s: int = 0, tolerance: float = 0.02
    ) -> RateSummary:
        rates = [s.records_per_s for s in samples[skip_s:]]
        if not rates:
            return cls(target_rate, 0, 0.0, 0.0, 0.0, tolerance)
        return cls(target_rate, len(rates), sum(rates) / len(rates), min(rates), max(rates), tolerance)


@dataclass(frozen=True)
class WorkerTotals:
    produced: int
    acknowledged: int
    failed: int
    first_error: str | None


@dataclass
class _WorkerPlan:
    """Everything one worker process needs (pickled to the child)."""

    index: int
    count: int
    topic: str
    workload: Workload
    producer_config: dict[str, Any] = field(repr=False)


@dataclass
class LoadGenerator:
    """Sends ``workload`` to ``topic`` from ``processes`` worker processes; a context manager.

    ``with LoadGenerator("127.0.0.1:9092", "input", Workload(keys=10_000)) as gen: ...`` -- ``start()``
    refuses bad parameters (``WorkloadError``) before anything is produced, publishes the UC4 sensor registry
    to ``config_topic`` if the workload has a hierarchy, starts the workers and returns when the first record
    is due. ``stop()`` (also on exceptions) stops, flushes and joins every worker.
    """

    bootstrap_servers: str
    topic: str
    workload: Workload
    processes: int | None = None  # None: as many as the load needs, at most one per CPU
    client_config: Mapping[str, Any] = field(default_factory=dict, repr=False)
    config_topic: str | None = None  # UC4: where the sensor registry goes before the load starts
    max_rate_per_process: float = MEASURED_RATE_PER_PROCESS
    connect_timeout_s: float = 10.0
    flush_timeout_s: float = 10.0

    started_at: float | None = field(default=None, init=False)  # epoch s of the first due record
    _workers: list[Any] = field(default_factory=list, init=False, repr=False)
    _stop_event: Any = field(default=None, init=False, repr=False)
    _reports: Any = field(default=None, init=False, repr=False)
    _collector: threading.Thread | None = field(default=None, init=False, repr=False)
    _collector_stop: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _acked_by_second: dict[int, dict[int, int]] = field(default_factory=dict, init=False, repr=False)
    _totals: dict[int, WorkerTotals] = field(default_factory=dict, init=False, repr=False)
    _failed_workers: dict[int, str] = field(default_factory=dict, init=False, repr=False)

    # -- what the load is -------------------------------------------------------------------------------
    @property
    def target_rate(self) -> float:
        return self.workload.target_rate

    @property
    def process_count(self) -> int:
        if self.processes is not None:
            return self.processes
        cpus = os.cpu_count() or 1
        # keep each worker at or below half its measured capacity, so it can catch up after a hiccup
        wanted = math.ceil(self.target_rate / (0.5 * self.rate_per_process))
        return max(1, min(cpus, wanted, self.workload.keys))

    @property
    def capacity(self) -> float:
        """The largest rate this generator takes on: measured per-process rate x processes that get a CPU."""
        return self.rate_per_process * min(self.process_count, os.cpu_count() or 1)

    @functools.cached_property
    def rate_per_process(self) -> float:
        """Records/s one worker is trusted with: ``max_rate_per_process``, or with a record factory half of
        what one CPU does with the factory's measured cost added to the built-in record's."""
        if self.workload.records is None:
            return self.max_rate_per_process
        cost_us = factory_cost_us(self.workload.records)
        return min(self.max_rate_per_process, 0.5 * 1e6 / (BUILTIN_US_PER_RECORD + cost_us))

    # -- lifecycle --------------------------------------------------------------------------------------
    def start(self) -> LoadGenerator:
        if self._workers:
            raise RuntimeError("this LoadGenerator is already running; stop() it first")
        self._reset_measurements()
        producer_config = self._producer_config()
        self._check_before_producing(producer_config)
        if self.workload.hierarchy is not None:
            publish_sensor_registry(
                producer_config, self.config_topic or "", self.workload, self.connect_timeout_s
            )
        self._start_workers(producer_config)
        return self

    def stop(self) -> None:
        """Stop every worker (flushing what it already handed to librdkafka) and collect the last reports."""
        if not self._workers:
            return
        self._stop_event.set()
        deadline = time.monotonic() + self.flush_timeout_s + 10.0
        started = [
            worker for worker in self._workers if worker.pid is not None
        ]  # a failed start leaves some unstarted
        for worker in started:
            worker.join(timeout=max(0.1, deadline - time.monotonic()))
        for worker in started:
            if worker.is_alive():
                worker.terminate()
                worker.join(timeout=5.0)
            if worker.is_alive():
                worker.kill()
                worker.join(timeout=5.0)
        self._collector_stop.set()
        if self._collector is not None:
            self._collector.join(timeout=5.0)
        self._drain_reports(block_s=0.0)
        for index, worker in enumerate(self._workers):
            if index not in self._totals and index not in self._failed_workers:
                self._failed_workers[index] = (
                    f"worker {index} exited with code {worker.exitcode} without a report"
                )
        self._reports.close()
        self._reports.join_thread()
        self._workers = []

    def __enter__(self) -> LoadGenerator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what was achieved ------------------------------------------------------------------------------
    def achieved_rates(self) -> list[RateSample]:
        """Acknowledged records per second for every completed second, oldest first.

        A second counts once every worker has reported it (a worker that failed counts as 0 for seconds it
        did not report, so a failure shows as a shortfall, never as a gap).
        """
        self._drain_reports(block_s=0.0)
        with self._lock:
            count = len(self._workers) or len(self._totals) + len(self._failed_workers)
            samples = []
            for second in sorted(self._acked_by_second):
                by_worker = self._acked_by_second[second]
                if all(w in by_worker or w in self._failed_workers for w in range(count)):
                    samples.append(RateSample(second, float(sum(by_worker.values()))))
            return samples

    def summary(self, skip_s: int = 0, tolerance: float = 0.02) -> RateSummary:
        return RateSummary.of(self.achieved_rates(), self.target_rate, skip_s, tolerance)

    @property
    def totals(self) -> WorkerTotals:
        """Records handed to librdkafka / acknowledged / failed over the whole run (complete after stop())."""
        with self._lock:
            parts = list(self._totals.values())
            errors = [t.first_error for t in parts if t.first_error] + list(self._failed_workers.values())
        return WorkerTotals(
            sum(t.produced for t in parts),
            sum(t.acknowledged for t in parts),
            sum(t.failed for t in parts),
            errors[0] if errors else None,
        )

    @property
    def worker_failures(self) -> dict[int, str]:
        with self._lock:
            return dict(self._failed_workers)

    @property
    def worker_pids(self) -> list[int]:
        return [w.pid for w in self._workers if w.pid is not None]

    # -- internals --------------------------------------------------------------------------------------
    def _reset_measurements(self) -> None:  # a second start() measures its own run only
        self.started_at = None
        self._collector_stop = threading.Event()
        self._acked_by_second, self._totals, self._failed_workers = {}, {}, {}

    def _producer_config(self) -> dict[str, Any]:
        return {
            **DEFAULT_PRODUCER_CONFIG,
            **librdkafka_config(self.client_config),
            "bootstrap.servers": self.bootstrap_servers,
        }

    def _check_before_producing(self, producer_config: dict[str, Any]) -> None:
        if self.processes is not None and self.processes < 1:
            raise WorkloadError(f"processes must be >= 1, got {self.processes}")
        if self.processes is not None and self.processes > self.workload.keys:
            raise WorkloadError(
                f"{self.processes} processes for {self.workload.keys} keys would leave processes without keys; "
                f"use at most {self.workload.keys} processes"
            )
        if self.target_rate > self.capacity:
            raise WorkloadError(
                f"the load of {self.target_rate:,.0f} records/s is more than this generator sustains here "
                f"({self.rate_per_process:,.0f} records/s per process"
                f"{' with this record factory' if self.workload.records is not None else ''} measured x "
                f"{min(self.process_count, os.cpu_count() or 1)} usable processes = {self.capacity:,.0f}); "
                + (
                    "lower the load, run on more cores, or make the record factory cheaper (e.g. build each "
                    "key's records once and cycle through them: the generator calls it once per record)"
                    if self.workload.records is not None
                    else "lower the load, run on more cores, or pass max_rate_per_process measured with "
                    "benchmarks/scripts/bench_generator.py on this machine"
                )
            )
        if self.workload.hierarchy is not None and not self.config_topic:
            raise WorkloadError("a hierarchical (UC4) workload needs config_topic for its sensor registry")
        if not self.topic:
            raise WorkloadError("no topic given; name the topic the records go to")
        check_topics(
            producer_config,
            [self.topic, *([self.config_topic] if self.config_topic else [])],
            self.bootstrap_servers,
            self.connect_timeout_s,
        )

    def _start_workers(self, producer_config: dict[str, Any]) -> None:
        context = mp.get_context("spawn")
        count = self.process_count
        self._stop_event = context.Event()
        self._reports = context.Queue()
        start_epoch_s = context.Value("d", 0.0)
        go = context.Event()
        for index in range(count):
            plan = _WorkerPlan(index, count, self.topic, self.workload, producer_config)
            worker = context.Process(
                target=_worker_main,
                args=(plan, self._reports, go, start_epoch_s, self._stop_event),
                name=f"theodolite-generator-{index}",
                daemon=True,
            )
            self._workers.append(worker)
        try:
            for worker in self._workers:
                worker.start()
            self._wait_ready(count)
            # start on a whole second so the per-second windows of all workers line up with wall seconds
            start_epoch_s.value = float(math.ceil(time.time() + _START_MARGIN_S))
            go.set()
            self.started_at = start_epoch_s.value
            self._collector = threading.Thread(
                target=self._collect, name="generator-rate-collector", daemon=True
            )
            self._collector.start()
            time.sleep(max(0.0, self.started_at - time.time()))
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, count: int) -> None:
        ready: set[int] = set()
        deadline = time.monotonic() + self.connect_timeout_s + 30.0  # + interpreter start of spawned workers
        while len(ready) < count:
            try:
                message = self._reports.get(timeout=0.2)
            except queue_module.Empty:
                dead = [w.name for w in self._workers if not w.is_alive()]
                if dead:
                    raise WorkloadError(f"generator worker(s) {dead} exited during start") from None
                if time.monotonic() > deadline:
                    raise WorkloadError("the generator workers did not get ready in time") from None
                continue
            if message[0] == "ready":
                ready.add(message[1])
            elif message[0] == "error":
                raise WorkloadError(f"generator worker {message[1]} could not start: {message[2]}")

    def _collect(self) -> None:
        while not self._collector_stop.is_set():
            self._drain_reports(block_s=0.2)

    def _drain_reports(self, block_s: float) -> None:
        if self._reports is None:
            return
        timeout: float | None = block_s
        while True:
            try:
                message = self._reports.get(timeout=timeout) if timeout else self._reports.get_nowait()
            except (queue_module.Empty, OSError, ValueError):  # OSError/ValueError: queue already closed
                return
            timeout = None
            self._record(message)

    def _record(self, message: tuple) -> None:
        kind, worker = message[0], message[1]
        with self._lock:
            if kind == "second":
                _, _, second, acked = message
                self._acked_by_second.setdefault(second, {})[worker] = acked
            elif kind == "done":
                self._totals[worker] = message[2]
            elif kind == "error":
                self._failed_workers[worker] = message[2]


# -- broker checks and the UC4 registry (parent process) -------------------------------------------------


def _admin_config(producer_config: Mapping[str, Any]) -> dict[str, Any]:
    # producer-only properties would make the AdminClient warn; keep the connection and security ones
    producer_only = set(DEFAULT_PRODUCER_CONFIG)
    return {k: v for k, v in producer_config.items() if k not in producer_only} | {"logger": LOG}


def _redact(text: str, config: Mapping[str, Any]) -> str:
    """An error text without any configured value that could be a secret (all but the bootstrap address)."""
    for name, value in config.items():
        if name != "bootstrap.servers" and isinstance(value, str) and len(value) >= 3:
            text = text.replace(value, "***")
    return text


def check_topics(
    producer_config: Mapping[str, Any], topics: list[str], bootstrap_servers: str, timeout_s: float
) -> None:
    """Refuse (``WorkloadError``) when no broker answers or a topic is missing -- before producing."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    try:
        admin = AdminClient(_admin_config(producer_config))
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise WorkloadError(
            f"no Kafka broker answered at {bootstrap_servers} within {timeout_s:.0f} s "
            f"({_redact(str(exc.args[0]) if exc.args else repr(exc), producer_config)}); check the address, "
            "that the broker runs, and the client security settings"
        ) from None
    for topic in topics:
        described = metadata.topics.get(topic)
        if described is None or described.error is not None:
            raise WorkloadError(
                f"topic {topic!r} does not exist at {bootstrap_servers}; create it first (e.g. "
                "kafka_cluster.create_topic(name, partitions)) -- the generator never auto-creates topics"
            )


def publish_sensor_registry(
    producer_config: Mapping[str, Any], config_topic: str, workload: Workload, timeout_s: float
) -> None:
    """Send the UC4 sensor registry JSON to ``config_topic`` and wait for the broker's acknowledgement."""
    from confluent_kafka import Producer

    registry_json = workload.sensor_registry().to_json().encode()
    outcome: list[Any] = []
    config = {k: v for k, v in producer_config.items() if k != "delivery.report.only.error"}
    # the registry of a deep hierarchy can exceed the default 1 MB request size
    config["message.max.bytes"] = max(int(config.get("message.max.bytes", 0)), len(registry_json) + 65_536)
    producer = Producer({**config, "logger": LOG})
    producer.produce(
        config_topic,
        registry_json,
        SENSOR_REGISTRY_EVENT_KEY,
        on_delivery=lambda err, _msg: outcome.append(err),
    )
    producer.flush(timeout_s)
    if not outcome or outcome[0] is not None:
        reason = "no acknowledgement" if not outcome else _redact(str(outcome[0]), producer_config)
        raise WorkloadError(
            f"the sensor registry ({len(registry_json):,} bytes) could not be published to {config_topic!r}: "
            f"{reason}; check the topic's max.message.bytes and the broker"
        )


# -- the worker process ----------------------------------------------------------------------------------


def _die_with_parent() -> None:
    # Linux: the kernel sends SIGTERM when the parent dies, even by SIGKILL, so no worker outlives it
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class _Errors:
    """What went wrong in one worker: failed deliveries (lost records) and client errors (logged only)."""

    def __init__(self) -> None:
        self.delivery_failures = 0
        self.messages: list[str] = []

    def on_delivery(
        self, err: Any, _msg: Any
    ) -> None:  # called for failures only (delivery.report.only.error)
        self.delivery_failures += 1
        self.messages.append(str(err))

    def on_client_error(self, err: Any) -> None:  # e.g. a connection dropped; librdkafka keeps retrying
        self.messages.append(str(err))


def _worker_main(plan: _WorkerPlan, reports: Any, go: Any, start_epoch_s: Any, stop_event: Any) -> None:
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops us in order
    from confluent_kafka import KafkaException, Producer

    errors = _Errors()
    try:
        producer = Producer(
            {
                **plan.producer_config,
                "on_delivery": errors.on_delivery,
                "error_cb": errors.on_client_error,
                "logger": LOG,
            }
        )
        producer.list_topics(plan.topic, timeout=10.0)  # connect and fetch metadata before the clock starts
    except KafkaException as exc:
        reports.put(("error", plan.index, _redact(str(exc), plan.producer_config)))
        return
    reports.put(("ready", plan.index))
    while not go.wait(0.1):
        if stop_event.is_set():
            return
    sender = _ScheduledSender(plan, producer, errors, reports, start_epoch_s.value)
    try:
        sender.run(stop_event)
    except Exception as exc:  # report, do not hide: the parent counts this worker's missing seconds as 0
        reports.put(("error", plan.index, _redact(f"{type(exc).__name__}: {exc}", plan.producer_config)))
    finally:
        producer.flush(10.0)
        sender.finish()
        acknowledged = sender.produced - len(producer) - errors.delivery_failures
        first_error = _redact(errors.messages[0], plan.producer_config) if errors.messages else None
        reports.put(
            (
                "done",
                plan.index,
                WorkerTotals(sender.produced, acknowledged, errors.delivery_failures, first_error),
            )
        )
        reports.close()
        reports.join_thread()


def poll_timeout_s(wake_at_s: float, now_s: float) -> float:
    """How long the hot loop waits in ``poll()`` for its next record or second: rounded *up* to whole
    milliseconds, because librdkafka takes the timeout in whole ms and confluent-kafka truncates it. A wait
    under 1 ms -- every wait above about 1 000 records/s, where each millisecond has a record due -- came
    back at once, and the worker spun a whole core between its records, CPU the Spark job under test was
    short of. A record handed over up to 1 ms late keeps its scheduled event time."""
    wait_s = wake_at_s - now_s
    return math.ceil(wait_s * 1000.0) / 1000.0 if wait_s > 0 else 0.0


class _ScheduledSender:
    """The hot loop of one worker: send what the schedule says is due, report every second."""

    def __init__(
        self, plan: _WorkerPlan, producer: Any, errors: _Errors, reports: Any, start_epoch_s: float
    ) -> None:
        workload = plan.workload
        self.schedule = workload.schedule(plan.index, plan.count)
        keys = list(self.schedule.key_indices())
        self.keys = [key_of(i).encode() for i in keys]
        self.prefixes = [record_prefix(key_of(i)) for i in keys]
        self.phases_ms = self.schedule.phases_ms()
        self.value_offsets = [ValueTable.offset(i) for i in keys]
        self.value_suffixes = ValueTable(workload.value_seed).suffixes()
        self.factory = workload.records  # the user's records (generator/factories.py), or None
        self.key_indices = keys
        self.plan = plan
        self.producer = producer
        self.errors = errors
        self.reports = reports
        self.start_s = start_epoch_s
        self.start_ms = round(start_epoch_s * 1000)
        self.produced = 0
        self.next_window_end_s = start_epoch_s + 1.0
        self.pending_windows: deque[tuple[int, int]] = (
            deque()
        )  # (epoch second, records handed over by its end)
        self.reported = 0  # acknowledged records reported so far

    def finish(self) -> None:
        """After the final flush: report every second that ended before the stop."""
        self._report_acknowledged(time.time(), self.produced, final=True)

    def acknowledged(self, sent: int) -> int:
        # len(producer): records queued or in flight; with success reports off, the rest were acknowledged
        return sent - len(self.producer) - self.errors.delivery_failures

    def _close_windows(self, now: float, sent: int) -> None:
        """Note, for every second that ended by ``now``, how many of its scheduled records were handed over.

        Records are attributed to the second they were scheduled in (``min(sent, due at its end)``), so on
        schedule every second holds exactly its share of the target -- no jitter from where a boundary falls
        between two sends -- and a generator that falls behind shows a shortfall in the second it fell behind.
        """
        while now >= self.next_window_end_s:
            end_ms = round((self.next_window_end_s - self.start_s) * 1000)
            self.pending_windows.append(
                (int(self.next_window_end_s) - 1, min(sent, self.schedule.due(end_ms - 1)))
            )
            self.next_window_end_s += 1.0

    def _report_acknowledged(self, now: float, sent: int, final: bool = False) -> None:
        """Report each closed second once its handed-over records are acknowledged (or after a grace period,
        with what was acknowledged by then; later acknowledgements then count for the next second)."""
        acknowledged = self.acknowledged(sent)
        while self.pending_windows:
            second, handed_over = self.pending_windows[0]
            if acknowledged < handed_over and now < second + 1 + _ACK_GRACE_S and not final:
                return
            confirmed = max(0, min(acknowledged, handed_over) - self.reported)
            self.reported += confirmed
            self.reports.put(("second", self.plan.index, second, confirmed))
            self.pending_windows.popleft()

    def _produce_when_queue_has_room(self, value: bytes, key: bytes, timestamp: int) -> None:
        while True:
            try:
                self.producer.produce(self.plan.topic, value, key, timestamp=timestamp)
                return
            except BufferError:  # librdkafka's queue is full: let it drain a little, then retry
                self.producer.poll(0.05)

    def run(self, stop_event: Any) -> None:
        producer, due_by, offset_ms = self.producer, self.schedule.due, self.schedule.offset_ms
        start_s = self.start_s
        sent = 0
        while not stop_event.is_set():
            now = time.time()
            if now >= self.next_window_end_s:
                sent = self._finish_ended_second(sent)
            if self.pending_windows:
                self._report_acknowledged(now, sent)
            due = due_by(int((time.time() - start_s) * 1000))
            if due <= sent:
                # nothing due: wait in poll() (it serves error reports) until the next record or second
                next_due_s = start_s + offset_ms(sent) / 1000.0
                producer.poll(poll_timeout_s(min(next_due_s, self.next_window_end_s), time.time()))
                continue
            sent = self._send(sent, min(due, sent + _MAX_CHUNK))
            producer.poll(0)
        if time.time() >= self.next_window_end_s:  # a second that ended before the stop still counts
            self._finish_ended_second(sent)

    def _finish_ended_second(self, sent: int) -> int:
        """Close the second(s) that ended; return the new ``sent``.

        Records of the second that just ended still count for it if handed over within _LATE_TOLERANCE_S
        after its end: a process descheduled for a few ms is jitter, not a shortfall. A generator that cannot
        keep up falls further behind than that, and the second shows it.
        """
        window_end_s = self.next_window_end_s
        due_in_window = self.schedule.due(round((window_end_s - self.start_s) * 1000) - 1)
        while sent < due_in_window and time.time() < window_end_s + _LATE_TOLERANCE_S:
            sent = self._send(sent, min(due_in_window, sent + _MAX_CHUNK))
        self._close_windows(time.time(), sent)
        return sent

    def _send(self, sent: int, target: int) -> int:
        """Hand events ``sent .. target - 1`` to librdkafka in a tight loop; return the new ``sent``."""
        if self.factory is not None:
            return self._send_from_factory(sent, target)
        topic, produce = self.plan.topic, self.producer.produce
        keys, prefixes, phases = self.keys, self.prefixes, self.phases_ms
        offsets, suffixes, mask = self.value_offsets, self.value_suffixes, len(self.value_suffixes) - 1
        key_count, period_ms = len(keys), self.schedule.period_ms
        cycle, owned = divmod(sent, key_count)
        while sent < target:
            take = min(key_count - owned, target - sent)
            cycle_ms = self.start_ms + cycle * period_ms
            for m in range(owned, owned + take):
                timestamp = cycle_ms + phases[m]
                value = b"%s%d%s" % (prefixes[m], timestamp, suffixes[(offsets[m] + cycle) & mask])
                try:
                    produce(topic, value, keys[m], timestamp=timestamp)
                except BufferError:
                    self._produce_when_queue_has_room(value, keys[m], timestamp)
            sent += take
            self.produced = sent
            cycle, owned = cycle + 1, 0
        return sent

    def _send_from_factory(self, sent: int, target: int) -> int:
        """``_send`` for the user's records: the factory makes each (key, value) from its key's number, its
        event time and its sequence number in the whole workload's schedule."""
        assert self.factory is not None
        topic, produce, factory = self.plan.topic, self.producer.produce, record_function(self.factory)
        key_indices, phases = self.key_indices, self.phases_ms
        key_count, period_ms, total_keys = len(key_indices), self.schedule.period_ms, self.schedule.total_keys
        cycle, owned = divmod(sent, key_count)
        while sent < target:
            take = min(key_count - owned, target - sent)
            cycle_ms = self.start_ms + cycle * period_ms
            first_sequence = cycle * total_keys
            for m in range(owned, owned + take):
                timestamp = cycle_ms + phases[m]
                key, value = factory(key_indices[m], timestamp, first_sequence + key_indices[m])
                try:
                    produce(topic, value, key, timestamp=timestamp)
                except BufferError:
                    self._produce_when_queue_has_room(value, key, timestamp)
            sent += take
            self.produced = sent
            cycle, owned = cycle + 1, 0
        return sent
