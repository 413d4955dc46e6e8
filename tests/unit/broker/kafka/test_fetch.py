"""Fetch (key 1) through kio's codec against a real ReplicaManager: records as stored for every
version that names topics, Kafka's answers to sessions, isolation levels, epochs and replicas."""

from __future__ import annotations

import datetime
import time
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from pykraft.broker.kafka.apis.fetch import APIS
from pykraft.broker.kafka.entities import build
from pykraft.broker.replica_selector import RACK_AWARE_SELECTOR
from pykraft.metadata_log.records import PartitionChangeRecord

from ..images import ORDERS_ID
from ..replica_harness import Harness, record_values
from .data_path_calls import CURRENT_LEADER_EPOCHS, call, services
from .kio_wire import request_types

FETCH = APIS[0]


def _request(
    version: int,
    offsets: dict[int, int],
    *,
    session: tuple[int, int] = (0, -1),
    isolation_level: int = 0,
    replica_id: int = -1,
    wait_ms: int = 0,
    min_bytes: int = 0,
    bytes_max: int = 1 << 20,
    rack: str = "",
    **partition_fields: int,
) -> Any:
    types = request_types(1, version)
    partitions = tuple(
        types.FetchPartition(
            partition=p, fetch_offset=o, partition_max_bytes=1 << 20, **partition_fields
        )
        for p, o in offsets.items()
    )
    return build(
        types.FetchRequest,
        replica_id=replica_id,
        max_wait=datetime.timedelta(milliseconds=wait_ms),
        min_bytes=min_bytes,
        max_bytes=bytes_max,
        isolation_level=isolation_level,
        topics=(types.FetchTopic(topic="orders", partitions=partitions),),
        session_id=session[0],
        session_epoch=session[1],
        forgotten_topics_data=(),
        rack_id=rack,
    )


def _partitions(response: Any) -> dict[int, Any]:
    assert getattr(response, "error_code", ErrorCode.none) == ErrorCode.none  # v7+
    (topic,) = response.responses
    assert topic.topic == "orders"
    return {p.partition_index: p for p in topic.partitions}


@pytest.mark.parametrize("version", range(4, 13))
def test_records_are_read_up_to_the_high_watermark(
    harness: Harness, tmp_path: Path, version: int
) -> None:
    harness.produce(0, [b"a", b"b"])
    harness.produce(0, [b"c"])
    response = call(FETCH, services(harness.manager, tmp_path), version, _request(version, {0: 1}))
    if version >= 7:
        assert response.session_id == 0
    result = _partitions(response)[0]
    assert result.error_code == ErrorCode.none
    assert (result.high_watermark, result.last_stable_offset) == (3, 3)
    assert result.aborted_transactions is None  # read_uncommitted
    if version >= 5:
        assert result.log_start_offset == 0
    if version >= 11:
        assert result.preferred_read_replica == -1
    # Whole batches: the one holding offset 1 starts at 0.
    assert record_values(result.records) == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_a_fetch_waits_up_to_max_wait_for_min_bytes(harness: Harness, tmp_path: Path) -> None:
    request = _request(12, {0: 0}, wait_ms=150, min_bytes=1)
    started = time.monotonic()
    result = _partitions(call(FETCH, services(harness.manager, tmp_path), 12, request))[0]
    assert time.monotonic() - started >= 0.14
    assert (result.error_code, result.high_watermark, result.records) == (ErrorCode.none, 0, b"")


def test_max_bytes_bounds_the_response_but_the_first_batch_comes_whole(
    harness: Harness, tmp_path: Path
) -> None:
    harness.produce(0, [b"a" * 100])
    harness.produce(1, [b"b" * 100])
    harness.fetch({1: 1}, replica_id=2)  # the follower has it: the high-water mark moves
    request = _request(12, {0: 0, 1: 0}, bytes_max=10)
    results = _partitions(call(FETCH, services(harness.manager, tmp_path), 12, request))
    assert record_values(results[0].records) == [(0, b"a" * 100)]
    assert (results[1].error_code, results[1].records) == (ErrorCode.none, b"")
    assert results[1].high_watermark == 1


def test_read_committed_reads_the_same_with_no_aborted_transactions(
    harness: Harness, tmp_path: Path
) -> None:
    harness.produce(0, [b"a"])
    request = _request(11, {0: 0}, isolation_level=1)
    result = _partitions(call(FETCH, services(harness.manager, tmp_path), 11, request))[0]
    assert (result.high_watermark, result.last_stable_offset) == (1, 1)
    assert result.aborted_transactions == ()
    assert record_values(result.records) == [(0, b"a")]


