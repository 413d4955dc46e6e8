from __future__ import annotations

from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.metadata_log.codec import (
    decode_record,
    decode_records,
    encode_record,
    encode_records,
)
from pykraft.metadata_log.errors import CorruptRecordError
from pykraft.metadata_log.records import (
    RECORD_CLASSES,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    Endpoint,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from tests.unit.metadata_log.strategies import ANY_RECORD, RECORDS_BY_CLASS

_SETTINGS = settings(max_examples=100, deadline=None)
TOPIC_ID = UUID("a0d4e1f2-1234-4abc-9def-0123456789ab")

EXAMPLES: list[Record] = [
    RegisterBrokerRecord(
        1,
        UUID(int=7),
        (1 << 40),
        (Endpoint("PLAINTEXT", "host-1", 9092), Endpoint("CONTROLLER", "h", 9093, "SSL")),
        rack="rack-é",
        fenced=False,
        in_controlled_shutdown=True,
    ),
    RegisterBrokerRecord(2, UUID(int=8), 1, ()),
    UnregisterBrokerRecord(3, 4),
    BrokerRegistrationChangeRecord(1, 5, fenced=False),
    BrokerRegistrationChangeRecord(1, 5, in_controlled_shutdown=True),
    TopicRecord("orders", TOPIC_ID),
    PartitionRecord(TOPIC_ID, 0, (1, 2, 3), (1, 2), 1, leader_epoch=3, partition_epoch=9),
    PartitionChangeRecord(TOPIC_ID, 2),
    PartitionChangeRecord(TOPIC_ID, 2, isr=(), leader=-1, replicas=(4, 5)),
    ConfigRecord(ConfigResourceType.TOPIC, "orders", "retention.ms", "-1"),
    ConfigRecord(ConfigResourceType.BROKER, "", "num.partitions", None),
    RemoveTopicRecord(TOPIC_ID),
    ProducerIdsRecord(1, 5, (1 << 63) - 1),
    FeatureLevelRecord("metadata.version", 1),
    NoOpRecord(),
]


def test_the_examples_cover_every_record_class() -> None:
    assert {type(record) for record in EXAMPLES} == set(RECORD_CLASSES)
    assert set(RECORDS_BY_CLASS) == set(RECORD_CLASSES)


@pytest.mark.parametrize("record", EXAMPLES, ids=repr)
def test_every_record_type_round_trips(record: Record) -> None:
    data = encode_record(record)
    decoded = decode_record(data)
    assert decoded == record
    assert type(decoded) is type(record)


def test_the_byte_layout_is_stable() -> None:
    # type id 2, version 0, "a" as length 1 + byte, then the 16 UUID bytes.
    assert encode_record(TopicRecord("a", UUID(int=1))) == b"\x02\x00\x01a" + bytes(15) + b"\x01"
    # Zig-zag: -1 -> 1, 1 -> 2, 64 -> 128 (two varint bytes).
    assert encode_record(UnregisterBrokerRecord(-1, 64)) == b"\x01\x00\x01\x80\x01"
    # Presence bytes for the two Optional flags.
    assert encode_record(BrokerRegistrationChangeRecord(0, 0, None, True)) == (
        b"\x11\x00\x00\x00\x00\x01\x01"
    )
    assert encode_records([NoOpRecord(), NoOpRecord()]) == b"\x02\x02\x14\x00\x02\x14\x00"


def test_extreme_integers_round_trip() -> None:
    for value in (-(1 << 63), (1 << 63) - 1, 0, -1):
        record = ProducerIdsRecord(value, value, value)
        assert decode_record(encode_record(record)) == record


@_SETTINGS
@given(record=ANY_RECORD)
def test_any_record_round_trips(record: Record) -> None:
    assert decode_record(encode_record(record)) == record


@_SETTINGS
@given(records=st.lists(ANY_RECORD, max_size=8))
def test_any_batch_round_trips(records: list[Record]) -> None:
    assert decode_records(encode_records(records)) == records


def test_empty_batch_round_trips() -> None:
    assert decode_records(encode_records([])) == []


@pytest.mark.parametrize("record", EXAMPLES, ids=repr)
def test_every_truncation_is_corrupt(record: Record) -> None:
    data = encode_record(record)
    for size in range(len(data)):
        with pytest.raises(CorruptRecordError):
            decode_record(data[:size])
    batch = encode_records([record, record])
    for size in range(len(batch)):
        with pytest.raises(CorruptRecordError):
            decode_records(batch[:size])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x63\x00", "unknown metadata record type id 99"),
        (b"\x14\x05", "unsupported version 5 of NoOpRecord"),
        (b"\x14\x00\x00", "1 bytes of trailing garbage"),
        (b"\x11\x00\x00\x00\x02", "bool byte 2"),
        (b"\x11\x00\x00\x00\x01\x07", "bool byte 7"),
        (b"\x0c\x00\x02\xff\xfe\x00", "not valid UTF-8"),
        (b"\x04\x00\x09", "is not a ConfigResourceType"),
        (b"\x01\x00" + b"\xff" * 10 + b"\x01\x00", "longer than 10 bytes"),
        (b"\x01\x00\x80\x00\x00", "non-canonical varint"),
        (b"\x01\x00" + b"\xff" * 9 + b"\x7f\x00", "exceeds 64 bits"),
        (b"\x03\x01" + bytes(16) + b"\x00\x7f", "tuple of 127 items"),
        (b"\x02\x00\x05ab", "truncated"),
    ],
)
def test_corrupt_records_say_what_is_wrong(data: bytes, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        decode_record(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x05\x02\x14\x00", "batch claims 5 records"),
        (b"\x01\x02\x14\x00\x00", "trailing garbage after the batch"),
        (b"\x01\x03\x14\x00\x00", "record 0 of the batch: NoOpRecord: 1 bytes of trailing"),
        (b"\x01\x09\x14\x00", "truncated"),
    ],
)
def test_corrupt_batches_say_what_is_wrong(data: bytes, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        decode_records(data)


def _assert_decodes_canonically_or_is_corrupt(data: bytes) -> None:
    """Bad bytes raise CorruptRecordError, nothing else; bytes that do decode are exactly what
    the encoder writes for the result (the encoding is canonical)."""
    try:
        record = decode_record(data)
    except CorruptRecordError:
        pass
    else:
        assert encode_record(record) == data
    try:
        records = decode_records(data)
    except CorruptRecordError:
        pass
    else:
        assert encode_records(records) == data


@_SETTINGS
@given(data=st.binary(max_size=64))
def test_random_bytes_raise_only_corrupt_record_error(data: bytes) -> None:
    _assert_decodes_canonically_or_is_corrupt(data)


@_SETTINGS
@given(records=st.lists(ANY_RECORD, min_size=1, max_size=3), data=st.data())
def test_damaged_encodings_raise_only_corrupt_record_error(
    records: list[Record], data: st.DataObject
) -> None:
    encoded = bytearray(encode_records(records))
    index = data.draw(st.integers(0, len(encoded) - 1), label="index")
    encoded[index] = data.draw(st.integers(0, 255), label="byte")
    _assert_decodes_canonically_or_is_corrupt(bytes(encoded))
    body = bytearray(encode_record(records[0]))
    index = data.draw(st.integers(0, len(body) - 1), label="record index")
    body[index] ^= data.draw(st.integers(1, 255), label="record xor")
    _assert_decodes_canonically_or_is_corrupt(bytes(body))


def test_encoding_refuses_integers_beyond_64_bits() -> None:
    with pytest.raises(ValueError, match="does not fit in 64 bits"):
        encode_record(ProducerIdsRecord(1, 1, 1 << 63))


def test_encoding_refuses_what_is_not_a_record() -> None:
    with pytest.raises(TypeError, match="not a metadata record: Endpoint"):
        encode_record(Endpoint("a", "b", 1))  # type: ignore[arg-type]
