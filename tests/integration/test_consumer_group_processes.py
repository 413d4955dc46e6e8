"""Consumer-group members as their own processes (`tests.integration.group_member`) against a
real cluster (issue 6 §4; the cluster is `group_cluster`'s), for the tests that kill or stop
them: a killed member's partitions moving, a zombie's commits refused, and a static member
getting its partitions back.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from pykraft.client import AdminClient

from .group_cluster import (
    PARTITIONS,
    SESSION_TIMEOUT_MS,
    STABLE_TIMEOUT_S,
    TOPIC,
    group_cluster,
    produce,
)
from .processes import wait_for

pytestmark = pytest.mark.integration


@dataclass(eq=False)
class ProcessMember:
    out: Path
    process: subprocess.Popen[bytes]
    log: IO[bytes]

    @classmethod
    def start(cls, bootstrap: str, group: str, out: Path, *extra: str) -> ProcessMember:
        log = open(out.with_suffix(".log"), "wb")  # noqa: SIM115 (closed with the process)
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.group_member", bootstrap, group, TOPIC,
             str(out), *extra],
            stdout=log, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parents[2],
        )  # fmt: skip
        return cls(out, process, log)

    def events(self) -> list[dict[str, object]]:
        if not self.out.exists():
            return []
        lines = self.out.read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def owned(self) -> set[int]:
        owned: set[int] = set()
        for event in self.events():
            partitions = {int(p[1]) for p in event.get("partitions", [])}  # type: ignore[attr-defined]
            if event["event"] == "assigned":
                owned |= partitions
            elif event["event"] in ("revoked", "lost"):
                owned -= partitions
        return owned

    def processed(self) -> set[tuple[int, int]]:
        return {
            (int(e["partition"]), int(e["offset"]))  # type: ignore[call-overload]
            for e in self.events()
            if e["event"] == "record"
        }

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def test_killed_member_partitions_move_and_every_record_is_processed(tmp_path: Path) -> None:
    """§4.3: kill -9 of a member; after the session timeout its partitions move, and with
    commits after processing every produced record is processed at least once."""
    records = 3000
    with group_cluster(tmp_path) as (_, _, bootstrap):
        produce(bootstrap, records)
        members = [
            ProcessMember.start(
                bootstrap, "workers", tmp_path / f"member-{i}.jsonl", "--process-delay-ms", "50"
            )
            for i in range(3)
        ]
        try:
            wait_for(
                lambda: sorted(len(m.owned()) for m in members) == [2, 2, 2],
                timeout_s=STABLE_TIMEOUT_S,
                what="2 partitions each",
            )
            victim = members[0]
            wait_for(lambda: len(victim.processed()) >= 100, timeout_s=30, what="victim working")
            victim.process.kill()
            victim.process.wait()
            killed_at = time.monotonic()
            orphaned = victim.owned()
            survivors = members[1:]
            wait_for(
                lambda: orphaned <= set().union(*(m.owned() for m in survivors)),
                timeout_s=STABLE_TIMEOUT_S,
                what="the victim's partitions taken over",
            )
            moved_after_s = time.monotonic() - killed_at
            assert moved_after_s >= SESSION_TIMEOUT_MS / 1000 - 1, "not before the session ended"
            wait_for(
                lambda: len(set().union(*(m.processed() for m in members))) >= records,
                timeout_s=120,
                what="every record processed",
            )
        finally:
            for member in members:
                member.stop()
        processed = set().union(*(m.processed() for m in members))
        assert len(processed) == records, "every produced record processed, none skipped"


def test_zombie_member_cannot_commit_and_never_shares_partitions(tmp_path: Path) -> None:
    """§4.5: a member stopped (SIGSTOP) past its session is removed; after SIGCONT its commit
    fails and it rejoins; no partition is ever owned by two members."""
    with group_cluster(tmp_path) as (_, _, bootstrap):
        produce(bootstrap, 600)
        members = [
            ProcessMember.start(
                bootstrap, "zombies", tmp_path / f"member-{i}.jsonl", "--process-delay-ms", "20"
            )
            for i in range(2)
        ]
        zombie, other = members
        try:
            wait_for(
                lambda: sorted(len(m.owned()) for m in members) == [3, 3],
                timeout_s=STABLE_TIMEOUT_S,
                what="3 partitions each",
            )
            with AdminClient(bootstrap) as admin:
                zombie.process.send_signal(19)  # SIGSTOP
                wait_for(lambda: len(other.owned()) == PARTITIONS, timeout_s=30, what="takeover")
                produce(bootstrap, 600, start=600)
                zombie.process.send_signal(18)  # SIGCONT
                wait_for(
                    lambda: any(e["event"] in ("commit_failed", "lost") for e in zombie.events()),
                    timeout_s=30,
                    what="the zombie learning it was removed",
                )
                wait_for(
                    lambda: sorted(len(m.owned()) for m in members) == [3, 3],
                    timeout_s=STABLE_TIMEOUT_S,
                    what="the zombie rejoined as a new member",
                )
                described = admin.describe_consumer_groups(["zombies"])["zombies"]
                assigned = [tp for m in described.members for tp in m.assignment]
                assert len(assigned) == len(set(assigned)) == PARTITIONS
        finally:
            for member in members:
                member.stop()
        failed = [e for e in zombie.events() if e["event"] == "commit_failed"]
        for event in failed:
            assert "UNKNOWN_MEMBER_ID" in str(event["error"]) or "FENCED" in str(event["error"])


def test_static_member_gets_its_partitions_back_without_a_rebalance(tmp_path: Path) -> None:
    """§1.3: a member with group.instance.id that closes and comes back within the session
    gets the same partitions and the group epoch does not move."""
    with group_cluster(tmp_path) as (_, _, bootstrap):
        produce(bootstrap, 60)
        first = ProcessMember.start(
            bootstrap, "statics", tmp_path / "a.jsonl", "--instance-id", "worker-a"
        )
        second = ProcessMember.start(
            bootstrap, "statics", tmp_path / "b.jsonl", "--instance-id", "worker-b"
        )
        try:
            wait_for(
                lambda: sorted(len(m.owned()) for m in (first, second)) == [3, 3],
                timeout_s=STABLE_TIMEOUT_S,
                what="3 partitions each",
            )
            owned = first.owned()
            with AdminClient(bootstrap) as admin:
                epoch = admin.describe_consumer_groups(["statics"])["statics"].group_epoch
                first.stop()  # SIGTERM: close() leaves with epoch -2
                again = ProcessMember.start(
                    bootstrap, "statics", tmp_path / "a2.jsonl", "--instance-id", "worker-a"
                )
                wait_for(lambda: again.owned() == owned, timeout_s=30, what="same partitions")
                assert second.owned() and not (second.owned() & owned)
                described = admin.describe_consumer_groups(["statics"])["statics"]
                assert described.group_epoch == epoch, "no rebalance"
                again.stop()
        finally:
            first.stop()
            second.stop()
