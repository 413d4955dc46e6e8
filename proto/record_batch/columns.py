"""Decoding batches straight into columns: the buffers of an Arrow record batch, with no Python
object per record (the columnar read of issue 17 §3; `pykraft.client` wraps them in pyarrow).

`RecordColumns` holds, for every record appended, Arrow's layout without depending on pyarrow:

- `offsets` and `timestamps`: int64 values;
- `keys` and `values`: binary columns, each an int32 offsets buffer (rows + 1 entries, the
  first 0), a data buffer and one validity byte a row (1: present, 0: null; pyarrow packs them
  into a bitmap);
- headers as list<struct<key: string, value: binary>>: `header_rows` (int32 list offsets, rows
  + 1 entries) over the headers' own `header_keys` (string, never null) and `header_values`
  (binary, nullable) columns.

The records are decoded by the compiled `_columns_ext` when it was built (setup.py builds it
where Cython and a C compiler are present), else by this module's pure-Python loop; both give
the same records and errors. PYKRAFT_NO_EXTENSIONS=1 selects the pure-Python one
(`pykraft.proto.extensions`).

`decode_batch_columns` appends a batch's records and checks the batch exactly as `decode_batch`
does (same errors for the same bytes); on an error the columns are left as they were. The
records it appends are those `decode_batch` returns, in order, from `offset_min` on.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

from pykraft.proto import extensions
from pykraft.proto.record_batch.decode import batch_payload, read_varint
from pykraft.proto.record_batch.header import BatchError, BatchHeader, Buffer, TimestampType


class BinaryColumn:
    """A nullable binary (or utf-8 string) column in Arrow's layout. The data is kept as the
    chunks appended (joined once, by `data()`): growing one bytearray would copy it over and
    over as it grows."""

    __slots__ = ("chunks", "offsets", "size", "valid")

    def __init__(self) -> None:
        self.offsets = array("i", [0])  # int32: element i is data[offsets[i]:offsets[i + 1]]
        self.chunks: list[bytes] = []
        self.size = 0  # bytes in chunks
        self.valid = bytearray()  # one byte a row: 1 present, 0 null

    def __len__(self) -> int:
        return len(self.valid)

    def data(self) -> bytes:
        """The elements' bytes, end to end."""
        if len(self.chunks) > 1:
            self.chunks = [b"".join(self.chunks)]
        return self.chunks[0] if self.chunks else b""

    def truncate(self, rows: int) -> None:
        """Keeps the first `rows` elements. Chunks past the cut are dropped and only the one it
        falls in is copied (a poll_arrow that stops inside a batch cuts its columns: joining
        them here would copy all of its keys and values twice)."""
        size = self.offsets[rows]
        kept = self.size
        while self.chunks and kept - len(self.chunks[-1]) >= size:
            kept -= len(self.chunks.pop())
        if kept > size:
            last = self.chunks[-1]
            self.chunks[-1] = last[: len(last) - (kept - size)]
        self.size = size
        del self.offsets[rows + 1 :]
        del self.valid[rows:]

    def get(self, row: int) -> bytes | None:
        if not self.valid[row]:
            return None
        return self.data()[self.offsets[row] : self.offsets[row + 1]]


class RecordColumns:
    """Records decoded into columns, appended batch by batch (see the module's docstring)."""

    __slots__ = (
        "header_keys",
        "header_rows",
        "header_values",
        "keys",
        "offsets",
        "timestamp_types",
        "timestamps",
        "values",
    )

    def __init__(self) -> None:
        self.offsets = array("q")
        self.timestamps = array("q")
        self.timestamp_types = array("b")  # the batch's TimestampType, per row
        self.keys = BinaryColumn()
        self.values = BinaryColumn()
        self.header_rows = array("i", [0])  # row i's headers: header_rows[i]..header_rows[i+1]
        self.header_keys = BinaryColumn()
        self.header_values = BinaryColumn()

    def __len__(self) -> int:
        return len(self.offsets)

    def truncate(self, rows: int) -> None:
        """Keeps the first `rows` records (and their headers)."""
        assert 0 <= rows <= len(self), (rows, len(self))
        headers = self.header_rows[rows]
        del self.offsets[rows:]
        del self.timestamps[rows:]
        del self.timestamp_types[rows:]
        self.keys.truncate(rows)
        self.values.truncate(rows)
        del self.header_rows[rows + 1 :]
        self.header_keys.truncate(headers)
        self.header_values.truncate(headers)

    def headers(self, row: int) -> tuple[tuple[str, bytes | None], ...]:
        """Row `row`'s headers as the consumer's records carry them (for tests and checks)."""
        span = range(self.header_rows[row], self.header_rows[row + 1])
        keys, values = self.header_keys, self.header_values
        return tuple(((keys.get(i) or b"").decode(), values.get(i)) for i in span)


