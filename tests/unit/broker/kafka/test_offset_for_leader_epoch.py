"""OffsetForLeaderEpoch (key 23) through kio's codec against a real ReplicaManager: end offsets
from the leader-epoch cache for consumers and followers, leader epoch checks, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from pykraft.broker.kafka.apis.offset_for_leader_epoch import APIS
from pykraft.broker.kafka.entities import build
from pykraft.metadata_log.records import PartitionChangeRecord

from ..images import ORDERS_ID
from ..replica_harness import Harness
from .data_path_calls import call, services
from .kio_wire import request_types

OFFSET_FOR_LEADER_EPOCH = APIS[0]


def _ask(
    harness: Harness,
    tmp_path: Path,
    version: int,
    epochs: dict[int, int],
    *,
    current: int = -1,
    replica_id: int = -1,
) -> dict[int, tuple[ErrorCode, int, int]]:
    types = request_types(23, version)
    partitions = tuple(
        types.OffsetForLeaderPartition(partition=p, current_leader_epoch=current, leader_epoch=e)
        for p, e in epochs.items()
    )
    topic = types.OffsetForLeaderTopic(topic="orders", partitions=partitions)
    request = build(types.OffsetForLeaderEpochRequest, replica_id=replica_id, topics=(topic,))
    kafka = services(harness.manager, tmp_path)
    response = call(OFFSET_FOR_LEADER_EPOCH, kafka, version, request)
    (result,) = response.topics
    assert result.topic == "orders"
    return {p.partition: (p.error_code, p.leader_epoch, p.end_offset) for p in result.partitions}


def _two_epochs(harness: Harness) -> None:
    harness.produce(0, [b"a", b"b", b"c"])  # epoch 0, offsets 0..2
    harness.change(PartitionChangeRecord(ORDERS_ID, 0, leader=1))  # epoch 1
    harness.produce(0, [b"d", b"e"])  # epoch 1, offsets 3..4


@pytest.mark.parametrize(("version", "replica_id"), [(2, -1), (3, -1), (3, 2), (4, -1), (4, 2)])
def test_end_offsets_come_from_the_epoch_cache(
    harness: Harness, tmp_path: Path, version: int, replica_id: int
) -> None:
    _two_epochs(harness)
    answers = _ask(harness, tmp_path, version, {0: 0}, replica_id=replica_id)
    assert answers[0] == (ErrorCode.none, 0, 3)
    assert _ask(harness, tmp_path, version, {0: 1}, current=1)[0] == (ErrorCode.none, 1, 5)
    # An epoch above every known one is unknown (Kafka: -1, -1).
    assert _ask(harness, tmp_path, version, {0: 7})[0] == (ErrorCode.none, -1, -1)


def test_an_epoch_older_than_the_log_ends_where_the_log_begins(
    harness: Harness, tmp_path: Path
) -> None:
    harness.change(PartitionChangeRecord(ORDERS_ID, 0, leader=1))  # epoch 1
    harness.produce(0, [b"a"])
    assert _ask(harness, tmp_path, 4, {0: 0})[0] == (ErrorCode.none, 0, 0)


@pytest.mark.parametrize(
    ("current", "code"),
    [(0, ErrorCode.fenced_leader_epoch), (2, ErrorCode.unknown_leader_epoch)],
)
def test_a_current_leader_epoch_other_than_the_leaders_is_refused(
    harness: Harness, tmp_path: Path, current: int, code: ErrorCode
) -> None:
    _two_epochs(harness)
    assert _ask(harness, tmp_path, 4, {0: 0}, current=current)[0] == (code, -1, -1)


def test_only_the_leader_answers(harness: Harness, tmp_path: Path) -> None:
    answers = _ask(harness, tmp_path, 4, {2: 0, 9: 0})
    assert answers == {
        2: (ErrorCode.not_leader_or_follower, -1, -1),
        9: (ErrorCode.unknown_topic_or_partition, -1, -1),
    }
