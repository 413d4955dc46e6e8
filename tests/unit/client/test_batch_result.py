"""`BatchResult`, the one outcome every record future of a batch shares: set once, waited on by
any number of threads, and light for the garbage collector, since a producer keeps one per
batch in flight and each object the collector tracks that outlives two young collections counts
toward the next full one (which walks every future a caller keeps)."""

from __future__ import annotations

import gc
import threading

from pykraft.client.producer.future import BatchResult

WAITERS = 8


def test_a_result_is_at_most_three_objects_for_the_collector() -> None:
    """Itself and its two locks (an Event made it nine)."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        before = len(gc.get_objects())
        results = [BatchResult() for _ in range(100)]
        assert len(gc.get_objects()) - before <= 3 * len(results) + 1  # and the list
    finally:
        if enabled:
            gc.enable()


def test_every_waiter_wakes_once_the_result_is_set() -> None:
    result = BatchResult()
    woken: list[bool] = []
    waiters = [
        threading.Thread(target=lambda: woken.append(result.wait(10))) for _ in range(WAITERS)
    ]
    for waiter in waiters:
        waiter.start()
    assert not result.wait(0.01) and not result.is_done()
    result.set(5, -1, None)
    for waiter in waiters:
        waiter.join(10)
    assert woken == [True] * WAITERS
    assert result.is_done() and result.wait(0) and result.wait(None) and result.wait(-1)
    assert (result.base_offset, result.log_append_time_ms, result.error) == (5, -1, None)


def test_a_wait_without_the_result_ends_after_its_timeout() -> None:
    result = BatchResult()
    assert result.wait(0) is False and result.wait(-1) is False
    done: list[bool] = []
    waiter = threading.Thread(target=lambda: done.append(result.wait(0.05)))
    waiter.start()
    waiter.join(10)
    assert done == [False] and not result.is_done()


def test_callbacks_run_in_order_once_set_and_at_once_after() -> None:
    result = BatchResult()
    called: list[object] = []
    result.on_done("first", called.append)  # type: ignore[arg-type]
    result.on_done("second", called.append)  # type: ignore[arg-type]
    assert called == []
    result.set(0, -1, RuntimeError("failed"))
    assert called == ["first", "second"]
    result.on_done("late", called.append)  # type: ignore[arg-type]
    assert called == ["first", "second", "late"]
