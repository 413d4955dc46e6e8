"""What `Producer.send` returns: a future per record over one result per batch (Kafka's
FutureRecordMetadata over ProduceRequestResult).

A `concurrent.futures.Future` per record costs a lock and a condition variable each, which
showed in the profile as a large share of `send`; here a batch carries one `BatchResult` (one
Event) and each record's future is a small object pointing into it. The methods mirror
`concurrent.futures.Future`'s: `result`, `exception`, `done`, `add_done_callback`. Timeouts
raise TimeoutError; callbacks run once the batch is done, on the producer's sender thread (or at
once, on the caller's thread, if it already is).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from pykraft.client.types import RecordMetadata, TopicPartition

log = logging.getLogger(__name__)

RecordCallback = Callable[["FutureRecordMetadata"], None]


class BatchResult:
    """The outcome of one batch: its base offset and append time, or the error that failed it.
    Set exactly once.

    At most three objects for the garbage collector (itself and two locks; its callback list
    exists only once a callback is added): a producer keeps one per batch in flight, and each
    tracked object that outlives two young collections counts toward the next full one, which
    walks every future a caller keeps. With an Event it was nine (the Event, its Condition,
    their dicts, the waiters' deque, the callback list)."""

    __slots__ = (
        "_callbacks", "_done", "_lock", "_unset", "base_offset", "error", "log_append_time_ms"
    )  # fmt: skip

    def __init__(self) -> None:
        self._done = False
        self._lock = threading.Lock()  # guards _done and _callbacks
        # Held until the result is set: a waiter takes it and hands it straight back, so every
        # waiter passes once it is released.
        self._unset = threading.Lock()
        self._unset.acquire()
        self._callbacks: list[tuple[FutureRecordMetadata, RecordCallback]] | None = None
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.error: BaseException | None = None

    def set(self, base_offset: int, log_append_time_ms: int, error: BaseException | None) -> None:
        """Records the outcome, wakes every waiter, then runs the callbacks in record order."""
        with self._lock:
            assert not self._done, "a batch's result is set once"
            self.base_offset = base_offset
            self.log_append_time_ms = log_append_time_ms
            self.error = error
            self._done = True
            callbacks, self._callbacks = self._callbacks, None
        self._unset.release()
        for future, callback in callbacks or ():
            _run(callback, future)

    def is_done(self) -> bool:
        return self._done

    def wait(self, timeout: float | None) -> bool:
        """Whether the result is set within `timeout` seconds (None: however long it takes),
        as Event.wait."""
        if self._done:
            return True
        if not self._unset.acquire(timeout=-1 if timeout is None else max(timeout, 0)):
            return False
        self._unset.release()
        return True

    def on_done(self, future: FutureRecordMetadata, callback: RecordCallback) -> None:
        """Runs `callback(future)` when the result is set, or now if it is."""
        with self._lock:
            if not self._done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append((future, callback))
                return
        _run(callback, future)


def _run(callback: RecordCallback, future: FutureRecordMetadata) -> None:
    try:
        callback(future)
    except Exception:  # a user's callback must not stop the sender thread
        log.exception("a delivery callback raised")


class FutureRecordMetadata:
    """Where one record landed, once its batch is done."""

    __slots__ = ("_index", "_result", "_timestamp_ms", "_tp")

    def __init__(
        self, result: BatchResult, tp: TopicPartition, index: int, timestamp_ms: int
    ) -> None:
        self._result = result
        self._tp = tp
        self._index = index
        self._timestamp_ms = timestamp_ms

    def done(self) -> bool:
        return self._result.is_done()

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata; raises its KafkaError, or TimeoutError after `timeout` s."""
        error = self.exception(timeout)
        if error is not None:
            raise error
        result = self._result
        offset = result.base_offset + self._index if result.base_offset >= 0 else -1
        append_ms = result.log_append_time_ms
        timestamp = append_ms if append_ms >= 0 else self._timestamp_ms
        return RecordMetadata(self._tp.topic, self._tp.partition, offset, timestamp)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The error that failed the record, None if it was delivered; TimeoutError if the
        batch is not done within `timeout` seconds."""
        if not self._result.wait(timeout):
            raise TimeoutError(f"the record for {self._tp} was not done within {timeout} s")
        return self._result.error

    def add_done_callback(self, callback: RecordCallback) -> None:
        self._result.on_done(self, callback)
