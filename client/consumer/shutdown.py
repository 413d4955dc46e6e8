"""How a `Consumer` closes: the one call any thread may make.

close marks the consumer closing first, under the subscription's lock, so a `poll` or an
iteration blocked in another thread wakes and returns (an empty list, or the end of the
iteration). The group work (final commit, on_partitions_revoked, leave, pending commit_async
callbacks) then runs on the closing thread, once the application thread has let go of the
consumer's lock, within close's timeout. Last the threads stop and the connections close; a
consumer dropped without close does that much too, from its finalizer (`shut_down`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final, Self

from pykraft.client.broker_connection import ConnectionPool
from pykraft.client.consumer.arguments import timeout_or
from pykraft.client.consumer.fetcher import Fetcher
from pykraft.client.consumer.group import ConsumerGroup
from pykraft.client.consumer.subscription import SubscriptionState

# close() waits at most this long for the fetcher thread (it stops within milliseconds: the
# connection pool is closed first, which cancels whatever request it waits on).
_CLOSE_JOIN_MS_MAX: Final = 5000
# Kafka's default bound on close (DEFAULT_CLOSE_TIMEOUT_MS): the final commit and the leave.
_CLOSE_TIMEOUT_MS: Final = 30000


class Shutdown:
    """The close half of `Consumer`, which mixes it in and sets what it reads: the flags
    `_closing` (poll and iteration return) and `_closed` (every other call raises), the lock
    the application thread's group work holds (`_app_lock`), and `_shut_down`, the finalizer
    that runs `shut_down` once."""

    _subscription: SubscriptionState
    _fetcher: Fetcher
    _group: ConsumerGroup | None
    _app_lock: threading.RLock
    _closing: bool
    _closed: bool
    _shut_down: Callable[[], object]

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the consumer is closed")

    def close(self, timeout_ms: int | None = None) -> None:
        """Stops the fetcher thread and closes the connections; idempotent, and the one
        method another thread may call (a blocked poll or iteration then returns).

        In a group it first commits the positions (with auto commit), calls
        on_partitions_revoked, leaves the group (a static member only for now: its
        partitions wait for it until its session times out), and runs the callbacks of
        pending commit_async calls, all within `timeout_ms` (default 30000, Kafka's). Raises
        what the listener raised, once everything is closed."""
        timeout_ms = timeout_or(_CLOSE_TIMEOUT_MS, timeout_ms)
        subscription = self._subscription
        with subscription.lock:
            if self._closing:
                return
            self._closing = True
            subscription.changed()
        errors: list[Exception] = []
        try:
            if self._group is not None:
                errors = self._close_group(self._group, timeout_ms)
        finally:
            self._closed = True
            self._shut_down()
            self._fetcher.join(_CLOSE_JOIN_MS_MAX)
        if errors:
            raise errors[0]

    def _close_group(self, group: ConsumerGroup, timeout_ms: int) -> list[Exception]:
        """The group part of close, once the application thread is out of poll."""
        if not self._app_lock.acquire(timeout=timeout_ms / 1000):
            return []  # the application thread is stuck (in a listener?): no commit, no leave
        try:
            return group.close(timeout_ms)
        finally:
            self._app_lock.release()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def shut_down(
    fetcher: Fetcher, pool: ConnectionPool, stop_group: Callable[[], None] | None
) -> None:
    """Stops the fetcher thread (and the group's threads), then closes the connections, which
    cancels the request it may be waiting on (so it stops within milliseconds)."""
    fetcher.stop()
    if stop_group is not None:
        stop_group()
    pool.close()
