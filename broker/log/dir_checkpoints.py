"""The offset checkpoint files and the clean-shutdown marker of one log directory, as Kafka keeps
them (its LogManager and ReplicaManager): `recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint` and `replication-offset-checkpoint` (the high watermark), each one
file in the log directory with a `topic partition offset` line per partition (format:
`checkpoints`), and `.kafka_cleanshutdown`.

Why per directory: a broker with 20,000 replicas wrote three files (six fsyncs) and a marker (one
more) per partition at every shutdown, and removed each marker (one more) at start; now a
shutdown writes three files and one marker per directory.

What a caller may rely on:
- A partition's offsets reach memory at once (`CheckpointSlot.stage`) and the files at the next
  `write_all` (the broker's periodic checkpoint and its shutdown, or `PartitionLog.close` of a log
  that owns its checkpoints). A stored offset may therefore lag: a lagging recovery point only
  costs more recovery, a lagging high watermark or log start offset is what Kafka stores too.
- `CheckpointSlot.write` stores the directory's files before it returns: for offsets that must
  not come back after a crash (a truncation lowering them, DeleteRecords). Given `DeferredWrites`
  it only stages the offset and names the directory there: a batch of truncations (a fetcher
  round) then writes each directory once, as Kafka's `LogManager.truncateTo` does, instead of
  rewriting a 20,000-entry file per partition.
- A file that does not parse (damage: every write is atomic) is not trusted: its partitions
  read no offset, so an unclean start recovers their logs in full and the high watermark and log
  start are learnt again; the next write replaces it.
- The old layout (the same three names inside each partition directory) is read for a partition
  the directory's file does not list, unless that file was damaged (an old file may be older than
  what the damaged one held); the old files are removed once the directory's file holds their
  entries durably.
- The marker (`mark_clean_shutdown`) is written only after every log of the directory was closed
  and the files written; `had_clean_shutdown` says whether it was there when this object was
  made, and it is removed durably at once, before any log of the directory is opened, so a crash
  from then on is seen as one.

Threads: one lock per directory; slots of many partitions are used from many threads.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Final

from pykraft.broker.log.checkpoints import (
    HIGH_WATERMARK_FILE,
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    OffsetCheckpointFile,
    TopicPartition,
)
from pykraft.broker.log.errors import LogError
from pykraft.server_common.durable_files import fsync_directory, unlink_durably

log = logging.getLogger(__name__)

OFFSET_CHECKPOINT_FILES: Final = (RECOVERY_POINT_FILE, LOG_START_OFFSET_FILE, HIGH_WATERMARK_FILE)
CLEAN_SHUTDOWN_FILE: Final = ".kafka_cleanshutdown"


class _DirOffsets:
    """One offset checkpoint file of a log directory, with its entries in memory. Its owner's
    lock guards every method."""

    def __init__(self, log_dir: Path, name: str) -> None:
        """Reads the file; raises OSError when it cannot be read (not when it is damaged)."""
        self.name = name
        self._file = OffsetCheckpointFile(log_dir / name)
        self.damaged = False
        try:
            self._offsets = self._file.read()
        except LogError as error:
            if isinstance(error.__cause__, OSError):
                raise error.__cause__ from None
            log.warning("%s: not trusted, its partitions recover in full: %s", name, error)
            self.damaged = True
            self._offsets = {}
        self._written = dict(self._offsets)  # what the file durably holds (damaged: unknown)
        self._migrated: list[Path] = []  # old per-partition files to remove once written

    def get(self, key: TopicPartition, partition_dir: Path) -> int | None:
        if key in self._offsets or self.damaged:
            return self._offsets.get(key)
        old_file = partition_dir / self.name
        if old_file == self._file.path or not old_file.exists():
            return None
        offset = OffsetCheckpointFile(old_file).read().get(key)
        if offset is not None:
            self._offsets[key] = offset
        self._migrated.append(old_file)
        return offset

    def set(self, key: TopicPartition, offset: int | None) -> None:
        if offset is None:
            self._offsets.pop(key, None)
        else:
            self._offsets[key] = offset

    def write(self) -> None:
        """Stores the entries unless the file already holds them; raises OSError."""
        if self._offsets != self._written or self.damaged:
            snapshot = dict(self._offsets)
            self._file.write(snapshot)
            self._written = snapshot
            self.damaged = False
        if self._migrated:
            unlink_durably(self._migrated)
            self._migrated = []


class LogDirCheckpoints:
    """The three offset checkpoint files of the log directory `log_dir` (see module doc)."""

    def __init__(self, log_dir: Path) -> None:
        """Reads the files and takes the clean-shutdown marker away; raises OSError if one
        cannot be read or the marker removed."""
        self.log_dir = log_dir
        self._lock = threading.Lock()
        self._files = {name: _DirOffsets(log_dir, name) for name in OFFSET_CHECKPOINT_FILES}
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        self.had_clean_shutdown = marker.exists()
        if self.had_clean_shutdown:
            unlink_durably([marker])

    def mark_clean_shutdown(self) -> None:
        """Writes the marker: call once every log of the directory was closed cleanly and
        `write_all` returned. Raises OSError."""
        (self.log_dir / CLEAN_SHUTDOWN_FILE).touch()
        fsync_directory(self.log_dir)

    def slot(self, name: str, partition_dir: Path, key: TopicPartition) -> CheckpointSlot:
        """The entry of `key` (its log in `partition_dir`) in the file `name`."""
        assert self.log_dir in (partition_dir.parent, partition_dir), (partition_dir, self.log_dir)
        return CheckpointSlot(self, name, partition_dir, key)

    def forget(self, key: TopicPartition) -> None:
        """The partition's log was deleted: its entries go at the next write."""
        with self._lock:
            for offsets in self._files.values():
                offsets.set(key, None)

    def write_all(self) -> None:
        """Stores every file whose entries changed since it was last stored; raises OSError."""
        with self._lock:
            for offsets in self._files.values():
                offsets.write()

    def _get(self, name: str, partition_dir: Path, key: TopicPartition) -> int | None:
        with self._lock:
            return self._files[name].get(key, partition_dir)

    def _set(self, name: str, key: TopicPartition, offset: int, *, durably: bool) -> None:
        with self._lock:
            self._files[name].set(key, offset)
            if durably:
                for offsets in self._files.values():
                    offsets.write()


