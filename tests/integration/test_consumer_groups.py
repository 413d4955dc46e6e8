"""Consumer groups against a real cluster (issue 6 §4; the cluster is `group_cluster`'s), with
members running in threads of this process (`ThreadMember`) where the test only watches them:
partitions shared and moved to a newcomer, the group surviving its coordinator's broker, and
`pykraft groups` describing and resetting offsets. Members the tests kill or stop, as their own
processes, are in test_consumer_group_processes.py.
"""

from __future__ import annotations

import itertools
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pykraft.client import (
    AdminClient,
    Consumer,
    ConsumerRebalanceListener,
    Producer,
    TopicPartition,
)
from pykraft.proto import common_pb2, group_pb2

from .controllers import pykraft
from .group_cluster import PARTITIONS, STABLE_TIMEOUT_S, TOPIC, group_cluster, produce
from .processes import BrokerProcess, wait_for

pytestmark = pytest.mark.integration

POLL_RECORDS_MAX = 100
# How long members may go without records while others join: far below any stop-the-world
# rebalance (which waits for every member's next poll and heartbeat).
POLL_GAP_S_MAX = 3.0


@dataclass(eq=False)
class ThreadMember(ConsumerRebalanceListener):
    """A member polling in a thread: what it owns, what it read, when its polls returned."""

    bootstrap: str
    group: str
    name: str
    commit_after_poll: bool = True
    owned: set[TopicPartition] = field(default_factory=set)
    revoked: list[set[TopicPartition]] = field(default_factory=list)
    read: list[tuple[int, int]] = field(default_factory=list)
    record_times: list[float] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.consumer = Consumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=self.name,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.owned |= assigned

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.owned -= revoked
        self.revoked.append(set(revoked))

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.on_partitions_revoked(lost)

    def start(self) -> ThreadMember:
        self.consumer.subscribe([TOPIC], listener=self)
        self.thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                records = self.consumer.poll(timeout_ms=200, records_max=POLL_RECORDS_MAX)
                if records:
                    self.record_times.append(time.monotonic())
                    self.read.extend((r.partition, r.offset) for r in records)
                    if self.commit_after_poll:
                        self.consumer.commit()
        except BaseException as error:  # surfaced by the test through `errors`
            self.errors.append(error)
        finally:
            self.consumer.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), f"{self.name} did not stop"

    def longest_gap_s(self, since: float, until: float) -> float:
        times = [since, *(t for t in self.record_times if since <= t <= until), until]
        return max(b - a for a, b in itertools.pairwise(times))


def assert_exclusive_and_complete(members: list[ThreadMember]) -> None:
    owned = [tp for m in members for tp in m.owned]
    assert len(owned) == len(set(owned)), f"a partition owned twice: {sorted(owned)}"
    assert {tp.partition for tp in owned} == set(range(PARTITIONS))


def settled(members: list[ThreadMember], sizes: list[int]) -> bool:
    owned = [tp for m in members for tp in m.owned]
    return (
        sorted(len(m.owned) for m in members) == sizes
        and len(owned) == len(set(owned)) == PARTITIONS
    )


def test_members_share_partitions_and_a_newcomer_moves_only_what_must_move(
    tmp_path: Path,
) -> None:
    """§4.1 and §4.2: 3 members get 2 partitions each; a 4th joins while records keep coming,
    one partition moves, and the others' polls never stop returning records."""
    with group_cluster(tmp_path) as (_, _, bootstrap):
        stop_producing = threading.Event()
        produced = [0]

        def keep_producing() -> None:
            with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
                while not stop_producing.is_set():
                    for p in range(PARTITIONS):
                        producer.send(TOPIC, b"x", partition=p)
                        produced[0] += 1
                    time.sleep(0.02)

        producer_thread = threading.Thread(target=keep_producing, daemon=True)
        producer_thread.start()
        members = [ThreadMember(bootstrap, "share", f"m{i}").start() for i in range(3)]
        try:
            wait_for(lambda: settled(members, [2, 2, 2]), timeout_s=STABLE_TIMEOUT_S, what="2 each")
            assert_exclusive_and_complete(members)
            before = {m.name: set(m.owned) for m in members}
            revocations_before = {m.name: len(m.revoked) for m in members}
            joined_at = time.monotonic()
            newcomer = ThreadMember(bootstrap, "share", "m3").start()
            everyone = [*members, newcomer]
            wait_for(
                lambda: settled(everyone, [1, 1, 2, 2]), timeout_s=STABLE_TIMEOUT_S, what="1,1,2,2"
            )
            settled_at = time.monotonic()
            time.sleep(1)  # let the members that kept partitions poll on past the rebalance
            assert_exclusive_and_complete(everyone)
            moved = [tp for m in members for tp in before[m.name] - m.owned]
            assert len(moved) == 1, f"only one partition had to move, moved {moved}"
            assert all(before[m.name] >= m.owned for m in members), "kept partitions stayed"
            revoked_since = [r for m in members for r in m.revoked[revocations_before[m.name] :]]
            assert sum(map(len, revoked_since)) == 1, f"one partition revoked: {revoked_since}"
            for member in members:
                gap_s = member.longest_gap_s(joined_at, settled_at + 1)
                assert gap_s < POLL_GAP_S_MAX, f"{member.name} stopped for {gap_s:.1f} s"
            assert newcomer.read, "the newcomer consumes its partition"
        finally:
            stop_producing.set()
            producer_thread.join(timeout=30)
            for member in [*members, *([newcomer] if "newcomer" in locals() else [])]:
                member.close()
        for member in members:
            assert not member.errors, member.errors


