"""PartitionRecords in and out of the codec's bytes, compiled and in Python (hypothesis):
`read_partition_run`, the snapshot loader's reader of a topic's PartitionRecords, takes the same
frames of any bytes into the same registrations either way, and a snapshot loads as the same
image whichever reads it; `encode_partition_body` writes the same bytes either way, or refuses
an int beyond 64 bits with the same error; `partition_record` makes the same record of a
registration either way."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.metadata_log import (
    codec,
    encode_chunks,
    encode_record,
    image_loader,
    image_of_chunks,
    replay_all,
)
from pykraft.metadata_log.codec import INT64_MAX, INT64_MIN
from pykraft.metadata_log.image import (
    MetadataImage,
    PartitionRegistration,
    partition_record_python,
)
from pykraft.metadata_log.partition_runs import read_partition_run_python
from pykraft.metadata_log.records import PartitionRecord, Record, TopicRecord
from pykraft.proto import extensions

from .strategies import valid_histories

Encoder = Callable[[bytearray, PartitionRecord], None]
Reader = Callable[[bytes, int, int, bytes, dict[int, PartitionRegistration]], tuple[int, int]]
COMPILED: Reader = extensions.compiled("pykraft.metadata_log._partition_records").read_partition_run
READERS = {"compiled": COMPILED, "python": read_partition_run_python}
ENCODERS: dict[str, Encoder] = {
    "compiled": extensions.compiled(
        "pykraft.metadata_log._partition_records"
    ).encode_partition_body,
    "python": codec.encode_partition_body_python,
}

TOPIC, OTHER = uuid.UUID(int=7), uuid.UUID(int=8)
OFFSET, EPOCH = 41, 3
ints = st.integers(-3, 40) | st.integers(INT64_MIN, INT64_MAX)
int_tuples = st.lists(ints, max_size=4).map(tuple)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@st.composite
def partition_bodies(draw: st.DrawFn) -> bytes:
    """A PartitionRecord's bytes (version 1, or 0 when it has no reassignment), mostly of TOPIC
    and with small partition ids, so runs and repeated ids both occur."""
    topic_id = draw(st.sampled_from((TOPIC, TOPIC, TOPIC, OTHER)))
    reassigning = draw(st.booleans())
    record = PartitionRecord(
        topic_id,
        draw(st.integers(0, 6) | ints),
        draw(int_tuples),
        draw(int_tuples),
        draw(ints),
        draw(ints),
        draw(ints),
        draw(int_tuples) if reassigning else (),
        draw(int_tuples) if reassigning else (),
    )
    body = encode_record(record)
    if not reassigning and draw(st.booleans()):
        assert body[:2] == b"\x03\x01" and body[-2:] == b"\x00\x00"
        return b"\x03\x00" + body[2:-2]  # what version 0 wrote
    return body


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """A frame's body: a partition's, another record's, or either damaged."""
    body = draw(partition_bodies() | st.just(encode_record(TopicRecord("t", TOPIC))))
    if draw(st.integers(0, 4)) != 0:
        return body
    damaged = bytearray(body)
    for _ in range(draw(st.integers(1, 3))):
        index = draw(st.integers(0, len(damaged)))
        if index == len(damaged) or draw(st.booleans()):
            damaged.insert(index, draw(st.integers(0, 255)))
        else:
            damaged[index] = draw(st.integers(0, 255))
    return bytes(damaged)


@settings(max_examples=400)
@given(
    st.lists(bodies(), max_size=8),
    st.sets(st.integers(0, 6), max_size=3),
    st.data(),
)
def test_both_readers_take_the_same_frames_into_the_same_registrations(
    frames: list[bytes], known: set[int], data: st.DataObject
) -> None:
    batch = _uvarint(len(frames)) + b"".join(_uvarint(len(body)) + body for body in frames)
    count = data.draw(st.integers(0, len(frames)))
    if data.draw(st.booleans()):  # a frame's length running past the end
        batch = batch[: data.draw(st.integers(1, len(batch)))]
    pos = len(_uvarint(len(frames)))
    results = {}
    for name, reader in READERS.items():
        partitions = {p: PartitionRegistration((1,), (1,), 1, 0, 0) for p in known}
        results[name] = (reader(batch, pos, count, TOPIC.bytes, partitions), partitions)
    assert results["compiled"] == results["python"]


@given(valid_histories(), st.integers(min_value=1, max_value=400))
def test_a_snapshot_loads_as_the_same_image_with_either_reader(
    records: list[Record], bytes_max: int
) -> None:
    image = replay_all(MetadataImage.EMPTY, records).apply(offset=OFFSET, epoch=EPOCH)
    for reader in READERS.values():
        with pytest.MonkeyPatch.context() as monkeypatch:
            monkeypatch.setattr(image_loader, "read_partition_run", reader)
            chunks = encode_chunks(image.write(), bytes_max)
            assert image_of_chunks(chunks, offset=OFFSET, epoch=EPOCH) == image


wide_ints = ints | st.integers(-(2**70), 2**70)
wide_tuples = st.lists(wide_ints, max_size=4).map(tuple)


@settings(max_examples=400)
@given(
    st.uuids(),
    wide_ints,
    wide_tuples,
    wide_tuples,
    wide_ints,
    wide_ints,
    wide_ints,
    wide_tuples,
    wide_tuples,
    st.binary(max_size=5),
)
def test_both_encoders_write_the_same_bytes_or_refuse_alike(
    topic_id: uuid.UUID,
    partition_id: int,
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    leader: int,
    leader_epoch: int,
    partition_epoch: int,
    adding: tuple[int, ...],
    removing: tuple[int, ...],
    prefix: bytes,
) -> None:
    record = PartitionRecord(
        topic_id, partition_id, replicas, isr, leader, leader_epoch, partition_epoch, adding,
        removing,
    )  # fmt: skip
    outcomes: dict[str, bytes | str] = {}
    for name, encode in ENCODERS.items():
        buf = bytearray(prefix)
        try:
            encode(buf, record)
            outcomes[name] = bytes(buf)
        except ValueError as error:
            outcomes[name] = str(error)
            if name == "compiled":
                assert buf == prefix  # nothing half written
    assert outcomes["compiled"] == outcomes["python"]


@given(
    st.uuids(),
    ints,
    st.builds(
        PartitionRegistration, int_tuples, int_tuples, ints, ints, ints, int_tuples, int_tuples
    ),
)
def test_both_make_the_same_record_of_a_registration(
    topic_id: uuid.UUID, partition_id: int, registration: PartitionRegistration
) -> None:
    compiled = extensions.compiled("pykraft.metadata_log._partition_records").partition_record
    made = compiled(topic_id, partition_id, registration)
    expected = partition_record_python(topic_id, partition_id, registration)
    assert type(made) is PartitionRecord and made == expected
    assert hash(made) == hash(expected)
