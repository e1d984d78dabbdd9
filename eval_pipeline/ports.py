"""Loopback ports for the servers the project starts (graph server, Dagster webserver)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port the OS reports free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_is_free(port: int) -> bool:
    """Nothing listens on it. SO_REUSEADDR, as the JVM and uvicorn bind: connections of a
    server that just stopped (TIME_WAIT) do not make the port busy, a listener still does."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
