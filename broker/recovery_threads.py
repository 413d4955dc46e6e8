"""Work on every log of a broker at once: opening them at start-up and closing them at shutdown
(Kafka's `num.recovery.threads.per.data.dir` threads per log directory).

Opening and closing logs waits on files (which releases the GIL), so threads help; the logs go
to the threads LOGS_PER_TASK at a time, since a future per log cost about a second of submits
and locks at 20,000 logs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Final, TypeVar

_T = TypeVar("_T")
_R = TypeVar("_R")

LOGS_PER_TASK: Final = 200  # logs opened or closed per task of the recovery threads


class RecoveryThreads:
    """Runs work on many logs with at most `threads` threads (one: in the caller's thread)."""

    def __init__(self, threads: int) -> None:
        assert threads >= 1, threads
        self.threads = threads

    def run(self, work: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
        """`work` on each item, results in the items' order; raises the first item's error once
        every item was tried."""
        threads = min(len(items), self.threads)
        if threads <= 1:
            return _each(work, items)
        tasks = [
            items[first : first + LOGS_PER_TASK] for first in range(0, len(items), LOGS_PER_TASK)
        ]
        with ThreadPoolExecutor(threads, thread_name_prefix="log-recovery") as pool:
            # Not `pool.map`: its iterator cancels the tasks not yet started when one raises.
            futures = [pool.submit(_each, work, task) for task in tasks]
        return [result for future in futures for result in future.result()]


def _each(work: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
    """`work` on every item in order; raises the first item's error once every item was tried."""
    results: list[_R] = []
    first_error: Exception | None = None
    for item in items:
        try:
            results.append(work(item))
        except Exception as error:
            first_error = first_error or error
    if first_error is not None:
        raise first_error
    return results