class CheckpointSlot:
    """One partition's offset in one of its log directory's checkpoint files."""

    def __init__(
        self, owner: LogDirCheckpoints, name: str, partition_dir: Path, key: TopicPartition
    ) -> None:
        self._owner = owner
        self._name = name
        self._partition_dir = partition_dir
        self._key = key

    def read(self) -> int | None:
        """The stored offset, or None when none is stored (or its file was damaged). Raises
        OSError or LogError(KAFKA_STORAGE_ERROR) for an old per-partition file it cannot read."""
        return self._owner._get(self._name, self._partition_dir, self._key)

    def stage(self, offset: int) -> None:
        """Sets the offset in memory; it reaches the file with the directory's next write."""
        self._owner._set(self._name, self._key, offset, durably=False)

    def write(self, offset: int, deferred: DeferredWrites | None = None) -> None:
        """Sets the offset and stores the directory's files (with every offset staged so far)
        before returning; raises OSError. With `deferred`, stages it and leaves the write to
        whoever owns `deferred`."""
        self._owner._set(self._name, self._key, offset, durably=deferred is None)
        if deferred is not None:
            deferred.owe(self._owner)


class DeferredWrites:
    """The log directories whose files owe a durable write to a batch of truncations. The
    batch's owner writes them (`LogDirCheckpoints.write_all`) once the batch is done and before
    the truncated logs may take any other write: until then a crash may bring back offsets above
    the new log ends, which is harmless only while nothing was written above them. One owner
    thread."""

    def __init__(self) -> None:
        self._owed: dict[Path, LogDirCheckpoints] = {}

    def owe(self, checkpoints: LogDirCheckpoints) -> None:
        self._owed[checkpoints.log_dir] = checkpoints

    def take(self) -> list[LogDirCheckpoints]:
        """The directories owed, in the order first named; none are owed afterwards."""
        owed, self._owed = list(self._owed.values()), {}
        return owed
