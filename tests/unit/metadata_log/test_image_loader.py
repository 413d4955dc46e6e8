"""`image_of_chunks`, the bulk build of a snapshot's topics: for any valid history, cut into
chunks any way, the image it builds equals the one replaying every record onto the empty image
gives, whether the records come in a snapshot's order (topics in one unbroken run, built in
bulk) or in the history's own (runs broken by other records, partitions set twice, changed,
topics removed: the delta's way); and a record that cannot replay is refused as a delta
refuses it."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykraft.metadata_log import (
    MetadataImage,
    MetadataReplayError,
    encode_chunks,
    image_of_chunks,
    replay_all,
)
from pykraft.metadata_log.records import PartitionRecord, Record, TopicRecord

from .strategies import valid_histories

LIMITS = st.integers(min_value=1, max_value=400)
OFFSET, EPOCH = 41, 3


def replayed(records: list[Record]) -> MetadataImage:
    return replay_all(MetadataImage.EMPTY, records).apply(offset=OFFSET, epoch=EPOCH)


def loaded(records: list[Record], bytes_max: int) -> MetadataImage:
    return image_of_chunks(encode_chunks(records, bytes_max), offset=OFFSET, epoch=EPOCH)


@given(valid_histories(), LIMITS)
def test_a_snapshot_loads_as_the_image_it_was_written_from(
    records: list[Record], bytes_max: int
) -> None:
    image = replayed(records)
    assert loaded(image.write(), bytes_max) == image


@given(valid_histories(), LIMITS)
def test_a_history_in_its_own_order_loads_as_its_replay(
    records: list[Record], bytes_max: int
) -> None:
    assert loaded(records, bytes_max) == replayed(records)


def test_topics_built_in_bulk_are_counted_and_indexed() -> None:
    topic_id = uuid.UUID(int=1)
    records: list[Record] = [TopicRecord("orders", topic_id)]
    records += [PartitionRecord(topic_id, p, (1, 2), (1, 2), 1, 0, 0) for p in range(3)]
    records.append(PartitionRecord(topic_id, 3, (2, 3), (2, 3), -1, 0, 0))
    image = loaded(records, 64)
    assert image == replayed(records)
    assert dict(image.topics.replica_counts or {}) == {1: 3, 2: 4, 3: 1}
    assert set(image.topics.partitions_in_isr(1)) == {(topic_id, p) for p in range(3)}
    assert set(image.topics.leaderless_partitions(3)) == {(topic_id, 3)}


def test_a_topic_name_taken_twice_is_refused_as_a_delta_refuses_it() -> None:
    records: list[Record] = [
        TopicRecord("orders", uuid.UUID(int=1)),
        TopicRecord("orders", uuid.UUID(int=2)),
    ]
    with pytest.raises(MetadataReplayError, match="topic name 'orders' already exists"):
        loaded(records, 1000)
