"""Benchmark of serializing a gRPC Fetch answer (issue 17 §4): the records spliced into the
message's bytes (`broker/fetch_wire.py`, what the broker sends) against setting them on the
message and serializing it (what it did before, and still does below SPLICE_BYTES_MIN), for
answers of 1 and 4 partitions of records; each call serializes a fresh copy of the message.

Run: `.venv/bin/python bench/fetch_wire.py [--repeats 200]` (no cluster). Figures depend on the
machine; compare the two columns of one run.
"""

from __future__ import annotations

import argparse
import functools
import sys
import timeit
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pykraft.broker.fetch_wire import SplicedFetch  # noqa: E402
from pykraft.proto import broker_pb2  # noqa: E402

RECORD_BYTES = (16_384, 262_144, 1_048_576)  # Kafka's batch.size, the tuned one, a fetch's MiB
PARTITIONS = (1, 4)
ROUNDS = 5


def _answer(partitions: int, size_bytes: int) -> SplicedFetch:
    response = broker_pb2.FetchResponse()
    topic = response.topics.add(topic="bench")
    for partition in range(partitions):
        topic.partitions.add(partition=partition, high_watermark=1 << 20, log_start_offset=0)
    return SplicedFetch(response, {(0, p): b"x" * size_bytes for p in range(partitions)})


def _spliced(answer: SplicedFetch) -> bytes:
    """What the broker sends: a fresh answer's bytes (an answer is serialized once)."""
    response = broker_pb2.FetchResponse()
    response.CopyFrom(answer.response)
    return SplicedFetch(response, answer.records).serialize()


def _in_message(answer: SplicedFetch) -> bytes:
    """The records set on a copy of the message, then serialized: two copies of each."""
    response = broker_pb2.FetchResponse()
    response.CopyFrom(answer.response)
    for (topic_slot, partition_slot), records in answer.records.items():
        response.topics[topic_slot].partitions[partition_slot].records = records
    return response.SerializeToString()


def _best_s(work: Callable[[], bytes], repeats: int) -> float:
    """Seconds per call, the best of ROUNDS rounds of `repeats` calls (the machine is shared)."""
    return min(timeit.repeat(work, number=repeats, repeat=ROUNDS)) / repeats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    print("| partitions x record bytes | spliced us | set and serialized us |")
    print("| --- | --- | --- |")
    for partitions in PARTITIONS:
        for size_bytes in RECORD_BYTES:
            answer = _answer(partitions, size_bytes)
            spliced = _best_s(functools.partial(_spliced, answer), args.repeats)
            inline = _best_s(functools.partial(_in_message, answer), args.repeats)
            print(f"| {partitions} x {size_bytes:,} | {spliced * 1e6:.1f} | {inline * 1e6:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