@pytest.mark.parametrize(
    ("session", "served"),
    [((0, 0), True), ((0, -1), True), ((12, 0), True), ((12, -1), True), ((12, 3), False),
     ((0, 1), False)],
)  # fmt: skip
def test_fetches_are_sessionless(
    harness: Harness, tmp_path: Path, session: tuple[int, int], served: bool
) -> None:
    harness.produce(0, [b"a"])
    request = _request(12, {0: 0}, session=session)
    response = call(FETCH, services(harness.manager, tmp_path), 12, request)
    assert response.session_id == 0
    if served:
        assert record_values(_partitions(response)[0].records) == [(0, b"a")]
    else:
        assert response.error_code == ErrorCode.fetch_session_id_not_found
        assert response.responses == ()


def test_errors_per_partition(harness: Harness, tmp_path: Path) -> None:
    harness.produce(0, [b"a"])
    harness.change(PartitionChangeRecord(ORDERS_ID, 2, isr=(2,)))  # broker 1 out of its ISR
    request = _request(12, {0: 5, 2: 0, 9: 0})
    results = _partitions(call(FETCH, services(harness.manager, tmp_path), 12, request))
    assert results[0].error_code == ErrorCode.offset_out_of_range
    assert results[2].error_code == ErrorCode.not_leader_or_follower
    assert results[2].current_leader.leader_id == 2
    assert results[9].error_code == ErrorCode.unknown_topic_or_partition
    for result in results.values():
        assert (result.high_watermark, result.last_stable_offset) == (-1, -1)
        assert result.log_start_offset == -1
        assert result.records == b""


@pytest.mark.parametrize(("epoch", "code"), CURRENT_LEADER_EPOCHS)
def test_a_leader_epoch_other_than_the_current_is_refused(
    harness: Harness, tmp_path: Path, epoch: int, code: ErrorCode
) -> None:
    harness.change(PartitionChangeRecord(ORDERS_ID, 0, leader=1))  # leader epoch 1
    request = _request(9, {0: 0}, current_leader_epoch=epoch)
    result = _partitions(call(FETCH, services(harness.manager, tmp_path), 9, request))[0]
    assert result.error_code == code


def test_a_consumer_past_its_epochs_end_is_told_where_the_logs_part(
    harness: Harness, tmp_path: Path
) -> None:
    harness.produce(0, [b"a", b"b", b"c"])  # epoch 0, offsets 0..2
    harness.change(PartitionChangeRecord(ORDERS_ID, 0, leader=1))  # epoch 1
    harness.produce(0, [b"d", b"e"])  # epoch 1, offsets 3..4
    request = _request(12, {0: 4}, current_leader_epoch=1, last_fetched_epoch=0)
    result = _partitions(call(FETCH, services(harness.manager, tmp_path), 12, request))[0]
    assert result.error_code == ErrorCode.none
    assert (result.diverging_epoch.epoch, result.diverging_epoch.end_offset) == (0, 3)
    assert result.records == b""


def test_replicas_fetch_over_grpc_not_here(harness: Harness, tmp_path: Path) -> None:
    harness.produce(0, [b"a"])
    request = _request(12, {0: 0}, replica_id=2)
    result = _partitions(call(FETCH, services(harness.manager, tmp_path), 12, request))[0]
    assert result.error_code == ErrorCode.not_leader_or_follower
    assert result.records == b""


def test_from_v11_followers_serve_and_leaders_name_the_consumers_rack_replica(
    tmp_path: Path,
) -> None:
    """KIP-392: a v11+ fetch carries the consumer's rack; an in-sync follower serves it, and a
    leader with RackAwareReplicaSelector names the follower in that rack, with no records."""
    harness = Harness(tmp_path, replica_selector_class=RACK_AWARE_SELECTOR)
    try:
        harness.produce(1, [b"a"])
        harness.fetch({1: 1}, replica_id=2)  # broker 2 follows orders-1 and holds offset 0
        answers = services(harness.manager, tmp_path)
        named = _partitions(call(FETCH, answers, 11, _request(11, {1: 0}, rack="rack-2")))[1]
        assert (named.error_code, named.preferred_read_replica) == (ErrorCode.none, 2)
        assert named.records == b"" and named.high_watermark == 1
        served = _partitions(call(FETCH, answers, 11, _request(11, {1: 0}, rack="rack-1")))[1]
        assert served.preferred_read_replica == -1
        assert record_values(served.records) == [(0, b"a")]
        followed = _partitions(call(FETCH, answers, 11, _request(11, {2: 0})))[2]
        assert followed.error_code == ErrorCode.none  # broker 1 follows orders-2, in its ISR
    finally:
        harness.manager.close()
