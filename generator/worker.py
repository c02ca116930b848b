"""One generator worker process: it sends its share of the keys on a schedule with its own librdkafka
producer and reports per-second totals to the parent (producer.LoadGenerator)."""

from __future__ import annotations

import ctypes
import math
import signal
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from theodolite_generator.factories import record_function
from theodolite_generator.kafka_client import LOG, redact_config_secrets
from theodolite_generator.records import ValueTable, key_of, record_prefix
from theodolite_generator.workload import Workload

_MAX_CHUNK = 2_000  # records sent between two looks at the clock, the stop flag and the report boundary
_LATE_TOLERANCE_S = 0.1  # a record handed over this late still counts for the second it was due in
_ACK_GRACE_S = 2.0  # how long a closed second waits for its acknowledgements before it is reported short


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


def worker_main(plan: WorkerPlan, reports: Any, go: Any, start_epoch_s: Any, stop_event: Any) -> None:
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
        reports.put(("error", plan.index, redact_config_secrets(str(exc), plan.producer_config)))
        return
    reports.put(("ready", plan.index))
    while not go.wait(0.1):
        if stop_event.is_set():  # stopped before it was released: it sent nothing, and says so
            producer.flush(0)
            reports.put(("done", plan.index, WorkerTotals(0, 0, 0, None)))
            reports.close()
            reports.join_thread()
            return
    sender = _ScheduledSender(plan, producer, errors, reports, start_epoch_s.value)
    try:
        sender.run(stop_event)
    except Exception as exc:  # report, do not hide: the parent counts this worker's missing seconds as 0
        reports.put(
            ("error", plan.index, redact_config_secrets(f"{type(exc).__name__}: {exc}", plan.producer_config))
        )
    finally:
        producer.flush(10.0)
        sender.finish()
        acknowledged = sender.produced - len(producer) - errors.delivery_failures
        first_error = (
            redact_config_secrets(errors.messages[0], plan.producer_config) if errors.messages else None
        )
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
        self, plan: WorkerPlan, producer: Any, errors: _Errors, reports: Any, start_epoch_s: float
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


@dataclass(frozen=True)
class WorkerTotals:
    produced: int
    acknowledged: int
    failed: int
    first_error: str | None


@dataclass
class WorkerPlan:
    """Everything one worker process needs (pickled to the child)."""

    index: int
    count: int
    topic: str
    workload: Workload
    producer_config: dict[str, Any] = field(repr=False)
