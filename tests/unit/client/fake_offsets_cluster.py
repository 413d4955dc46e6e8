"""In-process brokers over real gRPC, for the tests of AdminClient.list_offsets and
`pykraft offsets`.

Each `FakeNode` is a broker as the admin client sees one: it serves the AdminService (as a
broker forwarding to the controller would answer: DescribeCluster, DescribeTopics,
DescribeConfigs) and the BrokerService's Metadata and ListOffsets from one shared `FakeState`,
answering ListOffsets only for the partitions it leads. Tests script per-partition errors and
record every request, so they can check where each one went.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import grpc
from google.protobuf.message import Message

from pykraft.client.types import TopicPartition
from pykraft.proto import admin_pb2, broker_pb2, common_pb2
from tests.unit.client.fake_grpc import (
    describe_topics_answer,
    list_offsets_answer,
    metadata_answer,
    started,
    unary_service,
)


class FakeState:
    """The cluster every node answers from: leaders, epochs and each partition's record
    timestamps (offset = index; the log starts at `log_start`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.leaders: dict[TopicPartition, int] = {}
        self.epochs: dict[TopicPartition, int] = defaultdict(int)
        self.timestamps: dict[TopicPartition, list[int]] = defaultdict(list)
        self.log_start: dict[TopicPartition, int] = defaultdict(int)
        self.list_offsets_errors: dict[TopicPartition, list[int]] = defaultdict(list)
        self.requests: list[tuple[int, str, Any]] = []  # (node id, method, request)
        self.nodes: list[FakeNode] = []
        self.registered = True  # whether DescribeCluster lists the brokers

    def topics(self) -> list[str]:
        return sorted({tp.topic for tp in self.leaders})

    def list_offsets_to(self, node_id: int) -> list[tuple[TopicPartition, int]]:
        """(partition, timestamp) of every ListOffsets partition node `node_id` received."""
        with self.lock:
            return [
                (TopicPartition(t.topic, p.partition), p.timestamp)
                for n, method, request in self.requests
                if n == node_id and method == "ListOffsets"
                for t in request.topics
                for p in t.partitions
            ]


class FakeNode:
    def __init__(self, state: FakeState, node_id: int) -> None:
        self.state = state
        self.node_id = node_id
        self.server = grpc.server(ThreadPoolExecutor(max_workers=4))
        services: dict[str, dict[str, tuple[Any, Callable[[Any], Message]]]] = {
            "pykraft.AdminService": {
                "DescribeCluster": (admin_pb2.DescribeClusterRequest, self.describe_cluster),
                "DescribeTopics": (admin_pb2.DescribeTopicsRequest, self.describe_topics),
                "DescribeConfigs": (admin_pb2.DescribeConfigsRequest, self.describe_configs),
            },
            "pykraft.BrokerService": {
                "Metadata": (broker_pb2.MetadataRequest, self.metadata),
                "ListOffsets": (broker_pb2.ListOffsetsRequest, self.list_offsets),
            },
        }
        for service, methods in services.items():
            recorded = {name: (rt, self._recorded(name, h)) for name, (rt, h) in methods.items()}
            self.server.add_generic_rpc_handlers([unary_service(service, recorded)])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{self.port}"

    def _recorded(
        self, method: str, handler: Callable[[Any], Message]
    ) -> Callable[[Any, grpc.ServicerContext], Message]:
        def run(request: Any, context: grpc.ServicerContext) -> Message:
            with self.state.lock:
                self.state.requests.append((self.node_id, method, request))
                return handler(request)

        return run

    def describe_cluster(self, request: Any) -> admin_pb2.DescribeClusterResponse:
        brokers = [
            admin_pb2.BrokerNode(
                id=n.node_id, address=n.address, state="unfenced", epoch=5, incarnation_id="inc"
            )
            for n in self.state.nodes
            if self.state.registered
        ]
        return admin_pb2.DescribeClusterResponse(cluster_id="c", controller_id=1, brokers=brokers)

    def describe_topics(self, request: Any) -> admin_pb2.DescribeTopicsResponse:
        return describe_topics_answer(
            request,
            self.state,
            lambda tp: {
                "leader_epoch": self.state.epochs[tp],
                "partition_epoch": 7,
                "isr": [self.state.leaders[tp]],
            },
        )

    def describe_configs(self, request: Any) -> admin_pb2.DescribeConfigsResponse:
        entry = admin_pb2.ConfigEntry(
            name="retention.ms", value="1", type="LONG", documentation="How long logs stay."
        )
        return admin_pb2.DescribeConfigsResponse(
            results=[admin_pb2.DescribeConfigsResult(name="t", entries=[entry])]
        )

    def metadata(self, request: Any) -> broker_pb2.MetadataResponse:
        brokers = [(n.node_id, n.port) for n in self.state.nodes]
        return metadata_answer(
            request, self.state, brokers, lambda tp: {"leader_epoch": self.state.epochs[tp]}
        )

    def list_offsets(self, request: Any) -> broker_pb2.ListOffsetsResponse:
        return list_offsets_answer(
            request,
            self.state,
            lambda tp, p: self._error(tp, p.current_leader_epoch),
            self.state.epochs,
        )

    def _error(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        scripted = self.state.list_offsets_errors[tp]
        if scripted:
            return scripted.pop(0)
        if self.state.leaders.get(tp) != self.node_id:
            return common_pb2.NOT_LEADER_OR_FOLLOWER
        if 0 <= current_leader_epoch < self.state.epochs[tp]:
            return common_pb2.FENCED_LEADER_EPOCH
        return common_pb2.NONE


@contextmanager
def running(leaders: dict[TopicPartition, int], nodes: int = 2) -> Iterator[FakeState]:
    state = FakeState()
    state.leaders.update(leaders)
    state.nodes = [FakeNode(state, node_id) for node_id in range(1, nodes + 1)]
    with started(node.server for node in state.nodes):
        yield state
