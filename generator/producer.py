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

import functools
import math
import multiprocessing as mp
import os
import queue as queue_module
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from theodolite_generator.factories import factory_cost_us
from theodolite_generator.kafka_client import (
    DEFAULT_PRODUCER_CONFIG,
    check_topics,
    librdkafka_config,
    publish_sensor_registry,
)
from theodolite_generator.worker import WorkerPlan, WorkerTotals, worker_main
from theodolite_generator.workload import Workload, WorkloadError

#: Records/s one worker process is trusted to sustain: half of what one process sustained flat out on this
#: project's machine kind (docs/lab-notes/defaults.md), which leaves headroom for the Spark job that shares
#: the machine during a benchmark. Loads above ``processes x this`` are refused before
#: anything is produced; pass ``max_rate_per_process`` with a figure measured on another machine.
MEASURED_RATE_PER_PROCESS = 150_000.0
#: CPU microseconds per built-in record in one worker flat out (1e6 / 300 000, the same measurement): with a
#: record factory, a worker is trusted with half of ``1e6 / (this + the factory's own cost)`` records/s
BUILTIN_US_PER_RECORD = 3.3


_START_MARGIN_S = 0.3  # time between "all workers ready" and the first record, so every worker starts on time


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


@dataclass
class LoadGenerator:
    """Sends ``workload`` to ``topic`` from ``processes`` worker processes; a context manager.

    ``with LoadGenerator("127.0.0.1:9092", "input", Workload(keys=10_000)) as gen: ...`` -- ``start()``
    refuses bad parameters (``WorkloadError``) before anything is produced, publishes the UC4 sensor registry
    to ``config_topic`` if the workload has a hierarchy, starts the workers and returns when the first record
    is due; ``spawn()`` and ``release()`` are its two halves, for a caller that starts something else while the
    workers start. ``stop()`` (also on exceptions) stops, flushes and joins every worker.
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
    _go: Any = field(default=None, init=False, repr=False)  # set: the spawned workers send
    _start_epoch_s: Any = field(default=None, init=False, repr=False)
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
        self.spawn()
        self.release()
        return self

    def spawn(self) -> LoadGenerator:
        """The first half of `start`: check the parameters and the topics, publish the UC4 sensor registry and
        start the workers, which connect and then wait for `release` -- for a caller with something else to do
        meanwhile (a Spark application to start: the workers' interpreters start beside it, not after it)."""
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

    def release(self) -> None:
        """The second half of `start`: once every spawned worker is connected, let them send, starting on a
        whole second; returns when the first record is due."""
        if not self._workers or self._go is None:
            raise RuntimeError("spawn() this LoadGenerator before releasing it")
        if self._go.is_set():
            raise RuntimeError("this LoadGenerator is already sending")
        try:
            self._wait_ready(len(self._workers))
            # start on a whole second so the per-second windows of all workers line up with wall seconds
            self._start_epoch_s.value = float(math.ceil(time.time() + _START_MARGIN_S))
            self._go.set()
            self.started_at = self._start_epoch_s.value
            self._collector = threading.Thread(
                target=self._collect, name="generator-rate-collector", daemon=True
            )
            self._collector.start()
            time.sleep(max(0.0, self.started_at - time.time()))
        except BaseException:
            self.stop()
            raise

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
        self._workers, self._go = [], None

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
                    "experiments/bench_generator.py on this machine"
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
        self._start_epoch_s = context.Value("d", 0.0)
        self._go = context.Event()
        for index in range(count):
            plan = WorkerPlan(index, count, self.topic, self.workload, producer_config)
            worker = context.Process(
                target=worker_main,
                args=(plan, self._reports, self._go, self._start_epoch_s, self._stop_event),
                name=f"theodolite-generator-{index}",
                daemon=True,
            )
            self._workers.append(worker)
        try:
            for worker in self._workers:
                worker.start()
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


# -- the worker process ----------------------------------------------------------------------------------
