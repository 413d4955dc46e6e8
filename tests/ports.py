"""Ports for test servers whose addresses must be known before they bind (Raft voters name each
other up front, and restarted nodes bind the same port again).

A port the kernel hands out for port 0 lies in its ephemeral range, which it also uses for the
source port of outgoing connections: while a node is down, a peer's reconnect attempt may take the
node's port as its source port, and the node cannot bind it when it restarts. So ports are drawn
below that range, checked free by binding, and never handed out twice in one test process.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

PORT_LOW = 20_000
_handed_out: set[int] = set()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port() -> int:
    high = _ephemeral_low() - 1
    assert high > PORT_LOW + 1000, f"the ephemeral range starts too low ({high + 1})"
    rng = random.SystemRandom()
    for _ in range(1000):
        port = rng.randrange(PORT_LOW, high)
        if port in _handed_out:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port between {PORT_LOW} and {high}")
