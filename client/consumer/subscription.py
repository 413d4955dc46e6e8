"""What the consumer's thread and its fetcher thread share: each assigned partition's state and
the prefetch buffer's byte count, all under one condition variable (`lock`).

Who writes what:

- The consumer's thread owns positions: it hands records out (moving `position`), seeks,
  pauses, assigns, and is the only one to take fetches off a partition's queue.
- The fetcher thread appends fetches to the tail of a queue, sets a position that is missing
  (a reset it looked up), drops the queue of a paused partition when partitions being read
  need the room (the consumer's thread never reads a paused partition's queue), and keeps its
  own bookkeeping (`fetch_in_flight`, `retry_at_ms`, ...).

`generation` tells stale answers apart: every change of position that the user makes (seek,
reset, unassign) drops the partition's queue and bumps it, and the fetcher applies an answer
only when the generation it was sent under still holds. So no record fetched for an old
position is ever handed out.

The buffer holds at most `buffer_bytes_max` bytes of fetched data, counted from the moment an
answer is queued until its last record is handed out, with one exception that keeps the
consumer moving: a single answer larger than the whole limit is taken when nothing else is
buffered or reserved (Kafka's fetch.max.bytes makes the same exception for a big first batch).
`reserved_bytes` is what fetches in flight may still bring.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from pykraft.client.consumer.fetch_buffer import CompletedFetch
from pykraft.client.offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from pykraft.client.types import TopicPartition

# auto_offset_reset -> the ListOffsets timestamp a partition without a position is reset by
# ("none" has none: poll raises NoOffsetForPartitionError instead).
RESET_TIMESTAMPS: Final = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP}


@dataclass(frozen=True, slots=True)
class ReadReplica:
    """A replica a partition's leader named to read from instead of itself (KIP-392), and
    when the consumer stops trusting it and asks the leader again (`read_replica`)."""

    broker_id: int
    expires_at_ms: int


@dataclass(eq=False, slots=True)
class PartitionState:
    """One assigned partition. `position` None means "to be looked up": by `reset_timestamp`
    (EARLIEST/LATEST), or, with neither, poll raises NoOffsetForPartitionError."""

    tp: TopicPartition
    position: int | None = None
    # The leader epoch of the batch the last record handed out came from (None: unknown, as
    # after a seek or reset); committed with the position.
    position_epoch: int | None = None
    reset_timestamp: int | None = None
    fetch_offset: int = 0  # the offset the next Fetch asks for (meaningful with a position)
    # The leader epoch of the last batch fetched below `fetch_offset` (None: unknown), sent as
    # the Fetch's last_fetched_epoch so the leader can tell whether its log was cut since.
    fetch_epoch: int | None = None
    generation: int = 0
    paused: bool = False
    fetch_in_flight: bool = False
    reset_in_flight: bool = False
    retry_at_ms: int = 0
    # Where the fetcher reads the partition from, when not its leader (fetcher's bookkeeping).
    read_replica: ReadReplica | None = None
    topic_seen: bool = False  # the metadata named a leader since the partition was assigned
    gone_reported: bool = False  # UnknownTopicOrPartitionError queued for its deletion
    fetches: deque[CompletedFetch] = field(default_factory=deque)

    @property
    def blocked_by_error(self) -> bool:
        """An error waits in the queue for the user: fetch nothing more until it is raised."""
        return bool(self.fetches) and self.fetches[-1].error is not None


class SubscriptionState:
    """The assigned partitions (in the order poll and the fetcher visit them) and the buffer."""

    def __init__(self, buffer_bytes_max: int) -> None:
        self.lock = threading.Condition()
        self.buffer_bytes_max = buffer_bytes_max
        self.partitions: dict[TopicPartition, PartitionState] = {}
        self.buffered_bytes = 0
        self.reserved_bytes = 0
        # Bumped (with notify_all) whenever a waiting poll or position may have something new.
        self.version = 0
        self.fatal_error: BaseException | None = None

    def changed(self) -> None:
        """Wakes the consumer's thread; call with `lock` held."""
        self.version += 1
        self.lock.notify_all()

    def current(self, state: PartitionState, generation: int) -> bool:
        """Whether an answer sent for `state` under `generation` still applies."""
        return self.partitions.get(state.tp) is state and state.generation == generation

    def fits(self, size_bytes: int) -> bool:
        """Whether an answer of `size_bytes` may be buffered now (its reservation released)."""
        if self.buffered_bytes == 0 and self.reserved_bytes == 0:
            return True  # alone, even when larger than the limit: the consumer must move on
        return self.buffered_bytes + self.reserved_bytes + size_bytes <= self.buffer_bytes_max

    def free_bytes(self) -> int:
        return self.buffer_bytes_max - self.buffered_bytes - self.reserved_bytes

    def append(self, state: PartitionState, fetch: CompletedFetch) -> None:
        """Queues a fetch after the partition's others; call with `lock` held."""
        state.fetches.append(fetch)
        self.buffered_bytes += fetch.size_bytes
        self.changed()

    def pop(self, state: PartitionState) -> None:
        """Drops the partition's first fetch (handed out or raised); call with `lock` held."""
        fetch = state.fetches.popleft()
        self.buffered_bytes -= fetch.size_bytes

    def invalidate(self, state: PartitionState) -> None:
        """Forgets what was fetched for the old position; call with `lock` held."""
        self.buffered_bytes -= sum(f.size_bytes for f in state.fetches)
        state.fetches.clear()
        state.generation += 1
        state.retry_at_ms = 0

    def move(
        self,
        state: PartitionState,
        position: int | None,
        reset: int | None,
        *,
        epoch: int | None = None,
    ) -> None:
        """Sets a new position (None: look one up by `reset`) whose last record was written
        in leader `epoch` (None: unknown, no truncation check until a batch is fetched);
        forgets what was fetched for the old one. Call with `lock` held."""
        self.invalidate(state)
        state.position = position
        state.position_epoch = state.fetch_epoch = epoch
        state.fetch_offset = 0 if position is None else position
        state.reset_timestamp = reset
        self.changed()

    def assign(self, partitions: Sequence[TopicPartition], reset: int | None) -> None:
        """Makes `partitions` the ones read, in this order: those kept keep their state, new
        ones start without a position (to be looked up by `reset`), and what was fetched for
        the others is forgotten. Call with `lock` held."""
        old = self.partitions
        for tp, state in old.items():
            if tp not in partitions:
                self.invalidate(state)
        self.partitions = {
            tp: old.get(tp) or PartitionState(tp, reset_timestamp=reset) for tp in partitions
        }
        self.changed()

    def rotate(self, tp: TopicPartition) -> None:
        """Moves `tp` to the back, so the next poll and fetch serve the others first."""
        self.partitions[tp] = self.partitions.pop(tp)
