"""Starting what a gate needs from pytest: a broken part stops the run with one message, and what a
fixture started stays up until the session ends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TypeVar

import pytest

from pytest_theodolite.core.errors import TheodoliteSetupError

T = TypeVar("T")


def start_or_stop(request: pytest.FixtureRequest, start: Callable[[], T]) -> T:
    """Run ``start``; a missing or broken part (Java, Maven, broker, cluster) is reported once, without a
    traceback, and stops the run instead of failing every later test the same way."""
    try:
        return start()
    except TheodoliteSetupError as exc:
        message = str(exc)
    # outside the except block, so that pytest shows the message alone and not an exception chain
    request.session.shouldstop = f"pytest-theodolite: {message.splitlines()[0]}"
    pytest.fail(f"pytest-theodolite: {message}", pytrace=False)


def served(request: pytest.FixtureRequest, context: AbstractContextManager[T]) -> Iterator[T]:
    """Enter ``context`` (a setup error stops the run, see start_or_stop) and keep it open until the session ends."""
    value = start_or_stop(request, context.__enter__)
    try:
        yield value
    finally:
        context.__exit__(None, None, None)
