"""MetadataFetch answers as a stream of bounded messages (issue 18 §2.2): the controller thread
only chooses what to send (`plan_fetch`), the messages are encoded as they are drawn, none is
larger than the limit, and a broker reading the stream (`read_fetch_stream`) ends with the
controller's image, whether it got a snapshot in chunks or a batch cut at record boundaries."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from pykraft.broker.metadata import MetadataFetchError, read_fetch_stream
from pykraft.metadata_log import MetadataImage
from pykraft.metadata_log.records import (
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    TopicRecord,
)
from pykraft.proto import controller_pb2
from pykraft.quorum.batch import BatchKind, QuorumBatch
from pykraft.quorum.config import METADATA_FETCH_BYTES_MIN, ControllerConfig
from pykraft.quorum.metadata_fetch import fetch_bytes_max, fetch_messages, plan_fetch
from pykraft.quorum.state_machine import MetadataStateMachine

BYTES_MAX = 4096
TOPIC_ID = uuid.UUID(int=7)


def _config(**overrides: int) -> ControllerConfig:
    return ControllerConfig(
        node_id=1, voters={1: "x:1"}, controller_listeners={1: "x:2"}, data_dir=Path("."),
        **overrides,  # type: ignore[arg-type]
    )  # fmt: skip


def _machine(tail_records_max: int) -> MetadataStateMachine:
    machine = MetadataStateMachine(tail_records_max=tail_records_max)
    machine.apply(QuorumBatch(BatchKind.LEADER_CHANGE, 1, 1, (NoOpRecord(),)).encode())
    return machine


def _append(machine: MetadataStateMachine, records: list[Record]) -> None:
    machine.apply(QuorumBatch(BatchKind.RECORDS, 1, 1, tuple(records)).encode())


def _topic(partitions: int) -> list[Record]:
    """One topic whose partitions make a batch far larger than BYTES_MAX."""
    records: list[Record] = [TopicRecord("big", TOPIC_ID)]
    for partition in range(partitions):
        records.append(PartitionRecord(TOPIC_ID, partition, (1, 2, 3), (1, 2, 3), 1))
    return records


def _stream(
    machine: MetadataStateMachine, after_offset: int, bytes_max: int = BYTES_MAX
) -> list[controller_pb2.MetadataFetchResponse]:
    plan = plan_fetch(machine, after_offset, _config())
    messages = list(fetch_messages(plan, bytes_max))
    assert all(m.ByteSize() <= bytes_max for m in messages), [m.ByteSize() for m in messages]
    return messages


def test_a_snapshot_travels_in_chunks_within_the_limit_and_rebuilds_the_image() -> None:
    machine = _machine(tail_records_max=1)
    _append(machine, _topic(2000))
    _append(machine, [PartitionChangeRecord(TOPIC_ID, 5, leader=2)])
    messages = _stream(machine, after_offset=-1)
    assert len(messages) > 10  # the image is some 50 KB
    assert all(m.HasField("snapshot") and not m.batches for m in messages)
    assert [m.snapshot.last_chunk for m in messages] == [False] * (len(messages) - 1) + [True]
    fetched = read_fetch_stream(MetadataImage.EMPTY, messages)
    assert fetched.image == machine.image and fetched.delta is None
    assert fetched.records == len(machine.image.write())
    assert fetched.high_watermark == machine.last_offset


def test_a_batch_larger_than_the_limit_is_cut_at_record_boundaries() -> None:
    machine = _machine(tail_records_max=100_000)
    before = machine.image
    _append(machine, _topic(2000))
    messages = _stream(machine, after_offset=before.offset)
    assert len(messages) > 10 and not any(m.HasField("snapshot") for m in messages)
    fetched = read_fetch_stream(before, messages)
    assert fetched.image == machine.image
    assert fetched.records == 2001  # only the tail: the topic and its partitions
    assert fetched.delta is not None and fetched.delta.image is before


def test_small_batches_share_a_message() -> None:
    machine = _machine(tail_records_max=100_000)
    _append(machine, _topic(5))
    before = machine.image
    for partition in range(5):
        _append(machine, [PartitionChangeRecord(TOPIC_ID, partition, leader=2)])
    (message,) = _stream(machine, after_offset=before.offset)
    assert [b.base_offset for b in message.batches] == [before.offset + n for n in range(1, 6)]
    assert read_fetch_stream(before, [message]).image == machine.image


def test_a_stream_cut_inside_a_snapshot_is_not_taken_for_an_image() -> None:
    machine = _machine(tail_records_max=1)
    _append(machine, _topic(2000))
    messages = _stream(machine, after_offset=-1)
    with pytest.raises(MetadataFetchError, match="ended inside snapshot"):
        read_fetch_stream(MetadataImage.EMPTY, messages[:-1])
    with pytest.raises(MetadataFetchError, match="out of place"):
        read_fetch_stream(MetadataImage.EMPTY, [*messages, messages[0]])


def test_nothing_new_is_one_message_without_records() -> None:
    machine = _machine(tail_records_max=10)
    (message,) = _stream(machine, after_offset=machine.last_offset)
    assert not message.batches and not message.HasField("snapshot")
    assert message.high_watermark == machine.last_offset


def test_the_message_limit_is_the_brokers_within_the_controllers_bounds() -> None:
    config = _config(metadata_fetch_bytes_max=1 << 20)
    assert fetch_bytes_max(0, config) == 1 << 20
    assert fetch_bytes_max(1 << 30, config) == 1 << 20
    assert fetch_bytes_max(200_000, config) == 200_000
    assert fetch_bytes_max(1, config) == METADATA_FETCH_BYTES_MIN
