"""AdminClient.list_offsets and `pykraft offsets` against in-process brokers over real gRPC.

Each `FakeNode` is a broker as the admin client sees one: it serves the AdminService (as a
broker forwarding to the controller would answer: DescribeCluster, DescribeTopics,
DescribeConfigs) and the BrokerService's Metadata and ListOffsets from one shared `FakeState`,
answering ListOffsets only for the partitions it leads. Tests script per-partition errors and
record every request, so they can check where each one went.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import grpc
import pytest
from click.testing import CliRunner, Result
from google.protobuf.message import Message

from pykraft.cli.main import cli
from pykraft.cli.offsets import parse_partition_ids, parse_time
from pykraft.client import (
    AdminClient,
    BrokerNotAvailableError,
    InvalidRequestError,
    ListOffsetsResult,
    UnknownTopicOrPartitionError,
)
from pykraft.client.types import TopicPartition
from pykraft.proto import admin_pb2, broker_pb2, common_pb2

T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


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

    def partitions(self, topic: str) -> list[TopicPartition]:
        return sorted(tp for tp in self.leaders if tp.topic == topic)

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
            handlers = {
                name: grpc.unary_unary_rpc_method_handler(
                    self._recorded(name, handler),
                    request_deserializer=request_type.FromString,
                    response_serializer=lambda m: m.SerializeToString(),
                )
                for name, (request_type, handler) in methods.items()
            }
            self.server.add_generic_rpc_handlers(
                [grpc.method_handlers_generic_handler(service, handlers)]
            )
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
        response = admin_pb2.DescribeTopicsResponse()
        for name in request.names or self.state.topics():
            topic = response.topics.add(name=name, topic_id=f"id-{name}")
            partitions = self.state.partitions(name)
            if not partitions:
                topic.error_code = common_pb2.UNKNOWN_TOPIC_OR_PARTITION
                topic.error_message = f"Unknown topic {name!r}."
            for tp in partitions:
                leader = self.state.leaders[tp]
                topic.partitions.add(
                    partition=tp.partition,
                    leader=leader,
                    leader_epoch=self.state.epochs[tp],
                    partition_epoch=7,
                    replicas=[leader],
                    isr=[leader],
                )
        return response

    def describe_configs(self, request: Any) -> admin_pb2.DescribeConfigsResponse:
        entry = admin_pb2.ConfigEntry(
            name="retention.ms", value="1", type="LONG", documentation="How long logs stay."
        )
        return admin_pb2.DescribeConfigsResponse(
            results=[admin_pb2.DescribeConfigsResult(name="t", entries=[entry])]
        )

    def metadata(self, request: Any) -> broker_pb2.MetadataResponse:
        response = broker_pb2.MetadataResponse(cluster_id="c")
        for n in self.state.nodes:
            response.brokers.add(id=n.node_id, host="127.0.0.1", port=n.port)
        for name in request.topics or self.state.topics():
            topic = response.topics.add(name=name)
            partitions = self.state.partitions(name)
            if not partitions:
                topic.error_code = common_pb2.UNKNOWN_TOPIC_OR_PARTITION
            for tp in partitions:
                topic.partitions.add(
                    partition=tp.partition,
                    leader_id=self.state.leaders[tp],
                    leader_epoch=self.state.epochs[tp],
                )
        return response

    def list_offsets(self, request: Any) -> broker_pb2.ListOffsetsResponse:
        response = broker_pb2.ListOffsetsResponse()
        for topic in request.topics:
            result = response.topics.add(topic=topic.topic)
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition)
                answer = result.partitions.add(partition=p.partition, timestamp=-1, offset=-1)
                code = self._error(tp, p.current_leader_epoch)
                if code != common_pb2.NONE:
                    answer.error_code = code  # type: ignore[assignment]
                    continue
                answer.leader_epoch = self.state.epochs[tp]
                self._answer(tp, p.timestamp, answer)
        return response

    def _error(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        scripted = self.state.list_offsets_errors[tp]
        if scripted:
            return scripted.pop(0)
        if self.state.leaders.get(tp) != self.node_id:
            return common_pb2.NOT_LEADER_OR_FOLLOWER
        if 0 <= current_leader_epoch < self.state.epochs[tp]:
            return common_pb2.FENCED_LEADER_EPOCH
        return common_pb2.NONE

    def _answer(
        self, tp: TopicPartition, timestamp: int, answer: broker_pb2.ListOffsetsPartitionResult
    ) -> None:
        start, stamps = self.state.log_start[tp], self.state.timestamps[tp]
        if timestamp == -2:
            answer.offset = start
        elif timestamp == -1:
            answer.offset = len(stamps)
        else:
            found = [(o, ts) for o, ts in enumerate(stamps) if o >= start and ts >= timestamp]
            if found:
                answer.offset, answer.timestamp = found[0]


@contextmanager
def running(leaders: dict[TopicPartition, int], nodes: int = 2) -> Iterator[FakeState]:
    state = FakeState()
    state.leaders.update(leaders)
    state.nodes = [FakeNode(state, node_id) for node_id in range(1, nodes + 1)]
    for node in state.nodes:
        node.server.start()
    try:
        yield state
    finally:
        for node in state.nodes:
            node.server.stop(grace=None)


def admin(state: FakeState, timeout_ms: int = 5000) -> AdminClient:
    return AdminClient(state.nodes[0].address, request_timeout_ms=timeout_ms, retry_backoff_ms=10)


def test_list_offsets_asks_each_partitions_leader() -> None:
    with running({T0: 1, T1: 2, U0: 2}) as state:
        state.timestamps[T0] = [100, 200, 300]
        state.timestamps[T1] = [150]
        state.log_start[T0] = 1
        state.epochs[T1] = 4
        with admin(state) as client:
            results = client.list_offsets({T0: "earliest", T1: "latest", U0: "latest"})
            by_time = client.list_offsets({T0: 150, T1: 151})
        assert results == {
            T0: ListOffsetsResult(offset=1, timestamp=-1, leader_epoch=0),
            T1: ListOffsetsResult(offset=1, timestamp=-1, leader_epoch=4),
            U0: ListOffsetsResult(offset=0, timestamp=-1, leader_epoch=0),
        }
        assert by_time == {
            T0: ListOffsetsResult(offset=1, timestamp=200, leader_epoch=0),
            T1: ListOffsetsResult(offset=-1, timestamp=-1, leader_epoch=4),
        }
        assert state.list_offsets_to(1) == [(T0, -2), (T0, 150)]
        assert sorted(state.list_offsets_to(2)) == [(T1, -1), (T1, 151), (U0, -1)]


def test_list_offsets_follows_a_moved_leader() -> None:
    with running({T0: 1}) as state:
        state.timestamps[T0] = [1, 2]
        with admin(state) as client:
            assert client.list_offsets({T0: "latest"})[T0].offset == 2
            with state.lock:
                state.leaders[T0] = 2
                state.epochs[T0] = 1
                state.timestamps[T0].append(3)
            assert client.list_offsets({T0: "latest"})[T0] == ListOffsetsResult(3, -1, 1)
        assert state.list_offsets_to(2) == [(T0, -1)]


def test_retriable_partition_errors_are_retried() -> None:
    with running({T0: 1}) as state:
        state.list_offsets_errors[T0] = [common_pb2.LEADER_NOT_AVAILABLE] * 2
        with admin(state) as client:
            assert client.list_offsets({T0: "earliest"})[T0].offset == 0
        assert len(state.list_offsets_to(1)) == 3


def test_a_non_retriable_partition_error_raises_at_once() -> None:
    with running({T0: 1}) as state:
        state.list_offsets_errors[T0] = [common_pb2.INVALID_REQUEST]
        with admin(state) as client, pytest.raises(InvalidRequestError):
            client.list_offsets({T0: "earliest"})
        assert len(state.list_offsets_to(1)) == 1


def test_a_partition_the_topic_lacks_fails_without_waiting() -> None:
    with running({T0: 1}) as state, admin(state, timeout_ms=10_000) as client:
        started = time.monotonic()
        with pytest.raises(UnknownTopicOrPartitionError, match="has partitions 0 to 0, not 3"):
            client.list_offsets({TopicPartition("t", 3): "latest"})
        assert time.monotonic() - started < 5


def test_an_unknown_topic_is_retried_until_the_timeout() -> None:
    with running({T0: 1}) as state, admin(state, timeout_ms=300) as client:
        started = time.monotonic()
        with pytest.raises(UnknownTopicOrPartitionError):
            client.list_offsets({TopicPartition("nope", 0): "latest"})
        assert 0.3 <= time.monotonic() - started < 5


@pytest.mark.parametrize("spec", ["first", -1, True, 1.5])
def test_a_bad_offset_spec_is_a_value_error(spec: Any) -> None:
    with running({T0: 1}) as state, admin(state) as client:
        with pytest.raises(ValueError, match="must be 'earliest', 'latest' or a timestamp"):
            client.list_offsets({T0: spec})
        assert state.requests == []  # refused before anything was sent


def test_list_offsets_needs_a_registered_broker() -> None:
    with running({T0: 1}) as state:
        state.registered = False
        with admin(state) as client, pytest.raises(BrokerNotAvailableError, match="start a"):
            client.list_offsets({T0: "latest"})


def test_nothing_asked_sends_nothing() -> None:
    with running({T0: 1}) as state, admin(state) as client:
        assert client.list_offsets({}) == {}
        assert state.requests == []


def test_typed_results_carry_every_field_of_the_answers() -> None:
    with running({T0: 1}) as state, admin(state) as client:
        (topic,) = client.describe_topics("t")
        configs = client.describe_configs("topic", "t", keys=["retention.ms"])
        cluster = client.describe_cluster()
        request = next(r for _, m, r in state.requests if m == "DescribeConfigs")
    assert topic.partitions[0].partition_epoch == 7
    assert configs["retention.ms"].documentation == "How long logs stay."
    assert list(request.resources[0].keys) == ["retention.ms"]
    assert [b.incarnation_id for b in cluster.brokers] == ["inc", "inc"]


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env={"PYKRAFT_BOOTSTRAP": ""})


def test_offsets_prints_kafka_get_offsets_lines() -> None:
    with running({T0: 1, T1: 2, U0: 1}) as state:
        state.timestamps[T0] = [10, 20]
        state.timestamps[T1] = [30]
        bootstrap = ["--bootstrap-server", state.nodes[1].address]
        latest = run("offsets", "--topic", "t", *bootstrap)
        assert latest.exit_code == 0, latest.output
        assert latest.stdout.splitlines() == ["t:0:2", "t:1:1"]
        every = run("offsets", "--time", "-2", *bootstrap)
        assert every.stdout.splitlines() == ["t:0:0", "t:1:0", "u:0:0"]
        by_time = run("offsets", "--topic", "t", "--time", "15", *bootstrap)
        assert by_time.stdout.splitlines() == ["t:0:1", "t:1:0"]
        none_yet = run("offsets", "--topic", "t", "--time", "25", "--partitions", "0", *bootstrap)
        assert none_yet.exit_code == 0 and none_yet.stdout == ""  # no record that late
        regex = run("offsets", "--topic", "[tu]", "--partitions", "0", *bootstrap)
        assert regex.stdout.splitlines() == ["t:0:2", "u:0:0"]


def test_offsets_json_lists_every_partition_asked() -> None:
    with running({T0: 1}) as state:
        state.timestamps[T0] = [10]
        result = run(
            "offsets", "--topic", "t", "--time", "99", "--output", "json",
            "--bootstrap-server", state.nodes[0].address,
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == [
            {"topic": "t", "partition": 0, "offset": -1, "timestamp": -1, "leader_epoch": 0}
        ]


def test_offsets_errors_are_one_line_with_the_kafka_code() -> None:
    with running({T0: 1}) as state:
        bootstrap = ["--bootstrap-server", state.nodes[0].address]
        unknown = run("offsets", "--topic", "nope", *bootstrap)
        assert unknown.exit_code == 1
        assert unknown.stderr == "Error: UNKNOWN_TOPIC_OR_PARTITION: Unknown topic 'nope'.\n"
        unmatched = run("offsets", "--topic", "x.*", *bootstrap)
        assert unmatched.exit_code == 1
        assert unmatched.stderr.startswith("Error: UNKNOWN_TOPIC_OR_PARTITION: no topic-partition")
        for args, message in [
            (["--time", "max-timestamp"], "malformed time 'max-timestamp'"),
            (["--time", "-3"], "malformed time '-3'"),
            (["--partitions", "0,a"], "expected partition ids like 0,1,2"),
            (["--topic", "("], "not a regular expression"),
        ]:
            result = run("offsets", *args, *bootstrap)
            assert result.exit_code == 2, args
            assert message in result.stderr
            assert "Traceback" not in result.output


def test_parse_time_and_partition_ids() -> None:
    assert [parse_time(t) for t in ["earliest", "-2", "LATEST", "-1", "0", "1700"]] == [
        "earliest", "earliest", "latest", "latest", 0, 1700,
    ]  # fmt: skip
    assert parse_partition_ids(" 2,0,2 ") == [0, 2]
    with pytest.raises(ValueError):
        parse_partition_ids(",")
