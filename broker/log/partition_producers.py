"""The idempotent producers of one partition log, kept in step with its batches and its
producer snapshot files: the part of Kafka's ProducerStateManager that UnifiedLog drives
(snapshots at roll and close, reload on restart and truncation, cleanup when segments go).

`producer_state` is the state itself (pure, in memory); `producer_snapshots` its files. This
module ties them to the log's segments:
- Appends (a follower's too, so a new leader dedupes retries of what the old one wrote) go
  through `state`.
- Truncation and restarts: `reload` deletes the snapshots above the new log end and loads the
  newest usable one at or below it, then replays the batch headers after it from the segments.
- Segment deletion: producers stay; `delete_obsolete` removes the snapshots no load can use.
- Clean restarts (issue 18 §1.2, thousands of logs): a clean close leaves a snapshot at the log
  end, or none at all when the log has no producers and no snapshot (`close_snapshot`; Kafka's
  LogLoader too takes a cleanly closed log without snapshots as one without producers). So a
  clean open reads no file: the state is read on first use (`state`), from that snapshot.

What a caller may rely on: after every method, `state` is the state after every batch below
the log end the caller passed or appended; no snapshot above that end survives a reload.

Threads: no lock of its own. The caller (`PartitionLog`) holds its log lock for every call, and
for `reload` (and the constructor) also keeps the segments from changing (`LocalLog.exclusive()`,
or sole ownership while opening).
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

from pykraft.broker.log.errors import storage_error
from pykraft.broker.log.producer_snapshots import (
    delete_obsolete_snapshots,
    delete_snapshots,
    delete_snapshots_above,
    load_newest_snapshot,
    snapshot_offsets,
    write_snapshot,
)
from pykraft.broker.log.producer_state import ProducerStateManager
from pykraft.broker.log.segment_view import SegmentView, read_view
from pykraft.proto.record_batch import BatchError, iter_batches

# Bytes read at a time when replaying batch headers into the producer state.
PRODUCER_SCAN_BYTES_MAX: Final = 1 << 20


class PartitionProducers:
    """The producer state of the partition log in `directory` and its snapshot files."""

    def __init__(
        self,
        directory: Path,
        views: Callable[[], SegmentView],
        *,
        log_start_offset: int,
        log_end_offset: int,
        names: Iterable[str],
        clean: bool,
    ) -> None:
        """The state after every batch below `log_end_offset` (see `reload`), then deletes the
        snapshots no later load can use. `views` gives the log's current segments; `names` are
        the directory's files (its one listing at open); from here on this object knows which
        snapshots exist, since it alone writes and deletes them. After a `clean` shutdown
        whose close left its snapshot (or none, see `close_snapshot`) the state is read on
        first use. Raises OSError."""
        self.directory = directory
        self._views = views
        self._offsets = snapshot_offsets(names)
        self._state: ProducerStateManager | None = None
        self._deferred_end = log_end_offset  # where the state is read from on first use
        if not (clean and self._offsets[-1:] in ([], [log_end_offset])):
            self._state = self._reloaded(views(), log_end_offset)
        self.delete_obsolete(views(), log_start_offset)

    @property
    def state(self) -> ProducerStateManager:
        """The current state. `reload` replaces it, so take it afresh for every use. Its first
        use after a clean open reads it (LogError(KAFKA_STORAGE_ERROR) if that fails); the
        caller holds its log lock, which keeps the segments from changing meanwhile."""
        if self._state is None:
            if not self._offsets:
                self._state = ProducerStateManager(self._deferred_end)
                return self._state
            try:
                self._state = self._reloaded(self._views(), self._deferred_end)
            except OSError as error:
                raise storage_error(f"{self.directory}: producer state: {error}") from error
        return self._state

    def snapshot_offsets(self) -> list[int]:
        """The offsets of the snapshot files, in increasing order."""
        return list(self._offsets)

    def write_snapshot(self, offset: int, *, fsync: bool = True) -> None:
        """Stores the state as the snapshot at `offset` (a roll's new base offset or the log
        end at close: no batch lies between the state's end and it). One already at `offset`
        stays as it is (Kafka's takeSnapshot): every change of the state since it was written
        moved the log end past it or deleted it, so an idle partition's close writes none.
        `fsync` as for `replace_durably`. Raises OSError."""
        if offset in self._offsets:
            return
        write_snapshot(self.directory, self.state, offset, fsync=fsync)
        if offset not in self._offsets:
            insort(self._offsets, offset)

    def close_snapshot(self, offset: int, *, fsync: bool = True) -> None:
        """`write_snapshot` at a clean close (`offset`: the log end), except that a log with
        no producers and no snapshot writes none: a clean open then starts from an empty
        state (see the constructor). At 20,000 replicas one new file per log was most of a
        shutdown. A roll still snapshots, so a crash replays at most the active segment."""
        if not self._offsets and (self._state is None or not self._state.entries()):
            return
        self.write_snapshot(offset, fsync=fsync)

    def reload(self, view: SegmentView, log_end_offset: int) -> None:
        """After the log was cut to `log_end_offset` (a batch boundary): the snapshots above it
        go, and the state becomes the one after every batch below it. Raises OSError."""
        self._state = self._reloaded(view, log_end_offset)

    def delete_all_snapshots(self) -> None:
        """Removes every snapshot (the log is emptied); `reload` then starts afresh. Raises
        OSError."""
        delete_snapshots(self.directory, self._offsets)
        self._offsets = []

    def delete_obsolete(self, view: SegmentView, log_start_offset: int) -> None:
        """After the log start moved or segments went: removes the snapshots no load can use
        (see `producer_snapshots.delete_obsolete_snapshots`). Raises OSError."""
        self._offsets = delete_obsolete_snapshots(
            self.directory,
            self._offsets,
            first_segment_offset=view.bases[0],
            log_start_offset=log_start_offset,
        )

    def _reloaded(self, view: SegmentView, log_end_offset: int) -> ProducerStateManager:
        self._offsets = delete_snapshots_above(self.directory, self._offsets, log_end_offset)
        return rebuilt_producer_state(self.directory, self._offsets, view, log_end_offset)


def rebuilt_producer_state(
    directory: Path, snapshots: list[int], view: SegmentView, end_offset: int
) -> ProducerStateManager:
    """The producer state after every batch below `end_offset` (a batch boundary): the newest
    usable snapshot at or below it, then the batch headers after the snapshot read back from
    the segments. The caller keeps the segments from changing meanwhile. Raises OSError, also
    for a batch header that does not parse (damage the caller must treat as a storage
    failure)."""
    state = load_newest_snapshot(
        directory, snapshots, low_offset=view.bases[0], high_offset=end_offset
    )
    offset = state.end_offset
    while offset < end_offset:
        try:
            found = read_view(view, offset, PRODUCER_SCAN_BYTES_MAX, end_offset)
            if found is None:
                break  # the rest is a gap the leader's cleaner left
            data, _, next_offset = found
            batches = iter_batches(data, verify=False)
            headers = [h for _, h in batches if h.base_offset >= offset]
        except BatchError as error:
            raise OSError(f"replaying producer state at offset {offset}: {error}") from error
        assert next_offset > offset, (offset, next_offset)  # progress bounds the loop
        state.apply(headers)
        offset = next_offset
    return state