def test_group_survives_the_coordinator_broker_dying(tmp_path: Path) -> None:
    """§4.4: kill -9 of the coordinator's broker: the group goes on from its committed offsets
    on the new coordinator, and no committed offset is lost or moves back."""
    records = 2000
    with group_cluster(tmp_path) as (_, brokers, bootstrap):
        produce(bootstrap, records)
        members = [ThreadMember(bootstrap, "survivors", f"m{i}") for i in range(2)]
        for member in members:
            member.start()
        try:
            wait_for(lambda: settled(members, [3, 3]), timeout_s=STABLE_TIMEOUT_S, what="3 each")
            with AdminClient(bootstrap) as admin:
                wait_for(
                    lambda: len(admin.list_consumer_group_offsets("survivors")) == PARTITIONS,
                    timeout_s=30,
                    what="a commit on every partition",
                )
                before = admin.list_consumer_group_offsets("survivors")
                old = admin.describe_consumer_groups(["survivors"])["survivors"].coordinator
                brokers[old.id].kill()
                survivors = ",".join(b.address for i, b in brokers.items() if i != old.id)
            with AdminClient(survivors) as admin:
                wait_for(
                    lambda: (
                        admin.describe_consumer_groups(["survivors"])["survivors"].coordinator.id
                        != old.id
                    ),
                    timeout_s=30,
                    what="a new coordinator",
                )
                after = admin.list_consumer_group_offsets("survivors")
                for tp, committed in before.items():
                    assert after[tp].offset >= committed.offset, f"{tp} moved back"
                produce(survivors, 300, start=records)
                wait_for(
                    lambda: (
                        sum(
                            o.offset
                            for o in admin.list_consumer_group_offsets("survivors").values()
                        )
                        == records + 300
                    ),
                    timeout_s=60,
                    what="everything committed through the new coordinator",
                )
        finally:
            for member in members:
                member.close()
        read = [r for m in members for r in m.read]
        assert len(set(read)) == records + 300, "every record read"


def groups_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return pykraft("groups", *args, "--bootstrap-server", bootstrap)


