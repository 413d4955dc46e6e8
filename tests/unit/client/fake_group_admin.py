"""In-process brokers over real gRPC for the AdminClient's consumer-group methods and
`pykraft groups`.

`GroupCluster` is the shared state: partitions (leader, log start, record timestamps) and
groups (coordinator, state, members, committed offsets). Each `GroupNode` serves it as a
broker does: the AdminService calls the admin client bootstraps with (DescribeCluster,
DescribeTopics, answered as a broker forwarding to the controller would), and the BrokerService's
Metadata, ListOffsets and group RPCs, answering group RPCs only for the groups it coordinates
(NOT_COORDINATOR otherwise; ListGroups lists only those). Tests script whole-request errors per
method and node (`header_errors`), fence nodes in DescribeCluster (`fenced`), stop nodes, and
read every request received (`requests_to`).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from pykraft.client.types import TopicPartition
from pykraft.proto import admin_pb2, broker_pb2, common_pb2, group_pb2
from tests.unit.client.fake_grpc import (
    describe_topics_answer,
    list_offsets_answer,
    metadata_answer,
    started,
    unary_service,
)

_R = TypeVar("_R", bound=Message)


@dataclass
class FakeMember:
    member_id: str
    assignment: list[TopicPartition] = field(default_factory=list)
    target_assignment: list[TopicPartition] | None = None  # None: same as assignment
    instance_id: str = ""
    client_id: str = "client-1"
    host: str = "/127.0.0.1"
    member_epoch: int = 3


@dataclass
class FakeGroup:
    coordinator: int
    state: str = "Empty"
    members: list[FakeMember] = field(default_factory=list)
    # tp -> (offset, metadata, leader epoch)
    offsets: dict[TopicPartition, tuple[int, str, int]] = field(default_factory=dict)
    group_epoch: int = 5
    assignment_epoch: int = 5
    assignor: str = "uniform"


class GroupCluster:
    """What every node answers from; hold `lock` to change it while nodes run."""

    def __init__(self, nodes: int) -> None:
        self.lock = threading.Lock()
        self.leaders: dict[TopicPartition, int] = {}
        self.log_start: dict[TopicPartition, int] = defaultdict(int)
        # Record timestamps by offset (offset = index); the log end is their count.
        self.timestamps: dict[TopicPartition, list[int]] = defaultdict(list)
        self.groups: dict[str, FakeGroup] = {}
        self.new_group_coordinator = 1  # FindCoordinator's answer for unknown groups
        self.fenced: set[int] = set()
        self.registered = True  # whether DescribeCluster lists any broker
        # (method, node id) -> error codes the next requests answer in their header.
        self.header_errors: dict[tuple[str, int], list[int]] = defaultdict(list)
        self.requests: list[tuple[int, str, Any]] = []  # (node id, method, request)
        self.nodes = [GroupNode(self, node_id) for node_id in range(1, nodes + 1)]

    @property
    def bootstrap(self) -> str:
        return self.nodes[0].address

    def add_topic(self, name: str, partitions: int, leader: int = 1, end: int = 0) -> None:
        for p in range(partitions):
            tp = TopicPartition(name, p)
            self.leaders[tp] = leader
            self.timestamps[tp] = [1000 + i for i in range(end)]

    def requests_to(self, method: str, node_id: int | None = None) -> list[Any]:
        with self.lock:
            return [r for n, m, r in self.requests if m == method and node_id in (None, n)]

    def topics(self) -> list[str]:
        return sorted({tp.topic for tp in self.leaders})

    def coordinator_for(self, group_id: str) -> int:
        group = self.groups.get(group_id)
        return self.new_group_coordinator if group is None else group.coordinator


class GroupNode:
    def __init__(self, cluster: GroupCluster, node_id: int) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.server = grpc.server(ThreadPoolExecutor(max_workers=4))
        services: dict[str, dict[str, tuple[Any, Any, Callable[[Any], Message]]]] = {
            "pykraft.AdminService": {
                "DescribeCluster": (
                    admin_pb2.DescribeClusterRequest,
                    admin_pb2.DescribeClusterResponse,
                    self.describe_cluster,
                ),
                "DescribeTopics": (
                    admin_pb2.DescribeTopicsRequest,
                    admin_pb2.DescribeTopicsResponse,
                    self.describe_topics,
                ),
            },
            "pykraft.BrokerService": {
                "Metadata": (
                    broker_pb2.MetadataRequest,
                    broker_pb2.MetadataResponse,
                    self.metadata,
                ),
                "ListOffsets": (
                    broker_pb2.ListOffsetsRequest,
                    broker_pb2.ListOffsetsResponse,
                    self.list_offsets,
                ),
                "FindCoordinator": (
                    group_pb2.FindCoordinatorRequest,
                    group_pb2.FindCoordinatorResponse,
                    self.find_coordinator,
                ),
                "ListGroups": (
                    group_pb2.ListGroupsRequest,
                    group_pb2.ListGroupsResponse,
                    self.list_groups,
                ),
                "ConsumerGroupDescribe": (
                    group_pb2.ConsumerGroupDescribeRequest,
                    group_pb2.ConsumerGroupDescribeResponse,
                    self.describe_groups,
                ),
                "DeleteGroups": (
                    group_pb2.DeleteGroupsRequest,
                    group_pb2.DeleteGroupsResponse,
                    self.delete_groups,
                ),
                "OffsetFetch": (
                    group_pb2.OffsetFetchRequest,
                    group_pb2.OffsetFetchResponse,
                    self.offset_fetch,
                ),
                "OffsetCommit": (
                    group_pb2.OffsetCommitRequest,
                    group_pb2.OffsetCommitResponse,
                    self.offset_commit,
                ),
            },
        }
        for service, methods in services.items():
            recorded = {
                name: (request_type, self._recorded(name, response_type, handler))
                for name, (request_type, response_type, handler) in methods.items()
            }
            self.server.add_generic_rpc_handlers([unary_service(service, recorded)])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{self.port}"

    def _recorded(
        self, method: str, response_type: Any, handler: Callable[[Any], Message]
    ) -> Callable[[Any, grpc.ServicerContext], Message]:
        def run(request: Any, context: grpc.ServicerContext) -> Message:
            with self.cluster.lock:
                self.cluster.requests.append((self.node_id, method, request))
                scripted = self.cluster.header_errors[(method, self.node_id)]
                if scripted:
                    header = common_pb2.ResponseHeader(
                        error_code=scripted.pop(0),  # type: ignore[arg-type]
                        error_message="scripted",
                    )
                    return response_type(header=header)  # type: ignore[no-any-return]
                return handler(request)

        return run

    # AdminService ----------------------------------------------------------------------------

    def describe_cluster(self, request: Any) -> admin_pb2.DescribeClusterResponse:
        brokers = [
            admin_pb2.BrokerNode(
                id=n.node_id,
                address=n.address,
                state="fenced" if n.node_id in self.cluster.fenced else "unfenced",
                epoch=1,
            )
            for n in self.cluster.nodes
            if self.cluster.registered
        ]
        return admin_pb2.DescribeClusterResponse(cluster_id="c", controller_id=1, brokers=brokers)

    def describe_topics(self, request: Any) -> admin_pb2.DescribeTopicsResponse:
        return describe_topics_answer(request, self.cluster)

    # BrokerService: data -------------------------------------------------------------------

    def metadata(self, request: Any) -> broker_pb2.MetadataResponse:
        cluster = self.cluster
        brokers = [(n.node_id, n.port) for n in cluster.nodes if n.node_id not in cluster.fenced]
        return metadata_answer(
            request,
            cluster,
            brokers,
            lambda tp: {
                "error_code": (
                    common_pb2.NONE if cluster.leaders[tp] >= 0 else common_pb2.LEADER_NOT_AVAILABLE
                )
            },
        )

    def list_offsets(self, request: Any) -> broker_pb2.ListOffsetsResponse:
        return list_offsets_answer(
            request,
            self.cluster,
            lambda tp, p: (
                common_pb2.NONE
                if self.cluster.leaders.get(tp) == self.node_id
                else common_pb2.NOT_LEADER_OR_FOLLOWER
            ),
        )

    # BrokerService: groups -----------------------------------------------------------------

    def find_coordinator(self, request: Any) -> group_pb2.FindCoordinatorResponse:
        node = self.cluster.nodes[self.cluster.coordinator_for(request.key) - 1]
        return group_pb2.FindCoordinatorResponse(
            node_id=node.node_id, host="127.0.0.1", port=node.port
        )

    def _coordinates(self, group_id: str) -> bool:
        return self.cluster.coordinator_for(group_id) == self.node_id

    def list_groups(self, request: Any) -> group_pb2.ListGroupsResponse:
        states = {s.lower() for s in request.states_filter}
        return group_pb2.ListGroupsResponse(
            groups=[
                group_pb2.ListedGroup(
                    group_id=group_id, protocol_type="consumer", group_state=group.state
                )
                for group_id, group in sorted(self.cluster.groups.items())
                if group.coordinator == self.node_id
                and (not states or group.state.lower() in states)
            ]
        )

    def describe_groups(self, request: Any) -> group_pb2.ConsumerGroupDescribeResponse:
        response = group_pb2.ConsumerGroupDescribeResponse()
        for group_id in request.group_ids:
            described = response.groups.add(group_id=group_id)
            group = self.cluster.groups.get(group_id)
            if not self._coordinates(group_id):
                described.error_code = common_pb2.NOT_COORDINATOR
            elif group is None:
                described.error_code = common_pb2.GROUP_ID_NOT_FOUND
                described.error_message = f"Group {group_id} not found."
            else:
                described.group_state = group.state
                described.group_epoch = group.group_epoch
                described.assignment_epoch = group.assignment_epoch
                described.assignor_name = group.assignor
                for m in group.members:
                    target = m.assignment if m.target_assignment is None else m.target_assignment
                    described.members.add(
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.host,
                        assignment=_by_topic(m.assignment),
                        target_assignment=_by_topic(target),
                    )
        return response

    def delete_groups(self, request: Any) -> group_pb2.DeleteGroupsResponse:
        response = group_pb2.DeleteGroupsResponse()
        for group_id in request.group_ids:
            result = response.results.add(group_id=group_id)
            group = self.cluster.groups.get(group_id)
            if not self._coordinates(group_id):
                result.error_code = common_pb2.NOT_COORDINATOR
            elif group is None:
                result.error_code = common_pb2.GROUP_ID_NOT_FOUND
                result.error_message = f"Group {group_id} not found."
            elif group.members:
                result.error_code = common_pb2.NON_EMPTY_GROUP
                result.error_message = f"Group {group_id} is not empty."
            else:
                del self.cluster.groups[group_id]
        return response

    def offset_fetch(self, request: Any) -> group_pb2.OffsetFetchResponse:
        if not self._coordinates(request.group_id):
            return _header(group_pb2.OffsetFetchResponse, common_pb2.NOT_COORDINATOR)
        group = self.cluster.groups.get(request.group_id)
        offsets = {} if group is None else group.offsets
        wanted = [
            TopicPartition(t.topic, p) for t in request.topics for p in t.partitions
        ] or sorted(offsets)
        by_topic: dict[str, list[group_pb2.OffsetFetchPartition]] = defaultdict(list)
        for tp in wanted:
            offset, metadata, epoch = offsets.get(tp, (-1, "", -1))
            by_topic[tp.topic].append(
                group_pb2.OffsetFetchPartition(
                    partition=tp.partition,
                    committed_offset=offset,
                    committed_leader_epoch=epoch,
                    metadata=metadata,
                )
            )
        return group_pb2.OffsetFetchResponse(
            topics=[
                group_pb2.OffsetFetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()
            ]
        )

    def offset_commit(self, request: Any) -> group_pb2.OffsetCommitResponse:
        if not self._coordinates(request.group_id):
            return _header(group_pb2.OffsetCommitResponse, common_pb2.NOT_COORDINATOR)
        group = self.cluster.groups.get(request.group_id)
        if group is not None and group.members:
            return _header(group_pb2.OffsetCommitResponse, common_pb2.UNKNOWN_MEMBER_ID)
        if group is None:
            group = self.cluster.groups[request.group_id] = FakeGroup(self.node_id)
        response = group_pb2.OffsetCommitResponse()
        for topic in request.topics:
            result = response.topics.add(topic=topic.topic)
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition)
                answer = result.partitions.add(partition=p.partition)
                if tp not in self.cluster.leaders:
                    answer.error_code = common_pb2.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                group.offsets[tp] = (
                    p.committed_offset,
                    p.committed_metadata,
                    p.committed_leader_epoch,
                )
        return response


def _by_topic(partitions: list[TopicPartition]) -> list[group_pb2.TopicPartitions]:
    topics: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        topics[tp.topic].append(tp.partition)
    return [group_pb2.TopicPartitions(topic=t, partitions=ps) for t, ps in topics.items()]


def _header(response_type: type[_R], code: common_pb2.ErrorCode) -> _R:
    """A response that failed as a whole."""
    return response_type(header=common_pb2.ResponseHeader(error_code=code))


@contextmanager
def running(nodes: int = 2) -> Iterator[GroupCluster]:
    cluster = GroupCluster(nodes)
    with started(node.server for node in cluster.nodes):
        yield cluster
