"""The codecs of attribute bits 0-2: compressing a batch's records on build, decompressing them
on decode, and the worst-case size a builder promises before it compresses.

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
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

import cramjam

from pykraft.proto.record_batch.header import INT32, Compression, CorruptBatchError

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
        out += INT32.pack(len(block))
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
        size = INT32.unpack_from(data, pos)[0]
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


def compress(compression: Compression, records: bytes | bytearray) -> bytes:
    """The encoded records compressed with `compression` (not NONE), framed as Kafka frames them."""
    assert compression is not Compression.NONE, "uncompressed records are stored as they are"
    return _COMPRESSORS[compression](records)


def decompress(compression: Compression, data: bytes) -> bytes:
    """The records of a compressed batch; CorruptBatchError when they do not decompress."""
    assert compression is not Compression.NONE, "uncompressed records are read as they are"
    try:
        return _DECOMPRESSORS[compression](data)
    except cramjam.DecompressionError as error:
        raise CorruptBatchError(f"{compression.name} records do not decompress: {error}") from None


def compressed_size_bound(compression: Compression, raw_bytes: int) -> int:
    """Worst-case size of `raw_bytes` compressed, framing included (each codec's bound:
    snappy's 32 + n + n/6 per block; gzip, lz4 and zstd all stay under n/128 plus a constant)."""
    if compression is Compression.NONE:
        return raw_bytes
    if compression is Compression.SNAPPY:
        blocks = raw_bytes // _XERIAL_BLOCK_BYTES + 1
        return len(_XERIAL_HEADER) + raw_bytes + raw_bytes // 6 + 36 * blocks
    return raw_bytes + raw_bytes // 128 + 128