def describe_rows(bootstrap: str, group: str) -> dict[int, tuple[str, str, str]]:
    """partition -> (CURRENT-OFFSET, LOG-END-OFFSET, LAG) from `pykraft groups describe`."""
    described = groups_cli(bootstrap, "describe", "--group", group)
    assert described.returncode == 0, described.stderr
    lines = described.stdout.strip().splitlines()
    header = lines[0].split()
    assert header[:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
    rows = {}
    for line in lines[1:]:
        cells = line.split()
        assert cells[0] == group and cells[1] == TOPIC, line
        rows[int(cells[2])] = (cells[3], cells[4], cells[5])
    return rows


def test_describe_and_reset_offsets_match_what_was_produced_and_consumed(tmp_path: Path) -> None:
    """§4.6: describe shows committed offsets, log end offsets and lag as counted here;
    reset-offsets moves them (dry run changes nothing) and refuses while members are active."""
    per_partition = 100
    with group_cluster(tmp_path) as (_, brokers, bootstrap):
        with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
            for i in range(per_partition):
                for p in range(PARTITIONS):
                    producer.send(TOPIC, b"a%d" % i, partition=p)
            producer.flush(timeout=60)
        with Consumer(
            bootstrap_servers=bootstrap,
            group_id="reader",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        ) as consumer:
            consumer.subscribe([TOPIC])
            consumed = 0
            deadline = time.monotonic() + 60
            while consumed < per_partition * PARTITIONS:
                assert time.monotonic() < deadline, f"only {consumed} consumed"
                consumed += len(consumer.poll(timeout_ms=200, records_max=POLL_RECORDS_MAX))
            consumer.commit()
            refused = groups_cli(
                bootstrap,
                "reset-offsets",
                "--group",
                "reader",
                "--all-topics",
                "--to-earliest",
                "--execute",
            )
            assert refused.returncode == 1
            assert "inactive" in refused.stderr, refused.stderr
        between_ms = int(time.time() * 1000)
        time.sleep(0.01)  # later records get later timestamps than `between_ms`
        with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
            for i in range(50):
                for p in range(PARTITIONS):
                    producer.send(TOPIC, b"b%d" % i, partition=p)
            producer.flush(timeout=60)
        rows = describe_rows(bootstrap, "reader")
        assert rows == {p: ("100", "150", "50") for p in range(PARTITIONS)}

        def reset(*args: str) -> str:
            done = groups_cli(
                bootstrap, "reset-offsets", "--group", "reader", "--topic", TOPIC, *args
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        dry = reset("--to-earliest", "--dry-run")
        assert dry.split().count("0") >= PARTITIONS
        assert describe_rows(bootstrap, "reader")[0] == ("100", "150", "50"), "dry run"
        reset("--to-earliest", "--execute")
        assert describe_rows(bootstrap, "reader") == {p: ("0", "150", "150") for p in range(6)}
        reset("--shift-by", "30", "--execute")
        assert describe_rows(bootstrap, "reader")[3] == ("30", "150", "120")
        reset("--to-offset", "500", "--execute")
        assert describe_rows(bootstrap, "reader")[5] == ("150", "150", "0"), "clamped"
        moment = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(between_ms / 1000))
        moment += f".{between_ms % 1000:03d}"
        reset("--to-datetime", moment, "--execute")
        assert describe_rows(bootstrap, "reader") == {p: ("100", "150", "50") for p in range(6)}
        deleted = groups_cli(bootstrap, "delete", "--group", "reader")
        assert deleted.returncode == 0, deleted.stderr
        listed = groups_cli(bootstrap, "list")
        assert "reader" not in listed.stdout.split()
        assert_bad_group_requests_get_kafka_codes(brokers)


def assert_bad_group_requests_get_kafka_codes(brokers: dict[int, BrokerProcess]) -> None:
    """Bad input to the group RPCs of a real broker: each answer carries Kafka's code and a
    sentence, and the broker keeps serving."""
    stub = next(iter(brokers.values())).stub()
    found = stub.FindCoordinator(group_pb2.FindCoordinatorRequest(key="g", key_type=1), timeout=10)
    assert found.header.error_code == common_pb2.INVALID_REQUEST and found.header.error_message
    found = stub.FindCoordinator(group_pb2.FindCoordinatorRequest(key=""), timeout=10)
    assert found.header.error_code == common_pb2.INVALID_GROUP_ID
    found = stub.FindCoordinator(group_pb2.FindCoordinatorRequest(key="bad-input"), timeout=10)
    assert found.header.error_code == common_pb2.NONE
    coordinator = next(b for b in brokers.values() if b.port == found.port).stub()
    beat = coordinator.ConsumerGroupHeartbeat(
        group_pb2.ConsumerGroupHeartbeatRequest(
            group_id="bad-input", member_id="m", subscribed_topic_regex="(", rebalance_timeout_ms=1
        ),
        timeout=10,
    )
    assert beat.header.error_code == common_pb2.INVALID_REGULAR_EXPRESSION
    commit = coordinator.OffsetCommit(
        group_pb2.OffsetCommitRequest(
            group_id="bad-input",
            member_epoch=-1,
            topics=[
                group_pb2.OffsetCommitTopic(
                    topic="no-such-topic",
                    partitions=[group_pb2.OffsetCommitPartition(partition=0, committed_offset=1)],
                )
            ],
        ),
        timeout=10,
    )
    assert commit.topics[0].partitions[0].error_code == common_pb2.UNKNOWN_TOPIC_OR_PARTITION
    described = coordinator.ConsumerGroupDescribe(
        group_pb2.ConsumerGroupDescribeRequest(group_ids=["bad-input"]), timeout=10
    )
    assert described.groups[0].error_code == common_pb2.GROUP_ID_NOT_FOUND
    deleted = coordinator.DeleteGroups(
        group_pb2.DeleteGroupsRequest(group_ids=["bad-input"]), timeout=10
    )
    assert deleted.results[0].error_code == common_pb2.GROUP_ID_NOT_FOUND
