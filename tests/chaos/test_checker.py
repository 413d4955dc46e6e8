"""The chaos checker on hand-made histories: each anomaly is found, a clean history passes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chaos.checker import check, check_replicas
from tests.chaos.history import Op


class History:
    """Builds a history one operation at a time, with increasing times."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def op(self, process: str, op_type: str, f: str, **fields: Any) -> History:
        self.ops.append(
            {"time": float(len(self.ops)), "process": process, "type": op_type, "f": f, **fields}
        )
        return self

    def producer(self, process: str, acks: str = "all", idempotent: bool = True) -> History:
        return self.op(process, "ok", "config", acks=acks, idempotent=idempotent)

    def send(self, process: str, value: str, partition: int, offset: int | None) -> History:
        self.op(process, "invoke", "send", value=value, partition=partition)
        if offset is None:
            return self.op(process, "info", "send", value=value, error="timed out")
        return self.op(process, "ok", "send", value=value, partition=partition, offset=offset)

    def poll(self, process: str, *records: tuple[int, int, str], final: bool = False) -> History:
        return self.op(process, "ok", "poll", records=[list(r) for r in records], final=final)


def clean() -> History:
    h = History().producer("p0").producer("p1", acks="1", idempotent=False)
    h.send("p0", "p0-0", 0, 0).send("p1", "p1-0", 0, 1).send("p0", "p0-1", 0, 2)
    h.send("p0", "p0-2", 1, 0).send("p1", "p1-1", 1, None)  # p1-1: unknown outcome, never read
    h.op("c0", "ok", "assign", partitions=[0, 1])
    h.poll("c0", (0, 0, "p0-0"), (0, 1, "p1-0")).poll("c0", (0, 2, "p0-1"), (1, 0, "p0-2"))
    h.op("c0", "invoke", "commit", offsets={"0": 3, "1": 1})
    h.op("c0", "ok", "commit", offsets={"0": 3, "1": 1})
    h.op("m", "ok", "committed", offsets={"0": 2}).op("m", "ok", "committed", offsets={"0": 3})
    h.poll("final", (0, 0, "p0-0"), (0, 1, "p1-0"), (0, 2, "p0-1"), (1, 0, "p0-2"), final=True)
    return h


def anomalies(h: History) -> tuple[set[str], set[str]]:
    result = check(h.ops)
    return set(result.failures), set(result.infos)


def test_a_clean_history_passes() -> None:
    result = check(clean().ops)
    assert result.valid, result.summary()
    assert not result.infos
    assert result.stats["acknowledged_checked"] == 4
    assert result.stats["sends_info"] == 1


def test_lost_write_and_unseen() -> None:
    h = History().producer("p0")
    h.send("p0", "a", 0, 0).send("p0", "b", 0, 1).send("p0", "c", 0, 2)
    h.poll("r", (0, 0, "a"), (0, 2, "c"))
    h.poll("final", (0, 0, "a"), (0, 2, "c"), final=True)
    failures, _ = anomalies(h)
    assert {"lost-write", "unseen"} <= failures
    evidence = check(h.ops).failures["lost-write"][0]
    assert evidence["value"] == "b" and evidence["offset"] == 1


def test_unseen_when_read_once_then_gone() -> None:
    h = History().producer("p0").send("p0", "a", 0, 0).poll("r", (0, 0, "a"))
    h.poll("final", final=True)
    failures, _ = anomalies(h)
    assert failures == {"unseen"}


def test_acks_1_losses_are_info_not_failure() -> None:
    h = History().producer("p1", acks="1", idempotent=False)
    h.send("p1", "a", 0, 0).send("p1", "b", 0, 1)
    h.producer("px").send("px", "x", 0, 1).send("px", "y", 0, 2)
    h.poll("final", (0, 0, "a"), (0, 1, "x"), (0, 2, "y"), final=True)
    failures, infos = anomalies(h)
    assert not failures
    assert {"lost-write", "unseen", "inconsistent-offsets"} <= infos


def test_acks_all_overwritten_offset_is_inconsistent() -> None:
    h = History().producer("p0").send("p0", "a", 0, 0).send("p0", "b", 0, 0)
    h.poll("final", (0, 0, "b"), final=True)
    failures, _ = anomalies(h)
    assert "inconsistent-offsets" in failures


def test_two_values_at_one_offset_across_readers() -> None:
    h = History().producer("p0").send("p0", "a", 0, 0).send("p0", "b", 0, 1)
    h.poll("r1", (0, 0, "a")).poll("r2", (0, 0, "b"))
    assert "inconsistent-offsets" in anomalies(h)[0]


