"""The controller's gRPC services. Handlers only translate: every request becomes an event for the
controller thread (see `quorum_controller.py` and `controller_core.py`), which decides,
commits and answers. `BrokerSession` turns a stream's opening and its end into two writes
(`controller/sessions.py`); the end of a broker's stream fences it."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterator
from typing import Final

import grpc

from pykraft.proto import (
    admin_pb2,
    admin_pb2_grpc,
    common_pb2,
    controller_pb2,
    controller_pb2_grpc,
)
from pykraft.quorum import describe, voter_changes
from pykraft.quorum.controller import (
    cluster,
    configs,
    create_parts,
    elections,
    producer_ids,
    reads,
    reassignment,
    sessions,
    topics,
)
from pykraft.quorum.controller.result import ControllerResult
from pykraft.quorum.events import DecideContext
from pykraft.quorum.metadata_fetch import fetch_bytes_max, fetch_messages
from pykraft.quorum.quorum_controller import QuorumController
from pykraft.quorum.replies import controller_listeners
from pykraft.quorum.roles import Role, RoleState
from pykraft.server_common.errors import ApiError, error_header
from pykraft.server_common.grpc_server import start_server
from pykraft.server_common.slots import Slots

log = logging.getLogger(__name__)

# How often a held session stream looks whether this controller is still the active one in the
# epoch that opened it; when not, the stream ends so the broker opens one to the new controller.
SESSION_ROLE_CHECK_MS: Final = 200


class AdminService(admin_pb2_grpc.AdminServiceServicer):
    def __init__(self, controller: QuorumController) -> None:
        self._controller = controller
        self._timeout_ms = controller.config.request_timeout_ms

    def _timeout(self, requested_ms: int) -> int:
        return requested_ms if requested_ms > 0 else self._timeout_ms

    def CreateTopics(
        self, request: admin_pb2.CreateTopicsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.CreateTopicsResponse:
        """Decided in parts when large (`create_parts.py`), one after the other, all within the
        request's timeout."""
        deadline_s = time.monotonic() + self._timeout(request.timeout_ms) / 1000
        responses: list[admin_pb2.CreateTopicsResponse] = []
        for part in create_parts.parts_of(request):
            timeout_ms = max(1, int((deadline_s - time.monotonic()) * 1000))
            responses.append(
                self._controller.write(
                    lambda ctx, part=part: topics.create_topics(  # type: ignore[misc]
                        ctx.image, part, new_topic_id=ctx.new_topic_id
                    ),
                    admin_pb2.CreateTopicsResponse,
                    timeout_ms,
                )
            )
            if responses[-1].header.error_code != common_pb2.NONE:
                break
        return create_parts.merged(responses)

    def DeleteTopics(
        self, request: admin_pb2.DeleteTopicsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.DeleteTopicsResponse:
        return self._controller.write(
            lambda ctx: topics.delete_topics(ctx.image, request),
            admin_pb2.DeleteTopicsResponse,
            self._timeout(request.timeout_ms),
        )

    def CreatePartitions(
        self, request: admin_pb2.CreatePartitionsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.CreatePartitionsResponse:
        return self._controller.write(
            lambda ctx: topics.create_partitions(ctx.image, request),
            admin_pb2.CreatePartitionsResponse,
            self._timeout(request.timeout_ms),
        )

    def DescribeTopics(
        self, request: admin_pb2.DescribeTopicsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.DescribeTopicsResponse:
        return self._controller.read(
            lambda ctx: reads.describe_topics(ctx.image, request),
            admin_pb2.DescribeTopicsResponse,
            self._timeout_ms,
        )

    def DescribeConfigs(
        self, request: admin_pb2.DescribeConfigsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.DescribeConfigsResponse:
        return self._controller.read(
            lambda ctx: configs.describe_configs(ctx.image, request),
            admin_pb2.DescribeConfigsResponse,
            self._timeout_ms,
        )

    def IncrementalAlterConfigs(
        self, request: admin_pb2.AlterConfigsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.AlterConfigsResponse:
        return self._controller.write(
            lambda ctx: configs.incremental_alter_configs(ctx.image, request),
            admin_pb2.AlterConfigsResponse,
            self._timeout_ms,
        )

    def ElectLeaders(
        self, request: admin_pb2.ElectLeadersRequest, context: grpc.ServicerContext
    ) -> admin_pb2.ElectLeadersResponse:
        return self._controller.write(
            lambda ctx: elections.elect_leaders(ctx.image, request),
            admin_pb2.ElectLeadersResponse,
            self._timeout(request.timeout_ms),
        )

    def AlterPartitionReassignments(
        self,
        request: admin_pb2.AlterPartitionReassignmentsRequest,
        context: grpc.ServicerContext,
    ) -> admin_pb2.AlterPartitionReassignmentsResponse:
        return self._controller.write(
            lambda ctx: reassignment.alter_partition_reassignments(ctx.image, request),
            admin_pb2.AlterPartitionReassignmentsResponse,
            self._timeout(request.timeout_ms),
        )

    def ListPartitionReassignments(
        self, request: admin_pb2.ListPartitionReassignmentsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.ListPartitionReassignmentsResponse:
        return self._controller.read(
            lambda ctx: reassignment.list_partition_reassignments(ctx.image, request),
            admin_pb2.ListPartitionReassignmentsResponse,
            self._timeout_ms,
        )

    def UnregisterBroker(
        self, request: admin_pb2.UnregisterBrokerRequest, context: grpc.ServicerContext
    ) -> admin_pb2.UnregisterBrokerResponse:
        def decide(ctx: DecideContext) -> ControllerResult[admin_pb2.UnregisterBrokerResponse]:
            result = cluster.unregister_broker(ctx.image, request)
            if result.records:
                ctx.heartbeats.remove(request.broker_id)
            return result

        return self._controller.write(decide, admin_pb2.UnregisterBrokerResponse, self._timeout_ms)

    def DescribeCluster(
        self, request: admin_pb2.DescribeClusterRequest, context: grpc.ServicerContext
    ) -> admin_pb2.DescribeClusterResponse:
        return self._controller.read(
            describe.describe_cluster, admin_pb2.DescribeClusterResponse, self._timeout_ms
        )

    def DescribeQuorum(
        self, request: admin_pb2.DescribeQuorumRequest, context: grpc.ServicerContext
    ) -> admin_pb2.DescribeQuorumResponse:
        return self._controller.read(
            describe.describe_quorum, admin_pb2.DescribeQuorumResponse, self._timeout_ms
        )

    def AddRaftVoter(
        self, request: admin_pb2.AddRaftVoterRequest, context: grpc.ServicerContext
    ) -> admin_pb2.AddRaftVoterResponse:
        timeout_ms = self._timeout(request.timeout_ms)
        return voter_changes.add_raft_voter(self._controller, request, timeout_ms)

    def RemoveRaftVoter(
        self, request: admin_pb2.RemoveRaftVoterRequest, context: grpc.ServicerContext
    ) -> admin_pb2.RemoveRaftVoterResponse:
        timeout_ms = self._timeout(request.timeout_ms)
        return voter_changes.remove_raft_voter(self._controller, request, timeout_ms)


class ControllerService(controller_pb2_grpc.ControllerServiceServicer):
    def __init__(self, controller: QuorumController) -> None:
        self._controller = controller
        self._timeout_ms = controller.config.request_timeout_ms
        self._stream_ids = itertools.count()  # next() is atomic under the GIL
        # Each held session stream keeps a gRPC thread of the pool `serve` sized for them.
        self._sessions_max = controller.config.broker_sessions_max
        self._session_slots = Slots(self._sessions_max)

    def RegisterBroker(
        self, request: controller_pb2.BrokerRegistrationRequest, context: grpc.ServicerContext
    ) -> controller_pb2.BrokerRegistrationResponse:
        def decide(
            ctx: DecideContext,
        ) -> ControllerResult[controller_pb2.BrokerRegistrationResponse]:
            result = cluster.register_broker(
                ctx.image,
                request,
                cluster_id=ctx.cluster_id,
                next_offset=ctx.next_offset,
                session_alive=ctx.heartbeats.is_alive(request.broker_id, ctx.now_ms),
                partitions_max=ctx.heartbeats.partition_changes_max,
            )
            if result.response.header.error_code == 0:
                ctx.heartbeats.touch(request.broker_id, ctx.now_ms)
            return result

        return self._controller.write(
            decide, controller_pb2.BrokerRegistrationResponse, self._timeout_ms
        )

    def BrokerHeartbeat(
        self, request: controller_pb2.BrokerHeartbeatRequest, context: grpc.ServicerContext
    ) -> controller_pb2.BrokerHeartbeatResponse:
        def decide(ctx: DecideContext) -> ControllerResult[controller_pb2.BrokerHeartbeatResponse]:
            return cluster.heartbeat(
                ctx.image, request, ctx.heartbeats, now_ms=ctx.now_ms, next_offset=ctx.next_offset
            )

        response = self._controller.write(
            decide, controller_pb2.BrokerHeartbeatResponse, self._timeout_ms
        )
        status = self._controller.raft_status()
        listeners = controller_listeners(self._controller.config, status).values()
        response.controller_listeners.extend(sorted(address for address in listeners if address))
        return response

    def AlterPartition(
        self, request: controller_pb2.AlterPartitionRequest, context: grpc.ServicerContext
    ) -> controller_pb2.AlterPartitionResponse:
        return self._controller.write(
            lambda ctx: topics.alter_partition(ctx.image, request),
            controller_pb2.AlterPartitionResponse,
            self._timeout_ms,
        )

    def AllocateProducerIds(
        self, request: controller_pb2.AllocateProducerIdsRequest, context: grpc.ServicerContext
    ) -> controller_pb2.AllocateProducerIdsResponse:
        return self._controller.write(
            lambda ctx: producer_ids.allocate_producer_ids(ctx.image, request),
            controller_pb2.AllocateProducerIdsResponse,
            self._timeout_ms,
        )

    def MetadataFetch(
        self, request: controller_pb2.MetadataFetchRequest, context: grpc.ServicerContext
    ) -> Iterator[controller_pb2.MetadataFetchResponse]:
        """The stream of `metadata_fetch.fetch_messages`: chosen on the controller thread, encoded
        here message by message as gRPC sends them."""
        config = self._controller.config
        wait_ms = min(max(request.max_wait_ms, 0), config.metadata_fetch_wait_max_ms)
        answer = self._controller.fetch(
            request.after_offset, wait_ms, self._timeout_ms, allow_standby=request.allow_standby
        )
        if isinstance(answer, controller_pb2.MetadataFetchResponse):
            yield answer  # refused
            return
        yield from fetch_messages(answer, fetch_bytes_max(request.max_bytes, config))

    def BrokerSession(
        self, request: controller_pb2.BrokerSessionRequest, context: grpc.ServicerContext
    ) -> Iterator[controller_pb2.BrokerSessionResponse]:
        """Opens the broker's session stream and holds it while this controller stays active
        in the same epoch. Its end, seen by gRPC's termination callback (which runs even when
        this generator is never resumed), queues the write that fences the broker; a stream
        this controller ends itself (leadership moved) fences nothing: the broker reconnects."""
        if not self._session_slots.take():
            yield controller_pb2.BrokerSessionResponse(header=self._sessions_full())
            return
        if not context.add_callback(self._session_slots.give_back):
            self._session_slots.give_back()  # the broker went away already
            return
        stream_id = next(self._stream_ids)
        epoch = self._controller.core.role.epoch
        opened = self._controller.write(
            lambda ctx: sessions.open_session(ctx.image, request, ctx.heartbeats, stream_id),
            controller_pb2.BrokerSessionResponse,
            self._timeout_ms,
        )
        # Taken by the active controller of `epoch` (only an active one decides, and epochs
        # never go back), unless another epoch began meanwhile: then its sessions are fresh.
        role = self._controller.core.role
        if opened.header.error_code != common_pb2.NONE or role != RoleState(Role.ACTIVE, epoch):
            yield opened
            return
        ended = threading.Event()
        ended_here = threading.Event()

        def on_end() -> None:
            ended.set()
            if not ended_here.is_set():
                self._end_session(request, stream_id)

        if not context.add_callback(on_end):
            on_end()  # the broker went away while its stream opened
            return
        yield opened
        while not ended.wait(SESSION_ROLE_CHECK_MS / 1000):
            if self._controller.core.role != role:
                ended_here.set()
                return

    def _sessions_full(self) -> common_pb2.ResponseHeader:
        message = (
            f"this controller holds broker.sessions.max ({self._sessions_max}) session streams; "
            "the broker stays in the cluster on heartbeats, fenced by its session timeout alone"
        )
        return error_header(ApiError(common_pb2.POLICY_VIOLATION, message))

    def _end_session(self, request: controller_pb2.BrokerSessionRequest, stream_id: int) -> None:
        """Queues the decision on a stream's end without waiting (gRPC's callback thread)."""
        queued = self._controller.write_nowait(
            lambda ctx: sessions.end_session(
                ctx.image, request, ctx.heartbeats, stream_id, ctx.next_offset
            ),
            common_pb2.ResponseHeader,
            self._timeout_ms,
        )
        if not queued:
            log.info(
                "broker %d's session stream ended while this controller stops or is busy; "
                "its session timeout fences it if it is gone",
                request.broker_id,
            )


def serve(controller: QuorumController, address: str) -> grpc.Server:
    """Starts the gRPC server for both services on `address`; raises if it cannot bind. Its pool
    has `grpc.workers.max` threads for short requests and two per broker up to
    `broker.sessions.max`: a broker's session stream and its metadata long poll each hold one
    for as long as they last."""
    config = controller.config
    return start_server(
        address,
        config.grpc_workers_max + 2 * config.broker_sessions_max,
        [
            (admin_pb2_grpc.add_AdminServiceServicer_to_server, AdminService(controller)),
            (
                controller_pb2_grpc.add_ControllerServiceServicer_to_server,
                ControllerService(controller),
            ),
        ],
    )
