"""The lock that keeps other tests from running beside a measurement under pytest-xdist.

flock locks belong to an open file, so threads that each open the lock files exclude each other as the
workers' processes do.
"""

import threading
import time

import pytest

from pytest_theodolite.core.errors import TheodoliteSetupError
from pytest_theodolite.infra.isolation import MeasurementLock

WAIT_S = 10.0  # upper bound for a thread to reach a point it must reach


def in_thread(target) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_a_test_waits_while_a_measurement_holds_the_lock(tmp_path):
    events: list[str] = []
    measuring, release = threading.Event(), threading.Event()

    def measure():
        with MeasurementLock(tmp_path).exclusive():
            events.append("measure start")
            measuring.set()
            release.wait(WAIT_S)
            events.append("measure end")

    def other_test():
        with MeasurementLock(tmp_path).shared():
            events.append("test")

    measurer = in_thread(measure)
    assert measuring.wait(WAIT_S)
    tester = in_thread(other_test)
    time.sleep(0.5)  # time enough for the test to get in, if the lock let it
    assert events == ["measure start"]
    release.set()
    measurer.join(WAIT_S), tester.join(WAIT_S)
    assert events == ["measure start", "measure end", "test"]


def test_other_tests_run_beside_each_other(tmp_path):
    both_inside = threading.Barrier(2, timeout=WAIT_S)

    def other_test():
        with MeasurementLock(tmp_path).shared():
            both_inside.wait()  # raises BrokenBarrierError if the second test cannot get in

    threads = [in_thread(other_test) for _ in range(2)]
    for thread in threads:
        thread.join(WAIT_S)
    assert not both_inside.broken


def test_a_waiting_measurement_goes_before_tests_that_arrive_after_it(tmp_path):
    events: list[str] = []
    first_inside, release_first = threading.Event(), threading.Event()

    def first_test():
        with MeasurementLock(tmp_path).shared():
            first_inside.set()
            release_first.wait(WAIT_S)
            events.append("first test")

    def measure():
        with MeasurementLock(tmp_path).exclusive():
            events.append("measurement")

    def later_test():
        with MeasurementLock(tmp_path).shared():
            events.append("later test")

    threads = [in_thread(first_test)]
    assert first_inside.wait(WAIT_S)
    threads.append(in_thread(measure))
    time.sleep(0.3)  # the measurement is waiting (holding the turnstile)
    threads.append(in_thread(later_test))
    time.sleep(0.3)
    assert events == []  # the later test did not slip in beside the first one
    release_first.set()
    for thread in threads:
        thread.join(WAIT_S)
    assert events == ["first test", "measurement", "later test"]


def test_two_measurements_never_overlap(tmp_path):
    inside: list[int] = []
    overlaps: list[int] = []

    def measure(i):
        with MeasurementLock(tmp_path).exclusive():
            if inside:
                overlaps.append(i)
            inside.append(i)
            time.sleep(0.2)
            inside.remove(i)

    threads = [in_thread(lambda i=i: measure(i)) for i in range(3)]
    for thread in threads:
        thread.join(WAIT_S)
    assert overlaps == []


def test_a_lock_held_too_long_is_one_clear_error(tmp_path):
    holding, release = threading.Event(), threading.Event()

    def measure():
        with MeasurementLock(tmp_path).exclusive():
            holding.set()
            release.wait(WAIT_S)

    measurer = in_thread(measure)
    assert holding.wait(WAIT_S)
    try:
        with pytest.raises(TheodoliteSetupError, match="--theodolite-isolation none"):
            with MeasurementLock(tmp_path, timeout_s=0.3).shared():
                pass
    finally:
        release.set()
        measurer.join(WAIT_S)
