"""The RecordBatch v2 header: its 61-byte layout, parsing, CRC verification, walking a run of
batches and the leader's in-place stamping of offsets.

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

Because PartitionLeaderEpoch and BaseOffset lie before byte 21, the leader assigns both in place
(`rewrite_offsets`) without touching the CRC.

Everything here rejects damaged bytes with `CorruptBatchError` (CORRUPT_MESSAGE) and bad content
with plain `BatchError` (INVALID_RECORD); see the package docstring.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from enum import IntEnum
from typing import Final, NamedTuple, TypeAlias

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
CRC_START: Final = 21  # the CRC covers [Attributes, end of batch)
BATCH_LENGTH_MIN: Final = HEADER_SIZE - LOG_OVERHEAD

_HEADER = struct.Struct(">qiibIhiqqqhii")  # all 61 header bytes
HEADER_UP_TO_CRC = struct.Struct(">qiibI")  # BaseOffset .. CRC
HEADER_AFTER_CRC = struct.Struct(">hiqqqhii")  # Attributes .. RecordCount
INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

_CODEC_MASK: Final = 0x07
TIMESTAMP_TYPE_FLAG: Final = 0x08
TRANSACTIONAL_FLAG: Final = 0x10
_CONTROL_FLAG: Final = 0x20

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


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
        if header.batch_length < BATCH_LENGTH_MIN:
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
        if self.attributes & TIMESTAMP_TYPE_FLAG:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

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
    crc = crc32c.crc32c(memoryview(buf)[position + CRC_START : end])
    if crc != header.crc:
        raise CorruptBatchError(f"batch at {position}: crc {header.crc:#x}, computed {crc:#x}")
    return header


def whole_batch(buf: Buffer, position: int) -> BatchHeader:
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
        batch_length = INT32.unpack_from(buf, position + 8)[0]
        if batch_length < BATCH_LENGTH_MIN:
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
    if not 0 <= base_offset <= INT64_MAX:
        raise ValueError(f"base_offset {base_offset} out of range")
    _INT64.pack_into(batch, position, base_offset)
    INT32.pack_into(batch, position + _PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
