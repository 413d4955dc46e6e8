"""A parked Fetch looks again only when one of its own partitions (or the metadata) changed:
appends to other partitions wake its thread but cost it no re-read (issue 17 §4)."""

from __future__ import annotations

import threading

import pytest

from pykraft.broker import fetch
from pykraft.metadata_log.records import PartitionChangeRecord
from pykraft.proto import broker_pb2

from .images import ORDERS_ID
from .replica_harness import Harness, record_values

OTHER_APPENDS = 20


def test_change_marks_follow_only_their_own_partitions(harness: Harness) -> None:
    manager = harness.manager
    mine = [("orders", 0)]
    mark = manager.change_mark(mine)
    harness.produce(1, [b"elsewhere"])
    assert manager.change_mark(mine) == mark
    harness.produce(0, [b"mine"])
    moved = manager.change_mark(mine)
    assert moved != mark
    harness.change(PartitionChangeRecord(ORDERS_ID, 2, leader=2))
    assert manager.change_mark(mine) != moved  # a metadata change may concern every partition


def test_a_parked_fetch_rereads_only_when_its_partition_changes(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[int] = []
    first_read = threading.Event()
    read_all = fetch._read_all

    def counting(*args: object) -> tuple[broker_pb2.FetchResponse, int, bool]:
        answer = read_all(*args)  # type: ignore[arg-type]
        reads.append(answer[1])
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
