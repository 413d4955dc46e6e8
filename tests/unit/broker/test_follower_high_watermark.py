"""Followers learn the leader's high-water mark promptly (KIP-392's premise: a follower serves
consumers only up to the mark it knows). The leader answers a follower's fetch at once, records
or not, when the mark has moved past what that follower was last sent (Kafka's DelayedFetch,
case H), including a long poll parked before the mark moved; and the mark a follower's own
fetch moves is in the answer to that fetch."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pykraft.broker.controller_channel import monotonic_ms

from .replica_harness import Harness

# Long enough that an answer well before it was not the long poll running out.
_LONG_POLL_MS = 5000


@pytest.fixture
def three_replicas(tmp_path: Path) -> Iterator[Harness]:
    """orders-0 led by broker 1, followed by 2 and 3, all in the ISR."""
    harness = Harness(tmp_path, assignments=[(1, 2, 3)])
    yield harness
    harness.manager.close()


def _wait_until(condition: Callable[[], bool]) -> None:
    deadline_ms = monotonic_ms() + _LONG_POLL_MS
    while not condition():
        assert monotonic_ms() < deadline_ms, "condition not met in time"
        time.sleep(0.005)


def _follower_fetch(harness: Harness, replica_id: int, offset: int) -> tuple[int, int]:
    """(high-water mark answered, ms it took) of a long-polling fetch by `replica_id`."""
    started = monotonic_ms()
    answers = harness.fetch({0: offset}, replica_id=replica_id, wait_ms=_LONG_POLL_MS, min_bytes=1)
    return answers[0].high_watermark, monotonic_ms() - started


def test_the_mark_a_follower_fetch_moves_is_in_its_own_answer(three_replicas: Harness) -> None:
    harness = three_replicas
    harness.produce(0, [b"a", b"b"])
    for follower in (2, 3):
        harness.fetch({0: 0}, replica_id=follower)
    harness.fetch({0: 2}, replica_id=2)
    high_watermark, took_ms = _follower_fetch(harness, 3, 2)  # the last of the ISR at 2
    assert high_watermark == 2
    assert took_ms < _LONG_POLL_MS // 2


def test_a_parked_follower_fetch_is_answered_when_the_mark_moves(
    three_replicas: Harness,
) -> None:
    harness = three_replicas
    harness.produce(0, [b"a"])
    for follower in (2, 3):
        assert harness.fetch({0: 0}, replica_id=follower)[0].high_watermark == 0
    # Follower 2 is at the log end and has been sent the mark (0): its fetch parks, and the
    # answer at the wait's end leaves the partition out (nothing new).
    assert 0 not in harness.fetch({0: 1}, replica_id=2, wait_ms=300, min_bytes=1)
    partition = harness.manager.partition("orders", 0)
    assert partition is not None
    before = partition.follower_states()[2]
    answers: list[tuple[int, int]] = []
    parked = threading.Thread(target=lambda: answers.append(_follower_fetch(harness, 2, 1)))
    parked.start()
    # Each pass of a fetch records the follower's state anew: then it is parked.
    _wait_until(lambda: partition.follower_states()[2] is not before)
    harness.fetch({0: 1}, replica_id=3)  # the mark moves to 1, with no new records
    parked.join(timeout=_LONG_POLL_MS / 1000 + 5)
    assert answers and answers[0][0] == 1
    assert answers[0][1] < _LONG_POLL_MS // 2


def test_a_follower_with_nothing_new_waits_out_its_long_poll(three_replicas: Harness) -> None:
    """The other side: a follower that holds everything and was sent the current mark is not
    answered before its wait ends or something arrives (no busy loop of empty answers)."""
    harness = three_replicas
    for follower in (2, 3):
        harness.fetch({0: 0}, replica_id=follower)
    started = monotonic_ms()
    assert 0 not in harness.fetch({0: 0}, replica_id=2, wait_ms=300, min_bytes=1)  # nothing new
    assert monotonic_ms() - started >= 300


def test_a_follower_answer_leaves_out_the_partitions_with_nothing_new(tmp_path: Path) -> None:
    """As Kafka's incremental fetch answers (KIP-227): an idle partition the follower holds
    whole, whose mark it was sent, costs the answer nothing; any news brings it back."""
    harness = Harness(tmp_path, assignments=[(1, 2, 3), (1, 2, 3)])
    try:
        for partition in (0, 1):
            harness.produce(partition, [b"a"])
        assert set(harness.fetch({0: 0, 1: 0}, replica_id=2)) == {0, 1}  # records
        assert set(harness.fetch({0: 1, 1: 1}, replica_id=2)) == {0, 1}  # its new log end
        harness.produce(0, [b"b"])
        answer = harness.fetch({0: 1, 1: 1}, replica_id=2)
        assert set(answer) == {0} and answer[0].records
        harness.fetch({0: 2, 1: 1}, replica_id=3)  # follower 3 catches up: the marks move
        assert set(harness.fetch({0: 2, 1: 1}, replica_id=2, wait_ms=5000, min_bytes=1)) == {0, 1}
    finally:
        harness.manager.close()
