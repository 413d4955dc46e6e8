"""The latency trace (issue 17 §5): where a produced record's time goes inside the brokers.

Off by default. With the environment variable PYKRAFT_LATENCY_TRACE naming a directory, a
broker notes, per partition, the moments a record passes each step as
`step replica topic partition offset monotonic_ns` lines (`Step`), kept in memory and
written to `DIR/<pid>.trace` when the process exits. `offset` is an end offset (every record
below it has passed the step): the produce request's arrival and its append, the leader's answer
to a follower fetch carrying records, the follower's append, the follower's next fetch (its
fetch offset), the high-water mark's move, the produce answer and a consumer fetch's answer.
`replica` names the follower for the follower's steps, else -1.

Times are CLOCK_MONOTONIC nanoseconds (`time.perf_counter_ns`), one clock for every process on
the machine, so a bench lays them beside its own send, acknowledgement and receipt times
(`bench/latency.py` prints the breakdown). When off, each call site costs one test of `TRACE`.
"""

from __future__ import annotations

import atexit
import enum
import os
import threading
import time
from pathlib import Path
from typing import Final

ENVIRONMENT_VARIABLE: Final = "PYKRAFT_LATENCY_TRACE"
# Memory bound: at 10,000 records/s and a handful of events per batch, minutes of tracing.
TRACE_EVENTS_MAX: Final = 5_000_000
NO_REPLICA: Final = -1


class Step(enum.StrEnum):
    """The steps a record passes, in the order it passes them (a consumer's read comes after
    the high-water mark's move)."""

    PRODUCE_IN = "produce_in"
    LEADER_APPEND = "leader_append"
    FOLLOWER_READ = "follower_read"
    FOLLOWER_APPEND = "follower_append"
    FOLLOWER_FETCH = "follower_fetch"
    HIGH_WATERMARK = "high_watermark"
    PRODUCE_OUT = "produce_out"
    CONSUMER_READ = "consumer_read"


Event = tuple[Step, int, str, int, int, int]


class LatencyTrace:
    """The events of one process, written to `path` by `write` (at exit)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._events: list[Event] = []
        self._lock = threading.Lock()
        self.dropped = 0

    def note(
        self,
        event: Step,
        topic: str,
        partition: int,
        offset: int,
        *,
        replica: int = NO_REPLICA,
        at_ns: int | None = None,
    ) -> None:
        """Notes that every record of `topic`-`partition` below `offset` passed `event` at
        `at_ns` (default: now); beyond TRACE_EVENTS_MAX events are only counted."""
        at = time.perf_counter_ns() if at_ns is None else at_ns
        with self._lock:
            if len(self._events) >= TRACE_EVENTS_MAX:
                self.dropped += 1
                return
            self._events.append((event, replica, topic, partition, offset, at))

    def write(self) -> None:
        with self._lock:
            events, self._events = self._events, []
        lines = "".join(f"{e} {r} {t} {p} {o} {at}\n" for e, r, t, p, o, at in events)
        with open(self.path, "a", encoding="utf-8") as file:
            file.write(lines)
            if self.dropped:
                file.write(f"# dropped {self.dropped} events beyond {TRACE_EVENTS_MAX}\n")


def _from_environment() -> LatencyTrace | None:
    directory = os.environ.get(ENVIRONMENT_VARIABLE)
    if not directory:
        return None
    trace = LatencyTrace(Path(directory) / f"{os.getpid()}.trace")
    atexit.register(trace.write)
    return trace


# The process's trace, or None (the default): call sites test it before noting anything.
TRACE: Final = _from_environment()
