"""The segments' shared/exclusive lock of `PartitionLog`.

Reads (`read`, `offset_for_timestamp`, `segments`) hold it shared, so they run concurrently
with appends and with each other; only structural changes (truncation, segment deletion and
replacement, rollback, close) hold it exclusively. A reader therefore sees every batch of an
append or none of it, and never a segment list half replaced.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class SharedExclusiveLock:
    """Many shared holders or one exclusive holder; a waiting exclusive holder stops new
    shared ones from entering, so truncation is not starved by a stream of reads. Not
    re-entrant."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._exclusive_waiting = 0

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._condition:
            while self._exclusive or self._exclusive_waiting:
                self._condition.wait()
            self._shared += 1
        try:
            yield
        finally:
            with self._condition:
                self._shared -= 1
                self._condition.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._condition:
            self._exclusive_waiting += 1
            while self._exclusive or self._shared:
                self._condition.wait()
            self._exclusive_waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._condition:
                self._exclusive = False
                self._condition.notify_all()
