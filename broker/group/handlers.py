"""The group RPCs of BrokerService, from request to answer: FindCoordinator (which creates
`__consumer_offsets` on first use, as Kafka does) and the calls a coordinator serves.

Errors that concern the whole request (this broker is not the coordinator, the shard is
loading, the group refused the member) travel in the response header; ConsumerGroupDescribe
and DeleteGroups, which name several groups, carry them per group instead. A broker that may
not serve (fenced, or out of touch with the quorum) answers COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Final, TypeVar

from pykraft.broker.controller_channel import ControllerCaller, ControllerUnavailableError
from pykraft.broker.group.config import OFFSETS_TOPIC
from pykraft.broker.group.coordinator import CoordinatorError, GroupCoordinator, partition_for
from pykraft.broker.group.shard import GroupShard
from pykraft.broker.group.shard_state import Decision
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.broker.waiting import wait_until
from pykraft.metadata_log import MetadataImage
from pykraft.proto import admin_pb2, admin_pb2_grpc, common_pb2, group_pb2
from pykraft.server_common.errors import fill_error

GROUP_KEY_TYPE: Final = 0
# Kafka's offsets.topic.segment.bytes default; the topic is compacted.
OFFSETS_TOPIC_CONFIGS: Final = {
    "cleanup.policy": "compact",
    "segment.bytes": str(100 * 1024 * 1024),
    "compression.type": "producer",
}
# FindCoordinator waits this long for a topic it created to have a leader.
CREATION_WAIT_MS_MAX: Final = 5_000

T = TypeVar("T")
ItemT = TypeVar("ItemT", group_pb2.DescribedGroup, group_pb2.DeleteGroupsResult)
ResponseT = TypeVar(
    "ResponseT",
    group_pb2.FindCoordinatorResponse,
    group_pb2.ConsumerGroupHeartbeatResponse,
    group_pb2.OffsetCommitResponse,
    group_pb2.OffsetFetchResponse,
    group_pb2.ListGroupsResponse,
)


class GroupHandlers:
    def __init__(
        self,
        coordinator: GroupCoordinator,
        manager: ReplicaManager,
        caller: ControllerCaller,
        *,
        may_serve: Callable[[int], bool],
        clock_ms: Callable[[], int],
        wall_clock_ms: Callable[[], int],
        request_timeout_ms: int,
    ) -> None:
        self._coordinator = coordinator
        self._manager = manager
        self._caller = caller
        self._may_serve = may_serve
        self._clock_ms = clock_ms
        self._wall_clock_ms = wall_clock_ms
        self._request_timeout_ms = request_timeout_ms
        self._creating = threading.Lock()
        # Notified when a classic group changed: JoinGroup and SyncGroup wait on it.
        self.classic_changed = threading.Condition()

    # --- FindCoordinator ---

    def find_coordinator(
        self, request: group_pb2.FindCoordinatorRequest
    ) -> group_pb2.FindCoordinatorResponse:
        response = group_pb2.FindCoordinatorResponse(node_id=-1)
        try:
            if request.key_type != GROUP_KEY_TYPE:
                raise CoordinatorError(
                    common_pb2.INVALID_REQUEST, f"key type {request.key_type} is not a group (0)"
                )
            if not request.key:
                raise CoordinatorError(common_pb2.INVALID_GROUP_ID, "the group id is empty")
            node_id, host, port = self._locate(request.key)
        except CoordinatorError as error:
            return _failed(response, error)
        response.node_id, response.host, response.port = node_id, host, port
        return response

    def _locate(self, group_id: str) -> tuple[int, str, int]:
        image = self._manager.image
        if image.topics.get_by_name(OFFSETS_TOPIC) is None:
            self._create_offsets_topic()
            image = self._await_leaders()
        topic = image.topics.get_by_name(OFFSETS_TOPIC)
        assert topic is not None
        index = partition_for(group_id, len(topic.partitions))
        leader = topic.partitions[index].leader
        broker = image.cluster.brokers.get(leader)
        if broker is None or broker.fenced or not broker.endpoints:
            raise CoordinatorError(
                common_pb2.COORDINATOR_NOT_AVAILABLE,
                f"{OFFSETS_TOPIC}-{index}, which holds group {group_id!r}, has no live leader",
            )
        endpoint = broker.endpoints[0]
        return leader, endpoint.host, endpoint.port

    def _create_offsets_topic(self) -> None:
        config = self._coordinator.config
        request = admin_pb2.CreateTopicsRequest(
            topics=[
                admin_pb2.CreatableTopic(
                    name=OFFSETS_TOPIC,
                    num_partitions=config.offsets_topic_partitions,
                    replication_factor=config.offsets_topic_replication_factor,
                    configs=OFFSETS_TOPIC_CONFIGS,
                )
            ],
            timeout_ms=self._request_timeout_ms,
        )
        with self._creating:
            if self._manager.image.topics.get_by_name(OFFSETS_TOPIC) is not None:
                return
            try:
                response = self._caller.call(
                    "CreateTopics",
                    request,
                    admin_pb2.CreateTopicsResponse,
                    self._request_timeout_ms / 1000,
                    stub_class=admin_pb2_grpc.AdminServiceStub,
                )
            except ControllerUnavailableError as error:
                raise CoordinatorError(common_pb2.COORDINATOR_NOT_AVAILABLE, str(error)) from None
        results = [(response.header.error_code, response.header.error_message)]
        results += [(t.error_code, t.error_message) for t in response.topics]
        for code, message in results:
            if code not in (common_pb2.NONE, common_pb2.TOPIC_ALREADY_EXISTS):
                raise CoordinatorError(
                    common_pb2.COORDINATOR_NOT_AVAILABLE,
                    f"cannot create {OFFSETS_TOPIC}: {common_pb2.ErrorCode.Name(code)}: {message}",
                )

    def _await_leaders(self) -> MetadataImage:
        """The image once every offsets partition has a leader (bounded)."""
        deadline_ms = self._clock_ms() + CREATION_WAIT_MS_MAX
        image = self._manager.image

        def every_partition_led() -> bool:
            nonlocal image
            image = self._manager.image
            topic = image.topics.get_by_name(OFFSETS_TOPIC)
            return topic is not None and all(p.leader >= 0 for p in topic.partitions.values())

        changed = self._manager.changed
        if not wait_until(
            changed, every_partition_led, deadline_ms=deadline_ms, clock_ms=self._clock_ms
        ):
            raise CoordinatorError(
                common_pb2.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} is being created; try again"
            )
        return image

    # --- the classic protocol (Kafka's JoinGroup, SyncGroup, Heartbeat, LeaveGroup) ---

    def classic(
        self, group_id: str, act: Callable[[GroupShard, int, int], T], *, notify: bool = True
    ) -> T:
        """`act(shard, now_ms, wall_ms)` on the group's shard, after firing the classic groups'
        due timers, answered once what it wrote is replicated; CoordinatorError when this
        broker cannot serve the group. With `notify`, the callers waiting on
        `classic_changed` look again (polls pass False, or they would wake each other in
        turn)."""
        self._check_may_serve()
        now_ms, wall_ms = self._clock_ms(), self._wall_clock_ms()

        def decide(shard: GroupShard) -> Decision[T]:
            shard.classic.tick(now_ms, wall_ms)
            return shard.decision(act(shard, now_ms, wall_ms))

        answer = self._coordinator.run(group_id, decide)
        if notify:
            with self.classic_changed:
                self.classic_changed.notify_all()
        return answer

    # --- the coordinator's calls ---

    def heartbeat(
        self, request: group_pb2.ConsumerGroupHeartbeatRequest, peer: str
    ) -> group_pb2.ConsumerGroupHeartbeatResponse:
        host = client_host(peer)
        coordinator = self._coordinator

        def decide(shard: GroupShard) -> Decision[group_pb2.ConsumerGroupHeartbeatResponse]:
            if shard.classic.has_members(request.group_id):  # Kafka keeps the protocols apart
                raise CoordinatorError(
                    common_pb2.GROUP_ID_NOT_FOUND,
                    f"group {request.group_id!r} is a classic group, not a consumer group",
                )
            return shard.consumer_heartbeat(
                request,
                client_host=host,
                topics=coordinator.topics(),
                now_ms=self._clock_ms(),
                wall_ms=self._wall_clock_ms(),
            )

        return self._serve(request.group_id, group_pb2.ConsumerGroupHeartbeatResponse, decide)

    def offset_commit(
        self, request: group_pb2.OffsetCommitRequest, *, instance_id: str | None = None
    ) -> group_pb2.OffsetCommitResponse:
        """`instance_id`: a classic static member's (Kafka's OffsetCommit v7+)."""
        coordinator = self._coordinator
        return self._serve(
            request.group_id,
            group_pb2.OffsetCommitResponse,
            lambda shard: shard.offsets.commit(
                request,
                topics=coordinator.topics(),
                wall_ms=self._wall_clock_ms(),
                instance_id=instance_id,
            ),
        )

    def offset_fetch(self, request: group_pb2.OffsetFetchRequest) -> group_pb2.OffsetFetchResponse:
        return self._serve(
            request.group_id,
            group_pb2.OffsetFetchResponse,
            lambda shard: Decision([], shard.offsets.fetch(request)),
        )

    def list_groups(self, request: group_pb2.ListGroupsRequest) -> group_pb2.ListGroupsResponse:
        response = group_pb2.ListGroupsResponse()
        if not self._may_serve(self._clock_ms()):
            return _failed(response, _unavailable())
        for groups in self._coordinator.each_shard(
            lambda shard: shard.list_groups(request.states_filter)
        ):
            response.groups.extend(groups)
        return response

    def describe(
        self, request: group_pb2.ConsumerGroupDescribeRequest
    ) -> group_pb2.ConsumerGroupDescribeResponse:
        described = self._each_group(request.group_ids, group_pb2.DescribedGroup, _describing)
        return group_pb2.ConsumerGroupDescribeResponse(groups=described)

    def delete(self, request: group_pb2.DeleteGroupsRequest) -> group_pb2.DeleteGroupsResponse:
        results = self._each_group(request.group_ids, group_pb2.DeleteGroupsResult, _deleting)
        return group_pb2.DeleteGroupsResponse(results=results)

    def _each_group(
        self,
        group_ids: Iterable[str],
        item_type: type[ItemT],
        decision: Callable[[str], Callable[[GroupShard], Decision[ItemT]]],
    ) -> list[ItemT]:
        """One item per group, each from its own coordinator run; a group this broker cannot
        serve gets its error in its item."""
        items = []
        for group_id in group_ids:
            try:
                self._check_may_serve()
                item = self._coordinator.run(group_id, decision(group_id))
            except CoordinatorError as error:
                item = item_type(group_id=group_id)
                fill_error(item, error)
            items.append(item)
        return items

    def _check_may_serve(self) -> None:
        if not self._may_serve(self._clock_ms()):
            raise _unavailable()

    def _serve(
        self,
        group_id: str,
        response_type: type[ResponseT],
        decide: Callable[[GroupShard], Decision[ResponseT]],
    ) -> ResponseT:
        try:
            self._check_may_serve()
            return self._coordinator.run(group_id, decide)
        except CoordinatorError as error:
            return _failed(response_type(), error)


def _describing(
    group_id: str,
) -> Callable[[GroupShard], Decision[group_pb2.DescribedGroup]]:
    return lambda shard: Decision([], shard.describe(group_id))


def _deleting(group_id: str) -> Callable[[GroupShard], Decision[group_pb2.DeleteGroupsResult]]:
    return lambda shard: shard.delete_group(group_id)


def client_host(peer: str) -> str:
    """Kafka's way of showing a client's address ("/127.0.0.1") from gRPC's peer string
    ("ipv4:127.0.0.1:53412", "ipv6:[::1]:53412")."""
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return peer
    host = rest.rpartition(":")[0].strip("[]")
    return f"/{host}"


def _unavailable() -> CoordinatorError:
    return CoordinatorError(
        common_pb2.COORDINATOR_NOT_AVAILABLE,
        "this broker is fenced or out of touch with the controller quorum",
    )


def _failed(response: ResponseT, error: CoordinatorError) -> ResponseT:
    fill_error(response.header, error)
    return response
