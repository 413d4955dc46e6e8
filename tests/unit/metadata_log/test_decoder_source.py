"""The generated decoders' UUID sharing: a topic's partitions decode to one topic id object (an
image of a million partitions holds one per topic, not one per partition), and the cache behind
it never grows past its limit."""

from __future__ import annotations

from uuid import UUID

from pykraft.metadata_log.codec import decode_records, encode_records
from pykraft.metadata_log.decoder_source import UUID_CACHE_ENTRIES_MAX, _uuids, shared_uuid
from pykraft.metadata_log.records import PartitionRecord


def test_a_topics_partitions_share_one_topic_id_object() -> None:
    topic_id = UUID(int=7)
    records = [PartitionRecord(topic_id, p, (1, 2), (1, 2), 1, 0, 0) for p in range(3)]
    decoded = decode_records(encode_records(records))
    assert decoded == records
    assert all(isinstance(r, PartitionRecord) for r in decoded)
    ids = {id(r.topic_id) for r in decoded if isinstance(r, PartitionRecord)}
    assert len(ids) == 1


def test_the_cache_never_holds_more_than_its_limit() -> None:
    for value in range(UUID_CACHE_ENTRIES_MAX + 10):
        assert shared_uuid(value.to_bytes(16, "big")) == UUID(int=value)
        assert len(_uuids) <= UUID_CACHE_ENTRIES_MAX
