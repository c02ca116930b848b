"""The one way this package waits for something: poll a condition until a deadline, as testcontainers'
waiting utilities do. Every wait is bounded, says what it waited for when it gives up, names the last
transient error it saw, and can end early when what it waits on can no longer happen (a process died)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_NOTHING = object()


def poll_until(
    condition: Callable[[], T],
    *,
    timeout_s: float,
    interval_s: float = 0.1,
    transient: tuple[type[BaseException], ...] = (),
    check: Callable[[], None] | None = None,
) -> tuple[T | None, BaseException | None]:
    """Call ``condition`` every ``interval_s`` until it returns a truthy value, at most ``timeout_s``.

    Returns ``(value, None)`` when it did, ``(None, last transient error or None)`` when time ran out.
    Exceptions of the ``transient`` types count as "not yet"; ``check`` runs before every call and may raise
    to end the wait at once (its exception propagates)."""
    deadline = time.monotonic() + timeout_s
    last_error: BaseException | None = None
    while True:
        if check is not None:
            check()
        try:
            value = condition()
        except transient as exc:
            value, last_error = _NOTHING, exc  # type: ignore[assignment]
        if value is not _NOTHING and value:
            return value, None
        if time.monotonic() >= deadline:
            return None, last_error
        time.sleep(min(interval_s, max(0.0, deadline - time.monotonic())))


def wait_until(
    condition: Callable[[], T],
    *,
    timeout_s: float,
    what: str | Callable[[], str],
    interval_s: float = 0.1,
    transient: tuple[type[BaseException], ...] = (),
    check: Callable[[], None] | None = None,
    error: Callable[[str], BaseException] = TimeoutError,
) -> T:
    """As `poll_until`, but returns the truthy value and raises ``error(message)`` when time runs out;
    the message is ``what`` (a text, or a function that makes it then, e.g. with a log excerpt), followed by
    the last transient error when there was one."""
    value, last_error = poll_until(
        condition, timeout_s=timeout_s, interval_s=interval_s, transient=transient, check=check
    )
    if value is not None:
        return value
    message = what() if callable(what) else what
    if last_error is not None:
        message += f" (last error: {last_error!r})"
    raise error(message) from last_error
