"""A free TCP port on loopback, for a server this process is about to start."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port that nothing on 127.0.0.1 holds right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
