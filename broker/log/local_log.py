"""The segment files of one partition log (Kafka's LocalLog): which segments exist, the lock
that guards their structure, and whether the files can still be trusted.

`PartitionLog` keeps the offsets, epochs, producer state and checkpoints and serialises every
mutation under its own lock; it (or `log_start`, under that lock) calls the structural
primitives here (`truncate_segments`, `reset_at`, `delete_oldest`, `swap`) while holding
`exclusive()` and inside `failing_on_error`, so readers (`reading()`) never see a structure
half changed and a failure halfway takes the log offline.

Offline: if a storage error leaves files that only a reopen can sort out (an undo that failed,
an interrupted structural change), `failure` says why and every later mutation raises
KAFKA_STORAGE_ERROR (`check_writable`); reopening the directory recovers it.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import NoReturn

from pykraft.broker.log.config import LogConfig
from pykraft.broker.log.errors import storage_error
from pykraft.broker.log.segment import LogSegment, SegmentInfo
from pykraft.broker.log.segment_names import SEGMENT_SUFFIXES, file_name
from pykraft.broker.log.segment_swap import commit_swap, delete_replaced
from pykraft.broker.log.segment_view import SegmentView
from pykraft.broker.log.shared_lock import SharedExclusiveLock
from pykraft.proto.record_batch import BatchError
from pykraft.server_common.durable_files import fsync_directory, unlink_durably

log = logging.getLogger(__name__)


class LocalLog:
    """The segments of `directory`, oldest first; the last one is the active segment."""

    def __init__(self, directory: Path, config: LogConfig, segments: Sequence[LogSegment]) -> None:
        self.directory = directory
        self._config = config
        self._view = SegmentView.of(segments)
        self._lock = SharedExclusiveLock()
        self._failure: str | None = None
        self.closed = False

    # --- the segments ---

    @property
    def view(self) -> SegmentView:
        """The current segments; replaced whole, never changed, so a reader may keep it."""
        return self._view

    @property
    def active(self) -> LogSegment:
        return self._view.segments[-1]

    def publish(self, segments: Sequence[LogSegment]) -> None:
        self._view = SegmentView.of(segments)

    def configure(self, config: LogConfig) -> None:
        """New segments get `config`; existing ones take its roll and index settings."""
        self._config = config
        for segment in self._view.segments:
            segment.configure(config)

    def infos(self) -> tuple[SegmentInfo, ...]:
        with self.reading():
            return tuple(segment.info() for segment in self._view.segments)

    # --- locking and failure ---

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Holds the structure shared; LogError(KAFKA_STORAGE_ERROR) if closed or for an
        OSError or damaged batch met while reading."""
        with self._lock.shared():
            if self.closed:
                raise storage_error(f"{self.directory} is closed")
            try:
                yield
            except (OSError, BatchError) as error:
                raise storage_error(f"read of {self.directory}: {error}") from error

    def exclusive(self) -> AbstractContextManager[None]:
        """Holds the structure exclusively (no reader inside)."""
        return self._lock.exclusive()

    @property
    def failure(self) -> str | None:
        """Why this log went offline after a storage error it could not undo, else None."""
        return self._failure

    def fail(self, reason: str) -> None:
        log.error("%s: going offline: %s", self.directory, reason)
        self._failure = reason

    @contextmanager
    def failing_on_error(self, what: str) -> Iterator[None]:
        """An OSError inside leaves files that only a reopen can sort out: offline."""
        try:
            yield
        except OSError as error:
            self.fail(f"{what}: {error}")
            raise storage_error(f"{what}: {error}") from error

    def undo(self, what: str, error: OSError, undo: Callable[[], None]) -> NoReturn:
        """Runs `undo` exclusively, then raises KAFKA_STORAGE_ERROR for `error`; if `undo`
        fails too, the log goes offline."""
        try:
            with self._lock.exclusive():
                undo()
        except OSError as undo_error:
            self.fail(f"{what} failed ({error}) and could not be undone ({undo_error})")
        raise storage_error(f"{what}: {error}") from error

    def check_writable(self) -> None:
        if self.closed:
            raise storage_error(f"{self.directory} is closed")
        if self._failure is not None:
            raise storage_error(f"{self.directory} is offline: {self._failure}")

    # --- changes of structure ---

    def roll(self, base_offset: int) -> LogSegment:
        """Creates and publishes a new active segment at `base_offset`; on OSError removes
        what it made (or goes offline) and raises KAFKA_STORAGE_ERROR."""
        created: list[LogSegment] = []
        try:
            created.append(LogSegment.create(self.directory, base_offset, self._config))
            fsync_directory(self.directory)
        except OSError as error:

            def undo() -> None:
                for segment in created:
                    segment.close_files()
                names = [file_name(base_offset, suffix) for suffix in SEGMENT_SUFFIXES]
                unlink_durably([self.directory / name for name in names])

            self.undo(f"roll at {base_offset}", error, undo)
        self.publish((*self._view.segments, created[0]))
        return created[0]

    def flush(self, recovery_point: int, *, fsync: bool = True) -> None:
        """fsyncs the segments holding offsets at or above `recovery_point`, and the active
        one (without `fsync`, see LogSegment.flush). Raises OSError."""
        segments = self._view.segments
        for segment in segments:
            if segment.next_offset > recovery_point or segment is segments[-1]:
                segment.flush(fsync=fsync)

    def truncate_segments(self, offset: int) -> int:
        """Deletes the segments starting above `offset` and cuts the one holding it before
        the batch holding `offset`; returns the new end. Hold `exclusive()`; raises OSError."""
        view = self._view
        keep = bisect_right(view.bases, offset)
        for segment in reversed(view.segments[keep:]):
            segment.delete()
        fsync_directory(self.directory)
        self.publish(view.segments[:keep])
        view.segments[keep - 1].truncate_to(offset)
        return view.segments[keep - 1].next_offset

    def reset_at(self, offset: int) -> None:
        """Replaces every segment by an empty one at `offset`. Hold `exclusive()`; raises
        OSError."""
        for segment in reversed(self._view.segments):
            segment.delete()
        self.publish([LogSegment.create(self.directory, offset, self._config)])
        fsync_directory(self.directory)

    def delete_oldest(self, count: int) -> None:
        """Deletes the `count` oldest segments (never the active one). Hold `exclusive()`;
        raises OSError."""
        view = self._view
        assert 0 < count < len(view.segments), "the active segment stays"
        self.publish(view.segments[count:])
        for segment in view.segments[:count]:
            segment.delete()
        fsync_directory(self.directory)

    def swap(self, start: int, count: int, cleaned: Sequence[LogSegment]) -> None:
        """Puts `cleaned` in place of the `count` segments from `start` (module segment_swap).
        Hold `exclusive()`; raises OSError, after which the log must go offline."""
        view = self._view
        replaced = view.segments[start : start + count]
        commit_swap(self.directory, replaced, cleaned)
        self.publish((*view.segments[:start], *cleaned, *view.segments[start + count :]))
        delete_replaced(replaced)

    def close(self) -> None:
        """Closes every file, exclusively; reads and writes fail from now on."""
        with self._lock.exclusive():
            for segment in self._view.segments:
                segment.close_files()
            self.closed = True
