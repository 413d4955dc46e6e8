"""waiting.wait_until: the one broker loop that waits on a condition with a deadline."""

from __future__ import annotations

import threading

from pykraft.broker.waiting import wait_until


def test_a_predicate_that_holds_returns_at_once_without_reading_the_clock() -> None:
    def no_clock() -> int:
        raise AssertionError("the clock is read only when a wait is due")

    assert wait_until(threading.Condition(), lambda: True, deadline_ms=0, clock_ms=no_clock)


def test_the_deadline_ends_the_wait_by_the_callers_clock() -> None:
    now_ms = [0]

    def clock_ms() -> int:
        now_ms[0] += 10  # every look at the clock moves it on: the deadline comes
        return now_ms[0]

    asked: list[int] = []
    condition = threading.Condition()

    def is_done() -> bool:
        asked.append(now_ms[0])
        return False

    assert not wait_until(condition, is_done, deadline_ms=25, clock_ms=clock_ms)
    assert asked == [0, 10, 20], "asked at once and after each wait, then no more"


def test_a_notify_wakes_the_wait_and_the_predicate_decides() -> None:
    condition = threading.Condition()
    ready = threading.Event()
    done = [False]

    def is_done() -> bool:
        ready.set()
        return done[0]

    def finish() -> None:
        ready.wait(5)
        with condition:
            done[0] = True
            condition.notify_all()

    threading.Thread(target=finish).start()
    clock = iter(range(0, 10**9, 1))
    assert wait_until(condition, is_done, deadline_ms=10**9, clock_ms=lambda: next(clock))
