"""Kafka's default partitioner: murmur2 bit for bit, keyed placement, sticky null keys."""

from __future__ import annotations

import random

import pytest

from pykraft.client.producer.partitioner import (
    DefaultPartitioner,
    murmur2,
    partition_for_key,
    to_positive,
)

# Data: the expected hashes of Kafka's own UtilsTest.testMurmur2 (clients/src/test/java/org/
# apache/kafka/common/utils/UtilsTest.java), i.e. what Java's Utils.murmur2 returns.
KAFKA_MURMUR2 = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]

# Data: kafka-python's test_murmur2_java_compatibility (test/test_partitioner.py), the
# partitions out of 1000 that Kafka's Java DefaultPartitioner picks for these keys.
JAVA_PARTITIONS_OF_1000 = [
    (b"", 681),
    (b"a", 524),
    (b"ab", 434),
    (b"abc", 107),
    (b"123456789", 566),
    (b"\x00 ", 742),
]


@pytest.mark.parametrize(("data", "expected"), KAFKA_MURMUR2)
def test_murmur2_matches_kafkas_utils(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


@pytest.mark.parametrize(("key", "expected"), JAVA_PARTITIONS_OF_1000)
def test_keys_land_where_kafkas_java_client_puts_them(key: bytes, expected: int) -> None:
    assert partition_for_key(key, 1000) == expected


def test_to_positive_clears_the_sign_bit_like_java() -> None:
    assert to_positive(-(2**31)) == 0
    assert to_positive(-1) == 2**31 - 1
    assert to_positive(5) == 5


def test_keyed_records_always_go_to_the_same_partition() -> None:
    partitioner = DefaultPartitioner(random.Random(1))
    chosen = {partitioner.partition("t", b"customer-7", 6) for _ in range(20)}
    assert chosen == {partition_for_key(b"customer-7", 6)}


def test_null_keys_stick_to_one_partition_until_a_new_batch() -> None:
    partitioner = DefaultPartitioner(random.Random(7))
    first = partitioner.partition("t", None, 6)
    assert {partitioner.partition("t", None, 6) for _ in range(20)} == {first}
    partitioner.on_new_batch("t", first, 6)
    second = partitioner.partition("t", None, 6)
    assert second != first
    assert {partitioner.partition("t", None, 6) for _ in range(20)} == {second}


def test_a_new_batch_on_another_partition_does_not_move_the_sticky_one() -> None:
    partitioner = DefaultPartitioner(random.Random(3))
    sticky = partitioner.partition("t", None, 4)
    partitioner.on_new_batch("t", (sticky + 1) % 4, 4)
    assert partitioner.partition("t", None, 4) == sticky


def test_sticky_partitions_spread_over_every_partition() -> None:
    partitioner = DefaultPartitioner(random.Random(11))
    seen = set()
    for _ in range(200):
        current = partitioner.partition("t", None, 3)
        seen.add(current)
        partitioner.on_new_batch("t", current, 3)
    assert seen == {0, 1, 2}
