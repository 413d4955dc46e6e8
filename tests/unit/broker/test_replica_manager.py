"""The replica manager and the request handlers against real PartitionLogs in tmp_path."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from uuid import UUID

import pytest

from pykraft.broker.controller_channel import monotonic_ms
from pykraft.broker.fetch import FETCH_WAIT_MS_MAX, handle_fetch
from pykraft.broker.group.config import OFFSETS_TOPIC
from pykraft.broker.log import TopicPartition
from pykraft.broker.log.checkpoints import (
    HIGH_WATERMARK_FILE,
    RECOVERY_POINT_FILE,
    OffsetCheckpointFile,
)
from pykraft.broker.log.dir_checkpoints import CLEAN_SHUTDOWN_FILE, OFFSET_CHECKPOINT_FILES
from pykraft.broker.offsets import handle_list_offsets, handle_metadata
from pykraft.broker.partition import Partition
from pykraft.metadata_log.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    Endpoint,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
)
from pykraft.proto import broker_pb2, common_pb2

from .images import ORDERS_ID
from .replica_harness import Harness, record_values


def test_logs_are_created_for_hosted_partitions_only(harness: Harness, tmp_path: Path) -> None:
    dirs = sorted(p.name for d in ("a", "b") for p in (tmp_path / d).iterdir())
    assert dirs == ["orders-0", "orders-1", "orders-2"]
    assert harness.manager.partition("orders", 2) is not None
    assert not harness.manager.partition("orders", 2).is_leader  # type: ignore[union-attr]


def test_produce_then_fetch_in_order_up_to_the_high_watermark(harness: Harness) -> None:
    assert harness.produce(0, [b"a", b"b"]).base_offset == 0
    result = harness.produce(0, [b"c"], acks=-1)
    assert (result.error_code, result.base_offset) == (common_pb2.NONE, 2)
    fetched = harness.fetch({0: 0})[0]
    assert fetched.high_watermark == 3
    assert record_values(fetched.records) == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert harness.fetch({0: 4})[0].error_code == common_pb2.OFFSET_OUT_OF_RANGE


def test_acks_all_waits_for_the_isr_and_times_out(harness: Harness) -> None:
    result = harness.produce(1, [b"x"], acks=-1, timeout_ms=100)
    assert result.error_code == common_pb2.REQUEST_TIMED_OUT
    assert harness.fetch({1: 0})[1].records == b""  # above the high watermark: not visible


def _appended_acks_all(
    harness: Harness, timeout_ms: int
) -> tuple[Partition, threading.Thread, list[broker_pb2.ProducePartitionResult]]:
    """An acks=all produce of one record to orders-1 on a thread of its own, returned once
    the leader has appended it (the produce then waits for the follower): the partition, the
    thread and the list its answer goes to."""
    partition = harness.manager.partition("orders", 1)
    assert partition is not None
    results: list[broker_pb2.ProducePartitionResult] = []
    producer = threading.Thread(
        target=lambda: results.append(harness.produce(1, [b"x"], acks=-1, timeout_ms=timeout_ms))
    )
    producer.start()
    with harness.manager.changed:  # the append signals it
        assert harness.manager.changed.wait_for(lambda: partition.log.log_end_offset == 1, 5)
    return partition, producer, results


def test_acks_all_completes_when_the_follower_catches_up(harness: Harness) -> None:
    partition, producer, results = _appended_acks_all(harness, timeout_ms=10_000)
    assert partition.log.high_watermark == 0
    harness.fetch({1: 1}, replica_id=2)  # follower 2 now holds offset 0
    producer.join(timeout=10)
    (result,) = results
    assert (result.error_code, result.base_offset) == (common_pb2.NONE, 0)
    assert partition.log.high_watermark == 1


def test_acks_all_ends_not_leader_when_leadership_moves_even_if_the_mark_passes(
    harness: Harness,
) -> None:
    """The old leader may be truncated and refilled by the new leader; its high-water mark
    passing the old end offset must not acknowledge the append (it may be gone)."""
    partition, producer, results = _appended_acks_all(harness, timeout_ms=10_000)
    harness.change(PartitionChangeRecord(ORDERS_ID, 1, leader=2))
    partition.take_leader_high_watermark(1)  # as a follower, refilled by broker 2 (wakes)
    producer.join(timeout=10)
    (result,) = results
    assert result.error_code == common_pb2.NOT_LEADER_OR_FOLLOWER
    assert "moved" in result.error_message


def test_acks_all_waits_end_when_the_manager_closes(harness: Harness) -> None:
    _, producer, results = _appended_acks_all(harness, timeout_ms=60_000)
    harness.manager.close()
    producer.join(timeout=10)
    assert not producer.is_alive()
    assert results[0].error_code == common_pb2.NOT_LEADER_OR_FOLLOWER


def test_min_insync_replicas_refuses_before_appending(harness: Harness) -> None:
    harness.change(ConfigRecord(ConfigResourceType.TOPIC, "orders", "min.insync.replicas", "2"))
    result = harness.produce(0, [b"x"], acks=-1)
    assert result.error_code == common_pb2.NOT_ENOUGH_REPLICAS
    assert harness.manager.partition("orders", 0).log.log_end_offset == 0  # type: ignore[union-attr]
    assert harness.produce(0, [b"x"], acks=1).error_code == common_pb2.NONE


def test_not_leader_unknown_and_bad_acks(harness: Harness) -> None:
    not_leader = harness.produce(2, [b"x"])
    assert not_leader.error_code == common_pb2.NOT_LEADER_OR_FOLLOWER
    assert not_leader.current_leader.leader_id == 2
    assert harness.produce(3, [b"x"]).error_code == common_pb2.UNKNOWN_TOPIC_OR_PARTITION
    assert harness.produce(0, [b"x"], acks=2).error_code == common_pb2.INVALID_REQUIRED_ACKS


def test_a_broker_that_may_not_serve_refuses_everything(harness: Harness) -> None:
    harness.serving = False
    assert harness.produce(0, [b"x"]).error_code == common_pb2.NOT_LEADER_OR_FOLLOWER
    assert harness.fetch({0: 0})[0].error_code == common_pb2.NOT_LEADER_OR_FOLLOWER


def test_leader_epoch_checks(harness: Harness) -> None:
    harness.change(PartitionChangeRecord(ORDERS_ID, 0, leader=1))
    assert harness.fetch({0: 0}, epoch=0)[0].error_code == common_pb2.FENCED_LEADER_EPOCH
    assert harness.fetch({0: 0}, epoch=2)[0].error_code == common_pb2.UNKNOWN_LEADER_EPOCH
    assert harness.fetch({0: 0}, epoch=1)[0].error_code == common_pb2.NONE


def test_fetch_long_poll_wakes_on_append(harness: Harness) -> None:
    timer = threading.Timer(0.1, lambda: harness.produce(0, [b"late"]))
    started = monotonic_ms()
    timer.start()
    fetched = harness.fetch({0: 0}, wait_ms=5000, min_bytes=1)[0]
    timer.join()
    assert record_values(fetched.records) == [(0, b"late")]
    assert monotonic_ms() - started < 4000


def test_a_fetch_waits_no_longer_than_the_broker_allows(harness: Harness) -> None:
    """A Fetch asking to wait for days holds one of the broker's request threads only up to
    `wait_ms_max` (the caller's deadline, capped by FETCH_WAIT_MS_MAX), so such requests cannot
    tie up every thread."""
    assert 0 < FETCH_WAIT_MS_MAX <= 60_000
    request = broker_pb2.FetchRequest(replica_id=-1, max_wait_ms=2**31 - 1, min_bytes=1)
    request.topics.add(topic="orders").partitions.add(
        partition=0, fetch_offset=0, last_fetched_epoch=-1, partition_max_bytes=1 << 20
    )
    answered: list[broker_pb2.FetchResponse] = []
    waiter = threading.Thread(
        target=lambda: answered.append(
            handle_fetch(harness.manager, request, monotonic_ms, wait_ms_max=100)
        )
    )
    waiter.start()
    waiter.join(timeout=10)
    assert answered and answered[0].topics[0].partitions[0].records == b""


def test_fetch_max_bytes_in_all_lets_only_the_first_batch_exceed(harness: Harness) -> None:
    harness.produce(0, [b"x" * 100])
    harness.produce(1, [b"y" * 100])
    harness.fetch({1: 1}, replica_id=2)
    fetched = harness.fetch({0: 0, 1: 0}, bytes_max=10)
    assert record_values(fetched[0].records) == [(0, b"x" * 100)]
    assert fetched[1].records == b"" and fetched[1].error_code == common_pb2.NONE


def test_list_offsets(harness: Harness) -> None:
    harness.produce(0, [b"a", b"b", b"c"])
    request = broker_pb2.ListOffsetsRequest(replica_id=-1)
    topic = request.topics.add(topic="orders")
    for timestamp in (-2, -1, 1_001, 9_999):
        topic.partitions.add(partition=0, timestamp=timestamp)
    results = handle_list_offsets(harness.manager, request, monotonic_ms).topics[0].partitions
    assert [(r.offset, r.timestamp) for r in results] == [(0, -1), (3, -1), (1, 1_001), (-1, -1)]


def test_metadata_gives_a_brokers_data_port_when_it_is_on_the_grpc_host(harness: Harness) -> None:
    endpoints = (
        Endpoint("PLAINTEXT", "127.0.0.1", 9192),
        Endpoint("DATA", "127.0.0.1", 40002),
    )
    elsewhere = (Endpoint("PLAINTEXT", "127.0.0.1", 9193), Endpoint("DATA", "other", 40003))
    harness.change(
        RegisterBrokerRecord(2, UUID(int=2), broker_epoch=22, endpoints=endpoints, fenced=False),
        RegisterBrokerRecord(3, UUID(int=3), broker_epoch=33, endpoints=elsewhere, fenced=False),
    )
    response = handle_metadata(harness.manager.image, broker_pb2.MetadataRequest(), "c1")
    assert {b.id: b.data_port for b in response.brokers} == {1: 0, 2: 40002, 3: 0}


def test_metadata_lists_unfenced_brokers_and_partitions(harness: Harness) -> None:
    harness.change(BrokerRegistrationChangeRecord(3, 3, fenced=True))
    response = handle_metadata(
        harness.manager.image, broker_pb2.MetadataRequest(topics=["orders", "nope"]), "c1"
    )
    assert [(b.id, b.port, b.rack) for b in response.brokers] == [
        (1, 9191, "rack-1"),
        (2, 9192, "rack-2"),
    ]
    assert [b.data_port for b in response.brokers] == [0, 0]  # none registered a DATA endpoint
    orders, nope = response.topics
    assert nope.error_code == common_pb2.UNKNOWN_TOPIC_OR_PARTITION
    assert [(p.leader_id, list(p.isr)) for p in orders.partitions] == [
        (1, [1]), (1, [1, 2]), (2, [2, 1]),
    ]  # fmt: skip


def test_deleting_a_topic_removes_its_logs(harness: Harness, tmp_path: Path) -> None:
    harness.produce(0, [b"a"])
    harness.change(RemoveTopicRecord(ORDERS_ID))
    assert harness.manager.partitions() == []
    assert [p for d in ("a", "b") for p in (tmp_path / d).iterdir()] == []
    assert harness.produce(0, [b"x"]).error_code == common_pb2.UNKNOWN_TOPIC_OR_PARTITION


def test_clients_cannot_write_to_the_internal_offsets_topic(tmp_path: Path) -> None:
    """Only the group coordinator writes `__consumer_offsets` (records it must be able to load
    again); a client's Produce is refused as Kafka refuses it, and nothing is appended."""
    harness = Harness(tmp_path, topic=OFFSETS_TOPIC)
    try:
        result = harness.produce(0, [b"not a group record"])
        assert result.error_code == common_pb2.INVALID_TOPIC_EXCEPTION, result
        assert "internal topic" in result.error_message
        partition = harness.manager.partition(OFFSETS_TOPIC, 0)
        assert partition is not None and partition.log.log_end_offset == 0
    finally:
        harness.manager.close()


def test_refusals_carry_the_sentence_and_the_code_apart(harness: Harness) -> None:
    """As Kafka and the controllers answer: the code in error_code, the sentence alone in
    error_message, so a client printing "NAME: message" does not name the error twice."""
    refused: list[broker_pb2.ProducePartitionResult | broker_pb2.FetchPartitionResult] = [
        harness.produce(2, [b"x"]),  # not the leader
        harness.produce(3, [b"x"]),  # no such partition
        harness.fetch({0: 4})[0],  # past the log end
    ]
    for result in refused:
        name = common_pb2.ErrorCode.Name(result.error_code)
        assert result.error_code != common_pb2.NONE
        assert result.error_message and name not in result.error_message, result.error_message


def test_checkpoints_go_to_one_file_of_each_kind_per_log_directory(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's LogManager: the recovery points, log start offsets and high watermarks of every
    partition of a log directory in one file each, written by the periodic checkpoint and once
    at shutdown (not once per partition)."""
    harness.produce(0, [b"a", b"b"])
    harness.manager.checkpoint()
    log_dir = next(d for d in (tmp_path / "a", tmp_path / "b") if (d / "orders-0").exists())
    stored = OffsetCheckpointFile(log_dir / HIGH_WATERMARK_FILE).read()
    assert stored[TopicPartition("orders", 0)] == 2
    replaced: list[Path] = []
    real_replace = os.replace

    def replace(source: str | Path, target: str | Path) -> None:
        replaced.append(Path(target))
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace)
    harness.produce(0, [b"c"])
    harness.manager.close()
    checkpoints = [path for path in replaced if path.name in OFFSET_CHECKPOINT_FILES]
    assert len(checkpoints) == len(set(checkpoints)), "each file written once"
    assert {path.parent for path in checkpoints} <= {tmp_path / "a", tmp_path / "b"}
    stored = OffsetCheckpointFile(log_dir / RECOVERY_POINT_FILE).read()
    assert stored[TopicPartition("orders", 0)] == 3
    assert (log_dir / CLEAN_SHUTDOWN_FILE).exists(), "one clean-shutdown marker per directory"
    assert not list(log_dir.glob(f"*/{CLEAN_SHUTDOWN_FILE}"))
