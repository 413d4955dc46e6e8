"""`pykraft reassign`'s pure parts: the balanced plan and Kafka's JSON."""

from __future__ import annotations

from collections import Counter

import pytest

from pykraft.cli.reassign import balanced_plan, plan_json
from pykraft.client import TopicPartition


def test_the_plan_spreads_replicas_and_leaders_evenly_and_keeps_the_replication_factor() -> None:
    current = {TopicPartition(t, p): [1, 2, 3] for t in ("a", "b") for p in range(6)}
    plan = balanced_plan(current, [4, 2, 3])
    assert all(len(set(r)) == 3 and set(r) == {2, 3, 4} for r in plan.values())
    assert Counter(r[0] for r in plan.values()) == {2: 4, 3: 4, 4: 4}


def test_the_plan_refuses_more_replicas_than_brokers() -> None:
    with pytest.raises(ValueError, match="more than the 2 brokers"):
        balanced_plan({TopicPartition("a", 0): [1, 2, 3]}, [1, 2])


def test_the_json_is_kafkas() -> None:
    assert plan_json({TopicPartition("a", 1): [3, 1]}) == {
        "version": 1,
        "partitions": [{"topic": "a", "partition": 1, "replicas": [3, 1], "log_dirs": ["any"] * 2}],
    }
