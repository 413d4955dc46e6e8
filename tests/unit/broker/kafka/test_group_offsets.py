"""FindCoordinator, OffsetCommit and OffsetFetch over Kafka's protocol, through kio's codec, on
the real GroupHandlers and shard: every version we advertise encodes, and the answers are
Kafka's (Kafka addresses, error codes where each version puts them)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from pykraft.broker.kafka.apis.group_offsets import APIS
from tests.unit.broker.kafka.group_harness import FakeManager, GroupWorld, call, group_image, part

FIND, COMMIT, FETCH = APIS


def _versions(api: Any) -> range:
    return range(api.version_min, api.version_max + 1)


@pytest.mark.parametrize("version", _versions(FIND))
def test_find_coordinator_answers_the_kafka_address(version: int) -> None:
    answer = call(FIND, version, GroupWorld().services(), key="g", key_type=0)
    assert answer.error_code == ErrorCode.none
    assert (answer.node_id, answer.host, answer.port) == (1, "127.0.0.1", 9092)


def test_find_coordinator_without_a_kafka_listener_is_not_available() -> None:
    world = GroupWorld(manager=FakeManager(group_image(kafka_listener=False)))
    answer = call(FIND, 3, world.services(), key="g", key_type=0)
    assert answer.error_code == ErrorCode.coordinator_not_available
    assert answer.node_id == -1


def test_find_coordinator_refuses_transaction_keys() -> None:
    answer = call(FIND, 3, GroupWorld().services(), key="tx", key_type=1)
    assert answer.error_code == ErrorCode.invalid_request


def _commit(world: GroupWorld, version: int, offsets: dict[int, int], **fields: Any) -> Any:
    partitions = tuple(
        part(
            COMMIT,
            version,
            "OffsetCommitRequestPartition",
            partition_index=p,
            committed_offset=o,
            committed_leader_epoch=4,
            committed_metadata="m",
        )
        for p, o in offsets.items()
    )
    topic = part(COMMIT, version, "OffsetCommitRequestTopic", name="orders", partitions=partitions)
    fields = {"generation_id_or_member_epoch": -1, "member_id": "", **fields}
    return call(
        COMMIT,
        version,
        world.services(),
        group_id="g",
        retention_time=timedelta(milliseconds=-1),
        topics=(topic,),
        **fields,
    )


def _fetch(world: GroupWorld, version: int, partitions: tuple[int, ...] | None) -> Any:
    topics = None
    if partitions is not None:
        topics = (
            part(
                FETCH,
                version,
                "OffsetFetchRequestTopic",
                name="orders",
                partition_indexes=partitions,
            ),
        )
    return call(FETCH, version, world.services(), group_id="g", topics=topics, require_stable=False)


def _codes(answer: Any) -> dict[int, ErrorCode]:
    return {p.partition_index: p.error_code for t in answer.topics for p in t.partitions}


@pytest.mark.parametrize("version", _versions(COMMIT))
def test_a_simple_consumer_commits_and_fetches_at_every_version(version: int) -> None:
    world = GroupWorld()
    answer = _commit(world, version, {0: 10, 2: 30, 7: 1})
    assert _codes(answer) == {
        0: ErrorCode.none,
        2: ErrorCode.none,
        7: ErrorCode.unknown_topic_or_partition,
    }
    fetch_version = min(version - 1, FETCH.version_max)
    fetched = _fetch(world, fetch_version, (0, 1, 2))
    got = {p.partition_index: p.committed_offset for t in fetched.topics for p in t.partitions}
    assert got == {0: 10, 1: -1, 2: 30}


@pytest.mark.parametrize("version", range(2, FETCH.version_max + 1))
def test_fetch_all_topics_with_null(version: int) -> None:
    world = GroupWorld()
    _commit(world, 8, {1: 5})
    fetched = _fetch(world, version, None)
    assert [(t.name, [p.committed_offset for p in t.partitions]) for t in fetched.topics] == [
        ("orders", [5])
    ]
    if version >= 5:
        assert fetched.topics[0].partitions[0].committed_leader_epoch == 4


def test_commit_without_a_member_id_to_a_group_with_members_is_refused() -> None:
    world = GroupWorld()
    world.join_consumer_member("g", "m1")
    answer = _commit(world, 8, {0: 1, 1: 2})
    assert set(_codes(answer).values()) == {ErrorCode.unknown_member_id}
    assert set(_codes(_commit(world, 8, {0: 1}, member_id="zz")).values()) == {
        ErrorCode.unknown_member_id
    }


def test_fetch_errors_go_per_partition_in_v1_and_on_top_from_v2() -> None:
    world = GroupWorld(serving=False)
    v1 = _fetch(world, 1, (0, 1))
    assert set(_codes(v1).values()) == {ErrorCode.coordinator_not_available}
    v7 = _fetch(world, 7, (0, 1))
    assert v7.error_code == ErrorCode.coordinator_not_available
    assert set(_codes(v7).values()) == {ErrorCode.none}
    assert {p.committed_offset for t in v7.topics for p in t.partitions} == {-1}
