"""Kafka's checkpoint files, in Kafka's text format, replaced atomically and durably.

Every checkpoint is text: a version line (`0`), a line with the number of entries, then one
entry a line with space-separated fields. Two kinds exist:

- offset checkpoints (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
  `replication-offset-checkpoint` for the high watermark): entries `topic partition offset`.
  Kafka keeps one of each per log directory for all its partitions; we keep one per partition
  directory, holding that partition's single entry, so a partition's files travel together and
  no broker-wide writer is needed. The format stays Kafka's, so Kafka's tools read them.
- `leader-epoch-checkpoint` (one per partition in Kafka too): entries `epoch start_offset`.

A write goes to `<name>.tmp`, is fsynced, renamed over the file and the directory is fsynced, so
a crash leaves the old or the new content, never a mix. A file that does not parse (a torn
one included: a whole file ends with a newline and holds as many entries as it says) raises
LogError(KAFKA_STORAGE_ERROR): it can only come from damage, and guessing could lose data.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pykraft.broker.log.errors import storage_error
from pykraft.broker.log.files import read_whole
from pykraft.server_common.durable_files import replace_durably

CHECKPOINT_VERSION: Final = 0
RECOVERY_POINT_FILE: Final = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_FILE: Final = "log-start-offset-checkpoint"
HIGH_WATERMARK_FILE: Final = "replication-offset-checkpoint"
LEADER_EPOCH_FILE: Final = "leader-epoch-checkpoint"


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __post_init__(self) -> None:
        assert self.topic and " " not in self.topic, f"bad topic name {self.topic!r}"
        assert self.partition >= 0, f"bad partition {self.partition}"

    @staticmethod
    def from_directory_name(name: str) -> TopicPartition:
        """Parses Kafka's `<topic>-<partition>` directory name; ValueError if it is not one."""
        topic, dash, partition = name.rpartition("-")
        if not (topic and dash and partition.isdigit()):
            raise ValueError(f"{name!r} is not a <topic>-<partition> directory name")
        return TopicPartition(topic, int(partition))

    @property
    def directory_name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, order=True)
class EpochEntry:
    """Leader `epoch` wrote its first record at `start_offset`."""

    epoch: int
    start_offset: int

    def __post_init__(self) -> None:
        assert self.epoch >= 0 and self.start_offset >= 0, self


def encode_checkpoint(entries: Sequence[Sequence[object]]) -> bytes:
    """The file's bytes for `entries`, each a sequence of fields."""
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [" ".join(str(field) for field in entry) for entry in entries]
    return ("\n".join(lines) + "\n").encode()


def decode_checkpoint(path: Path, data: bytes, field_count: int) -> list[list[str]]:
    """The entries of a checkpoint file, each a list of `field_count` fields; raises
    LogError(KAFKA_STORAGE_ERROR) if the bytes are not a version-0 checkpoint."""
    try:
        lines = data.decode().split("\n")
    except UnicodeDecodeError:
        raise storage_error(f"{path}: not text") from None
    if not data.endswith(b"\n"):
        raise storage_error(f"{path}: torn (no newline at the end)")
    lines.pop()
    if len(lines) < 2 or lines[0] != str(CHECKPOINT_VERSION) or not lines[1].isdigit():
        raise storage_error(f"{path}: no version {CHECKPOINT_VERSION} checkpoint header")
    entries = [line.split(" ") for line in lines[2:]]
    if int(lines[1]) != len(entries):
        raise storage_error(f"{path}: says {lines[1]} entries, holds {len(entries)}")
    for entry in entries:
        if len(entry) != field_count or not all(field for field in entry):
            raise storage_error(f"{path}: malformed line {' '.join(entry)!r}")
    return entries


def _read_entries(path: Path, field_count: int) -> list[list[str]]:
    try:
        data = read_whole(path)
    except FileNotFoundError:
        return []
    except OSError as error:
        raise storage_error(f"{path}: {error}") from error
    return decode_checkpoint(path, data, field_count)


def _integer(path: Path, text: str) -> int:
    if not text.isdigit():
        raise storage_error(f"{path}: {text!r} is not an offset")
    return int(text)


class OffsetCheckpointFile:
    """An offset checkpoint: `topic partition offset` entries."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[TopicPartition, int]:
        """The stored offsets; empty when the file does not exist."""
        offsets: dict[TopicPartition, int] = {}
        for topic, partition, offset in _read_entries(self.path, 3):
            key = TopicPartition(topic, _integer(self.path, partition))
            offsets[key] = _integer(self.path, offset)
        return offsets

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Replaces the file atomically and durably; raises OSError on I/O failure."""
        entries = [(key.topic, key.partition, offset) for key, offset in sorted(offsets.items())]
        replace_durably(self.path, encode_checkpoint(entries))


class LeaderEpochCheckpointFile:
    """The leader-epoch checkpoint: `epoch start_offset` entries, in increasing order."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> list[EpochEntry]:
        """The stored entries; empty when the file does not exist."""
        entries = [
            EpochEntry(_integer(self.path, epoch), _integer(self.path, start_offset))
            for epoch, start_offset in _read_entries(self.path, 2)
        ]
        for earlier, later in itertools.pairwise(entries):
            if not (earlier.epoch < later.epoch and earlier.start_offset < later.start_offset):
                raise storage_error(f"{self.path}: {later} does not follow {earlier}")
        return entries

    def write(self, entries: Sequence[EpochEntry]) -> None:
        """Replaces the file atomically and durably; raises OSError on I/O failure."""
        encoded = [(entry.epoch, entry.start_offset) for entry in entries]
        replace_durably(self.path, encode_checkpoint(encoded))
