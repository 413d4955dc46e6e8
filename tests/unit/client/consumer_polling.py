"""Polling a consumer in the consumer's prefetch tests: its two partitions, polls repeated until
enough records came, and the offsets and values of what came."""

from __future__ import annotations

import time

from pykraft.client import Consumer, ConsumerRecord, TopicPartition
from tests.unit.client.fake_broker import WAIT_S

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
WAIT_MS = int(WAIT_S * 1000)


def poll_until(consumer: Consumer, count: int, **kwargs: int) -> list[ConsumerRecord]:
    records: list[ConsumerRecord] = []
    deadline = time.monotonic() + WAIT_S
    while len(records) < count:
        assert time.monotonic() < deadline, f"only {len(records)} of {count} records"
        records += consumer.poll(timeout_ms=50, **kwargs)
    return records


def offsets(records: list[ConsumerRecord]) -> list[int]:
    return [r.offset for r in records]


def values(records: list[ConsumerRecord]) -> list[bytes | None]:
    return [r.value for r in records]
