"""The controller's Raft snapshot file: written from the state machine's parts as they are drawn
and restored chunk by chunk (never the whole encoding in memory), every chunk checked; a damaged
file is refused with a clear error and the state is left as it was."""

from __future__ import annotations

import pickle
import struct
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path

import crc32c
import pytest

from pykraft.metadata_log import MetadataImage, encode_records, replay_all
from pykraft.metadata_log.records import PartitionRecord, Record, TopicRecord
from pykraft.quorum import state_machine
from pykraft.quorum.raft import SnapshotCorruptError
from pykraft.quorum.raft.snapshot_file import (
    read_raft_data,
    reading_snapshot_file,
    write_snapshot_file,
)
from pykraft.quorum.state_machine import MetadataStateMachine

RAFT_DATA = pickle.dumps(((b"c", 9, 2), (b"b", 8, 2), set()))
CHUNK_BYTES_MAX = 32 * 1024


def _machine(topic_count: int, per_topic: int) -> MetadataStateMachine:
    """A state machine holding `topic_count` topics of `per_topic` partitions (RF 3)."""
    records: list[Record] = []
    for t in range(topic_count):
        topic_id = uuid.UUID(int=t + 1)
        records.append(TopicRecord(f"topic-{t:05d}", topic_id))
        for p in range(per_topic):
            replicas = tuple(1 + (p + k) % 3 for k in range(3))
            records.append(PartitionRecord(topic_id, p, replicas, replicas, replicas[0], 0, 0))
    machine = MetadataStateMachine(tail_records_max=1)
    machine.image = replay_all(MetadataImage.EMPTY, records).apply(offset=len(records), epoch=3)
    machine.active_epoch, machine.active_leader_id = 3, 2
    return machine


def _restored(path: Path) -> MetadataStateMachine:
    machine = MetadataStateMachine(tail_records_max=1)
    with reading_snapshot_file(path) as (raft_data, parts):
        assert raft_data == RAFT_DATA
        machine.restore(parts)
    return machine


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_machine, "SNAPSHOT_CHUNK_BYTES_MAX", CHUNK_BYTES_MAX)


def test_a_snapshot_round_trips_through_its_file(tmp_path: Path) -> None:
    machine = _machine(200, 20)
    path = tmp_path / "snap"
    write_snapshot_file(path, RAFT_DATA, machine.snapshot())
    assert path.stat().st_size > 4 * CHUNK_BYTES_MAX  # several chunks
    assert read_raft_data(path) == RAFT_DATA
    restored = _restored(path)
    assert restored.image == machine.image
    assert (restored.image.offset, restored.image.epoch) == (4200, 3)
    assert (restored.active_epoch, restored.active_leader_id) == (3, 2)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: data[:-1] + bytes([data[-1] ^ 1]), "chunk .* fails its checksum"),
        (lambda data: data[: len(data) // 2], "cut short in chunk"),
        (lambda data: data + b"\x00", "bytes follow the last"),
        (lambda data: data[:10], "cut short in the header"),
        (lambda data: b"PKRSNAP\x07" + data[8:], "not a file of this kind"),
        # Read as the format before chunks, whose version field this is not.
        (lambda data: b"PKRSNAP\x00" + data[8:], "unknown snapshot format version"),
    ],
)
def test_a_damaged_snapshot_is_refused_and_the_state_kept(
    tmp_path: Path, damage: Callable[[bytes], bytes], message: str
) -> None:
    path = tmp_path / "snap"
    write_snapshot_file(path, RAFT_DATA, _machine(50, 20).snapshot())
    path.write_bytes(damage(path.read_bytes()))
    machine = _machine(1, 1)
    image = machine.image
    with (
        pytest.raises(SnapshotCorruptError, match=f"{path}: {message}"),
        reading_snapshot_file(path) as (_, parts),
    ):
        machine.restore(parts)
    assert machine.image is image and machine.active_epoch == 3


def _format_1(state: bytes, raft_data: bytes) -> bytes:
    """A snapshot file as controllers wrote them before chunks (one checksum, one state)."""
    body = struct.pack("<Q", len(state)) + state + raft_data
    return struct.pack("<8sII", b"PKRSNAP\x00", 1, crc32c.crc32c(body)) + body


def test_a_snapshot_written_before_chunks_is_still_restored(tmp_path: Path) -> None:
    """An upgraded controller keeps what it compacted: the state was the header and one batch
    of every record."""
    machine = _machine(30, 5)
    image = machine.image
    header = struct.pack(">qiii", image.offset, image.epoch, 3, 2)
    path = tmp_path / "snap"
    path.write_bytes(_format_1(header + encode_records(image.write()), RAFT_DATA))
    assert read_raft_data(path) == RAFT_DATA
    restored = _restored(path)
    assert restored.image == image and (restored.active_epoch, restored.active_leader_id) == (3, 2)
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(SnapshotCorruptError, match="checksum mismatch"):
        _restored(path)


def test_writing_and_restoring_never_hold_the_whole_encoding(tmp_path: Path) -> None:
    """Issue 18 §2.2: the snapshot was one bytes object (and a list of every decoded record on
    restore), 32 MiB at 1,000,000 partitions. Now each side holds about a chunk of it at once:
    its peak, beyond what it keeps, stays below the size of the file."""
    machine = _machine(1000, 20)
    path = tmp_path / "snap"
    tracemalloc.start()
    try:
        write_snapshot_file(path, RAFT_DATA, machine.snapshot())
        _, write_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        restored = _restored(path)
        kept, restore_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    file_bytes = path.stat().st_size
    assert file_bytes > 16 * CHUNK_BYTES_MAX
    assert write_peak < file_bytes / 2, (write_peak, file_bytes)
    assert restore_peak - kept < file_bytes, (restore_peak, kept, file_bytes)
    assert restored.image == machine.image
