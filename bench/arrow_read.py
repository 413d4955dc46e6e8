"""Benchmark of the consumer's columnar read (issue 17 §3), without a cluster: the cost per
record of turning fetched batches into Arrow, the three ways the consumer can.

The same fetched bytes (N records of 100-byte values and 13-byte keys, in producer-sized
batches of BATCH_RECORDS, uncompressed or lz4) are read, round after round, alternating:
- records: poll's path (`CompletedFetch.take`, 500 records a poll) and then one Arrow batch of
  each poll's records built column by column from Python lists, as the Spark source did before
  it read with poll_arrow;
- columns, compiled: poll_arrow's path (`take_rows` then `to_record_batch`) with the Cython
  decoder;
- columns, pure Python: the same with the fallback PYKRAFT_NO_EXTENSIONS=1 selects.

Prints ns per record of each (the best round) and the ratios to the records path.
Run: `.venv/bin/python bench/arrow_read.py [--records 200000] [--rounds 5]`.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402

from pykraft.client import ConsumerRecord, TopicPartition  # noqa: E402
from pykraft.client.consumer.arrow_batch import (  # noqa: E402
    ARROW_ROWS_MAX,
    ColumnRows,
    take_rows,
    to_record_batch,
)
from pykraft.client.consumer.fetch_buffer import CompletedFetch  # noqa: E402
from pykraft.proto import extensions  # noqa: E402
from pykraft.proto.record_batch import BatchBuilder, Compression  # noqa: E402
from pykraft.proto.record_batch import columns as columns_module  # noqa: E402

TP = TopicPartition("bench-arrow", 0)
BATCH_RECORDS = 130  # about 16 KiB of these records: a producer's default batch
POLL_RECORDS = 500  # max.poll.records' default
VALUE = b"v" * 100


def fetched(records: int, codec: Compression) -> bytes:
    data = bytearray()
    for base in range(0, records, BATCH_RECORDS):
        builder = BatchBuilder(compression=codec, base_offset=base)
        for i in range(base, min(base + BATCH_RECORDS, records)):
            builder.append(1_700_000_000_000 + i, b"key-%09d" % i, VALUE)
        data += builder.build()
    return bytes(data)


def records_to_arrow(records: list[ConsumerRecord]) -> pa.RecordBatch:
    """One poll's records as Arrow, a Python list per column (the Spark source before)."""
    columns = [
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([r.topic for r in records], pa.string()),
        pa.array([r.partition for r in records], pa.int32()),
        pa.array([r.offset for r in records], pa.int64()),
        pa.array([r.timestamp * 1000 for r in records], pa.timestamp("us", tz="UTC")),
        pa.array([int(r.timestamp_type) for r in records], pa.int32()),
    ]
    names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    return pa.RecordBatch.from_arrays(columns, names=names)


def read_records(data: bytes) -> int:
    fetch = CompletedFetch.of_records(TP, 0, data, check_crcs=True)
    assert fetch is not None
    rows = 0
    while not fetch.exhausted:
        out: list[ConsumerRecord] = []
        fetch.take(out, POLL_RECORDS)
        rows += records_to_arrow(out).num_rows
    return rows


def read_columns(data: bytes) -> int:
    fetch = CompletedFetch.of_records(TP, 0, data, check_crcs=True)
    assert fetch is not None
    rows = 0
    while not fetch.exhausted:
        taken = ColumnRows()
        take_rows(fetch, taken, ARROW_ROWS_MAX)
        rows += to_record_batch(taken).num_rows
    return rows


def with_decoder(
    decoder: Callable[..., None], read: Callable[[bytes], int]
) -> Callable[[bytes], int]:
    def run(data: bytes) -> int:
        selected = columns_module._decode
        columns_module._decode = decoder
        try:
            return read(data)
        finally:
            columns_module._decode = selected

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    compiled = extensions.compiled("pykraft.proto.record_batch._columns_ext")
    ways = {
        "records (poll + lists)": read_records,
        "columns, compiled": with_decoder(compiled.decode_records, read_columns),
        "columns, pure Python": with_decoder(columns_module.decode_records_python, read_columns),
    }
    for codec in (Compression.NONE, Compression.LZ4):
        data = fetched(args.records, codec)
        best = dict.fromkeys(ways, float("inf"))
        for _ in range(args.rounds):
            for name, read in ways.items():  # alternating: each round runs every way once
                started = time.perf_counter()
                rows = read(data)
                seconds = time.perf_counter() - started
                if rows != args.records:
                    raise RuntimeError(f"{name} read {rows:,} rows of {args.records:,}")
                best[name] = min(best[name], seconds)
        baseline = best["records (poll + lists)"]
        print(f"{codec.name}, {args.records:,} records, best of {args.rounds} rounds:")
        for name, seconds in best.items():
            print(
                f"  {name}: {seconds / args.records * 1e9:,.0f} ns/record, "
                f"{baseline / seconds:.1f}x the records path"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
