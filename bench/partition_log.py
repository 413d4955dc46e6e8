"""Benchmark of the partition log against the raw disk, in one run.

Writes the same bytes (16 KiB batches of 100-byte records) twice: once with plain sequential
`write` calls to a file, once through `PartitionLog.append_as_leader` (verification, offset
assignment, indexes, rolls); both end with one fsync. Then reads them back: plain sequential 1 MiB
reads, and `PartitionLog.read` from offset 0 to the end with 1 MiB `bytes_max`. Prints MB/s,
batches/s and the log's figure as a ratio of the raw one (the issue's goal: at least 50%).

Run: `.venv/bin/python bench/partition_log.py [--mib 256] [--segment-mib 256]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pykraft.broker.log import LogConfig, PartitionLog
from pykraft.proto.record_batch import BatchBuilder

BATCH_BYTES_TARGET = 16 * 1024
RECORD_VALUE_BYTES = 100
READ_BYTES = 1024 * 1024


def make_batch() -> bytes:
    builder = BatchBuilder()
    value = os.urandom(RECORD_VALUE_BYTES)
    while builder.estimated_size_bytes() + RECORD_VALUE_BYTES + 20 <= BATCH_BYTES_TARGET:
        builder.append(1_700_000_000_000, None, value)
    return builder.build()


def raw_write(path: Path, batch: bytes, count: int) -> float:
    started = time.perf_counter()
    with open(path, "wb") as file:
        for _ in range(count):
            file.write(batch)
        file.flush()
        os.fsync(file.fileno())
    return time.perf_counter() - started


def raw_read(path: Path) -> tuple[float, int]:
    total = 0
    started = time.perf_counter()
    with open(path, "rb", buffering=0) as file:
        while chunk := file.read(READ_BYTES):
            total += len(chunk)
    return time.perf_counter() - started, total


def log_write(directory: Path, batch: bytes, count: int, config: LogConfig) -> float:
    now_ms = int(time.time() * 1000)
    log = PartitionLog.open(directory, config, now_ms=now_ms)
    started = time.perf_counter()
    for _ in range(count):
        log.append_as_leader(batch, leader_epoch=0, now_ms=now_ms)
    log.flush()
    elapsed = time.perf_counter() - started
    log.close()
    return elapsed


def log_read(directory: Path, config: LogConfig) -> tuple[float, int]:
    log = PartitionLog.open(directory, config, now_ms=int(time.time() * 1000))
    offset, total = 0, 0
    started = time.perf_counter()
    while offset < log.log_end_offset:
        result = log.read(offset, bytes_max=READ_BYTES)
        total += len(result.data)
        offset = result.next_offset
    elapsed = time.perf_counter() - started
    log.close()
    return elapsed, total


def one_round(batch: bytes, count: int, config: LogConfig) -> dict[str, float]:
    """Seconds for each of the four runs, raw and log alternating on the same disk."""
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as tmp:
        raw_path = Path(tmp) / "raw.bin"
        log_dir = Path(tmp) / "bench-0"
        seconds = {"raw append": raw_write(raw_path, batch, count)}
        seconds["log append"] = log_write(log_dir, batch, count, config)
        seconds["raw read"], raw_bytes = raw_read(raw_path)
        seconds["log read"], log_bytes = log_read(log_dir, config)
    assert raw_bytes == log_bytes == count * len(batch), (raw_bytes, log_bytes)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="bytes to write, in MiB")
    parser.add_argument("--segment-mib", type=int, default=256, help="segment.bytes, in MiB")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds; medians shown")
    args = parser.parse_args()
    batch = make_batch()
    count = args.mib * 1024 * 1024 // len(batch)
    megabytes = count * len(batch) / 1e6
    config = LogConfig(segment_bytes=args.segment_mib * 1024 * 1024)
    rounds = [one_round(batch, count, config) for _ in range(args.rounds)]
    median = {name: statistics.median(r[name] for r in rounds) for name in rounds[0]}
    print(
        f"{count} batches of {len(batch)} bytes ({megabytes:.0f} MB), 100-byte records; "
        f"median of {args.rounds} alternating rounds"
    )
    for name in ("append", "read"):
        raw_s, log_s = median[f"raw {name}"], median[f"log {name}"]
        print(
            f"{name:6} raw {megabytes / raw_s:7.0f} MB/s {count / raw_s:8.0f} batches/s | "
            f"log {megabytes / log_s:7.0f} MB/s {count / log_s:8.0f} batches/s | "
            f"log/raw {raw_s / log_s:5.0%}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
