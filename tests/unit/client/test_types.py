"""TopicPartition keeps a precomputed hash; it must behave as the plain dataclass did."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys

from pykraft.client.types import TopicPartition


def test_topic_partition_hash_equality_order_and_repr_are_the_plain_dataclass_ones() -> None:
    tp = TopicPartition("orders", 3)
    assert hash(tp) == hash(("orders", 3))
    assert tp == TopicPartition("orders", 3) and tp != TopicPartition("orders", 4)
    assert {tp: 1}[TopicPartition("orders", 3)] == 1
    assert sorted([TopicPartition("b", 0), TopicPartition("a", 2), TopicPartition("a", 1)]) == [
        TopicPartition("a", 1),
        TopicPartition("a", 2),
        TopicPartition("b", 0),
    ]
    assert repr(tp) == "TopicPartition(topic='orders', partition=3)"
    assert dataclasses.replace(tp, partition=5) == TopicPartition("orders", 5)
    assert hash(dataclasses.replace(tp, partition=5)) == hash(("orders", 5))


def test_a_pickled_topic_partition_hashes_as_its_new_process_does() -> None:
    """Spark pickles partitions to executors: a str hash differs between processes, so the hash
    must be computed again on unpickling, not carried."""
    payload = pickle.dumps({TopicPartition("orders", 3): "found"})
    check = (
        "import pickle, sys; from pykraft.client.types import TopicPartition; "
        "d = pickle.loads(sys.stdin.buffer.read()); print(d[TopicPartition('orders', 3)])"
    )
    for seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", check],
            input=payload,
            capture_output=True,
            env={"PYTHONHASHSEED": seed},
            check=True,
            timeout=60,
        )
        assert done.stdout.strip() == b"found"
