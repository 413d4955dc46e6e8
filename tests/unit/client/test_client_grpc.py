"""AdminClient against small in-process AdminService servers over real gRPC
(`fake_controller.FakeNode`), so its redirect and retry loop runs for real."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import pytest

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
from tests.unit.client.fake_controller import ELECTED, FakeNode, follower_and_active


def closed_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_follows_not_controller_to_the_named_node_and_remembers_it(
    start_node: Callable[[int], FakeNode],
) -> None:
    follower, active = follower_and_active(start_node)
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


def test_an_attempt_cut_short_by_the_deadline_reports_the_previous_answer(
    start_node: Callable[[int], FakeNode],
) -> None:
    # Each NOT_CONTROLLER answer takes 300 ms of an attempt's 500 (half the request's 1000), so
    # the last attempt only has what is left and is cut off by the request's own deadline: that
    # says nothing about the cluster, and the error raised is what the last answer said.
    node = start_node(1)
    node.not_controller_answers_left = 10**6
    node.answer_delay_s = 0.3
    with (
        AdminClient(node.address, request_timeout_ms=1000, retry_backoff_ms=10) as admin,
        pytest.raises(NotControllerError, match="no known active controller"),
    ):
        admin.describe_quorum()


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
