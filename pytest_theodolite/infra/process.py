"""Child processes (broker, Spark master/workers, generator workers) as context managers.

Every process a test starts is stopped again: SIGTERM to its whole process group, then SIGKILL after a grace
period. Linux's parent-death signal kills a child whose pytest process dies without running finalizers
(e.g. SIGKILL), so nothing is left behind even then.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_theodolite.infra.waiting import poll_until

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask Linux to kill the calling process when its parent dies (run in a child: between fork and exec, or
    first thing in a spawned interpreter)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the finalizers are the only safety net
        pass


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"stopped by signal {signal.Signals(signum).name}")


def terminate_as_interrupt() -> Callable[[], None]:
    """Make SIGTERM (a CI job cancelled, ``timeout``, ``kill``) raise KeyboardInterrupt as Ctrl-C does, so that
    the same finalizers stop every process and remove every temp dir; returns what restores the previous
    handler. Only where SIGTERM still has its default action, and only in the main thread (the one Python
    delivers signals to): a handler someone else installed is left alone."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return lambda: None
    signal.signal(signal.SIGTERM, _interrupt)

    def restore() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    return restore


def interruptible_child() -> None:
    """First thing in a spawned helper process: Ctrl-C and SIGTERM raise KeyboardInterrupt there, whatever the
    parent's dispositions (a SIGINT ignored by a background shell is inherited across exec), so that the
    helper can clean up what it started when the parent interrupts it."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)


@dataclass
class ManagedProcess:
    """A child process in its own process group whose output goes to a log file."""

    argv: Sequence[str]
    log_path: Path
    env: dict[str, str] | None = None
    cwd: Path | None = None
    die_with_parent: bool = True
    #: runs in the child before exec, e.g. to join a cgroup (so that its children inherit the quota)
    before_exec: Callable[[], None] | None = None
    stop_timeout_s: float = 20.0
    popen: subprocess.Popen | None = field(default=None, init=False)

    def start(self) -> ManagedProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")

        def preexec() -> None:
            if self.die_with_parent:
                die_with_parent()
            if self.before_exec is not None:
                self.before_exec()

        try:
            self.popen = subprocess.Popen(
                list(self.argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,  # own process group: stop() reaches the JVM's children too
                preexec_fn=preexec,
            )
        finally:
            log.close()
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None, "process not started"
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def returncode(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def log_tail(self, lines: int = 30) -> str:
        return tail(self.log_path, lines)

    def log_excerpt(self, lines: int = 25) -> str:
        """The first ERROR lines (the cause; a JVM's shutdown noise comes after it) and the last lines."""
        try:
            errors = [
                line for line in self.log_path.read_text(errors="replace").splitlines() if " ERROR " in line
            ][:5]
        except OSError:
            errors = []
        last = self.log_tail(lines)
        head = "\n".join(line for line in errors if line not in last)
        return f"{head}\n...\n{last}" if head else last

    def stop(self) -> None:
        if self.popen is None:
            return
        stop_process_group(self.popen.pid, self.stop_timeout_s)
        try:
            self.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def __enter__(self) -> ManagedProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_process_group(pid: int, timeout_s: float = 20.0) -> None:
    """SIGTERM the process group led by ``pid``, wait, then SIGKILL what is left of it."""
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        pgid = pid  # leader gone; its group may still have members
    if pgid != pid:
        # not a group leader (should not happen for ManagedProcess): never signal our own group
        _signal(pid, signal.SIGTERM, group=False)
        _wait_gone(lambda: _exists(pid), timeout_s)
        _signal(pid, signal.SIGKILL, group=False)
        return
    _signal(pgid, signal.SIGTERM, group=True)
    if not _wait_gone(lambda: _group_exists(pgid), timeout_s):
        _signal(pgid, signal.SIGKILL, group=True)
        _wait_gone(lambda: _group_exists(pgid), 5.0)


def _signal(target: int, sig: int, group: bool) -> None:
    try:
        (os.killpg if group else os.kill)(target, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child still "exists": reap it if it is ours
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # only zombies left in the group count as gone
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getpgid(int(entry)) == pgid and _not_zombie(int(entry)):
                    if int(entry) == pgid:
                        return _exists(pgid)
                    return True
            except (ProcessLookupError, PermissionError):
                continue
    return False


def _wait_gone(still_there: Callable[[], bool], timeout_s: float) -> bool:
    gone, _ = poll_until(lambda: not still_there(), timeout_s=timeout_s)
    return bool(gone)


def tail(path: Path, lines: int = 30) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            return b"\n".join(f.read().splitlines()[-lines:]).decode(errors="replace")
    except OSError:
        return "(no log)"
