"""The replicated state machine: offsets in commit order, the epoch check that drops decisions of a
deposed controller, the bounded tail behind MetadataFetch, and snapshot/restore."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator

import pytest

from pykraft.metadata_log.records import NoOpRecord, Record, TopicRecord
from pykraft.quorum import state_machine
from pykraft.quorum.batch import BatchKind, CorruptBatchError, QuorumBatch
from pykraft.quorum.roles import IllegalTransitionError, Role, RoleState
from pykraft.quorum.state_machine import (
    REMEMBERED_BATCHES_MAX,
    Applied,
    MetadataStateMachine,
    Rejected,
)


def _leader_change(epoch: int, leader: int) -> bytes:
    return QuorumBatch(BatchKind.LEADER_CHANGE, epoch, leader, (NoOpRecord(),)).encode()


def _records(epoch: int, leader: int, *records: Record) -> bytes:
    return QuorumBatch(BatchKind.RECORDS, epoch, leader, records).encode()


def _topic(name: str) -> TopicRecord:
    return TopicRecord(name=name, topic_id=uuid.uuid4())


def test_batch_round_trips_and_rejects_garbage() -> None:
    batch = QuorumBatch(BatchKind.RECORDS, 7, 2, (_topic("a"), NoOpRecord()))
    assert QuorumBatch.decode(batch.encode()) == batch
    for bad in (b"", b"\x00" * 11, b"\x4b\x00\x09" + b"\x00" * 8):
        with pytest.raises(CorruptBatchError):
            QuorumBatch.decode(bad)


def test_offsets_follow_commit_order() -> None:
    machine = MetadataStateMachine(tail_records_max=100)
    assert machine.apply(_leader_change(1, 1)) == Applied(0, 0)
    assert machine.apply(_records(1, 1, _topic("a"), _topic("b"))) == Applied(1, 2)
    assert machine.apply(_records(1, 1, _topic("c"))) == Applied(3, 3)
    assert machine.last_offset == 3 and machine.image.epoch == 1
    assert set(machine.image.topics.by_name) == {"a", "b", "c"}


def test_decisions_of_a_deposed_controller_are_dropped() -> None:
    machine = MetadataStateMachine(tail_records_max=100)
    machine.apply(_leader_change(1, 1))
    machine.apply(_leader_change(3, 2))
    # Controller 1 decided this in epoch 1; pysyncobj may still deliver it after epoch 3 began.
    assert machine.apply(_records(1, 1, _topic("stale"))) == Rejected(1, 3)
    # Same epoch number but another leader: also not the active controller.
    assert isinstance(machine.apply(_records(3, 1, _topic("imposter"))), Rejected)
    # An older LEADER_CHANGE cannot reopen a past epoch.
    assert isinstance(machine.apply(_leader_change(2, 3)), Rejected)
    assert machine.image.topics.get_by_name("stale") is None
    assert machine.last_offset == 1
    assert machine.apply(_records(3, 2, _topic("fresh"))) == Applied(2, 2)


def test_tail_is_bounded_and_far_fetchers_need_a_snapshot() -> None:
    machine = MetadataStateMachine(tail_records_max=5)
    machine.apply(_leader_change(1, 1))
    for i in range(10):
        machine.apply(_records(1, 1, _topic(f"t{i}")))
    assert machine.batches_after(0, bytes_max=1 << 20) is None
    recent = machine.batches_after(8, bytes_max=1 << 20)
    assert recent is not None and [b.base_offset for b in recent] == [9, 10]
    assert machine.batches_after(10, bytes_max=1 << 20) == []
    one = machine.batches_after(8, bytes_max=1)
    assert one is not None and len(one) == 1  # always at least one batch


def test_snapshot_restores_an_equal_machine() -> None:
    machine = MetadataStateMachine(tail_records_max=100)
    machine.apply(_leader_change(4, 3))
    machine.apply(_records(4, 3, _topic("a"), _topic("b")))
    restored = MetadataStateMachine(tail_records_max=100)
    restored.restore(machine.snapshot())
    assert restored.image == machine.image
    assert (restored.active_epoch, restored.active_leader_id) == (4, 3)
    # After a restore the tail is empty: anyone behind gets a snapshot; the log goes on in order.
    assert restored.batches_after(0, bytes_max=1 << 20) is None
    assert restored.apply(_records(4, 3, _topic("c"))) == Applied(3, 3)


def _forty_topics(monkeypatch: pytest.MonkeyPatch) -> MetadataStateMachine:
    """A machine whose snapshot takes several parts: 40 topics, parts of at most 256 bytes."""
    monkeypatch.setattr(state_machine, "SNAPSHOT_CHUNK_BYTES_MAX", 256)
    machine = MetadataStateMachine(tail_records_max=100)
    machine.apply(_leader_change(2, 1))
    machine.apply(_records(2, 1, *(_topic(f"t{i:02d}") for i in range(40))))
    return machine


def test_a_snapshot_comes_in_bounded_parts_fixed_when_it_was_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    machine = _forty_topics(monkeypatch)
    image = machine.image
    parts = machine.snapshot()
    machine.apply(_records(2, 1, _topic("after")))  # applies go on while the parts are drawn
    drawn = list(parts)
    assert len(drawn) >= 5 and all(len(part) <= 256 for part in drawn)
    restored = MetadataStateMachine(tail_records_max=100)
    restored.restore(iter(drawn))
    assert restored.image == image and restored.last_offset == 40


def test_a_restore_that_fails_midway_leaves_the_state_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = _forty_topics(monkeypatch)
    machine = MetadataStateMachine(tail_records_max=100)
    machine.apply(_leader_change(7, 3))
    machine.apply(_records(7, 3, _topic("mine")))
    image = machine.image

    def damaged() -> Iterator[bytes]:
        parts = source.snapshot()
        yield from itertools.islice(parts, 3)
        raise ValueError("chunk 3 fails its checksum")

    with pytest.raises(ValueError, match="chunk 3"):
        machine.restore(damaged())
    assert machine.image is image
    assert (machine.active_epoch, machine.active_leader_id) == (7, 3)
    assert machine.apply(_records(7, 3, _topic("next"))) == Applied(2, 2)
    with pytest.raises(ValueError, match="header"):
        machine.restore(iter([]))


def test_role_transitions_raise_on_illegal_edges() -> None:
    standby = RoleState.standby()
    activating = standby.to_activating(5)
    active = activating.to_active()
    assert (active.role, active.epoch) == (Role.ACTIVE, 5)
    assert active.to_standby().role is Role.STANDBY
    with pytest.raises(IllegalTransitionError):
        standby.to_active()
    with pytest.raises(IllegalTransitionError):
        active.to_activating(6)
    with pytest.raises(IllegalTransitionError):
        standby.to_activating(-1)


def test_a_remembered_batch_applies_without_being_decoded_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    machine = MetadataStateMachine(tail_records_max=100)
    machine.apply(_leader_change(1, 1))
    batch = QuorumBatch(BatchKind.RECORDS, 1, 1, (_topic("a"),))
    payload = batch.encode()
    machine.remember(payload, batch)
    decode = QuorumBatch.decode
    monkeypatch.setattr(QuorumBatch, "decode", staticmethod(_never_decoded))
    assert machine.apply(bytes(payload)) == Applied(1, 1)  # equal bytes, another object
    assert "a" in machine.image.topics.by_name
    monkeypatch.setattr(QuorumBatch, "decode", staticmethod(decode))
    assert machine.apply(_records(1, 1, _topic("b"))) == Applied(2, 2)  # not remembered


def test_remembered_batches_are_bounded_and_the_oldest_decoded_again() -> None:
    machine = MetadataStateMachine(tail_records_max=1000)
    machine.apply(_leader_change(1, 1))
    batches = [QuorumBatch(BatchKind.RECORDS, 1, 1, (_topic(f"t{i}"),)) for i in range(40)]
    for batch in batches:
        machine.remember(batch.encode(), batch)
    assert len(machine._remembered) == REMEMBERED_BATCHES_MAX
    for batch in batches:
        assert isinstance(machine.apply(batch.encode()), Applied)
    assert len(machine.image.topics.by_name) == 40 and machine._remembered_bytes == 0


def _never_decoded(payload: bytes) -> QuorumBatch:
    raise AssertionError("a remembered batch was decoded again")
