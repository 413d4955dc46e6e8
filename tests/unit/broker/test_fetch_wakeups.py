"""A parked Fetch looks again only when one of its own partitions (or the metadata) changed:
appends to other partitions wake its thread but cost it no re-read (issue 17 §4); and a
consumer's only when what it reads changed, the high-water mark (issue 17 §5)."""

from __future__ import annotations

import threading

import pytest

from pykraft.broker import fetch
from pykraft.broker.partition_watches import COMMITTED, Change, PartitionWatches
from pykraft.proto import broker_pb2
from pykraft.server_common.slots import Slots
from tests.waiting import wait_until

from .replica_harness import Harness, record_values

OTHER_APPENDS = 20


def test_a_watch_wakes_only_for_its_own_partitions_or_all() -> None:
    watches = PartitionWatches()
    with watches.watch([("orders", 0)]) as watch:
        watches.changed(("orders", 1))
        assert not watch.wait(deadline_ms=0, clock_ms=lambda: 0)
        watches.changed(("orders", 0))
        assert watch.wait(deadline_ms=0, clock_ms=lambda: 0)
        watch.clear()
        watches.changed(None)  # a metadata change may concern every partition
        assert watch.wait(deadline_ms=0, clock_ms=lambda: 0)
    watch.clear()
    watches.changed(None)
    assert not watch.wait(deadline_ms=0, clock_ms=lambda: 0)  # no longer watching


def test_a_watch_wakes_only_for_the_changes_it_cares_for() -> None:
    watches = PartitionWatches()
    with watches.watch([("orders", 0)], COMMITTED) as watch:
        watches.changed(("orders", 0), Change.LOG_END)  # an append: news to followers only
        assert not watch.wait(deadline_ms=0, clock_ms=lambda: 0)
        for change in (Change.HIGH_WATERMARK, Change.OTHER, Change.ALL):
            watches.changed(("orders", 0), change)
            assert watch.wait(deadline_ms=0, clock_ms=lambda: 0)
            watch.clear()


def _consumer_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The record bytes each look of a consumer's Fetch found, in order, from now on."""
    reads: list[int] = []
    read_all = fetch._read_all

    def counting(*args: object) -> fetch._Pass:
        answer = read_all(*args)  # type: ignore[arg-type]
        request = args[1]
        assert isinstance(request, broker_pb2.FetchRequest)
        if request.replica_id == fetch.CONSUMER_REPLICA_ID:
            reads.append(sum(answer.topic_bytes))
        return answer

    monkeypatch.setattr(fetch, "_read_all", counting)
    return reads


def _parked(
    harness: Harness, partition: int
) -> tuple[threading.Thread, list[dict[int, broker_pb2.FetchPartitionResult]]]:
    """A consumer's long poll of `partition` from offset 0, parked: its thread and answer."""
    answered: list[dict[int, broker_pb2.FetchPartitionResult]] = []
    waiter = threading.Thread(
        target=lambda: answered.append(harness.fetch({partition: 0}, wait_ms=30_000, min_bytes=1))
    )
    waiter.start()
    wait_until(lambda: harness.manager.fetch_waits.held == 1, "the fetch parks")
    return waiter, answered


def test_a_parked_fetch_rereads_only_when_its_partition_changes(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = _consumer_reads(monkeypatch)
    waiter, answered = _parked(harness, 0)
    for i in range(OTHER_APPENDS):
        harness.produce(1, [b"other-%d" % i])
    harness.produce(0, [b"mine"])
    waiter.join(timeout=10)
    assert answered and record_values(answered[0][0].records) == [(0, b"mine")]
    assert reads == [0, len(answered[0][0].records)]  # parked once, read again once


def test_a_fetch_answers_at_once_when_every_wait_slot_is_held(harness: Harness) -> None:
    """Parked fetches hold request threads; beyond `fetch.waits.max` a fetch does not wait."""
    harness.manager.fetch_waits = Slots(1)
    answered: list[dict[int, broker_pb2.FetchPartitionResult]] = []

    def park() -> None:
        answered.append(harness.fetch({0: 0}, wait_ms=30_000, min_bytes=1))

    parked = threading.Thread(target=park)
    parked.start()
    wait_until(lambda: harness.manager.fetch_waits.held == 1, "the first fetch parks")

    second = harness.fetch({1: 0}, wait_ms=30_000, min_bytes=1)  # returns without waiting
    assert second[1].records == b""
    assert harness.manager.fetch_waits.held == 1

    harness.produce(0, [b"wake"])
    parked.join(timeout=10)
    assert record_values(answered[0][0].records) == [(0, b"wake")]
    assert harness.manager.fetch_waits.held == 0


def test_a_parked_consumer_fetch_rereads_only_when_the_high_watermark_moves(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consumer reads up to the high-water mark, so an append that moves only the log end
    (orders-1's follower, broker 2, has not fetched it yet) is no news to it; the follower's
    fetch that moves the mark is."""
    reads = _consumer_reads(monkeypatch)
    waiter, answered = _parked(harness, 1)
    for i in range(OTHER_APPENDS):
        harness.produce(1, [b"uncommitted-%d" % i])
    assert harness.fetch({1: 0}, replica_id=2)[1].records  # the follower reads them...
    harness.fetch({1: OTHER_APPENDS}, replica_id=2)  # ...and has them: the mark moves
    waiter.join(timeout=10)
    assert answered and len(record_values(answered[0][1].records)) == OTHER_APPENDS
    assert reads == [0, len(answered[0][1].records)]  # parked once, read again once
