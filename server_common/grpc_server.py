"""The gRPC plumbing every server process shares: the listener it serves on and the channels it
opens to its peers (broker to controller, follower to leader), with one message limit.

`start_server` is the one way a controller or broker starts serving: a thread pool bounded by
`workers_max` (a long poll holds one thread), messages up to `GRPC_MESSAGE_BYTES_MAX` both ways,
no port sharing (a second process on the same port fails instead of splitting the traffic), and
`RefuseUnparsableRequests`, so bytes that are no request answer INVALID_ARGUMENT,
`RequestMetrics`, which counts and times every call per method, and `SelfSerializedAnswers`, so a
handler may answer with bytes it serialized itself (a Fetch answer's records are not copied into
the message first).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import grpc

from pykraft.server_common.request_metrics import RequestMetrics
from pykraft.server_common.self_serialized import SelfSerializedAnswers
from pykraft.server_common.unparsable_requests import RefuseUnparsableRequests

# gRPC messages, both ways, between clients, brokers and controllers (a Fetch carries up to this).
GRPC_MESSAGE_BYTES_MAX: Final = 64 * 1024 * 1024

# A generated `add_<Service>Servicer_to_server` function and the servicer it adds.
ServiceRegistration = tuple[Callable[[Any, grpc.Server], None], object]


def start_server(
    address: str, workers_max: int, services: Sequence[ServiceRegistration]
) -> grpc.Server:
    """Serves `services` on `address` (`host:port`) with at most `workers_max` request threads,
    as the module docstring says; raises OSError if it cannot listen there."""
    server = grpc.server(
        ThreadPoolExecutor(max_workers=workers_max, thread_name_prefix="grpc"),
        options=[
            ("grpc.max_receive_message_length", GRPC_MESSAGE_BYTES_MAX),
            ("grpc.max_send_message_length", GRPC_MESSAGE_BYTES_MAX),
            ("grpc.so_reuseport", 0),
        ],
        interceptors=[RefuseUnparsableRequests(), RequestMetrics(), SelfSerializedAnswers()],
    )
    for add_to_server, servicer in services:
        add_to_server(servicer, server)
    if server.add_insecure_port(address) == 0:
        raise OSError(f"cannot listen on {address}")
    server.start()
    return server


def open_peer_channel(address: str) -> grpc.Channel:
    """An insecure channel from this server to another one that accepts answers up to
    `GRPC_MESSAGE_BYTES_MAX` (a follower's Fetch, a MetadataFetch snapshot)."""
    return grpc.insecure_channel(
        address, options=[("grpc.max_receive_message_length", GRPC_MESSAGE_BYTES_MAX)]
    )
