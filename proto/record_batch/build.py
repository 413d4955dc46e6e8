"""Building a batch: records are encoded as they are appended, the header is written last.

The builder asserts that the header it writes agrees with its records (count, last offset
delta, size); a bad argument from a caller raises ValueError or BatchError instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

import crc32c

from pykraft.proto import extensions
from pykraft.proto.record_batch.compression import compress, compressed_size_bound
from pykraft.proto.record_batch.header import (
    BATCH_LENGTH_MIN,
    HEADER_AFTER_CRC,
    HEADER_SIZE,
    HEADER_UP_TO_CRC,
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_FLAG,
    TRANSACTIONAL_FLAG,
    BatchError,
    BatchHeader,
    Compression,
    TimestampType,
)
from pykraft.proto.record_batch.records import RecordHeader


class BatchBuilder:
    """Accumulates records and builds one batch: the producer's and the cleaner's builder.

    Records are encoded as they are appended, so `build` only compresses, adds the header and
    computes the CRC; it can be called more than once. With LOG_APPEND_TIME the caller passes
    the append time as every record's timestamp. `last_offset_delta` lets the cleaner keep the
    original batch's last offset (and so the producer's last sequence) when it drops records;
    with it, a batch may even be empty.
    """

    __slots__ = (
        "_attributes",
        "_base_offset",
        "_base_sequence",
        "_base_timestamp",
        "_compression",
        "_count",
        "_last_offset_delta",
        "_max_timestamp",
        "_next_delta",
        "_partition_leader_epoch",
        "_producer_epoch",
        "_producer_id",
        "_records",
    )

    def __init__(
        self,
        *,
        compression: Compression = Compression.NONE,
        base_offset: int = 0,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        is_transactional: bool = False,
        last_offset_delta: int | None = None,
    ) -> None:
        _check_range("base_offset", base_offset, 0, INT64_MAX)
        _check_range("producer_id", producer_id, INT64_MIN, INT64_MAX)
        _check_range("producer_epoch", producer_epoch, INT16_MIN, INT16_MAX)
        _check_range("base_sequence", base_sequence, INT32_MIN, INT32_MAX)
        _check_range("partition_leader_epoch", partition_leader_epoch, INT32_MIN, INT32_MAX)
        if last_offset_delta is not None:
            _check_range("last_offset_delta", last_offset_delta, 0, INT32_MAX)
        self._compression = Compression(compression)
        self._attributes = (
            self._compression
            | (TIMESTAMP_TYPE_FLAG if timestamp_type == TimestampType.LOG_APPEND_TIME else 0)
            | (TRANSACTIONAL_FLAG if is_transactional else 0)
        )
        self._base_offset = base_offset
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._partition_leader_epoch = partition_leader_epoch
        self._last_offset_delta = last_offset_delta
        self._records = bytearray()
        self._count = 0
        self._next_delta = 0  # the smallest offset delta the next record may take
        self._base_timestamp = NO_TIMESTAMP
        self._max_timestamp = NO_TIMESTAMP

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[RecordHeader | tuple[str, bytes | None]] = (),
        *,
        offset_delta: int | None = None,
    ) -> None:
        """Encodes one record. `offset_delta` defaults to one past the previous record's; the
        cleaner passes the kept record's own delta, which must be larger than the previous one.
        """
        if offset_delta is None:
            offset_delta = self._next_delta
        elif not self._next_delta <= offset_delta <= INT32_MAX:
            raise ValueError(f"offset delta {offset_delta} must exceed {self._next_delta - 1}")
        first = self._count == 0
        timestamp_delta = 0 if first else timestamp - self._base_timestamp
        if not (INT64_MIN <= timestamp <= INT64_MAX and INT64_MIN <= timestamp_delta <= INT64_MAX):
            raise ValueError(f"timestamp {timestamp} out of range for this batch")
        encode_record(self._records, timestamp_delta, offset_delta, key, value, headers)
        # State changes only once nothing can fail, so a rejected record leaves no trace.
        if first:
            self._base_timestamp = self._max_timestamp = timestamp
        elif timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        self._count += 1
        self._next_delta = offset_delta + 1

    def set_producer(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Stamps the idempotent producer's id, epoch and first sequence, which a producer
        learns only when the batch is about to be sent (the records are already encoded)."""
        _check_range("producer_id", producer_id, INT64_MIN, INT64_MAX)
        _check_range("producer_epoch", producer_epoch, INT16_MIN, INT16_MAX)
        _check_range("base_sequence", base_sequence, INT32_MIN, INT32_MAX)
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence

    def adopt_records(
        self, records: bytearray, count: int, base_timestamp: int, max_timestamp: int
    ) -> None:
        """Takes `count` records encoded elsewhere exactly as `append` would have encoded them
        (offset deltas 0 to count - 1, timestamps relative to `base_timestamp`): the producer's
        compiled append (client/producer/_open_batches.pyx) fills its own buffer and builds
        through this. Only into an empty builder; `records` is taken, not copied."""
        assert self._count == 0 and not self._records, "records are adopted by an empty builder"
        self._records = records
        self._count = self._next_delta = count
        if count:
            self._base_timestamp, self._max_timestamp = base_timestamp, max_timestamp

    def estimated_size_bytes(self) -> int:
        """An upper bound on len(build()), cheap enough to call after every append: exact when
        uncompressed, else the codec's worst-case expansion of the encoded records."""
        if self._compression is Compression.NONE:  # the common case, without a call
            return HEADER_SIZE + len(self._records)
        return HEADER_SIZE + compressed_size_bound(self._compression, len(self._records))

    def record_count(self) -> int:
        return self._count

    def build(self) -> bytes:
        """The batch's bytes. Raises ValueError for an empty batch without last_offset_delta."""
        last_delta = self._next_delta - 1
        if self._last_offset_delta is not None:
            if self._last_offset_delta < last_delta:
                raise ValueError(f"last_offset_delta {self._last_offset_delta} < {last_delta}")
            last_delta = self._last_offset_delta
        elif self._count == 0:
            raise ValueError("an empty batch needs last_offset_delta")
        records: bytes | bytearray = self._records
        if self._count and self._compression is not Compression.NONE:
            records = compress(self._compression, records)
        if len(records) > INT32_MAX - BATCH_LENGTH_MIN:
            raise ValueError(f"batch of {len(records)} bytes of records is too large")
        tail = HEADER_AFTER_CRC.pack(
            self._attributes,
            last_delta,
            self._base_timestamp,
            self._max_timestamp,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            self._count,
        )
        crc = crc32c.crc32c(records, crc32c.crc32c(tail))
        head = HEADER_UP_TO_CRC.pack(
            self._base_offset,
            BATCH_LENGTH_MIN + len(records),
            self._partition_leader_epoch,
            MAGIC,
            crc,
        )
        batch = b"".join((head, tail, records))
        self._assert_header_agrees(batch, last_delta)
        return batch

    def _assert_header_agrees(self, batch: bytes, last_delta: int) -> None:
        """The header `build` wrote, read back, describes these records: their count, an offset
        span that holds them, the batch's own length, and no more bytes than
        `estimated_size_bytes` promised the producer's accumulator."""
        header = BatchHeader.parse(batch)
        assert header.record_count == self._count, (header.record_count, self._count)
        assert header.last_offset_delta == last_delta, (header.last_offset_delta, last_delta)
        assert 0 <= self._count <= last_delta + 1, (self._count, last_delta)
        assert header.size_bytes == len(batch), (header.size_bytes, len(batch))
        assert len(batch) <= self.estimated_size_bytes(), (len(batch), self._compression)
        if self._count == 0:
            assert len(batch) == HEADER_SIZE, len(batch)
        else:
            assert header.base_timestamp <= header.max_timestamp, header


