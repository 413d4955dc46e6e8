"""Where each record's end-to-end time went: the bench's own times (send, acknowledgement,
receipt) beside the brokers' latency trace (`pykraft.broker.latency_trace`), one clock for all.

Per record, each step's time is the first moment the step's end offset passed the record's
offset. With replication factor 3 the high-water mark waits for both followers, so the
follower steps are those of the follower whose next fetch came last (the one the mark waited
for). A step missing from the trace (a record written before the trace, or a broker of another
tree) leaves that record out of the steps that need it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bench.cluster import percentile
from pykraft.broker import latency_trace as trace

# (partition) -> the times, in order, at which the step's end offset first passed each offset:
# the running maximum of the offsets and the time it was reached.
_Steps = dict[tuple[str, str, int, int], tuple[list[int], list[int]]]

# The rows printed: (name, from, to); "sent", "acked" and "received" are the bench's times,
# "follower_*" the gating follower's.
STAGES: tuple[tuple[str, str, str], ...] = (
    ("send -> leader has the request (client, sender, trip)", "sent", trace.Step.PRODUCE_IN),
    ("leader append", trace.Step.PRODUCE_IN, trace.Step.LEADER_APPEND),
    (
        "append -> follower fetch answered with it",
        trace.Step.LEADER_APPEND,
        trace.Step.FOLLOWER_READ,
    ),
    (
        "-> follower appended (answer's trip, apply)",
        trace.Step.FOLLOWER_READ,
        trace.Step.FOLLOWER_APPEND,
    ),
    (
        "-> follower's next fetch at the leader",
        trace.Step.FOLLOWER_APPEND,
        trace.Step.FOLLOWER_FETCH,
    ),
    ("-> high-water mark moved", trace.Step.FOLLOWER_FETCH, trace.Step.HIGH_WATERMARK),
    ("mark -> produce answered", trace.Step.HIGH_WATERMARK, trace.Step.PRODUCE_OUT),
    ("produce answered -> ack callback", trace.Step.PRODUCE_OUT, "acked"),
    ("mark -> consumer fetch answered", trace.Step.HIGH_WATERMARK, trace.Step.CONSUMER_READ),
    ("consumer fetch answered -> record polled", trace.Step.CONSUMER_READ, "received"),
    ("send -> ack", "sent", "acked"),
    ("send -> receipt (end to end)", "sent", "received"),
)
_FOLLOWER_STEPS = (trace.Step.FOLLOWER_READ, trace.Step.FOLLOWER_APPEND, trace.Step.FOLLOWER_FETCH)


@dataclass
class RecordTimes:
    """The bench's times of one record (perf_counter_ns); acked is None without an ack."""

    sent_ns: int
    received_ns: int
    acked_ns: int | None = None


@dataclass
class Trace:
    """The brokers' trace files, indexed for lookups by record."""

    steps: _Steps = field(default_factory=dict)

    @classmethod
    def read(cls, directory: Path) -> Trace:
        rows: dict[tuple[str, str, int, int], list[tuple[int, int]]] = {}
        for path in sorted(directory.glob("*.trace")):
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.startswith("#"):
                    print(f"trace {path.name}: {line}")
                    continue
                event, replica, topic, partition, offset, at_ns = line.split()
                key = (event, topic, int(partition), int(replica))
                rows.setdefault(key, []).append((int(at_ns), int(offset)))
        steps: _Steps = {}
        for key, events in rows.items():
            events.sort()
            reached: list[int] = []
            times: list[int] = []
            for at, end_offset in events:
                if not reached or end_offset > reached[-1]:
                    reached.append(end_offset)
                    times.append(at)
            steps[key] = (reached, times)
        return cls(steps)

    def at_ns(
        self, event: str, topic: str, partition: int, offset: int, replica: int
    ) -> int | None:
        """When `event` first passed `offset` (its end offset rose above it), or None."""
        found = self.steps.get((event, topic, partition, replica))
        if found is None:
            return None
        reached, times = found
        index = bisect.bisect_right(reached, offset)
        return times[index] if index < len(times) else None

    def replicas(self, event: str, topic: str, partition: int) -> list[int]:
        return [r for (e, t, p, r) in self.steps if (e, t, p) == (event, topic, partition)]

    def moments(
        self, topic: str, partition: int, offset: int, times: RecordTimes
    ) -> dict[str, int]:
        """Every known moment of one record, by step name."""
        found: dict[str, int] = {"sent": times.sent_ns, "received": times.received_ns}
        if times.acked_ns is not None:
            found["acked"] = times.acked_ns
        for event in trace.Step:
            if event in _FOLLOWER_STEPS:
                continue
            at = self.at_ns(event, topic, partition, offset, trace.NO_REPLICA)
            if at is not None:
                found[event] = at
        marked = found.get(trace.Step.HIGH_WATERMARK)
        if marked is not None:
            found.update(self._gating_follower(topic, partition, offset, marked))
        return found

    def _gating_follower(
        self, topic: str, partition: int, offset: int, marked_ns: int
    ) -> dict[str, int]:
        """The follower steps of the follower whose fetch past `offset` came last before the
        high-water mark passed it (`marked_ns`); a replica that fetched it only later was not
        in the way (a leader that became a follower at shutdown, say)."""
        best: dict[str, int] = {}
        for replica in self.replicas(trace.Step.FOLLOWER_FETCH, topic, partition):
            steps = {
                event: self.at_ns(event, topic, partition, offset, replica)
                for event in _FOLLOWER_STEPS
            }
            fetched = steps[trace.Step.FOLLOWER_FETCH]
            if fetched is None or fetched > marked_ns:
                continue
            if best and fetched <= best[trace.Step.FOLLOWER_FETCH]:
                continue
            best = {event: at for event, at in steps.items() if at is not None}
        return best


def stage_ms(
    trace_: Trace, topic: str, records: dict[tuple[int, int], RecordTimes]
) -> dict[str, list[float]]:
    """Each stage's durations (ms) over the records that have both its ends."""
    durations: dict[str, list[float]] = {name: [] for name, _, _ in STAGES}
    for (partition, offset), times in records.items():
        moments = trace_.moments(topic, partition, offset, times)
        for name, start, end in STAGES:
            if start in moments and end in moments:
                durations[name].append((moments[end] - moments[start]) / 1e6)
    return durations


def print_table(labels: Iterable[str], stages: list[dict[str, list[float]]]) -> None:
    """One row per stage, p50 / p99 (ms) in a column per run."""
    print("| stage | " + " | ".join(f"{label} p50 / p99 ms" for label in labels) + " |")
    print("|---" * (1 + len(stages)) + "|")
    for name, _, _ in STAGES:
        cells = [
            f"{percentile(run[name], 0.5):.2f} / {percentile(run[name], 0.99):.2f}"
            if run[name]
            else "-"
            for run in stages
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
