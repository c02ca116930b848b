"""Which executors answer: a listening block manager does; a closed port does not, nor a silent one -- here a
listener whose accept queue is full, so that the kernel drops each new SYN as a silent host's link would (the
silent host itself is tested live in tests/test_multi_host_spark.py)."""

import socket
from contextlib import ExitStack

from pytest_theodolite.infra.spark.executors import unanswered


def test_an_executor_that_accepts_no_connection_is_unanswered_and_one_that_listens_is_not():
    with ExitStack() as stack:
        listening, closed, silent = (stack.enter_context(socket.socket()) for _ in range(3))
        for sock in (listening, closed, silent):
            sock.bind(("127.0.0.1", 0))
        listening.listen()
        silent.listen(0)
        for _ in range(3):  # filling its queue: the kernel takes one, then drops the SYNs
            filler = stack.enter_context(socket.socket())
            filler.settimeout(0.5)
            try:
                filler.connect(silent.getsockname())
            except TimeoutError:
                break
        else:
            raise AssertionError("the full accept queue still took connections")
        alive, refused, dropped = (
            f"127.0.0.1:{sock.getsockname()[1]}" for sock in (listening, closed, silent)
        )
        assert unanswered([alive, refused, dropped, alive], timeout_s=0.5) == {
            refused: "refused",
            dropped: "silent",
        }
        assert unanswered([alive]) == {}
        assert unanswered([]) == {}
