"""Under pytest-xdist, a test that measures (a gate point) runs alone: other tests wait while it runs.

The gates' instances get a quarter of a core each; a test on another worker that starts a broker or pushes
50 000 records/s takes the CPU they are measured on, and the gate reports a regression that is not one
(measured: 5 of 12 gate points under ``pytest -n 2 tests benchmarks`` before this lock existed).

A readers-writer lock over two files shared by the workers: a measuring test holds it exclusively (so two
measurements never overlap either, whichever workers they run on), every other test holds it shared. ``flock``
locks belong to an open file and die with their process, so a crashed holder never leaves it taken. The writer
first takes a turnstile that readers must pass, so a gate is not starved by a stream of short tests; before its
next turn it pauses briefly, so waiting tests are not starved by the gates.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pytest_theodolite.core.errors import TheodoliteSetupError
from pytest_theodolite.infra.waiting import wait_until

POLL_S = 0.05
#: between two measuring tests, how long a waiting test gets to pass the turnstile (a few poll intervals)
COURTESY_PAUSE_S = 0.3


@dataclass
class MeasurementLock:
    root: Path
    #: longest wait for the lock; a holder that dies releases it at once, so only a hung worker reaches this
    timeout_s: float = 4 * 3600.0
    _released_at: float = field(default=float("-inf"), init=False, repr=False)

    @property
    def _turnstile(self) -> Path:
        return self.root / "theodolite-measurement.turnstile"

    @property
    def _lock(self) -> Path:
        return self.root / "theodolite-measurement.lock"

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Held by a measuring test: no test of another worker runs meanwhile."""
        pause = self._released_at + COURTESY_PAUSE_S - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        with self._flock(self._turnstile, fcntl.LOCK_EX, "a measuring test"):
            with self._flock(self._lock, fcntl.LOCK_EX, "a measuring test"):
                try:
                    yield
                finally:
                    self._released_at = time.monotonic()

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Held by every other test: tests run beside each other, but not beside a measurement."""
        with self._flock(self._turnstile, fcntl.LOCK_EX, "a test"):
            pass
        with self._flock(self._lock, fcntl.LOCK_SH, "a test"):
            yield

    @contextmanager
    def _flock(self, path: Path, operation: int, holder: str) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            self._wait(fd, operation, holder, path)
            yield
        finally:
            os.close(fd)  # closing the file releases its lock

    def _wait(self, fd: int, operation: int, holder: str, path: Path) -> None:
        def locked() -> bool:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)  # BlockingIOError while another process holds it
            return True

        wait_until(
            locked,
            timeout_s=self.timeout_s,
            interval_s=POLL_S,
            transient=(BlockingIOError,),
            error=TheodoliteSetupError,
            what=f"{holder} waited {self.timeout_s:.0f} s for {path} (pytest-theodolite's lock that keeps "
            "other tests from running beside a measurement under pytest-xdist); another worker "
            "seems stuck. Run with --theodolite-isolation none to measure without it.",
        )
