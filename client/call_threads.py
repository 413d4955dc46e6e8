"""Kept threads for a connection's calls: `BrokerConnection.call_async` runs each gRPC call as a
blocking call on one of them instead of through gRPC's `future`, which starts a thread of its
own whenever a call begins with none in flight on the channel (with linger 0 nearly every
produce and fetch). On the 2-core machine such a start cost about 0.15 ms at the median and
2 ms at p99 of a round trip; a kept thread's hand-over costs about 0.05 ms.

Threads start as calls need them, up to `threads_max`, and are daemon threads: a client never
closed must not hold its interpreter's exit for a call's timeout. Work submitted while every
thread is busy waits for the first one free, in order.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

Work = Callable[[], None]


class CallThreads:
    """Up to `threads_max` kept threads running submitted work, in submission order."""

    def __init__(self, name: str, threads_max: int) -> None:
        assert threads_max >= 1, threads_max
        self._name = name
        self._threads_max = threads_max
        self._work: queue.SimpleQueue[Work | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._free = 0  # threads done with their work and waiting for more
        self._closed = False

    def submit(self, work: Work) -> None:
        """Runs `work` on a free thread, a new one while under `threads_max`, else on the first
        one free. After `close`, on the caller's thread (nothing would take it)."""
        with self._lock:
            closed = self._closed
            start = False
            if closed:
                pass
            elif self._free > 0:
                self._free -= 1
            elif self._threads < self._threads_max:
                self._threads += 1
                start = True
        if closed:
            work()
            return
        self._work.put(work)
        if start:
            name = f"{self._name}-{self._threads}"
            threading.Thread(target=self._run, name=name, daemon=True).start()

    def close(self) -> None:
        """Lets each thread end after the work queued before: work submitted from now on runs
        on its caller's thread. Does not wait."""
        with self._lock:
            self._closed = True
            threads = self._threads
        for _ in range(threads):
            self._work.put(None)

    def _run(self) -> None:
        while True:
            work = self._work.get()
            if work is None:
                return
            try:
                work()
            except Exception:  # a failing callback must not take the thread with it
                log.exception("%s: a call's work failed", self._name)
            with self._lock:
                self._free += 1
