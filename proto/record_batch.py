"""Kafka RecordBatch v2 (magic 2): the data-plane batch format, byte for byte.

Producers build batches with `BatchBuilder`, brokers store them unchanged (after `rewrite_offsets`)
and consumers read them with `decode_batch`, so Kafka's own tools can read our segment files and
Kafka's test vectors can check us. All integers are big-endian.

Batch (61-byte header, then the records)::

    offset size field
         0    8 BaseOffset            int64   offset of the first record
         8    4 BatchLength           int32   bytes after this field (batch size - 12)
        12    4 PartitionLeaderEpoch  int32   stamped by the leader; NOT covered by the CRC
        16    1 Magic                 int8    always 2
        17    4 CRC                   uint32  CRC-32C (Castagnoli) of bytes [21, end of batch)
        21    2 Attributes            int16   bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4,
                                              4 zstd); bit 3 timestamp type (1 = LogAppendTime);
                                              bit 4 transactional; bit 5 control; bit 6 delete
                                              horizon (the cleaner's; BaseTimestamp then holds it)
        23    4 LastOffsetDelta       int32   last offset - BaseOffset (= last sequence delta)
        27    8 BaseTimestamp         int64   first record's timestamp (-1 in an empty batch)
        35    8 MaxTimestamp          int64   largest record timestamp, or the LogAppendTime
        43    8 ProducerId            int64   -1 when not idempotent
        51    2 ProducerEpoch         int16
        53    4 BaseSequence          int32   -1 when not idempotent
        57    4 RecordCount           int32
        61    - Records               the records, or with a codec one compressed blob of them

Record (zig-zag varints, as in protobuf; -1 as a length means null)::

    Length varint (bytes after itself) | Attributes int8 (unused, 0) | TimestampDelta varlong |
    OffsetDelta varint | KeyLength varint | Key | ValueLength varint | Value |
    HeadersCount varint | HeadersCount x (KeyLength varint | Key utf-8 | ValueLength varint | Value)

A header key may not be null. Deltas are relative to BaseOffset and BaseTimestamp. In a
LogAppendTime batch every record's timestamp reads as MaxTimestamp.

Because PartitionLeaderEpoch and BaseOffset lie before byte 21, the leader assigns both in place
(`rewrite_offsets`) without touching the CRC.

Compression framing, as Kafka's Java client writes and reads it:

- gzip: one standard gzip stream (RFC 1952).
- lz4: one LZ4 *frame* (not a bare block), framed by hand as Kafka's Java client frames it:
  independent 64 KiB blocks (Kafka's reader refuses frames whose blocks depend on earlier ones)
  and no checksums but the header's. We read any standard frame.
- zstd: one standard zstd frame.
- snappy: the Java client writes xerial-snappy framing: the 8-byte magic ``\\x82SNAPPY\\x00``, a
  big-endian int32 version (1) and int32 minimum compatible version (1), then for every 32 KiB of
  input an int32 length followed by a raw snappy block. librdkafka and kafka-python may instead
  write one raw snappy block; xerial's reader (and so Kafka's) accepts both. We write xerial and
  read both, telling them apart by the magic.

Errors: everything a decoder rejects raises `BatchError` with Kafka's error code;
`CorruptBatchError` (CORRUPT_MESSAGE) is damage to the batch itself (CRC, magic, length,
truncation, a compressed blob that does not decompress), plain `BatchError` (INVALID_RECORD) is
a well-formed batch with bad content (records, counts, deltas, an unknown codec). Kafka's
UNSUPPORTED_COMPRESSION_TYPE is not in our ErrorCode enum, so an unknown codec is INVALID_RECORD.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Final, NamedTuple, TypeAlias

import cramjam
import crc32c

from pykraft.proto import common_pb2

MAGIC: Final = 2
HEADER_SIZE: Final = 61
LOG_OVERHEAD: Final = 12  # BaseOffset + BatchLength, the bytes BatchLength does not count
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1
NO_TIMESTAMP: Final = -1

Buffer: TypeAlias = bytes | bytearray | memoryview

_PARTITION_LEADER_EPOCH_OFFSET: Final = 12
_MAGIC_OFFSET: Final = 16
_CRC_START: Final = 21  # the CRC covers [Attributes, end of batch)
_BATCH_LENGTH_MIN: Final = HEADER_SIZE - LOG_OVERHEAD

_HEADER = struct.Struct(">qiibIhiqqqhii")  # all 61 header bytes
_UP_TO_CRC = struct.Struct(">qiibI")  # BaseOffset .. CRC
_AFTER_CRC = struct.Struct(">hiqqqhii")  # Attributes .. RecordCount
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

_CODEC_MASK: Final = 0x07
_TIMESTAMP_TYPE_FLAG: Final = 0x08
_TRANSACTIONAL_FLAG: Final = 0x10
_CONTROL_FLAG: Final = 0x20

_INT16_MIN, _INT16_MAX = -(1 << 15), (1 << 15) - 1
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

# LZ4 frame header: magic 0x184D2204 (little-endian); FLG 0x60 = version 1, independent blocks,
# no block or content checksum, no content size; BD 0x40 = 64 KiB blocks; 0x82 = the header's
# checksum, (xxHash32(FLG, BD) >> 8) & 0xFF. The same seven bytes Kafka's Java client writes.
_LZ4_FRAME_HEADER: Final = b"\x04\x22\x4d\x18\x60\x40\x82"
_LZ4_BLOCK_BYTES: Final = 64 * 1024
_LZ4_UNCOMPRESSED_FLAG: Final = 0x80000000  # high bit of a block's size: stored uncompressed
_LZ4_END_MARK: Final = b"\x00\x00\x00\x00"
_UINT32_LE = struct.Struct("<I")

_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_BYTES: Final = 32 * 1024  # xerial SnappyOutputStream's default block size


class Compression(IntEnum):
    """The codec in attribute bits 0-2 (Kafka's CompressionType ids)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    """Attribute bit 3: who set the timestamps."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class BatchError(ValueError):
    """A batch or record was rejected; `error_code` is Kafka's code for the response."""

    error_code: int

    def __init__(self, message: str, error_code: int = common_pb2.INVALID_RECORD) -> None:
        super().__init__(message)
        self.error_code = error_code


class CorruptBatchError(BatchError):
    """The batch's bytes are damaged: CRC, magic, length or truncation (CORRUPT_MESSAGE)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, common_pb2.CORRUPT_MESSAGE)


@dataclass(frozen=True, slots=True)
class RecordHeader:
    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record; `offset` and `timestamp` are absolute."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[RecordHeader, ...] = ()


_new_tuple = tuple.__new__


class BatchHeader(NamedTuple):
    """The 61-byte header, as stored. `parse` checks only its shape, never the CRC.

    A NamedTuple rather than a frozen dataclass: the log parses one per batch on every append
    and read, and building a tuple costs a fifth of what a frozen dataclass's __init__ does.
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @staticmethod
    def parse(buf: Buffer, position: int = 0) -> BatchHeader:
        """Reads the header at `position`.

        Raises CorruptBatchError when fewer than 61 bytes remain, the magic is not 2 or
        BatchLength is too small to hold the header.
        """
        if position < 0 or len(buf) - position < HEADER_SIZE:
            raise CorruptBatchError(f"batch header at {position} is truncated")
        header: BatchHeader = _new_tuple(BatchHeader, _HEADER.unpack_from(buf, position))
        if header.magic != MAGIC:
            raise CorruptBatchError(f"batch at {position} has magic {header.magic}, expected 2")
        if header.batch_length < _BATCH_LENGTH_MIN:
            raise CorruptBatchError(f"batch at {position} has length {header.batch_length}")
        return header

    @property
    def compression(self) -> Compression:
        """The codec; raises BatchError(INVALID_RECORD) for the unassigned ids 5-7."""
        codec = self.attributes & _CODEC_MASK
        if codec > Compression.ZSTD:
            raise BatchError(f"unknown compression codec {codec}")
        return Compression(codec)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & _TIMESTAMP_TYPE_FLAG:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_FLAG)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def size_bytes(self) -> int:
        """The whole batch on disk or on the wire: BatchLength plus the 12 bytes before it."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


def verify_batch(buf: Buffer, position: int = 0) -> BatchHeader:
    """Parses the header at `position` and checks that the batch fits in `buf` and its CRC.

    Raises CorruptBatchError on any failure.
    """
    header = BatchHeader.parse(buf, position)
    end = position + header.size_bytes
    if end > len(buf):
        raise CorruptBatchError(f"batch at {position} ends at {end}, beyond {len(buf)} bytes")
    crc = crc32c.crc32c(memoryview(buf)[position + _CRC_START : end])
    if crc != header.crc:
        raise CorruptBatchError(f"batch at {position}: crc {header.crc:#x}, computed {crc:#x}")
    return header


def _whole_batch(buf: Buffer, position: int) -> BatchHeader:
    """verify_batch without the CRC: the header, once the whole batch is known to be there."""
    header = BatchHeader.parse(buf, position)
    end = position + header.size_bytes
    if end > len(buf):
        raise CorruptBatchError(f"batch at {position} ends at {end}, beyond {len(buf)} bytes")
    return header


def iter_batches(buf: Buffer, *, verify: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """Yields (position, header) of each whole batch in `buf`, a concatenation of batches.

    A torn tail (fewer bytes left than the next batch needs) ends the iteration silently, as a
    fetch response may end in a partial batch; a caller that must notice compares the end of the
    last batch yielded with len(buf). A batch whose bytes are all present but whose length or
    magic is wrong raises CorruptBatchError, and so does a bad CRC when `verify` is set. Log
    recovery that wants to truncate at the first bad batch iterates with verify=False and calls
    verify_batch at each position itself.
    """
    position = 0
    size = len(buf)
    while size - position >= LOG_OVERHEAD:
        batch_length = _INT32.unpack_from(buf, position + 8)[0]
        if batch_length < _BATCH_LENGTH_MIN:
            raise CorruptBatchError(f"batch at {position} has length {batch_length}")
        if position + LOG_OVERHEAD + batch_length > size:
            return
        header = verify_batch(buf, position) if verify else BatchHeader.parse(buf, position)
        yield position, header
        position += header.size_bytes


def rewrite_offsets(
    batch: bytearray, position: int, *, base_offset: int, partition_leader_epoch: int
) -> None:
    """Sets BaseOffset and PartitionLeaderEpoch of the batch at `position`, in place.

    Both fields lie before byte 21, outside the CRC, so the CRC stays valid by construction
    (which is why Kafka put them there): the leader stamps every appended batch without
    recomputing anything.
    """
    if (
        position < 0
        or len(batch) - position < HEADER_SIZE
        or batch[position + _MAGIC_OFFSET] != MAGIC
    ):
        raise CorruptBatchError(f"no batch header at {position}")
    if not 0 <= base_offset <= _INT64_MAX:
        raise ValueError(f"base_offset {base_offset} out of range")
    _INT64.pack_into(batch, position, base_offset)
    _INT32.pack_into(batch, position + _PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)


def decode_batch(buf: Buffer, position: int = 0, *, verify: bool = True) -> list[Record]:
    """Verifies the batch at `position` (as verify_batch) and returns its records.

    Offsets and timestamps are absolute. Offset deltas must be strictly increasing within
    [0, LastOffsetDelta]; they need not be contiguous, since the cleaner keeps offsets (a
    broker validating a produce request checks contiguity with record_count == last_offset_delta
    + 1). Raises CorruptBatchError for damaged bytes and BatchError(INVALID_RECORD) for bad
    records, a record count that does not match, or bytes left after the last record.
    `verify=False` skips only the CRC (a consumer's check_crcs=false); the rest is checked.
    """
    header = verify_batch(buf, position) if verify else _whole_batch(buf, position)
    if header.record_count < 0:
        raise BatchError(f"negative record count {header.record_count}")
    if header.record_count == 0:
        if header.batch_length != _BATCH_LENGTH_MIN:
            raise BatchError("an empty batch carries record bytes")
        return []
    payload = bytes(memoryview(buf)[position + HEADER_SIZE : position + header.size_bytes])
    compression = header.compression
    if compression is not Compression.NONE:
        payload = _decompress(compression, payload)
    return _decode_records(payload, header)


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
        _check_range("base_offset", base_offset, 0, _INT64_MAX)
        _check_range("producer_id", producer_id, _INT64_MIN, _INT64_MAX)
        _check_range("producer_epoch", producer_epoch, _INT16_MIN, _INT16_MAX)
        _check_range("base_sequence", base_sequence, _INT32_MIN, _INT32_MAX)
        _check_range("partition_leader_epoch", partition_leader_epoch, _INT32_MIN, _INT32_MAX)
        if last_offset_delta is not None:
            _check_range("last_offset_delta", last_offset_delta, 0, _INT32_MAX)
        self._compression = Compression(compression)
        self._attributes = (
            self._compression
            | (_TIMESTAMP_TYPE_FLAG if timestamp_type == TimestampType.LOG_APPEND_TIME else 0)
            | (_TRANSACTIONAL_FLAG if is_transactional else 0)
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
        elif not self._next_delta <= offset_delta <= _INT32_MAX:
            raise ValueError(f"offset delta {offset_delta} must exceed {self._next_delta - 1}")
        first = self._count == 0
        timestamp_delta = 0 if first else timestamp - self._base_timestamp
        if not (
            _INT64_MIN <= timestamp <= _INT64_MAX and _INT64_MIN <= timestamp_delta <= _INT64_MAX
        ):
            raise ValueError(f"timestamp {timestamp} out of range for this batch")
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
                small[timestamp_delta]
                if 0 <= timestamp_delta < limit
                else _varint(timestamp_delta),
                small[offset_delta] if offset_delta < limit else _varint(offset_delta),
                key_length,
                key,
                value_length,
                value,
                _encode_headers(headers) if headers else b"\x00",
            )
        )
        records = self._records
        records += small[len(body)] if len(body) < limit else _varint(len(body))
        records += body
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
        _check_range("producer_id", producer_id, _INT64_MIN, _INT64_MAX)
        _check_range("producer_epoch", producer_epoch, _INT16_MIN, _INT16_MAX)
        _check_range("base_sequence", base_sequence, _INT32_MIN, _INT32_MAX)
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence

    def estimated_size_bytes(self) -> int:
        """An upper bound on len(build()), cheap enough to call after every append: exact when
        uncompressed, else the codec's worst-case expansion of the encoded records."""
        return HEADER_SIZE + _compressed_size_bound(self._compression, len(self._records))

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
            records = _COMPRESSORS[self._compression](records)
        if len(records) > _INT32_MAX - _BATCH_LENGTH_MIN:
            raise ValueError(f"batch of {len(records)} bytes of records is too large")
        tail = _AFTER_CRC.pack(
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
        head = _UP_TO_CRC.pack(
            self._base_offset,
            _BATCH_LENGTH_MIN + len(records),
            self._partition_leader_epoch,
            MAGIC,
            crc,
        )
        return b"".join((head, tail, records))


def build_batch(
    records: Iterable[tuple[int, bytes | None, bytes | None]], **builder_kwargs: Any
) -> bytes:
    """One batch of (timestamp, key, value) records; keyword arguments go to BatchBuilder."""
    builder = BatchBuilder(**builder_kwargs)
    for timestamp, key, value in records:
        builder.append(timestamp, key, value)
    return builder.build()


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{name} {value} is outside [{low}, {high}]")


# --- varints (Kafka's ByteUtils: zig-zag, 7 bits a byte, least significant group first) ---


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


def _read_varint(data: bytes, pos: int, bits: int) -> tuple[int, int]:
    """(value, position after it) of the varint at `pos`; `bits` is 32 for a varint (at most 5
    bytes) and 64 for a varlong (10). Raises IndexError at the end of `data`, BatchError when
    the varint is too long or its value does not fit."""
    raw = 0
    shift = 0
    for index in range(pos, pos + (bits + 6) // 7):
        byte = data[index]
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            if raw >> bits:
                raise BatchError(f"varint at {pos} overflows {bits} bits")
            return (raw >> 1) ^ -(raw & 1), index + 1
        shift += 7
    raise BatchError(f"varint at {pos} is longer than {(bits + 6) // 7} bytes")


# --- records ---


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


def _decode_records(data: bytes, header: BatchHeader) -> list[Record]:
    """Parses header.record_count records that must fill `data` exactly.

    This is the consumer's hot loop, written for speed (measured: 2.5 -> 1.35 us per 100-byte
    record): varints of one or two bytes and short keys and values are decoded inline, longer
    ones by the helpers, and records are filled through their slots (`_new_record`). Reads never
    check bounds one by one: slices past the end come back short and indexing past it raises
    IndexError, and both are caught by the check that each record ended where its Length said.
    """
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append_ms = header.max_timestamp
    create_time = header.timestamp_type is TimestampType.CREATE_TIME
    last_delta = header.last_offset_delta
    previous_delta = -1
    records: list[Record] = []
    pos = 0
    try:
        for _ in range(header.record_count):
            raw = data[pos]  # Length
            if raw < 0x80:
                length, pos = (raw >> 1) ^ -(raw & 1), pos + 1
            elif data[pos + 1] < 0x80:
                raw = (raw & 0x7F) | (data[pos + 1] << 7)
                length, pos = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                length, pos = _read_varint(data, pos, 32)
            record_end = pos + length
            raw = data[pos + 1]  # TimestampDelta, after the unused record attributes
            if raw < 0x80:
                timestamp_delta, pos = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                timestamp_delta, pos = _read_varint(data, pos + 1, 64)
            raw = data[pos]  # OffsetDelta
            if raw < 0x80:
                offset_delta, pos = (raw >> 1) ^ -(raw & 1), pos + 1
            elif data[pos + 1] < 0x80:
                raw = (raw & 0x7F) | (data[pos + 1] << 7)
                offset_delta, pos = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                offset_delta, pos = _read_varint(data, pos, 32)
            if not previous_delta < offset_delta <= last_delta:
                raise BatchError(f"offset delta {offset_delta} after {previous_delta}")
            previous_delta = offset_delta
            raw = data[pos]  # Key: null, or shorter than 64 bytes, inline
            if raw == 1:
                key, pos = None, pos + 1
            elif raw < 0x80 and not raw & 1:
                key, pos = data[pos + 1 : pos + 1 + (raw >> 1)], pos + 1 + (raw >> 1)
            else:
                key, pos = _read_nullable_bytes(data, pos)
            raw = data[pos]  # Value: null, or shorter than 8 KiB, inline
            if raw == 1:
                value, pos = None, pos + 1
            elif raw < 0x80 and not raw & 1:
                value, pos = data[pos + 1 : pos + 1 + (raw >> 1)], pos + 1 + (raw >> 1)
            elif data[pos + 1] < 0x80 and not raw & 1:
                size = ((raw & 0x7F) | (data[pos + 1] << 7)) >> 1
                value, pos = data[pos + 2 : pos + 2 + size], pos + 2 + size
            else:
                value, pos = _read_nullable_bytes(data, pos)
            if data[pos] == 0:  # HeadersCount: none, the common case
                headers: tuple[RecordHeader, ...] = ()
                pos += 1
            else:
                headers, pos = _read_headers(data, pos)
            if pos != record_end:
                raise BatchError(f"record ends at {pos}, its length says {record_end}")
            record = _new_record(Record)
            _set_offset(record, base_offset + offset_delta)
            _set_timestamp(
                record, base_timestamp + timestamp_delta if create_time else log_append_ms
            )
            _set_key(record, key)
            _set_value(record, value)
            _set_headers(record, headers)
            records.append(record)
    except IndexError:
        raise BatchError(f"records end early: {header.record_count} declared") from None
    if pos != len(data):
        raise BatchError(f"{len(data) - pos} bytes follow the last of {len(records)} records")
    return records


# A frozen dataclass's __init__ sets each field through object.__setattr__ (0.55 us a Record);
# the decoder fills the slots through their descriptors instead (0.29 us).
_new_record = object.__new__
_set_offset, _set_timestamp, _set_key, _set_value, _set_headers = (
    Record.__dict__[field].__set__ for field in ("offset", "timestamp", "key", "value", "headers")
)


def _read_nullable_bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    byte = data[pos]
    if byte < 0x80:
        size, pos = (byte >> 1) ^ -(byte & 1), pos + 1
    else:
        size, pos = _read_varint(data, pos, 32)
    if size < 0:
        if size != -1:
            raise BatchError(f"negative length {size}")
        return None, pos
    return data[pos : pos + size], pos + size


def _read_headers(data: bytes, pos: int) -> tuple[tuple[RecordHeader, ...], int]:
    count, pos = _read_varint(data, pos, 32)
    if not 0 <= count <= len(data) - pos:
        raise BatchError(f"invalid header count {count}")
    headers = []
    for _ in range(count):
        key_size, pos = _read_varint(data, pos, 32)
        if key_size < 0:
            raise BatchError("a record header key may not be null")
        try:
            key = data[pos : pos + key_size].decode()
        except UnicodeDecodeError:
            raise BatchError("a record header key is not utf-8") from None
        value, pos = _read_nullable_bytes(data, pos + key_size)
        headers.append(RecordHeader(key, value))
    return tuple(headers), pos


# --- compression ---


def _lz4_frame(data: bytes | bytearray) -> bytes:
    """One LZ4 frame as Kafka's Lz4BlockOutputStream writes it: 64 KiB blocks compressed each on
    its own, a block that does not shrink stored as is, no checksums but the header's."""
    out = bytearray(_LZ4_FRAME_HEADER)
    view = memoryview(data)
    for start in range(0, len(data), _LZ4_BLOCK_BYTES):
        chunk = view[start : start + _LZ4_BLOCK_BYTES]
        block = cramjam.lz4.compress_block(chunk, store_size=False)
        if len(block) < len(chunk):
            out += _UINT32_LE.pack(len(block))
            out += block
        else:
            out += _UINT32_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED_FLAG)
            out += chunk
    out += _LZ4_END_MARK
    return bytes(out)


def _xerial_snappy(data: bytes | bytearray) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    view = memoryview(data)
    for start in range(0, len(data), _XERIAL_BLOCK_BYTES):
        block = cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_BYTES])
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _unsnappy(data: bytes) -> bytes:
    """Reads xerial framing when the magic is there, one raw snappy block otherwise."""
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    pos = len(_XERIAL_HEADER)
    while pos < len(data):
        if len(data) - pos < 4:
            raise CorruptBatchError("xerial snappy block length is truncated")
        size = _INT32.unpack_from(data, pos)[0]
        pos += 4
        if not 0 <= size <= len(data) - pos:
            raise CorruptBatchError(f"xerial snappy block of {size} bytes")
        out += cramjam.snappy.decompress_raw(data[pos : pos + size])
        pos += size
    return bytes(out)


