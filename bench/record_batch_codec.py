"""Benchmark of the RecordBatch v2 codec (`pykraft.proto.record_batch`), the client's hot loop.

For each codec it fills a 16 KiB batch (Kafka's default batch.size) with 100-byte values and no
keys, as kafka-producer-perf-test sends them, and prints:
- build: microseconds per record for BatchBuilder.append of every record plus build();
- parse: microseconds per record for decode_batch (CRC check, decompression, records);
- consume: parse plus the consumer's ConsumerRecords (fetch_buffer.consumer_records);
- MB/s of uncompressed batch bytes (1 MB = 10^6 bytes) for build and parse, and the compressed
  batch size;
each with the compiled extensions and with their pure-Python twins (rounds alternate between
the two), and the ratio python / compiled.

The values are log-like text over a small vocabulary, which compresses about as well as typical
JSON payloads. Each figure is the best of several rounds of this process's CPU time, the usual way
to filter out noise from other processes on a shared machine.

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

from bench.implementations import NAMES, implementation  # noqa: E402
from pykraft.client.consumer import fetch_buffer  # noqa: E402
from pykraft.client.types import ConsumerRecord  # noqa: E402
from pykraft.proto.record_batch import (  # noqa: E402
    BatchBuilder,
    Compression,
    TimestampType,
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


def consume(batch: bytes) -> list[ConsumerRecord]:
    """What a consumer does per batch: decode it and build its ConsumerRecords."""
    records = decode_batch(batch)
    return fetch_buffer.consumer_records("topic", 0, TimestampType.CREATE_TIME, records, 0)


def best_seconds(task: Callable[[], object], repeats: int, rounds: int) -> dict[bool, float]:
    """The fastest round's CPU seconds per call of `task`, compiled (True) and pure (False),
    rounds alternating between the two."""
    best = {True: float("inf"), False: float("inf")}
    for _ in range(rounds):
        for compiled in (True, False):
            with implementation(compiled):
                start = time.process_time()
                for _ in range(repeats):
                    task()
                seconds = (time.process_time() - start) / repeats
            best[compiled] = min(best[compiled], seconds)
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
    print(f"{'codec':<8}{'impl':<10}{'bytes':>7}{'build us/rec':>14}{'MB/s':>8}"
          f"{'parse us/rec':>14}{'MB/s':>8}{'consume us/rec':>16}")  # fmt: skip
    for codec in Compression:
        batch = build(codec, values, now_ms)
        assert [r.value for r in decode_batch(batch)] == values
        build_s = best_seconds(partial(build, codec, values, now_ms), args.batches, args.rounds)
        parse_s = best_seconds(partial(decode_batch, batch), args.batches, args.rounds)
        consume_s = best_seconds(partial(consume, batch), args.batches, args.rounds)
        for compiled in (True, False):
            print(
                f"{codec.name:<8}{NAMES[compiled]:<10}{len(batch):>7}"
                f"{build_s[compiled] / count * 1e6:>14.3f}"
                f"{raw_bytes / build_s[compiled] / 1e6:>8.1f}"
                f"{parse_s[compiled] / count * 1e6:>14.3f}"
                f"{raw_bytes / parse_s[compiled] / 1e6:>8.1f}"
                f"{consume_s[compiled] / count * 1e6:>16.3f}"
            )
        print(
            f"{codec.name:<8}{'ratio':<10}{'':>7}{build_s[False] / build_s[True]:>14.2f}{'':>8}"
            f"{parse_s[False] / parse_s[True]:>14.2f}{'':>8}"
            f"{consume_s[False] / consume_s[True]:>16.2f}"
        )


if __name__ == "__main__":
    main()
