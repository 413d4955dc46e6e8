"""ListOffsets (key 2) through kio's codec against a real ReplicaManager: earliest, latest and
by time for every version, the leader epoch checks (v4+), errors per partition."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from pykraft.broker.kafka.apis.list_offsets import APIS
from pykraft.broker.kafka.entities import build
from pykraft.metadata_log.records import PartitionChangeRecord

from ..images import ORDERS_ID
from ..replica_harness import Harness
from .data_path_calls import CURRENT_LEADER_EPOCHS, call, services
from .kio_wire import request_types

LIST_OFFSETS = APIS[0]
EARLIEST, LATEST = -2, -1


def _request(version: int, timestamps: dict[int, int], *, leader_epoch: int = -1) -> Any:
    types = request_types(2, version)
    partitions = tuple(
        build(
            types.ListOffsetsPartition,
            partition_index=p,
            current_leader_epoch=leader_epoch,
            timestamp=t,
        )
        for p, t in timestamps.items()
    )
    topic = types.ListOffsetsTopic(name="orders", partitions=partitions)
    return build(types.ListOffsetsRequest, replica_id=-1, isolation_level=0, topics=(topic,))


def _ask(harness: Harness, tmp_path: Path, version: int, request: Any) -> dict[int, Any]:
    response = call(LIST_OFFSETS, services(harness.manager, tmp_path), version, request)
    (topic,) = response.topics
    assert topic.name == "orders"
    return {p.partition_index: p for p in topic.partitions}


@pytest.mark.parametrize("version", range(1, 8))
def test_earliest_latest_and_by_time(harness: Harness, tmp_path: Path, version: int) -> None:
    harness.produce(0, [b"a", b"b", b"c"])  # timestamps 1000, 1001, 1002
    request = _request(version, {0: EARLIEST})
    earliest = _ask(harness, tmp_path, version, request)[0]
    assert (earliest.error_code, earliest.offset) == (ErrorCode.none, 0)
    latest = _ask(harness, tmp_path, version, _request(version, {0: LATEST}))[0]
    assert (latest.error_code, latest.offset) == (ErrorCode.none, 3)
    by_time = _ask(harness, tmp_path, version, _request(version, {0: 1_001}))[0]
    assert (by_time.offset, by_time.timestamp) == (1, 1_001)
    too_late = _ask(harness, tmp_path, version, _request(version, {0: 5_000}))[0]
    assert (too_late.error_code, too_late.offset, too_late.timestamp) == (ErrorCode.none, -1, -1)
    if version >= 4:
        assert earliest.leader_epoch == latest.leader_epoch == 0


@pytest.mark.parametrize(("epoch", "code"), CURRENT_LEADER_EPOCHS)
def test_a_leader_epoch_other_than_the_current_is_refused(
    harness: Harness, tmp_path: Path, epoch: int, code: ErrorCode
) -> None:
    harness.change(PartitionChangeRecord(ORDERS_ID, 0, leader=1))  # leader epoch 1
    result = _ask(harness, tmp_path, 4, _request(4, {0: LATEST}, leader_epoch=epoch))[0]
    assert result.error_code == code
    assert result.leader_epoch == (1 if code == ErrorCode.none else -1)


def test_errors_per_partition(harness: Harness, tmp_path: Path) -> None:
    request = _request(7, {2: LATEST, 9: LATEST, 0: -3})
    results = _ask(harness, tmp_path, 7, request)
    assert results[2].error_code == ErrorCode.not_leader_or_follower
    assert results[9].error_code == ErrorCode.unknown_topic_or_partition
    assert results[0].error_code == ErrorCode.invalid_request
    for result in results.values():
        assert (result.offset, result.timestamp, result.leader_epoch) == (-1, -1, -1)