_COMPRESSORS: Final[dict[Compression, Callable[[bytes | bytearray], bytes]]] = {
    Compression.GZIP: lambda data: bytes(cramjam.gzip.compress(data)),
    Compression.SNAPPY: _xerial_snappy,
    Compression.LZ4: _lz4_frame,
    Compression.ZSTD: lambda data: bytes(cramjam.zstd.compress(data)),
}
_DECOMPRESSORS: Final[dict[Compression, Callable[[bytes], bytes]]] = {
    Compression.GZIP: lambda data: bytes(cramjam.gzip.decompress(data)),
    Compression.SNAPPY: _unsnappy,
    Compression.LZ4: lambda data: bytes(cramjam.lz4.decompress(data)),
    Compression.ZSTD: lambda data: bytes(cramjam.zstd.decompress(data)),
}


def _decompress(compression: Compression, data: bytes) -> bytes:
    try:
        return _DECOMPRESSORS[compression](data)
    except cramjam.DecompressionError as error:
        raise CorruptBatchError(f"{compression.name} records do not decompress: {error}") from None


def _compressed_size_bound(compression: Compression, raw_bytes: int) -> int:
    """Worst-case size of `raw_bytes` compressed, framing included (each codec's bound:
    snappy's 32 + n + n/6 per block; gzip, lz4 and zstd all stay under n/128 plus a constant)."""
    if compression is Compression.NONE:
        return raw_bytes
    if compression is Compression.SNAPPY:
        blocks = raw_bytes // _XERIAL_BLOCK_BYTES + 1
        return len(_XERIAL_HEADER) + raw_bytes + raw_bytes // 6 + 36 * blocks
    return raw_bytes + raw_bytes // 128 + 128
