"""Preferred leader election: the ElectLeaders decision and the automatic rebalance."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest

from pykraft.metadata_log.image import PartitionRegistration
from pykraft.metadata_log.records import PartitionChangeRecord
from pykraft.proto import admin_pb2, common_pb2
from pykraft.quorum.controller import elections
from pykraft.quorum.controller.elections import balance_partition_leaders, elect_leaders
from tests.unit.quorum.controller.conftest import after, broker, brokers, image_with, topic

T = UUID(int=1)
U = UUID(int=2)

# Partition 0 is led by its preferred replica; 1 by another ISR member with the preferred one in
# the ISR; 2 by another with the preferred replica (3) out of the ISR; 3 by 2 while preferred 4
# is fenced.
BASE = image_with(
    *brokers(1, 2, 3),
    broker(4, fenced=True),
    *topic(
        "t",
        T,
        [
            (1, 2, 3),
            PartitionRegistration((2, 3, 1), (1, 2, 3), 1, 1, 1),
            PartitionRegistration((3, 1, 2), (1, 2), 1, 1, 1),
            PartitionRegistration((4, 2, 1), (1, 2, 4), 2, 1, 1),
        ],
    ),
    *topic("u", U, [PartitionRegistration((3, 1), (1, 3), 1, 1, 1)]),
)


def _request(*items: tuple[str, list[int]]) -> admin_pb2.ElectLeadersRequest:
    return admin_pb2.ElectLeadersRequest(
        topic_partitions=[
            admin_pb2.ElectLeadersPartitions(topic=name, partitions=ids) for name, ids in items
        ]
    )


def _codes(response: admin_pb2.ElectLeadersResponse) -> dict[tuple[str, int], int]:
    return {(r.topic, r.partition): r.error_code for r in response.results}


def test_each_partition_gets_kafkas_answer() -> None:
    result = elect_leaders(BASE, _request(("t", [0, 1, 2, 3, 7]), ("nope", [0])))
    assert result.response.header.error_code == common_pb2.NONE
    assert _codes(result.response) == {
        ("t", 0): common_pb2.ELECTION_NOT_NEEDED,
        ("t", 1): common_pb2.NONE,
        ("t", 2): common_pb2.PREFERRED_LEADER_NOT_AVAILABLE,
        ("t", 3): common_pb2.PREFERRED_LEADER_NOT_AVAILABLE,
        ("t", 7): common_pb2.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): common_pb2.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert result.records == (PartitionChangeRecord(T, 1, leader=2),)


def test_the_election_moves_leadership_and_bumps_the_leader_epoch() -> None:
    image = after(BASE, elect_leaders(BASE, _request(("t", [1]))))
    moved = image.topics.by_id[T].partitions[1]
    assert (moved.leader, moved.leader_epoch, moved.isr) == (2, 2, (1, 2, 3))
    again = elect_leaders(image, _request(("t", [1])))
    assert again.records == ()
    assert _codes(again.response) == {("t", 1): common_pb2.ELECTION_NOT_NEEDED}


def test_no_partitions_named_means_every_partition_and_a_topic_alone_all_of_its_own() -> None:
    everything = elect_leaders(BASE, admin_pb2.ElectLeadersRequest())
    assert list(_codes(everything.response)) == [("t", 0), ("t", 1), ("t", 2), ("t", 3), ("u", 0)]
    assert everything.records == (
        PartitionChangeRecord(T, 1, leader=2),
        PartitionChangeRecord(U, 0, leader=3),
    )
    one_topic = elect_leaders(BASE, _request(("u", []), ("u", [0]), ("gone", [])))
    assert _codes(one_topic.response) == {
        ("u", 0): common_pb2.NONE,
        ("gone", -1): common_pb2.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert one_topic.records == (PartitionChangeRecord(U, 0, leader=3),)


def test_an_unsupported_election_type_fails_the_request() -> None:
    request = admin_pb2.ElectLeadersRequest(election_type=1)  # type: ignore[arg-type]
    result = elect_leaders(BASE, request)
    assert result.records == ()
    assert result.response.header.error_code == common_pb2.INVALID_REQUEST


def test_the_rebalance_elects_every_imbalanced_partition_up_to_its_bound() -> None:
    assert balance_partition_leaders(BASE).records == (
        PartitionChangeRecord(T, 1, leader=2),
        PartitionChangeRecord(U, 0, leader=3),
    )
    assert balance_partition_leaders(BASE, elections_max=1).records == (
        PartitionChangeRecord(T, 1, leader=2),
    )
    balanced = after(BASE, balance_partition_leaders(BASE))
    assert balance_partition_leaders(balanced).records == ()


def test_the_rebalance_looks_only_at_partitions_their_preferred_replica_does_not_lead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At a million partitions a scan of every partition held the controller thread for seconds
    every leader.imbalance.check.interval: the image keeps the imbalanced ones apart."""
    balanced = [(1, 2, 3)] * 2000
    image = image_with(
        *brokers(1, 2, 3),
        *topic("t", T, [*balanced, PartitionRegistration((2, 3, 1), (1, 2, 3), 1, 1, 1)]),
    )
    looked_at: list[int] = []
    real = elections.preferred_election

    def counted(*args: Any) -> Any:
        looked_at.append(args[1])
        return real(*args)

    monkeypatch.setattr(elections, "preferred_election", counted)
    assert balance_partition_leaders(image).records == (PartitionChangeRecord(T, 2000, leader=2),)
    assert looked_at == [2000]