def test_two_values_at_one_offset_across_replicas() -> None:
    h = History().producer("p0").send("p0", "a", 0, 0).send("p0", "b", 0, 1)
    h.op("replica-1", "ok", "replica", records=[[0, 1, "b"]])
    h.op("replica-2", "ok", "replica", records=[[0, 1, "a"]])
    assert "inconsistent-offsets" in anomalies(h)[0]


@pytest.mark.parametrize(
    ("acks", "idempotent", "is_failure"),
    [("all", True, True), ("all", False, False), ("1", False, False)],
)
def test_duplicate_fails_only_idempotent_producers(
    acks: str, idempotent: bool, is_failure: bool
) -> None:
    h = History().producer("p", acks=acks, idempotent=idempotent).send("p", "a", 0, 0)
    h.poll("r", (0, 0, "a"), (0, 1, "a"))
    failures, infos = anomalies(h)
    assert ("duplicate" in failures) is is_failure
    assert ("duplicate" in infos) is not is_failure


def test_nonmonotonic_send() -> None:
    h = History().producer("p0").send("p0", "a", 0, 5).send("p0", "b", 0, 3)
    assert "nonmonotonic-send" in anomalies(h)[0]
    plain = History().producer("p2", idempotent=False).send("p2", "a", 0, 5).send("p2", "b", 0, 3)
    assert "nonmonotonic-send" in anomalies(plain)[1]


def test_nonmonotonic_poll_within_one_assignment() -> None:
    h = History().poll("r", (0, 3, "a"), (0, 4, "b")).poll("r", (0, 4, "b"))
    assert "nonmonotonic-poll" in anomalies(h)[0]


def test_rereading_after_a_new_assignment_is_allowed() -> None:
    h = History().producer("p0").send("p0", "a", 0, 0).send("p0", "b", 0, 1)
    h.op("c", "ok", "assign", partitions=[0]).poll("c", (0, 0, "a"), (0, 1, "b"))
    h.op("c", "ok", "revoke", partitions=[0]).op("c", "ok", "assign", partitions=[0])
    h.poll("c", (0, 0, "a"), (0, 1, "b"))
    assert check(h.ops).valid


def test_poll_skip() -> None:
    h = History().poll("r1", (0, 0, "a"), (0, 1, "b"), (0, 2, "c"))
    h.poll("r2", (0, 0, "a")).poll("r2", (0, 2, "c"))
    result = check(h.ops)
    assert set(result.failures) >= {"poll-skip"}
    assert result.failures["poll-skip"][0]["skipped"] == [1]


def test_aborted_read_and_phantom() -> None:
    h = History().producer("p0").op("p0", "invoke", "send", value="a", partition=0)
    h.op("p0", "fail", "send", value="a", error="buffer full")
    h.poll("r", (0, 0, "a"), (0, 1, "never-sent"))
    assert {"aborted-read", "phantom"} <= anomalies(h)[0]


def test_committed_offsets_moving_backwards() -> None:
    h = (
        History()
        .op("m", "ok", "committed", offsets={"0": 7})
        .op("m", "ok", "committed", offsets={"0": 5})
    )
    assert anomalies(h)[0] == {"committed-backwards"}
    own = (
        History()
        .op("c", "ok", "commit", offsets={"1": 9})
        .op("c", "ok", "commit", offsets={"1": 2})
    )
    assert anomalies(own)[0] == {"committed-backwards"}


def test_replicas_identical_below_the_high_watermark_pass() -> None:
    batches = [(0, 2, b"x" * 10), (3, 3, b"y" * 10)]
    above = [(4, 4, b"only-on-the-leader")]
    logs = {1: {0: batches + above}, 2: {0: batches}, 3: {0: list(batches)}}
    assert check_replicas(logs, {0: 4}) == []


def test_replicas_that_differ_below_the_high_watermark_diverge() -> None:
    logs = {1: {0: [(0, 2, b"a"), (3, 5, b"b")]}, 2: {0: [(0, 2, b"a"), (3, 5, b"B")]},
            3: {0: [(0, 2, b"a")]}}  # fmt: skip
    found = check_replicas(logs, {0: 6})
    assert [f["brokers"] for f in found] == [[1, 2], [1, 3]]
    assert [f["first_difference"] for f in found] == [3, 3]
    assert "replica-divergence" in check([], found).failures


def test_committed_but_never_read_by_the_group() -> None:
    h = History().producer("p0").send("p0", "a", 0, 0).send("p0", "b", 0, 1)
    h.op("c", "ok", "assign", partitions=[0]).poll("c", (0, 1, "b"))
    h.op("c", "ok", "commit", offsets={"0": 2}).op("m", "ok", "committed", offsets={"0": 2})
    h.poll("final", (0, 0, "a"), (0, 1, "b"), final=True)
    result = check(h.ops)
    assert set(result.failures) == {"committed-unread"}
    assert result.failures["committed-unread"][0]["offset"] == 0
