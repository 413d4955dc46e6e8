"""AdminClient's consumer-group methods against in-process brokers over real gRPC
(fake_group_admin): where each request goes, what it carries, and how answers and errors map."""

from __future__ import annotations

import time

import pytest

from pykraft.client.admin import AdminClient
from pykraft.client.admin_types import (
    ConsumerGroupListing,
    GroupState,
    MemberDescription,
    Node,
)
from pykraft.client.errors import (
    BrokerNotAvailableError,
    GroupIdNotFoundError,
    InvalidRequestError,
    KafkaConnectionError,
    NonEmptyGroupError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from pykraft.client.types import OffsetAndMetadata, TopicPartition
from pykraft.proto import common_pb2
from tests.unit.client.fake_group_admin import FakeGroup, FakeMember, GroupCluster, running

T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def admin(cluster: GroupCluster, timeout_ms: int = 5000) -> AdminClient:
    return AdminClient(cluster.bootstrap, request_timeout_ms=timeout_ms, retry_backoff_ms=10)


def test_list_asks_every_live_broker_and_merges_their_groups() -> None:
    with running(nodes=3) as cluster:
        cluster.groups["b"] = FakeGroup(coordinator=1, state="Stable")
        cluster.groups["a"] = FakeGroup(coordinator=2)
        cluster.groups["c"] = FakeGroup(coordinator=3, state="Reconciling")
        with admin(cluster) as client:
            listed = client.list_consumer_groups()
        assert listed == [
            ConsumerGroupListing("a", GroupState.EMPTY),
            ConsumerGroupListing("b", GroupState.STABLE),
            ConsumerGroupListing("c", GroupState.RECONCILING),
        ]
        for node_id in (1, 2, 3):
            assert len(cluster.requests_to("ListGroups", node_id)) == 1


def test_list_sends_the_state_filter_and_checks_state_names() -> None:
    with running(nodes=2) as cluster:
        cluster.groups["a"] = FakeGroup(coordinator=1, state="Stable")
        cluster.groups["b"] = FakeGroup(coordinator=2)
        with admin(cluster) as client:
            assert client.list_consumer_groups(["stable"]) == [
                ConsumerGroupListing("a", GroupState.STABLE)
            ]
            with pytest.raises(ValueError, match="unknown group state 'busy'; valid states"):
                client.list_consumer_groups(["Stable", "busy"])
        sent = cluster.requests_to("ListGroups")
        assert [list(r.states_filter) for r in sent] == [["Stable"], ["Stable"]]


def test_list_skips_fenced_brokers() -> None:
    with running(nodes=2) as cluster:
        cluster.groups["a"] = FakeGroup(coordinator=1)
        cluster.fenced.add(2)
        with admin(cluster) as client:
            assert [g.group_id for g in client.list_consumer_groups()] == ["a"]
        assert cluster.requests_to("ListGroups", 2) == []


def test_list_asks_a_loading_broker_again_and_no_other() -> None:
    with running(nodes=2) as cluster:
        cluster.groups["a"] = FakeGroup(coordinator=1)
        cluster.groups["b"] = FakeGroup(coordinator=2)
        cluster.header_errors[("ListGroups", 2)] = [common_pb2.COORDINATOR_LOAD_IN_PROGRESS] * 2
        with admin(cluster) as client:
            assert [g.group_id for g in client.list_consumer_groups()] == ["a", "b"]
        assert len(cluster.requests_to("ListGroups", 1)) == 1
        assert len(cluster.requests_to("ListGroups", 2)) == 3


def test_list_raises_a_brokers_non_retriable_error() -> None:
    with running(nodes=2) as cluster:
        cluster.header_errors[("ListGroups", 2)] = [common_pb2.INVALID_REQUEST]
        with admin(cluster) as client, pytest.raises(InvalidRequestError):
            client.list_consumer_groups()


def test_list_never_returns_a_partial_list_when_a_broker_is_unreachable() -> None:
    with running(nodes=2) as cluster:
        cluster.groups["a"] = FakeGroup(coordinator=1)
        cluster.nodes[1].server.stop(grace=None)
        started = time.monotonic()
        with admin(cluster, timeout_ms=500) as client, pytest.raises(KafkaConnectionError):
            client.list_consumer_groups()
        assert time.monotonic() - started < 5
        assert len(cluster.requests_to("ListGroups", 1)) == 1  # its answer was kept


def test_group_calls_need_a_registered_broker() -> None:
    with running(nodes=1) as cluster:
        cluster.registered = False
        with admin(cluster) as client:
            with pytest.raises(BrokerNotAvailableError, match="start a broker"):
                client.list_consumer_groups()
            with pytest.raises(BrokerNotAvailableError, match="start a broker"):
                client.describe_consumer_groups("g")


def test_describe_maps_every_field_and_names_the_coordinator() -> None:
    with running(nodes=2) as cluster:
        cluster.groups["g"] = FakeGroup(
            coordinator=2,
            state="Reconciling",
            group_epoch=7,
            assignment_epoch=6,
            assignor="range",
            members=[
                FakeMember("m1", [T0, U0], target_assignment=[T0], member_epoch=6),
                FakeMember("m2", [], target_assignment=[U0], instance_id="i2", client_id="c2"),
            ],
        )
        with admin(cluster) as client:
            described = client.describe_consumer_groups(["g", "g"])
        group = described["g"]
        assert list(described) == ["g"]
        assert (group.state, group.group_epoch, group.assignment_epoch, group.assignor) == (
            GroupState.RECONCILING, 7, 6, "range",
        )  # fmt: skip
        assert group.coordinator == Node(2, cluster.nodes[1].address)
        assert group.members == [
            MemberDescription("m1", None, "client-1", "/127.0.0.1", frozenset({T0, U0}),
                              frozenset({T0}), 6),
            MemberDescription("m2", "i2", "c2", "/127.0.0.1", frozenset(), frozenset({U0}), 3),
        ]  # fmt: skip
        (request,) = cluster.requests_to("ConsumerGroupDescribe")
        assert list(request.group_ids) == ["g"]
        assert cluster.requests_to("ConsumerGroupDescribe", 2) == [request]


def test_describe_sends_one_request_per_group_and_raises_an_unknown_one() -> None:
    with running(nodes=2) as cluster:
        cluster.groups["a"] = FakeGroup(coordinator=1)
        cluster.groups["b"] = FakeGroup(coordinator=2)
        with admin(cluster) as client:
            assert list(client.describe_consumer_groups(["b", "a"])) == ["b", "a"]
            with pytest.raises(GroupIdNotFoundError, match="Group nope not found"):
                client.describe_consumer_groups(["a", "nope"])
        assert [list(r.group_ids) for r in cluster.requests_to("ConsumerGroupDescribe")] == [
            ["b"], ["a"], ["a"], ["nope"],
        ]  # fmt: skip


def test_describe_follows_a_moved_coordinator() -> None:
    with running(nodes=2) as cluster:
        cluster.groups["g"] = FakeGroup(coordinator=1)
        with admin(cluster) as client:
            assert client.describe_consumer_groups("g")["g"].coordinator.id == 1
            with cluster.lock:
                cluster.groups["g"].coordinator = 2
            assert client.describe_consumer_groups("g")["g"].coordinator.id == 2
        assert len(cluster.requests_to("ConsumerGroupDescribe", 1)) == 2  # one NOT_COORDINATOR
        assert len(cluster.requests_to("ConsumerGroupDescribe", 2)) == 1


def test_list_group_offsets_of_every_partition_or_of_some() -> None:
    with running(nodes=2) as cluster:
        cluster.add_topic("t", 2)
        cluster.groups["g"] = FakeGroup(
            coordinator=2, offsets={T0: (5, "meta", 3), U0: (9, "", -1)}
        )
        with admin(cluster) as client:
            every = client.list_consumer_group_offsets("g")
            some = client.list_consumer_group_offsets("g", [T0, T1])
            assert client.list_consumer_group_offsets("g", []) == {}
            assert client.list_consumer_group_offsets("unknown") == {}
        assert every == {T0: OffsetAndMetadata(5, "meta", 3), U0: OffsetAndMetadata(9, "", None)}
        assert some == {T0: OffsetAndMetadata(5, "meta", 3)}  # t-1 has none
        fetches = cluster.requests_to("OffsetFetch")
        asked = [(r.group_id, [(t.topic, list(t.partitions)) for t in r.topics]) for r in fetches]
        assert asked == [("g", []), ("g", [("t", [0, 1])]), ("unknown", [])]


def test_alter_group_offsets_commits_as_an_admin() -> None:
    with running(nodes=2) as cluster:
        cluster.add_topic("t", 2)
        cluster.groups["g"] = FakeGroup(coordinator=2)
        with admin(cluster) as client:
            client.alter_consumer_group_offsets(
                "g", {T1: OffsetAndMetadata(4), T0: OffsetAndMetadata(2, "m", 7)}
            )
            client.alter_consumer_group_offsets("g", {})
        (request,) = cluster.requests_to("OffsetCommit")
        assert (request.group_id, request.member_id, request.member_epoch) == ("g", "", -1)
        assert [
            (
                t.topic,
                p.partition,
                p.committed_offset,
                p.committed_leader_epoch,
                p.committed_metadata,
            )
            for t in request.topics
            for p in t.partitions
        ] == [("t", 0, 2, 7, "m"), ("t", 1, 4, -1, "")]
        assert cluster.groups["g"].offsets == {T0: (2, "m", 7), T1: (4, "", -1)}


def test_alter_group_offsets_errors() -> None:
    with running(nodes=1) as cluster:
        cluster.add_topic("t", 1)
        cluster.groups["busy"] = FakeGroup(coordinator=1, state="Stable", members=[FakeMember("m")])
        with admin(cluster) as client:
            with pytest.raises(UnknownMemberIdError):
                client.alter_consumer_group_offsets("busy", {T0: OffsetAndMetadata(1)})
            with pytest.raises(UnknownTopicOrPartitionError):
                client.alter_consumer_group_offsets("g", {U0: OffsetAndMetadata(1)})
            with pytest.raises(ValueError, match="negative for t-0"):
                client.alter_consumer_group_offsets("g", {T0: OffsetAndMetadata(-1)})
        assert cluster.groups["busy"].offsets == {}
        assert len(cluster.requests_to("OffsetCommit")) == 2  # not the negative one


def test_delete_tries_every_group_then_raises_the_first_error() -> None:
    with running(nodes=2) as cluster:
        cluster.groups["busy"] = FakeGroup(coordinator=1, members=[FakeMember("m")])
        cluster.groups["a"] = FakeGroup(coordinator=1)
        cluster.groups["b"] = FakeGroup(coordinator=2)
        with admin(cluster) as client:
            with pytest.raises(NonEmptyGroupError, match="busy is not empty"):
                client.delete_consumer_groups(["a", "busy", "nope", "b"])
            with pytest.raises(GroupIdNotFoundError):
                client.delete_consumer_groups("a")
        assert sorted(cluster.groups) == ["busy"]
        deletes = cluster.requests_to("DeleteGroups")
        assert [list(r.group_ids) for r in deletes] == [["a"], ["busy"], ["nope"], ["b"], ["a"]]
        assert [list(r.group_ids) for r in cluster.requests_to("DeleteGroups", 2)] == [["b"]]


def test_group_requests_retry_a_coordinator_that_is_loading() -> None:
    with running(nodes=1) as cluster:
        cluster.groups["g"] = FakeGroup(coordinator=1)
        cluster.header_errors[("OffsetFetch", 1)] = [common_pb2.COORDINATOR_LOAD_IN_PROGRESS]
        with admin(cluster) as client:
            assert client.list_consumer_group_offsets("g") == {}
        assert len(cluster.requests_to("OffsetFetch")) == 2
