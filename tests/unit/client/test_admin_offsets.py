"""AdminClient.list_offsets against in-process brokers over real gRPC (`fake_offsets_cluster`:
each answers ListOffsets only for the partitions it leads, with scripted per-partition errors,
and records every request, so tests can check where each one went)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from pykraft.client import (
    AdminClient,
    BrokerNotAvailableError,
    InvalidRequestError,
    ListOffsetsResult,
    UnknownTopicOrPartitionError,
)
from pykraft.client.types import TopicPartition
from pykraft.proto import common_pb2
from tests.unit.client.fake_offsets_cluster import FakeState, running

T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


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
