"""IsrUpdater: a leader of more partitions than one controller operation may change sends its ISR
changes in several AlterPartition requests (one request for 10,000 partitions was refused as
too large, again and again, so a restarted broker never rejoined their ISRs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf.message import Message

from pykraft.broker import alter_partition
from pykraft.broker.alter_partition import IsrUpdater
from pykraft.proto import controller_pb2

from .replica_harness import Harness


class RecordingCaller:
    """Answers every AlterPartition with no partition changed, and keeps the requests."""

    def __init__(self) -> None:
        self.requests: list[controller_pb2.AlterPartitionRequest] = []

    def call(self, method: str, request: Message, response_type: type, timeout_s: float) -> object:
        assert method == "AlterPartition" and isinstance(
            request, controller_pb2.AlterPartitionRequest
        )
        self.requests.append(request)
        return controller_pb2.AlterPartitionResponse()


def test_isr_changes_go_in_requests_of_a_bounded_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(alter_partition, "ALTER_PARTITION_PARTITIONS_MAX", 2, raising=False)
    harness = Harness(tmp_path, assignments=[(1, 2)] * 5)
    caller = RecordingCaller()
    updater = IsrUpdater(
        harness.manager,
        caller,  # type: ignore[arg-type]
        broker_id=1,
        broker_epoch=lambda: 1,
        may_serve=lambda now_ms: True,
        lag_time_max_ms=10,
        request_timeout_ms=1000,
        clock_ms=lambda: 60_000,  # follower 2 has not fetched for a minute: it leaves every ISR
    )
    try:
        updater.check_once()
    finally:
        harness.manager.close()
    sizes = [sum(len(t.partitions) for t in request.topics) for request in caller.requests]
    assert sizes == [2, 2, 1]
    asked = [p.partition for r in caller.requests for t in r.topics for p in t.partitions]
    assert sorted(asked) == [0, 1, 2, 3, 4]
