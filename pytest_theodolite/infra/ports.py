"""Loopback ports: pick free ones, or check that a requested one is free."""

from __future__ import annotations

import socket

from pytest_theodolite.core.errors import TheodoliteSetupError

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def ensure_free(port: int, what: str) -> int:
    """Return ``port`` if it can be bound on loopback, else raise an error naming ``what`` needs it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError as exc:
            raise TheodoliteSetupError(
                f"Port {port} on {LOOPBACK}, requested for {what}, is already in use ({exc.strerror}). "
                "Stop what holds it, or choose another port (0 picks a free one)."
            ) from exc
    return port


def port_or_free(port: int, what: str) -> int:
    return free_port() if port == 0 else ensure_free(port, what)
