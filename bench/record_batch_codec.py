"""Benchmark of the RecordBatch v2 codec (`pykraft.proto.record_batch`), the client's hot loop.

For each codec it fills a 16 KiB batch (Kafka's default batch.size) with 100-byte values and no
keys, as kafka-producer-perf-test sends them, and prints:
- build: microseconds per record for BatchBuilder.append of every record plus build();
- parse: microseconds per record for decode_batch (CRC check, decompression, records);
- MB/s of uncompressed batch bytes (1 MB = 10^6 bytes) for each, and the compressed batch size.

The values are log-like text over a small vocabulary, which compresses about as well as typical
JSON payloads. Each figure is the best of several rounds, the usual way to filter out noise from
other processes on a shared machine.

Run: `.venv/bin/python bench/record_batch_codec.py [--rounds 40] [--batches 20]`.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pykraft.proto.record_batch import (  # noqa: E402
    BatchBuilder,
    Compression,
    decode_batch,
)

BATCH_BYTES = 16 * 1024
VALUE_BYTES = 100
WORDS = [
    b"user", b"order", b"id", b"status", b"ok", b"error", b"GET", b"POST", b"/api/v1/items",
    b"latency_ms", b"region", b"eu-west-1", b"us-east-1", b"true", b"false", b"null",
]  # fmt: skip


def make_values(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    values = []
    for _ in range(count):
        text = b""
        while len(text) < VALUE_BYTES:
            text += rng.choice(WORDS) + b"=" + str(rng.randrange(100_000)).encode() + b" "
        values.append(text[:VALUE_BYTES])
    return values


def fill_batch(values: list[bytes], now_ms: int) -> list[bytes]:
    """The values that fit in one uncompressed batch of BATCH_BYTES, as a producer fills it."""
    builder = BatchBuilder()
    for count, value in enumerate(values):
        builder.append(now_ms + count, None, value)
        if builder.estimated_size_bytes() > BATCH_BYTES:
            return values[:count]
    raise ValueError("not enough values to fill a batch")


def build(codec: Compression, values: list[bytes], now_ms: int) -> bytes:
    builder = BatchBuilder(compression=codec)
    for i, value in enumerate(values):
        builder.append(now_ms + i, None, value)
    return builder.build()


def best_seconds(task: Callable[[], object], repeats: int, rounds: int) -> float:
    """The fastest round's seconds per call of `task`."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeats):
            task()
        best = min(best, (time.perf_counter() - start) / repeats)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40, help="rounds; the best one is kept")
    parser.add_argument("--batches", type=int, default=20, help="batches built or parsed per round")
    args = parser.parse_args()

    now_ms = 1_700_000_000_000
    values = fill_batch(make_values(BATCH_BYTES // VALUE_BYTES, seed=1), now_ms)
    count = len(values)
    raw_bytes = len(build(Compression.NONE, values, now_ms))
    print(f"{count} records of {VALUE_BYTES} bytes a batch; {raw_bytes} bytes uncompressed")
    print(f"{'codec':<8}{'bytes':>7}{'build us/rec':>14}{'MB/s':>8}{'parse us/rec':>14}{'MB/s':>8}")
    for codec in Compression:
        batch = build(codec, values, now_ms)
        assert [r.value for r in decode_batch(batch)] == values
        build_s = best_seconds(partial(build, codec, values, now_ms), args.batches, args.rounds)
        parse_s = best_seconds(partial(decode_batch, batch), args.batches, args.rounds)
        print(
            f"{codec.name:<8}{len(batch):>7}"
            f"{build_s / count * 1e6:>14.2f}{raw_bytes / build_s / 1e6:>8.1f}"
            f"{parse_s / count * 1e6:>14.2f}{raw_bytes / parse_s / 1e6:>8.1f}"
        )


if __name__ == "__main__":
    main()
