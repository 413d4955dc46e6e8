"""In-process AdminService servers over real gRPC, for AdminClient's and the CLI's tests.

Each `FakeNode` answers either as the active controller (canned responses) or NOT_CONTROLLER,
naming another node or nobody, so the client's redirect and retry loop runs for real.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import grpc
from google.protobuf.message import Message

from pykraft.proto import admin_pb2 as pb
from pykraft.proto import common_pb2
from tests.unit.client.fake_grpc import unary_service

RESPONSES: dict[str, tuple[type[Message], type[Message]]] = {
    "CreateTopics": (pb.CreateTopicsRequest, pb.CreateTopicsResponse),
    "DeleteTopics": (pb.DeleteTopicsRequest, pb.DeleteTopicsResponse),
    "CreatePartitions": (pb.CreatePartitionsRequest, pb.CreatePartitionsResponse),
    "DescribeTopics": (pb.DescribeTopicsRequest, pb.DescribeTopicsResponse),
    "DescribeConfigs": (pb.DescribeConfigsRequest, pb.DescribeConfigsResponse),
    "IncrementalAlterConfigs": (pb.AlterConfigsRequest, pb.AlterConfigsResponse),
    "DescribeCluster": (pb.DescribeClusterRequest, pb.DescribeClusterResponse),
    "DescribeQuorum": (pb.DescribeQuorumRequest, pb.DescribeQuorumResponse),
    "ElectLeaders": (pb.ElectLeadersRequest, pb.ElectLeadersResponse),
}


class FakeNode:
    """One controller's AdminService; by default the active controller with empty answers."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.address = ""
        self.not_controller_answers_left = 0  # answer NOT_CONTROLLER this often, then serve
        self.redirect_to: FakeNode | None = None  # the node NOT_CONTROLLER names (None: nobody)
        self.answers: dict[str, Message] = {}
        self.answer_delay_s = 0.0  # how long each answer takes
        self.requests: list[tuple[str, Message]] = []
        self._lock = threading.Lock()

    def handler(self, method: str) -> Callable[[Message, grpc.ServicerContext], Message]:
        response_type = RESPONSES[method][1]

        def handle(request: Message, context: grpc.ServicerContext) -> Message:
            time.sleep(self.answer_delay_s)
            with self._lock:
                self.requests.append((method, request))
                if self.not_controller_answers_left > 0:
                    self.not_controller_answers_left -= 1
                    return response_type(header=self._not_controller(self.redirect_to))
                return self.answers.get(method, response_type())

        return handle

    def methods(self) -> list[str]:
        return [method for method, _ in self.requests]

    @staticmethod
    def _not_controller(active: FakeNode | None) -> common_pb2.ResponseHeader:
        return common_pb2.ResponseHeader(
            error_code=common_pb2.NOT_CONTROLLER,
            error_message="not the active controller",
            controller_id=active.node_id if active else -1,
            controller_address=active.address if active else "",
        )


@contextmanager
def serving() -> Iterator[Callable[[int], FakeNode]]:
    """A function that starts a FakeNode with the given id; every node stops at exit."""
    servers: list[grpc.Server] = []

    def start(node_id: int) -> FakeNode:
        node = FakeNode(node_id)
        server = grpc.server(ThreadPoolExecutor(max_workers=2))
        methods = {method: (types[0], node.handler(method)) for method, types in RESPONSES.items()}
        server.add_generic_rpc_handlers([unary_service("pykraft.AdminService", methods)])
        node.address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
        server.start()
        servers.append(server)
        return node

    try:
        yield start
    finally:
        for server in servers:
            server.stop(grace=None)


CLUSTER = pb.DescribeClusterResponse(
    cluster_id="c1",
    controller_id=2,
    controllers=[pb.ControllerNode(id=2, address="127.0.0.1:2", is_active=True)],
    brokers=[pb.BrokerNode(id=7, address="h:7", rack="r1", state="unfenced", epoch=3)],
)


ELECTED = pb.ElectLeadersResponse(
    results=[
        pb.ElectLeadersResult(topic="t", partition=0),
        pb.ElectLeadersResult(
            topic="t",
            partition=1,
            error_code=common_pb2.ELECTION_NOT_NEEDED,
            error_message="already leads",
        ),
    ]
)


def follower_and_active(start: Callable[[int], FakeNode]) -> tuple[FakeNode, FakeNode]:
    """Starts nodes 1 and 2 with `start`: node 1 a follower answering every call NOT_CONTROLLER
    naming node 2, the active controller, which answers DescribeCluster with CLUSTER."""
    follower, active = start(1), start(2)
    follower.not_controller_answers_left, follower.redirect_to = 10**6, active
    active.answers["DescribeCluster"] = CLUSTER
    return follower, active