def decode_batch_columns(
    buf: Buffer, position: int, columns: RecordColumns, offset_min: int, *, verify: bool = True
) -> None:
    """Appends the records at or after `offset_min` of the batch at `position` to `columns`;
    checks the batch as `decode_batch` does and raises the same errors, leaving `columns` as it
    was."""
    header, payload = batch_payload(buf, position, verify=verify)
    if not header.record_count:
        return
    rows = len(columns)
    try:
        _decode(payload, header, columns, offset_min)
    except IndexError:
        columns.truncate(rows)
        raise BatchError(f"records end early: {header.record_count} declared") from None
    except BatchError:
        columns.truncate(rows)
        raise


def _decode_records(
    data: bytes, header: BatchHeader, columns: RecordColumns, offset_min: int
) -> None:
    """Parses header.record_count records that must fill `data` exactly, appending those at or
    after `offset_min`. Lengths and deltas are read through `read_varint`; the pure-Python
    fallback of the columnar read, checked against `decode_batch` by property tests."""
    base_offset = header.base_offset
    create_time = header.timestamp_type is TimestampType.CREATE_TIME
    last_delta = header.last_offset_delta
    keys, values = columns.keys, columns.values
    previous_delta = -1
    pos = 0
    appended = 0
    for _ in range(header.record_count):
        length, pos = read_varint(data, pos, 32)
        record_end = pos + length
        data[pos]  # the unused record attributes (IndexError past the end)
        timestamp_delta, pos = read_varint(data, pos + 1, 64)
        offset_delta, pos = read_varint(data, pos, 32)
        if not previous_delta < offset_delta <= last_delta:
            raise BatchError(f"offset delta {offset_delta} after {previous_delta}")
        previous_delta = offset_delta
        key_start, key_end, pos = _bytes_span(data, pos)
        value_start, value_end, pos = _bytes_span(data, pos)
        keep = base_offset + offset_delta >= offset_min
        pos = _read_headers(data, pos, columns if keep else None)
        if pos != record_end:
            raise BatchError(f"record ends at {pos}, its length says {record_end}")
        if not keep:
            continue
        appended += 1
        columns.offsets.append(base_offset + offset_delta)
        columns.timestamps.append(
            header.base_timestamp + timestamp_delta if create_time else header.max_timestamp
        )
        _append_span(keys, data, key_start, key_end)
        _append_span(values, data, value_start, value_end)
        columns.header_rows.append(len(columns.header_keys))
    if pos != len(data):
        raise BatchError(f"{len(data) - pos} bytes follow the last of the batch's records")
    columns.timestamp_types.extend(array("b", [int(header.timestamp_type)]) * appended)


def _bytes_span(data: bytes, pos: int) -> tuple[int, int, int]:
    """(start, end, position after) of the nullable bytes at `pos`; start -1 for null."""
    size, pos = read_varint(data, pos, 32)
    if size < 0:
        if size != -1:
            raise BatchError(f"negative length {size}")
        return -1, -1, pos
    if pos + size > len(data):
        raise IndexError(pos + size)
    return pos, pos + size, pos + size


def _append_span(column: BinaryColumn, data: bytes, start: int, end: int) -> None:
    if start < 0:
        column.valid.append(0)
    else:
        column.chunks.append(data[start:end])
        column.size += end - start
        column.valid.append(1)
    column.offsets.append(column.size)


def _read_headers(data: bytes, pos: int, columns: RecordColumns | None) -> int:
    """Checks the record's headers at `pos` and appends them to `columns` (unless None);
    returns the position after them."""
    count, pos = read_varint(data, pos, 32)
    if not 0 <= count <= len(data) - pos:
        raise BatchError(f"invalid header count {count}")
    for _ in range(count):
        key_start, key_end, pos = _bytes_span(data, pos)
        if key_start < 0:
            raise BatchError("a record header key may not be null")
        try:
            data[key_start:key_end].decode()
        except UnicodeDecodeError:
            raise BatchError("a record header key is not utf-8") from None
        value_start, value_end, pos = _bytes_span(data, pos)
        if columns is not None:
            _append_span(columns.header_keys, data, key_start, key_end)
            _append_span(columns.header_values, data, value_start, value_end)
    return pos


def _compiled_or_python() -> Callable[[bytes, BatchHeader, RecordColumns, int], None]:
    """The compiled decoder unless PYKRAFT_NO_EXTENSIONS is set or it was not built."""
    compiled = extensions.load("pykraft.proto.record_batch._columns_ext")
    if compiled is None:
        return decode_records_python
    decode: Callable[[bytes, BatchHeader, RecordColumns, int], None] = compiled.decode_records
    return decode


decode_records_python = _decode_records
_decode = _compiled_or_python()