def build_batch(
    records: Iterable[tuple[int, bytes | None, bytes | None]], **builder_kwargs: Any
) -> bytes:
    """One batch of (timestamp, key, value) records; keyword arguments go to BatchBuilder."""
    builder = BatchBuilder(**builder_kwargs)
    for timestamp, key, value in records:
        builder.append(timestamp, key, value)
    return builder.build()


def encode_record_python(
    records: bytearray,
    timestamp_delta: int,
    offset_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[RecordHeader | tuple[str, bytes | None]],
) -> None:
    """Appends one record, its Length varint first, to `records`: the producer's per-record
    loop. The compiled `_codec.encode_record` writes the same bytes."""
    small, limit = _SMALL_VARINTS, _SMALL
    if key is None:
        key, key_length = b"", _NULL_LENGTH
    else:
        key_length = small[len(key)] if len(key) < limit else _varint(len(key))
    if value is None:
        value, value_length = b"", _NULL_LENGTH
    else:
        value_length = small[len(value)] if len(value) < limit else _varint(len(value))
    body = b"".join(
        (
            b"\x00",  # record attributes: unused
            small[timestamp_delta] if 0 <= timestamp_delta < limit else _varint(timestamp_delta),
            small[offset_delta] if offset_delta < limit else _varint(offset_delta),
            key_length,
            key,
            value_length,
            value,
            _encode_headers(headers) if headers else b"\x00",
        )
    )
    records += small[len(body)] if len(body) < limit else _varint(len(body))
    records += body


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{name} {value} is outside [{low}, {high}]")


def _varint(value: int) -> bytes:
    """Zig-zag varint of a signed value; int32 and int64 values encode alike."""
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw > 0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


_SMALL: Final = 1 << 12  # lengths and deltas below this are encoded once, here
_SMALL_VARINTS: Final = tuple(_varint(value) for value in range(_SMALL))
_NULL_LENGTH: Final = _varint(-1)


def _encode_headers(headers: Sequence[RecordHeader | tuple[str, bytes | None]]) -> bytes:
    out = bytearray(_varint(len(headers)))
    for header in headers:
        key, value = (header.key, header.value) if isinstance(header, RecordHeader) else header
        if key is None:
            raise BatchError("a record header key may not be null")
        encoded_key = key.encode()
        out += _varint(len(encoded_key))
        out += encoded_key
        if value is None:
            out += _NULL_LENGTH
        else:
            out += _varint(len(value))
            out += value
    return bytes(out)


# The producer's and the cleaner's per-record encoder: compiled unless disabled or not built.
encode_record = encode_record_python
_compiled = extensions.load("pykraft.proto.record_batch._codec")
if _compiled is not None:
    encode_record = _compiled.encode_record
