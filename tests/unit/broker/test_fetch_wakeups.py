"""A parked Fetch looks again only when one of its own partitions (or the metadata) changed:
appends to other partitions wake its thread but cost it no re-read (issue 17 §4)."""

from __future__ import annotations

import threading

import pytest

from pykraft.broker import fetch
from pykraft.broker.partition_watches import PartitionWatches
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


def test_a_parked_fetch_rereads_only_when_its_partition_changes(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[int] = []
    first_read = threading.Event()
    read_all = fetch._read_all

    def counting(*args: object) -> tuple[broker_pb2.FetchResponse, list[int], bool]:
        answer = read_all(*args)  # type: ignore[arg-type]
        reads.append(sum(answer[1]))
        first_read.set()
        return answer

    monkeypatch.setattr(fetch, "_read_all", counting)
    answered: list[dict[int, broker_pb2.FetchPartitionResult]] = []
    waiter = threading.Thread(
        target=lambda: answered.append(harness.fetch({0: 0}, wait_ms=30_000, min_bytes=1))
    )
    waiter.start()
    assert first_read.wait(timeout=10)
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
