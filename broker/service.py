"""The gRPC face of the data plane: BrokerService methods handed to the request handlers."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import grpc

from pykraft.broker.config import GRPC_MESSAGE_BYTES_MAX
from pykraft.broker.fetch import handle_fetch
from pykraft.broker.offsets import handle_list_offsets, handle_metadata
from pykraft.broker.produce import handle_produce
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.proto import admin_pb2_grpc, broker_pb2, broker_pb2_grpc


class BrokerService(broker_pb2_grpc.BrokerServiceServicer):
    def __init__(
        self, manager: ReplicaManager, cluster_id: str, clock_ms: Callable[[], int]
    ) -> None:
        self._manager = manager
        self._cluster_id = cluster_id
        self._clock_ms = clock_ms

    def Produce(
        self, request: broker_pb2.ProduceRequest, context: grpc.ServicerContext
    ) -> broker_pb2.ProduceResponse:
        return handle_produce(self._manager, request, self._clock_ms)

    def Fetch(
        self, request: broker_pb2.FetchRequest, context: grpc.ServicerContext
    ) -> broker_pb2.FetchResponse:
        return handle_fetch(self._manager, request, self._clock_ms)

    def ListOffsets(
        self, request: broker_pb2.ListOffsetsRequest, context: grpc.ServicerContext
    ) -> broker_pb2.ListOffsetsResponse:
        return handle_list_offsets(self._manager, request, self._clock_ms)

    def Metadata(
        self, request: broker_pb2.MetadataRequest, context: grpc.ServicerContext
    ) -> broker_pb2.MetadataResponse:
        return handle_metadata(self._manager.image, request, self._cluster_id)


def serve(
    service: BrokerService,
    admin: admin_pb2_grpc.AdminServiceServicer,
    address: str,
    workers_max: int,
) -> grpc.Server:
    """Starts the gRPC server on `address` with `workers_max` threads (long polls hold one each)
    for the data plane and the forwarded admin API; raises OSError if it cannot bind."""
    server = grpc.server(
        ThreadPoolExecutor(max_workers=workers_max, thread_name_prefix="grpc"),
        options=[
            ("grpc.max_receive_message_length", GRPC_MESSAGE_BYTES_MAX),
            ("grpc.max_send_message_length", GRPC_MESSAGE_BYTES_MAX),
            ("grpc.so_reuseport", 0),
        ],
    )
    broker_pb2_grpc.add_BrokerServiceServicer_to_server(  # type: ignore[no-untyped-call]
        service, server
    )
    admin_pb2_grpc.add_AdminServiceServicer_to_server(  # type: ignore[no-untyped-call]
        admin, server
    )
    if server.add_insecure_port(address) == 0:
        raise OSError(f"cannot listen on {address}")
    server.start()
    return server
