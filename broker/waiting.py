"""Waiting on a condition variable until a predicate holds or a deadline passes: the one loop
every broker wait on a condition with a deadline goes through (the group coordinator's
start-up wait, producer id blocks; acks=all produce and the coordinator's wait for its writes
wait on their partitions' watches instead, `PartitionWatches.wait_until`).

Deadlines are in the caller's clock (`clock_ms`, monotonic milliseconds), so tests can drive
them; the condition is only the wake-up signal, never a source of truth.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


def wait_until(
    condition: threading.Condition,
    is_done: Callable[[], bool],
    *,
    deadline_ms: int,
    clock_ms: Callable[[], int],
) -> bool:
    """Holding `condition`, asks `is_done()` at once and after every wake-up: True as soon as
    it says so, False once `deadline_ms` has passed by `clock_ms` with it still saying no.
    `is_done` runs under the condition's lock; what it raises propagates. The caller may
    already hold the condition if its lock is re-entrant (`threading.Condition()`'s is)."""
    with condition:
        while not is_done():
            left_ms = deadline_ms - clock_ms()
            if left_ms <= 0:
                return False
            condition.wait(left_ms / 1000)
        return True
