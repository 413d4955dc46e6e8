"""AdminClient and the CLI against small in-process AdminService servers over real gRPC.

Each `FakeNode` answers either as the active controller (canned responses) or NOT_CONTROLLER,
naming another node or nobody, so the client's redirect and retry loop runs for real.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from click.testing import CliRunner
from google.protobuf.message import Message

from pykraft.cli.main import cli
from pykraft.client import (
    AdminClient,
    ConfigSource,
    ElectionNotNeededError,
    ElectionResult,
    InvalidRequestError,
    KafkaConnectionError,
    NewTopic,
    NotControllerError,
    PartitionInfo,
    TopicAlreadyExistsError,
    TopicCreated,
)
from pykraft.client.routing import parse_bootstrap
from pykraft.proto import admin_pb2 as pb
from pykraft.proto import common_pb2

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
        self.requests: list[tuple[str, Message]] = []
        self._lock = threading.Lock()

    def handler(self, method: str) -> Callable[[Message, grpc.ServicerContext], Message]:
        response_type = RESPONSES[method][1]

        def handle(request: Message, context: grpc.ServicerContext) -> Message:
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


@pytest.fixture
def start_node() -> Iterator[Callable[[int], FakeNode]]:
    servers: list[grpc.Server] = []

    def start(node_id: int) -> FakeNode:
        node = FakeNode(node_id)
        server = grpc.server(ThreadPoolExecutor(max_workers=2))
        handlers = {
            method: grpc.unary_unary_rpc_method_handler(
                node.handler(method),
                request_deserializer=request_type.FromString,
                response_serializer=lambda m: m.SerializeToString(),
            )
            for method, (request_type, _) in RESPONSES.items()
        }
        server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler("pykraft.AdminService", handlers)]
        )
        node.address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
        server.start()
        servers.append(server)
        return node

    yield start
    for server in servers:
        server.stop(grace=None)


def closed_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


CLUSTER = pb.DescribeClusterResponse(
    cluster_id="c1",
    controller_id=2,
    controllers=[pb.ControllerNode(id=2, address="127.0.0.1:2", is_active=True)],
    brokers=[pb.BrokerNode(id=7, address="h:7", rack="r1", state="unfenced", epoch=3)],
)


def test_follows_not_controller_to_the_named_node_and_remembers_it(
    start_node: Callable[[int], FakeNode],
) -> None:
    follower, active = start_node(1), start_node(2)
    follower.not_controller_answers_left, follower.redirect_to = 10**6, active
    active.answers["DescribeCluster"] = CLUSTER
    with AdminClient(follower.address, retry_backoff_ms=10) as admin:
        described = admin.describe_cluster()
        admin.describe_quorum()
    assert (described.cluster_id, described.controller_id) == ("c1", 2)
    assert described.brokers[0].rack == "r1" and described.brokers[0].epoch == 3
    assert follower.methods() == ["DescribeCluster"]
    assert active.methods() == ["DescribeCluster", "DescribeQuorum"]


def test_waits_out_an_election_on_the_same_node(start_node: Callable[[int], FakeNode]) -> None:
    node = start_node(1)
    node.not_controller_answers_left = 2
    with AdminClient(node.address, retry_backoff_ms=10) as admin:
        assert admin.list_topics() == []
    assert node.methods() == ["DescribeTopics"] * 3


def test_returns_to_bootstrap_when_the_named_controller_is_down(
    start_node: Callable[[int], FakeNode],
) -> None:
    node, dead = start_node(1), FakeNode(2)
    dead.address = closed_address()
    node.not_controller_answers_left, node.redirect_to = 1, dead
    with AdminClient(node.address, retry_backoff_ms=10) as admin:
        assert admin.describe_quorum().leader_id == 0
    assert node.methods() == ["DescribeQuorum"] * 2


def test_skips_an_unreachable_bootstrap_address(start_node: Callable[[int], FakeNode]) -> None:
    node = start_node(1)
    with AdminClient([closed_address(), node.address], retry_backoff_ms=10) as admin:
        admin.delete_topics("orders")
    assert node.requests[0][1] == pb.DeleteTopicsRequest(names=["orders"], timeout_ms=15000)


def test_raises_the_last_error_when_no_controller_emerges(
    start_node: Callable[[int], FakeNode],
) -> None:
    node = start_node(1)
    node.not_controller_answers_left = 10**6
    started = time.monotonic()
    with (
        AdminClient(node.address, request_timeout_ms=300, retry_backoff_ms=10) as admin,
        pytest.raises(NotControllerError, match="no known active controller"),
    ):
        admin.describe_quorum()
    assert 0.3 <= time.monotonic() - started < 5
    assert len(node.requests) >= 2


def test_unreachable_cluster_raises_connection_error_after_the_timeout() -> None:
    started = time.monotonic()
    with (
        AdminClient(closed_address(), request_timeout_ms=300, retry_backoff_ms=10) as admin,
        pytest.raises(KafkaConnectionError, match="cannot reach"),
    ):
        admin.describe_cluster()
    assert 0.3 <= time.monotonic() - started < 5


def test_request_level_errors_raise_without_retrying(start_node: Callable[[int], FakeNode]) -> None:
    node = start_node(1)
    node.answers["DescribeQuorum"] = pb.DescribeQuorumResponse(
        header=common_pb2.ResponseHeader(error_code=common_pb2.INVALID_REQUEST, error_message="bad")
    )
    with AdminClient(node.address) as admin, pytest.raises(InvalidRequestError, match="bad"):
        admin.describe_quorum()
    assert len(node.requests) == 1


def test_create_topics_returns_results_and_raises_per_topic_errors(
    start_node: Callable[[int], FakeNode],
) -> None:
    node = start_node(1)
    node.answers["CreateTopics"] = pb.CreateTopicsResponse(
        topics=[
            pb.CreateTopicsResult(name="a", topic_id="id-a", num_partitions=3, replication_factor=1)
        ]
    )
    with AdminClient(node.address) as admin:
        created = admin.create_topics([NewTopic("a", 3, 1, {"cleanup.policy": "compact"})])
        assert created == {"a": TopicCreated("a", "id-a", 3, 1)}
        sent = node.requests[0][1]
        assert isinstance(sent, pb.CreateTopicsRequest)
        assert dict(sent.topics[0].configs) == {"cleanup.policy": "compact"}

        node.answers["CreateTopics"] = pb.CreateTopicsResponse(
            topics=[
                pb.CreateTopicsResult(
                    name="a",
                    error_code=common_pb2.TOPIC_ALREADY_EXISTS,
                    error_message="Topic 'a' already exists.",
                )
            ]
        )
        with pytest.raises(TopicAlreadyExistsError, match="'a' already exists"):
            admin.create_topic("a")


def test_describe_topics_converts_partitions_and_configs(
    start_node: Callable[[int], FakeNode],
) -> None:
    node = start_node(1)
    node.answers["DescribeTopics"] = pb.DescribeTopicsResponse(
        topics=[
            pb.TopicDescription(
                name="t",
                topic_id="id-t",
                partitions=[
                    pb.PartitionDescription(partition=1, leader=2, replicas=[2, 1], isr=[2]),
                    pb.PartitionDescription(partition=0, leader=1, leader_epoch=3, replicas=[1]),
                ],
                configs=[
                    pb.ConfigEntry(
                        name="retention.ms",
                        value="1000",
                        source=pb.CONFIG_SOURCE_DYNAMIC_TOPIC,
                        type="LONG",
                    )
                ],
            )
        ]
    )
    with AdminClient(node.address) as admin:
        (topic,) = admin.describe_topics(["t"], include_configs=True)
    assert topic.partitions == [
        PartitionInfo(0, 1, 3, [1], []),
        PartitionInfo(1, 2, 0, [2, 1], [2]),
    ]
    assert topic.configs["retention.ms"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert node.requests[0][1] == pb.DescribeTopicsRequest(names=["t"], include_configs=True)


def test_alter_configs_sends_set_and_delete_operations(
    start_node: Callable[[int], FakeNode],
) -> None:
    node = start_node(1)
    with AdminClient(node.address) as admin:
        admin.alter_configs("broker", "", set={"a": "1"}, delete=["b"], validate_only=True)
    assert node.requests[0][1] == pb.AlterConfigsRequest(
        resources=[
            pb.AlterConfigsResource(
                type=pb.CONFIG_RESOURCE_BROKER,
                name="",
                configs=[
                    pb.AlterableConfig(name="a", op=pb.ALTER_CONFIG_SET, value="1"),
                    pb.AlterableConfig(name="b", op=pb.ALTER_CONFIG_DELETE),
                ],
            )
        ],
        validate_only=True,
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


def test_elect_leaders_returns_per_partition_outcomes(
    start_node: Callable[[int], FakeNode],
) -> None:
    node = start_node(1)
    node.answers["ElectLeaders"] = ELECTED
    with AdminClient(node.address) as admin:
        results = admin.elect_leaders({"t": [0, 1]})
        admin.elect_leaders()
    assert results[0] == ElectionResult("t", 0, None)
    assert (results[1].topic, results[1].partition) == ("t", 1)
    assert isinstance(results[1].error, ElectionNotNeededError)
    assert results[1].error.message == "already leads"
    sent = [request for _, request in node.requests]
    assert isinstance(sent[0], pb.ElectLeadersRequest)
    assert [(t.topic, list(t.partitions)) for t in sent[0].topic_partitions] == [("t", [0, 1])]
    assert sent[0].election_type == pb.ELECTION_TYPE_PREFERRED
    assert isinstance(sent[1], pb.ElectLeadersRequest) and not sent[1].topic_partitions


def test_cli_leaders_elect_prints_each_partition(start_node: Callable[[int], FakeNode]) -> None:
    node = start_node(1)
    node.answers["ElectLeaders"] = ELECTED
    args = ["leaders", "elect", "--topic", "t", "--bootstrap-controller", node.address]
    as_json = CliRunner().invoke(cli, [*args, "--output", "json"])
    assert as_json.exit_code == 0, as_json.output
    assert [(r["partition"], r["result"]) for r in json.loads(as_json.output)] == [
        (0, "NONE"),
        (1, "ELECTION_NOT_NEEDED"),
    ]
    table = CliRunner().invoke(cli, args)
    assert table.exit_code == 0, table.output
    assert table.output.splitlines()[2].split()[:3] == ["t", "1", "ELECTION_NOT_NEEDED"]
    request = node.requests[0][1]
    assert isinstance(request, pb.ElectLeadersRequest)
    assert [(t.topic, list(t.partitions)) for t in request.topic_partitions] == [("t", [])]
    lone_partition = CliRunner().invoke(
        cli, ["leaders", "elect", "--partition", "0", "--bootstrap-controller", node.address]
    )
    assert lone_partition.exit_code == 2


def test_a_closed_client_refuses_requests(start_node: Callable[[int], FakeNode]) -> None:
    admin = AdminClient(start_node(1).address)
    admin.close()
    with pytest.raises(RuntimeError, match="closed"):
        admin.describe_cluster()


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, b:2,") == ["a:1", "b:2"]
    assert parse_bootstrap(["a:1,b:2", "[::1]:3"]) == ["a:1", "b:2", "[::1]:3"]
    for bad in ("", "a", "a:", ":1", "a:x", "a:0"):
        with pytest.raises(ValueError):
            parse_bootstrap(bad)


def test_cli_prints_json_from_the_active_controller(
    start_node: Callable[[int], FakeNode],
) -> None:
    follower, active = start_node(1), start_node(2)
    follower.not_controller_answers_left, follower.redirect_to = 10**6, active
    active.answers["DescribeCluster"] = CLUSTER
    result = CliRunner().invoke(
        cli, ["cluster", "describe", "--bootstrap-controller", follower.address, "--output", "json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "cluster_id": "c1",
        "controller_id": 2,
        "controllers": [{"id": 2, "address": "127.0.0.1:2", "is_active": True}],
        "brokers": [{"id": 7, "address": "h:7", "rack": "r1", "state": "unfenced"}],
    }


def test_cli_reports_kafka_errors_by_code_name(start_node: Callable[[int], FakeNode]) -> None:
    node = start_node(1)
    node.answers["CreatePartitions"] = pb.CreatePartitionsResponse(
        topics=[
            pb.CreatePartitionsResult(
                name="t",
                error_code=common_pb2.INVALID_PARTITIONS,
                error_message="Topic currently has 3 partitions, which is higher than 2.",
            )
        ]
    )
    args = ["topics", "alter", "--bootstrap-controller", node.address, "--topic", "t"]
    result = CliRunner().invoke(cli, [*args, "--partitions", "2"])
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: INVALID_PARTITIONS: Topic currently has 3 partitions, which is higher than 2.\n"
    )
    sent = node.requests[0][1]
    assert isinstance(sent, pb.CreatePartitionsRequest)
    assert [(t.name, t.count) for t in sent.topics] == [("t", 2)]
