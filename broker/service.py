"""The gRPC face of the data plane: BrokerService methods handed to the request handlers.

Test hook (`test.drop.produce.responses.every` = N > 0, never in production): every Nth Produce
request that carries idempotent batches (a producer id) is processed in full, appended and, with
acks=all, waited for, and then its response is dropped: the RPC ends with UNAVAILABLE, so the
client sees a lost answer and sends the same batches again, which the log must recognise. Each
drop is logged with the same sentence the client gets, so tests can count them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import grpc

from pykraft.broker.config import BrokerConfig
from pykraft.broker.counters import describe
from pykraft.broker.fetch import FETCH_WAIT_MS_MAX, handle_fetch_spliced
from pykraft.broker.fetch_wire import SplicedFetch
from pykraft.broker.group.handlers import GroupHandlers
from pykraft.broker.offsets import handle_list_offsets, handle_metadata
from pykraft.broker.produce import handle_produce
from pykraft.broker.producer_ids import ProducerIdAllocator, handle_init_producer_id
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.proto import admin_pb2_grpc, broker_pb2, broker_pb2_grpc, group_pb2
from pykraft.proto.record_batch import BatchError, iter_batches
from pykraft.server_common.grpc_server import start_server

log = logging.getLogger(__name__)

DROPPED_RESPONSE_MESSAGE = "response dropped by test.drop.produce.responses.every"


class ProduceResponseDropper:
    """The test hook of the module docstring: which Produce responses to drop."""

    def __init__(self, every: int) -> None:
        assert every >= 0, every
        self._every = every
        self._count = 0
        self._lock = threading.Lock()

    def should_drop(self, request: broker_pb2.ProduceRequest) -> bool:
        """Counts `request` if it carries idempotent batches; True for every Nth of those."""
        if not self._every or not _carries_idempotent_batches(request):
            return False
        with self._lock:
            self._count += 1
            return self._count % self._every == 0


def _carries_idempotent_batches(request: broker_pb2.ProduceRequest) -> bool:
    try:
        return any(
            header.producer_id >= 0
            for topic in request.topics
            for item in topic.partitions
            for _, header in iter_batches(item.records, verify=False)
        )
    except BatchError:
        return False  # malformed: the log refused it already


class BrokerService(broker_pb2_grpc.BrokerServiceServicer):
    def __init__(
        self,
        manager: ReplicaManager,
        config: BrokerConfig,
        clock_ms: Callable[[], int],
        *,
        wall_clock_ms: Callable[[], int],
        producer_ids: ProducerIdAllocator,
        may_serve: Callable[[int], bool],
        groups: GroupHandlers,
    ) -> None:
        self._manager = manager
        self._groups = groups
        self._config = config
        self._clock_ms = clock_ms
        self._wall_clock_ms = wall_clock_ms
        self._producer_ids = producer_ids
        self._may_serve = may_serve
        self._dropper = ProduceResponseDropper(config.test_drop_produce_responses_every)

    def Produce(
        self, request: broker_pb2.ProduceRequest, context: grpc.ServicerContext
    ) -> broker_pb2.ProduceResponse:
        response = handle_produce(
            self._manager, request, self._clock_ms, wall_clock_ms=self._wall_clock_ms
        )
        if self._dropper.should_drop(request):
            log.warning("Produce: %s", DROPPED_RESPONSE_MESSAGE)
            context.abort(grpc.StatusCode.UNAVAILABLE, DROPPED_RESPONSE_MESSAGE)
        return response

    def InitProducerId(
        self, request: broker_pb2.InitProducerIdRequest, context: grpc.ServicerContext
    ) -> broker_pb2.InitProducerIdResponse:
        now_ms = self._clock_ms()
        timeout_ms = self._config.request_timeout_ms
        remaining_s = context.time_remaining()
        if remaining_s is not None:
            timeout_ms = min(timeout_ms, int(remaining_s * 1000))
        return handle_init_producer_id(
            self._producer_ids,
            request,
            broker_id=self._config.node_id,
            may_serve=self._may_serve(now_ms),
            deadline_ms=now_ms + timeout_ms,
        )

    # --- consumer groups (pykraft.broker.group) ---

    def FindCoordinator(
        self, request: group_pb2.FindCoordinatorRequest, context: grpc.ServicerContext
    ) -> group_pb2.FindCoordinatorResponse:
        return self._groups.find_coordinator(request)

    def ConsumerGroupHeartbeat(
        self, request: group_pb2.ConsumerGroupHeartbeatRequest, context: grpc.ServicerContext
    ) -> group_pb2.ConsumerGroupHeartbeatResponse:
        return self._groups.heartbeat(request, context.peer())

    def OffsetCommit(
        self, request: group_pb2.OffsetCommitRequest, context: grpc.ServicerContext
    ) -> group_pb2.OffsetCommitResponse:
        return self._groups.offset_commit(request)

    def OffsetFetch(
        self, request: group_pb2.OffsetFetchRequest, context: grpc.ServicerContext
    ) -> group_pb2.OffsetFetchResponse:
        return self._groups.offset_fetch(request)

    def ListGroups(
        self, request: group_pb2.ListGroupsRequest, context: grpc.ServicerContext
    ) -> group_pb2.ListGroupsResponse:
        return self._groups.list_groups(request)

    def ConsumerGroupDescribe(
        self, request: group_pb2.ConsumerGroupDescribeRequest, context: grpc.ServicerContext
    ) -> group_pb2.ConsumerGroupDescribeResponse:
        return self._groups.describe(request)

    def DeleteGroups(
        self, request: group_pb2.DeleteGroupsRequest, context: grpc.ServicerContext
    ) -> group_pb2.DeleteGroupsResponse:
        return self._groups.delete(request)

    def Fetch(
        self, request: broker_pb2.FetchRequest, context: grpc.ServicerContext
    ) -> SplicedFetch:
        """The answer serializes itself, its records copied once (`fetch_wire`)."""
        remaining_s = context.time_remaining()
        wait_ms_max = FETCH_WAIT_MS_MAX
        if remaining_s is not None:
            wait_ms_max = min(wait_ms_max, max(int(remaining_s * 1000), 0))
        return handle_fetch_spliced(self._manager, request, self._clock_ms, wait_ms_max)

    def DescribeCounters(
        self, request: broker_pb2.DescribeCountersRequest, context: grpc.ServicerContext
    ) -> broker_pb2.DescribeCountersResponse:
        return describe(self._manager.counters)

    def ListOffsets(
        self, request: broker_pb2.ListOffsetsRequest, context: grpc.ServicerContext
    ) -> broker_pb2.ListOffsetsResponse:
        return handle_list_offsets(self._manager, request, self._clock_ms)

    def Metadata(
        self, request: broker_pb2.MetadataRequest, context: grpc.ServicerContext
    ) -> broker_pb2.MetadataResponse:
        return handle_metadata(self._manager.image, request, self._config.cluster_id)


def serve(
    service: BrokerService,
    admin: admin_pb2_grpc.AdminServiceServicer,
    address: str,
    workers_max: int,
) -> grpc.Server:
    """Starts the gRPC server on `address` with `workers_max` threads (long polls hold one each)
    for BrokerService (Produce and Fetch too, for clients that do not use the data plane
    listener) and the forwarded admin API; raises OSError if it cannot bind."""
    return start_server(
        address,
        workers_max,
        [
            (broker_pb2_grpc.add_BrokerServiceServicer_to_server, service),
            (admin_pb2_grpc.add_AdminServiceServicer_to_server, admin),
        ],
    )
