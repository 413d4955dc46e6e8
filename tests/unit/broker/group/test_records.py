"""The `__consumer_offsets` codec for what classic groups need: a group's record (key type 2,
Kafka's GroupMetadataValue v3 bytes) round-trips, its bytes are Kafka's field by field, and a
damaged or foreign value is refused with RecordError (so a load stops instead of half
understanding it); offset commits still read back after the reader was shared."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from pykraft.broker.group.records import (
    ClassicGroupValue,
    ClassicMemberValue,
    GroupRecord,
    OffsetCommitValue,
    RecordError,
    RecordKey,
    RecordType,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

KEY = RecordKey(RecordType.CLASSIC_GROUP, "g")
MEMBER = ClassicMemberValue(
    member_id="m-1",
    instance_id="host-1",
    client_id="c",
    client_host="/127.0.0.1",
    rebalance_timeout_ms=30_000,
    session_timeout_ms=10_000,
    subscription=b"\x00\x01sub",
    assignment=b"",
)
GROUP = ClassicGroupValue(
    protocol_type="consumer",
    generation=7,
    protocol_name="range",
    leader="m-1",
    state_timestamp_ms=1_700_000_000_000,
    members=(MEMBER, ClassicMemberValue("m-2", None, "c2", "/10.0.0.2", 5, 6, b"s", b"a")),
)


def _string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(text)) + text.encode()


def test_a_classic_group_round_trips_and_an_empty_one_too() -> None:
    key = decode_key(encode_key(KEY))
    assert key == KEY and encode_key(KEY) == b"\x00\x02\x00\x01g"
    assert decode_value(key, encode_value(GroupRecord(key, GROUP))) == GROUP
    empty = ClassicGroupValue("consumer", 8, None, None, -1, ())
    assert decode_value(key, encode_value(GroupRecord(key, empty))) == empty
    assert decode_value(key, None) is None


def test_the_bytes_are_kafkas_group_metadata_value_v3() -> None:
    one = ClassicGroupValue("consumer", 7, "range", "m-1", 1_700_000_000_000, (MEMBER,))
    expected = b"".join(
        (
            struct.pack(">h", 3),
            _string("consumer"),
            struct.pack(">i", 7),
            _string("range"),
            _string("m-1"),
            struct.pack(">q", 1_700_000_000_000),
            struct.pack(">i", 1),
            _string("m-1"),
            _string("host-1"),
            _string("c"),
            _string("/127.0.0.1"),
            struct.pack(">ii", 30_000, 10_000),
            struct.pack(">i", 5) + b"\x00\x01sub",
            struct.pack(">i", 0),
        )
    )
    assert encode_value(GroupRecord(KEY, one)) == expected


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-1],  # truncated
        lambda data: data + b"\x00",  # trailing bytes
        lambda data: struct.pack(">h", 4) + data[2:],  # a version we do not write
        lambda data: data[:2] + struct.pack(">h", -1) + data[12:],  # null protocol type
    ],
)
def test_a_damaged_group_value_is_refused(damage: Callable[[bytes], bytes]) -> None:
    data = encode_value(GroupRecord(KEY, GROUP))
    assert data is not None
    with pytest.raises(RecordError):
        decode_value(KEY, damage(data))


def test_offset_commits_still_read_back() -> None:
    key = RecordKey(RecordType.OFFSET_COMMIT, "g", topic="orders", partition=2)
    value = OffsetCommitValue(offset=42, leader_epoch=3, metadata="m", commit_timestamp_ms=9)
    data = encode_value(GroupRecord(key, value))
    assert data is not None
    assert decode_value(decode_key(encode_key(key)), data) == value
    with pytest.raises(RecordError):
        decode_value(key, data + b"x")
