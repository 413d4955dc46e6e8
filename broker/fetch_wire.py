"""A gRPC Fetch answer whose records are not copied into the protobuf message: the message is
serialized without them and each partition's records are spliced into those bytes as its
`records` field (FetchPartitionResult field 9), so they are copied once, by the final join,
instead of twice (into the message, then out of it). A reader parses the bytes as the same
FetchResponse: protobuf takes a message's fields in any order and length-prefixes nested ones,
which is all this writes by hand.

Answers with less than SPLICE_BYTES_MIN of records are serialized by protobuf, records set on
the message: below that, two copies cost less than the Python that splices (bench/fetch_wire.py:
about 2 us against 6 at 16 KiB), and from it protobuf's serialization costs hundreds of us
(its buffers come from fresh memory the kernel maps page by page).
"""

from __future__ import annotations

from typing import Final

from pykraft.proto import broker_pb2
from pykraft.server_common.self_serialized import SelfSerialized

# The records an answer needs for splicing them to pay (see the module docstring).
SPLICE_BYTES_MIN: Final = 128 * 1024
# Where a partition's records belong in the response: (topic index, partition index).
Slot = tuple[int, int]

# Protobuf keys of the length-delimited fields written here: (field number << 3) | 2.
_TOPICS_KEY: Final = bytes([2 << 3 | 2])  # FetchResponse.topics
_PARTITIONS_KEY: Final = bytes([2 << 3 | 2])  # FetchTopicResult.partitions
_RECORDS_KEY: Final = bytes([9 << 3 | 2])  # FetchPartitionResult.records


class SplicedFetch(SelfSerialized):
    """`response` (whose held partitions have no records in it) and the records it leaves out,
    by slot; `serialize` is called once (it may set the records on `response`)."""

    def __init__(self, response: broker_pb2.FetchResponse, records: dict[Slot, bytes]) -> None:
        self.response = response
        self.records = records

    def serialize(self) -> bytes:
        if sum(len(records) for records in self.records.values()) < SPLICE_BYTES_MIN:
            return self._in_message()
        return self._spliced()

    def _in_message(self) -> bytes:
        response = self.response
        for (topic_slot, partition_slot), records in self.records.items():
            response.topics[topic_slot].partitions[partition_slot].records = records
        return response.SerializeToString()

    def _spliced(self) -> bytes:
        response, held = self.response, self.records
        pieces = [_without_topics(response).SerializeToString()]
        for topic_slot, topic in enumerate(response.topics):
            if not any((topic_slot, p) in held for p in range(len(topic.partitions))):
                _field(pieces, _TOPICS_KEY, [topic.SerializeToString()])
                continue
            topic_pieces = [broker_pb2.FetchTopicResult(topic=topic.topic).SerializeToString()]
            for partition_slot, partition in enumerate(topic.partitions):
                partition_pieces = [partition.SerializeToString()]
                records = held.get((topic_slot, partition_slot))
                if records:
                    _field(partition_pieces, _RECORDS_KEY, [records])
                _field(topic_pieces, _PARTITIONS_KEY, partition_pieces)
            _field(pieces, _TOPICS_KEY, topic_pieces)
        return b"".join(pieces)


def _without_topics(response: broker_pb2.FetchResponse) -> broker_pb2.FetchResponse:
    """Every field of `response` but its topics (the header, the session id, any added later),
    for `_spliced` to write before the topics."""
    rest = broker_pb2.FetchResponse()
    for field, value in response.ListFields():
        if field.name == "topics":
            continue
        if field.message_type is None:
            setattr(rest, field.name, value)
        else:
            getattr(rest, field.name).CopyFrom(value)
    return rest


def _field(out: list[bytes], key: bytes, value: list[bytes]) -> None:
    """Appends a length-delimited field made of `value`'s pieces (not joined) to `out`."""
    out += (key, _varint(sum(len(piece) for piece in value)), *value)


def _varint(value: int) -> bytes:
    """Protobuf's base-128 varint of a length (>= 0)."""
    assert value >= 0, value
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
