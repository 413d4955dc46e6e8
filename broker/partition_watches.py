"""Wake-ups by partition: a parked fetch or acks=all produce is woken only by a change of one of
its own partitions (its log end, high-water mark or role) or by a change that may concern every
partition (metadata, close), never by appends elsewhere. With many partitions and waiters on one
broker, an append then costs no thread but the ones waiting on it a wake-up and a re-read.

A waiter also says which kinds of change it reads (`Change`): one that reads only committed
records (a consumer's fetch, an acks=all wait) is not woken by an append that moves only the log
end, which is news to followers alone. Any change but those two is `Change.OTHER` and wakes all.

Usage, free of lost wake-ups: `with watches.watch(keys) as watch:` then, in a loop, `clear()`,
look, and `wait(...)`: a change signalled after `clear` (even during the look) ends the wait.
"""

from __future__ import annotations

import contextlib
import enum
import threading
from collections.abc import Callable, Collection, Iterator

Key = tuple[str, int]


class Change(enum.Flag):
    """What moved in a partition, as far as its waiters care."""

    NONE = 0
    LOG_END = enum.auto()  # records appended: news to followers
    HIGH_WATERMARK = enum.auto()  # news to consumers, acks=all waits and followers (case H)
    OTHER = enum.auto()  # a role, a truncation, the replica dropped: news to everyone
    ALL = LOG_END | HIGH_WATERMARK | OTHER


# What a reader of committed records waits for (consumers, acks=all waits).
COMMITTED = Change.HIGH_WATERMARK | Change.OTHER


class Watch:
    """One waiter's wake-up signal (set by `PartitionWatches.changed` for a change in
    `interest`)."""

    def __init__(self, interest: Change) -> None:
        self.interest = interest
        self._event = threading.Event()

    def clear(self) -> None:
        """Forgets earlier changes: call it before looking."""
        self._event.clear()

    def note(self, key: Key | None) -> None:
        """A change in its interest of partition `key` (None: of every partition): wakes the
        waiter. A subclass may also keep which partitions changed (`fetch_sessions`)."""
        del key  # a plain waiter rereads all its partitions
        self._event.set()

    def wait(self, *, deadline_ms: int, clock_ms: Callable[[], int]) -> bool:
        """True once a change is signalled after the last `clear`, False once `deadline_ms`
        has passed by `clock_ms` (monotonic milliseconds) without one."""
        while not self._event.is_set():
            left_ms = deadline_ms - clock_ms()
            if left_ms <= 0:
                return False
            self._event.wait(left_ms / 1000)
        return True


class PartitionWatches:
    """The watches of parked fetches, by the partitions they wait on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[Key, set[Watch]] = {}

    @contextlib.contextmanager
    def watch(self, keys: Collection[Key], interest: Change = Change.ALL) -> Iterator[Watch]:
        """A watch woken by changes in `interest` of `keys` (or of all) while the block runs."""
        watch = Watch(interest)
        self.add(watch, keys)
        try:
            yield watch
        finally:
            self.remove(watch, keys)

    def add(self, watch: Watch, keys: Collection[Key]) -> None:
        """Notes changes of `keys` to `watch` from now on, until `remove`: for a watch that
        outlives a request (a fetch session's)."""
        with self._lock:
            for key in keys:
                self._by_key.setdefault(key, set()).add(watch)

    def remove(self, watch: Watch, keys: Collection[Key]) -> None:
        with self._lock:
            for key in keys:
                watching = self._by_key.get(key)
                if watching is not None:
                    watching.discard(watch)
                    if not watching:
                        del self._by_key[key]

    def wait_until(
        self,
        keys: Collection[Key],
        is_done: Callable[[], bool],
        *,
        deadline_ms: int,
        clock_ms: Callable[[], int],
        interest: Change = Change.ALL,
    ) -> bool:
        """Asks `is_done()` at once and after every change in `interest` of `keys` (or of all):
        True as soon as it says so, False once `deadline_ms` has passed by `clock_ms` with it
        still saying no (`waiting.wait_until`, woken by these partitions only)."""
        with self.watch(keys, interest) as watch:
            while True:
                watch.clear()  # before looking: a change during the look ends the wait at once
                if is_done():
                    return True
                if clock_ms() >= deadline_ms:
                    return False
                watch.wait(deadline_ms=deadline_ms, clock_ms=clock_ms)

    def changed(self, key: Key | None, change: Change = Change.ALL) -> None:
        """Wakes the watches of partition `key` (None: of every partition) whose interest
        includes `change`."""
        with self._lock:
            if key is None:
                woken = {w for watching in self._by_key.values() for w in watching}
            else:
                woken = set(self._by_key.get(key, ()))
        for watch in woken:
            if watch.interest & change:
                watch.note(key)
