"""The checker of a chaos history (see history.py for its operations): pure code, no I/O.

Anomalies carry the names of Jepsen's Kafka checker (jepsen.tests.kafka):

- `lost-write`: an acknowledged send that no read ever returned, although reads got past its
  offset in its partition;
- `unseen`: an acknowledged send missing from the final read after healing;
- `duplicate`: one value read at two positions;
- `inconsistent-offsets`: two values at one offset (across readers, replicas, or an
  acknowledgement and a read);
- `nonmonotonic-send`: one producer's acknowledged offsets in a partition do not grow in the
  order it sent;
- `nonmonotonic-poll`: a reader's next record in a partition is not after its previous one;
- `poll-skip`: a reader jumped over offsets that hold records;
- `aborted-read`: a send that certainly failed was read (Jepsen's G1a);
- `phantom`: a value nobody sent was read;
- `committed-backwards`: a group's committed offset for a partition went down;
- `committed-unread` (ours; Jepsen has no groups): a record below the group's last committed
  offset that no member ever polled, although members commit only what they processed;
- `replica-divergence`: after healing, two replicas differ below the high-water mark.

Which of them fail the run depends on what the producer promised (Kafka's model):

| producer              | lost-write, unseen | duplicate | nonmonotonic-send |
| --------------------- | ------------------ | --------- | ----------------- |
| acks=all, idempotent  | failure            | failure   | failure           |
| acks=all, plain       | failure            | info      | info              |
| acks=1                | info               | info      | info              |

acks=1 is acknowledged by the leader alone, so a leader failover may truncate it (Kafka
documents this); a producer without idempotence may write a retried batch twice and, with
several requests in flight, reorder it. Such findings are reported as `info`, never as a
failure. Everything about reads (inconsistent-offsets between reads, nonmonotonic-poll and
poll-skip within one assignment, aborted-read, phantom), committed-backwards and
replica-divergence is a failure whatever the producer. Group members may re-read after a
rebalance: their poll order is checked only between an `assign` and the next `revoke`.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tests.chaos.history import Op

FAILURE = "failure"
INFO = "info"
EVIDENCE_MAX = 20  # per anomaly in the summary


@dataclass(frozen=True)
class ProducerKind:
    acks: str
    idempotent: bool

    def severity(self, anomaly: str) -> str:
        if anomaly in ("lost-write", "unseen", "ack-inconsistent-offsets"):
            return FAILURE if self.acks == "all" else INFO
        if anomaly in ("duplicate", "nonmonotonic-send"):
            return FAILURE if self.acks == "all" and self.idempotent else INFO
        return FAILURE


UNKNOWN_PRODUCER = ProducerKind(acks="all", idempotent=True)  # no config line: strictest


@dataclass
class CheckResult:
    failures: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    infos: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return not self.failures

    def add(self, anomaly: str, severity: str, **evidence: Any) -> None:
        (self.failures if severity == FAILURE else self.infos)[anomaly].append(evidence)

    def summary(self) -> dict[str, Any]:
        def counted(found: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
            return {
                name: {"count": len(items), "evidence": items[:EVIDENCE_MAX]}
                for name, items in sorted(found.items())
            }

        return {
            "valid": self.valid,
            "failures": counted(self.failures),
            "infos": counted(self.infos),
            "stats": self.stats,
        }


@dataclass
class _Send:
    process: str
    index: int  # position of its invoke in the history
    outcome: str = "invoke"
    partition: int = -1
    offset: int = -1


def _producer_kinds(ops: list[Op]) -> dict[str, ProducerKind]:
    return {
        op["process"]: ProducerKind(str(op["acks"]), bool(op["idempotent"]))
        for op in ops
        if op["f"] == "config"
    }


def _sends(ops: list[Op], result: CheckResult) -> dict[str, _Send]:
    sends: dict[str, _Send] = {}
    for index, op in enumerate(ops):
        if op["f"] != "send":
            continue
        value = str(op["value"])
        if op["type"] == "invoke":
            sends[value] = _Send(op["process"], index)
            continue
        send = sends.setdefault(value, _Send(op["process"], index))
        send.outcome = op["type"]
        if op["type"] == "ok":
            send.partition, send.offset = int(op["partition"]), int(op["offset"])
    result.stats["sends"] = len(sends)
    for outcome in ("ok", "fail", "info", "invoke"):
        result.stats[f"sends_{outcome}"] = sum(s.outcome == outcome for s in sends.values())
    return sends


class _Reads:
    """What the reads saw: positions of each value, values at each position."""

    def __init__(self, ops: list[Op]) -> None:
        self.positions: dict[str, set[tuple[int, int]]] = defaultdict(set)
        self.at: dict[tuple[int, int], set[str]] = defaultdict(set)
        self.polled: set[str] = set()  # values returned by consumers (replicas excluded)
        self.final: set[str] = set()
        self.has_final = False
        self.max_polled: dict[int, int] = defaultdict(lambda: -1)
        known: dict[int, set[int]] = defaultdict(set)
        for op in ops:
            if op["f"] not in ("poll", "replica") or op["type"] != "ok":
                continue
            final = bool(op.get("final"))
            self.has_final = self.has_final or final
            for partition, offset, value in op["records"]:
                self.positions[value].add((partition, offset))
                self.at[(partition, offset)].add(value)
                known[partition].add(offset)
                if op["f"] == "poll":
                    self.polled.add(value)
                    self.max_polled[partition] = max(self.max_polled[partition], offset)
                if final:
                    self.final.add(value)
        self.known = {p: sorted(offsets) for p, offsets in known.items()}

    def known_between(self, partition: int, low: int, high: int) -> list[int]:
        """Offsets known to hold records strictly between low and high."""
        offsets = self.known.get(partition, [])
        return offsets[bisect.bisect_right(offsets, low) : bisect.bisect_left(offsets, high)]


def _check_values(
    sends: dict[str, _Send], reads: _Reads, kinds: dict[str, ProducerKind], result: CheckResult
) -> None:
    for position, values in sorted(reads.at.items()):
        if len(values) > 1:
            result.add("inconsistent-offsets", FAILURE, partition=position[0],
                       offset=position[1], values=sorted(values))  # fmt: skip
    for value, positions in sorted(reads.positions.items()):
        send = sends.get(value)
        if send is None:
            result.add("phantom", FAILURE, value=value, positions=sorted(positions))
            continue
        kind = kinds.get(send.process, UNKNOWN_PRODUCER)
        if len(positions) > 1:
            result.add("duplicate", kind.severity("duplicate"), value=value,
                       process=send.process, positions=sorted(positions))  # fmt: skip
        if send.outcome == "fail":
            result.add("aborted-read", FAILURE, value=value, positions=sorted(positions))
    checked = 0
    for value, send in sends.items():
        if send.outcome != "ok":
            continue
        kind = kinds.get(send.process, UNKNOWN_PRODUCER)
        checked += 1
        where = {"value": value, "process": send.process, "partition": send.partition,
                 "offset": send.offset}  # fmt: skip
        others = reads.at.get((send.partition, send.offset), set()) - {value}
        if others and (send.partition, send.offset) not in reads.positions.get(value, set()):
            result.add("inconsistent-offsets", kind.severity("ack-inconsistent-offsets"),
                       read_there=sorted(others), **where)  # fmt: skip
        if value not in reads.polled and reads.max_polled[send.partition] > send.offset:
            result.add("lost-write", kind.severity("lost-write"),
                       max_read_offset=reads.max_polled[send.partition], **where)  # fmt: skip
        if reads.has_final and value not in reads.final:
            result.add("unseen", kind.severity("unseen"), **where)
    result.stats["acknowledged_checked"] = checked
    result.stats["acknowledged_all_checked"] = sum(
        1
        for s in sends.values()
        if s.outcome == "ok" and kinds.get(s.process, UNKNOWN_PRODUCER).acks == "all"
    )
    result.stats["values_read"] = len(reads.positions)


def _check_send_order(
    sends: dict[str, _Send], kinds: dict[str, ProducerKind], result: CheckResult
) -> None:
    acked: dict[tuple[str, int], list[tuple[int, int, str]]] = defaultdict(list)
    for value, send in sends.items():
        if send.outcome == "ok":
            acked[(send.process, send.partition)].append((send.index, send.offset, value))
    for (process, partition), items in sorted(acked.items()):
        items.sort()
        kind = kinds.get(process, UNKNOWN_PRODUCER)
        for (_, before, first), (_, after, second) in itertools.pairwise(items):
            if after <= before:
                result.add("nonmonotonic-send", kind.severity("nonmonotonic-send"),
                           process=process, partition=partition,
                           sent=[first, second], offsets=[before, after])  # fmt: skip


def _check_poll_order(ops: list[Op], reads: _Reads, result: CheckResult) -> None:
    last: dict[tuple[str, int], int] = {}
    for op in ops:
        process = op["process"]
        if op["f"] in ("assign", "revoke"):
            for partition in op["partitions"]:
                last.pop((process, partition), None)
            continue
        if op["f"] != "poll" or op["type"] != "ok":
            continue
        for partition, offset, value in op["records"]:
            before = last.get((process, partition))
            last[(process, partition)] = offset
            if before is None:
                continue
            where = {"process": process, "partition": partition, "from": before, "to": offset}
            if offset <= before:
                result.add("nonmonotonic-poll", FAILURE, value=value, **where)
            else:
                skipped = reads.known_between(partition, before, offset)
                if skipped:
                    result.add("poll-skip", FAILURE, skipped=skipped[:10], **where)


def _check_commits(ops: list[Op], result: CheckResult) -> None:
    seen: dict[tuple[str, str], int] = {}
    for op in ops:
        if op["type"] != "ok" or op["f"] not in ("commit", "committed"):
            continue
        # A member's own commits, and the monitor's reads of the group's offsets.
        source = op["process"] if op["f"] == "commit" else "monitor"
        for partition, offset in op["offsets"].items():
            before = seen.get((source, partition))
            seen[(source, partition)] = int(offset)
            if before is not None and int(offset) < before:
                result.add("committed-backwards", FAILURE, source=op["process"],
                           partition=int(partition), from_offset=before, to_offset=int(offset),
                           time=op["time"])  # fmt: skip


def _check_group_reads(ops: list[Op], result: CheckResult) -> None:
    members = {op["process"] for op in ops if op["f"] == "commit"}
    committed: dict[int, int] = {}
    for op in ops:
        if op["f"] == "committed" and op["type"] == "ok":
            committed.update({int(p): int(o) for p, o in op["offsets"].items()})
    polled: set[tuple[int, int]] = set()
    final: set[tuple[int, int]] = set()
    for op in ops:
        if op["f"] == "poll" and op["type"] == "ok":
            target = final if op.get("final") else polled if op["process"] in members else None
            if target is not None:
                target.update((p, o) for p, o, _ in op["records"])
    missed = sorted((p, o) for p, o in final - polled if members and o < committed.get(p, -1))
    for partition, offset in missed:
        result.add("committed-unread", FAILURE, partition=partition, offset=offset,
                   committed=committed[partition])  # fmt: skip


def check(ops: list[Op], replica_divergence: Iterable[dict[str, Any]] = ()) -> CheckResult:
    """Checks a history (ordered by time); `replica_divergence` is what check_replicas found."""
    result = CheckResult()
    result.stats["ops"] = len(ops)
    kinds = _producer_kinds(ops)
    sends = _sends(ops, result)
    reads = _Reads(ops)
    _check_values(sends, reads, kinds, result)
    _check_send_order(sends, kinds, result)
    _check_poll_order(ops, reads, result)
    _check_commits(ops, result)
    _check_group_reads(ops, result)
    for item in replica_divergence:
        result.add("replica-divergence", FAILURE, **item)
    return result


Batch = tuple[int, int, bytes]  # base offset, last offset, the batch's bytes as stored


def _first_difference(one: list[Batch], other: list[Batch]) -> int:
    for a, b in zip(one, other, strict=False):
        if a != b:
            return min(a[0], b[0])
    longer = one if len(one) > len(other) else other
    return longer[min(len(one), len(other))][0]


def check_replicas(
    logs: dict[int, dict[int, list[Batch]]], high_watermarks: dict[int, int]
) -> list[dict[str, Any]]:
    """Replicas must hold byte-identical batches below each partition's high-water mark.

    `logs` maps broker -> partition -> its batches in log order. Returns one finding per
    partition where two replicas differ (the first differing base offset)."""
    found: list[dict[str, Any]] = []
    for partition, high_watermark in sorted(high_watermarks.items()):
        below = {
            broker: [b for b in partitions.get(partition, []) if b[0] < high_watermark]
            for broker, partitions in sorted(logs.items())
            if partition in partitions
        }
        if len(below) < 2:
            continue
        (reference_broker, reference), *others = below.items()
        for broker, batches in others:
            if batches == reference:
                continue
            first = _first_difference(reference, batches)
            found.append({
                "partition": partition, "brokers": [reference_broker, broker],
                "high_watermark": high_watermark, "first_difference": first,
                "batches": [len(reference), len(batches)],
            })  # fmt: skip
    return found
