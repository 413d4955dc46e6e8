"""Checkpoint files: Kafka's text format byte for byte, the round trip, refusal of damaged
files, and the atomic write (temp file, fsync, rename, fsync of the directory)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pykraft.broker.log import LogError
from pykraft.broker.log.checkpoints import (
    EpochEntry,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    TopicPartition,
)
from pykraft.proto import common_pb2


def test_offset_checkpoint_is_kafkas_text_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    OffsetCheckpointFile(path).write({TopicPartition("b", 1): 7, TopicPartition("a", 0): 42})
    assert path.read_text() == "0\n2\na 0 42\nb 1 7\n"
    assert OffsetCheckpointFile(path).read() == {
        TopicPartition("a", 0): 42,
        TopicPartition("b", 1): 7,
    }


def test_leader_epoch_checkpoint_is_kafkas_text_format(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    LeaderEpochCheckpointFile(path).write([EpochEntry(1, 0), EpochEntry(3, 17)])
    assert path.read_text() == "0\n2\n1 0\n3 17\n"
    assert LeaderEpochCheckpointFile(path).read() == [EpochEntry(1, 0), EpochEntry(3, 17)]


def test_missing_files_read_as_empty(tmp_path: Path) -> None:
    assert OffsetCheckpointFile(tmp_path / "x").read() == {}
    assert LeaderEpochCheckpointFile(tmp_path / "y").read() == []


@pytest.mark.parametrize(
    "content",
    [
        "1\n0\n",  # unknown version
        "0\n2\na 0 1\n",  # fewer entries than the count says
        "0\n1\na 0\n",  # a field missing
        "0\n1\na 0 x\n",  # not a number
        "0\n1\na 0 -5\n",  # negative
        "0\n1\na 0 12",  # torn inside the last line (the whole file ends with a newline)
        "0\n2\na 0 1\nb 0 2",  # torn, each line whole but the last one's newline
        "",
    ],
)
def test_damaged_offset_checkpoint_is_a_storage_error(tmp_path: Path, content: str) -> None:
    (tmp_path / "cp").write_text(content)
    with pytest.raises(LogError) as raised:
        OffsetCheckpointFile(tmp_path / "cp").read()
    assert raised.value.error_code == common_pb2.KAFKA_STORAGE_ERROR


def test_epochs_out_of_order_are_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / "cp").write_text("0\n2\n3 10\n2 20\n")
    with pytest.raises(LogError) as raised:
        LeaderEpochCheckpointFile(tmp_path / "cp").read()
    assert raised.value.error_code == common_pb2.KAFKA_STORAGE_ERROR


def test_write_is_fsynced_then_renamed_then_directory_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "fsync file")
        real_fsync(fd)

    def replace(source: str | Path, target: str | Path) -> None:
        events.append("rename")
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    LeaderEpochCheckpointFile(tmp_path / "cp").write([EpochEntry(0, 0)])
    assert events == ["fsync file", "rename", "fsync dir"]


def test_a_failed_write_leaves_the_old_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = OffsetCheckpointFile(tmp_path / "cp")
    checkpoint.write({TopicPartition("t", 0): 5})

    def failing_replace(source: str | Path, target: str | Path) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        checkpoint.write({TopicPartition("t", 0): 6})
    assert checkpoint.read() == {TopicPartition("t", 0): 5}
