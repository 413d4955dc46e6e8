"""Kafka RecordBatch v2 (magic 2): the data-plane batch format, byte for byte.

Producers build batches with `BatchBuilder`, brokers store them unchanged (after `rewrite_offsets`)
and consumers read them with `decode_batch`, so Kafka's own tools can read our segment files and
Kafka's test vectors can check us. All integers are big-endian.

By role: `header` (the 61-byte layout, parsing, CRC verification, `iter_batches`,
`rewrite_offsets`), `records` (the record values and their layout), `build` (`BatchBuilder`),
`decode` (`decode_batch`), `columns` (`decode_batch_columns`: records straight into Arrow-layout
buffers, for columnar reads) and `compression` (the codecs and their framing). This module is the
API brokers and clients import; the modules' other names are the codec's own.

Errors: everything a decoder rejects raises `BatchError` with Kafka's error code;
`CorruptBatchError` (CORRUPT_MESSAGE) is damage to the batch itself (CRC, magic, length,
truncation, a compressed blob that does not decompress), plain `BatchError` (INVALID_RECORD) is
a well-formed batch with bad content (records, counts, deltas, an unknown codec). Kafka's
UNSUPPORTED_COMPRESSION_TYPE is not in our ErrorCode enum, so an unknown codec is INVALID_RECORD.
"""

from pykraft.proto.record_batch.build import BatchBuilder, build_batch
from pykraft.proto.record_batch.decode import decode_batch
from pykraft.proto.record_batch.header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchError,
    BatchHeader,
    Buffer,
    Compression,
    CorruptBatchError,
    TimestampType,
    iter_batches,
    rewrite_offsets,
    verify_batch,
)
from pykraft.proto.record_batch.records import Record, RecordHeader

__all__ = [
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "BatchBuilder",
    "BatchError",
    "BatchHeader",
    "Buffer",
    "Compression",
    "CorruptBatchError",
    "Record",
    "RecordHeader",
    "TimestampType",
    "build_batch",
    "decode_batch",
    "iter_batches",
    "rewrite_offsets",
    "verify_batch",
]
