"""Mends a test client's defect before any integration test runs.

kafka-python 3.0.12's `KafkaNetSocket.sock_connect` raises without closing its socket when a
broker refuses the connection. Tests kill brokers that kafka-python clients talk to, and the
garbage collector then finds those sockets in whichever later test it happens to run, whose
ResourceWarning pytest turns into a failure. The wrapper closes the socket where it failed.
"""

from __future__ import annotations

import functools
import socket
from typing import Any

from kafka.net.inet import KafkaNetSocket

_sock_connect = KafkaNetSocket.sock_connect


@functools.wraps(_sock_connect)
async def _sock_connect_closing(
    self: KafkaNetSocket, net: Any, sock: socket.socket, sockaddr: Any, timeout_at: Any = None
) -> socket.socket:
    try:
        return await _sock_connect(self, net, sock, sockaddr, timeout_at=timeout_at)  # type: ignore[no-any-return]
    except BaseException:
        sock.close()
        raise


KafkaNetSocket.sock_connect = _sock_connect_closing
