"""The coordinator's decisions (GroupShard), driven with time as an argument: joins, incremental
reconciliation, timeouts, static members, commits, deletion, and a seeded simulation that
checks that no partition ever has two owners and that every partition gets one."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

from pykraft.broker.group.classic import JoinRequest
from pykraft.broker.group.config import GroupConfig
from pykraft.broker.group.consumer_group import EMPTY, RECONCILING, STABLE
from pykraft.broker.group.records import GroupRecord, decode_key, decode_value, encode_key
from pykraft.broker.group.records import encode_value as encode_record_value
from pykraft.broker.group.shard import GroupShard
from pykraft.proto import common_pb2, group_pb2

GROUP = "g"
TOPICS = {"orders": 6, "audit": 2}
SESSION_MS = 45_000


@dataclass
class FakeMember:
    """A member that does what a well-behaved consumer does with each answer."""

    member_id: str
    topics: tuple[str, ...] = ("orders",)
    instance_id: str = ""
    epoch: int = 0
    owned: set[tuple[str, int]] = field(default_factory=set)

    def request(self, epoch: int | None = None) -> group_pb2.ConsumerGroupHeartbeatRequest:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(self.owned):
            by_topic.setdefault(topic, []).append(partition)
        return group_pb2.ConsumerGroupHeartbeatRequest(
            group_id=GROUP,
            member_id=self.member_id,
            member_epoch=self.epoch if epoch is None else epoch,
            instance_id=self.instance_id,
            rebalance_timeout_ms=300_000,
            subscribed_topic_names=self.topics,
            owned_partitions=[
                group_pb2.TopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()
            ],
        )


class Harness:
    def __init__(self) -> None:
        self.shard = GroupShard(GroupConfig(session_timeout_ms=SESSION_MS))
        self.now_ms = 1_000
        self.log: list[GroupRecord] = []

    def beat(
        self, member: FakeMember, epoch: int | None = None
    ) -> group_pb2.ConsumerGroupHeartbeatResponse:
        decision = self.shard.membership.heartbeat(
            member.request(epoch),
            client_host="/127.0.0.1",
            topics=TOPICS,
            now_ms=self.now_ms,
            wall_ms=self.now_ms,
        )
        self._written(decision.records)
        response = decision.response
        if response.header.error_code in (
            common_pb2.UNKNOWN_MEMBER_ID,
            common_pb2.FENCED_MEMBER_EPOCH,
        ):  # lost its partitions: drops them and rejoins, as a consumer does
            member.owned, member.epoch = set(), 0
        elif response.header.error_code == common_pb2.NONE and response.member_epoch >= 0:
            member.epoch = response.member_epoch
            member.owned = {(t.topic, p) for t in response.assignment for p in t.partitions}
        self.check_exclusive()
        return response

    def _written(self, records: list[GroupRecord]) -> None:
        """Round-trips each record through the codec, as the log would."""
        for record in records:
            key = decode_key(encode_key(record.key))
            self.log.append(GroupRecord(key, decode_value(key, encode_record_value(record))))

    def expire(self) -> None:
        self._written(self.shard.membership.expire_members(TOPICS, self.now_ms, self.now_ms))

    def check_exclusive(self) -> None:
        group = self.shard.groups.get(GROUP)
        seen: dict[tuple[str, int], str] = {}
        for member_id, member in ({} if group is None else group.members).items():
            for partition in member.holds:
                assert partition not in seen, (
                    f"{partition} held by {seen[partition]} and {member_id}"
                )
                seen[partition] = member_id

    def settle(self, members: list[FakeMember], rounds: int = 6) -> None:
        for _ in range(rounds):
            for member in members:
                self.beat(member)


def test_three_members_get_two_partitions_each_and_a_fourth_moves_only_what_must_move() -> None:
    h = Harness()
    members = [FakeMember(f"m{i}") for i in range(3)]
    h.settle(members)
    assert sorted(len(m.owned) for m in members) == [2, 2, 2]
    assert set().union(*(m.owned for m in members)) == {("orders", p) for p in range(6)}
    assert h.shard.groups[GROUP].state == STABLE

    before = {m.member_id: set(m.owned) for m in members}
    newcomer = FakeMember("m3")
    h.beat(newcomer)
    assert newcomer.owned == set(), "nothing is free before someone revokes"
    assert h.shard.groups[GROUP].state == RECONCILING
    h.settle([*members, newcomer])
    moved = sum(len(before[m.member_id] - m.owned) for m in members)
    assert moved == 1, "six partitions over four members: exactly one moves"
    assert sorted(len(m.owned) for m in [*members, newcomer]) == [1, 1, 2, 2]
    assert all(before[m.member_id] >= m.owned for m in members), "kept partitions stay"


def test_a_revoking_member_keeps_its_epoch_until_it_acknowledges() -> None:
    h = Harness()
    first = FakeMember("a")
    h.settle([first])
    epoch = first.epoch
    second = FakeMember("b")
    h.beat(second)
    response = h.beat(first)
    assert response.member_epoch == epoch, "revocation comes at the same epoch"
    assert len(first.owned) == 3
    h.beat(second)
    assert not second.owned, "not before the revocation is acknowledged"
    h.beat(first)  # owns three now: the acknowledgement
    h.beat(second)
    assert len(second.owned) == 3, "the revoked partitions go to the newcomer"


def test_session_timeout_moves_partitions_and_fences_the_zombie() -> None:
    h = Harness()
    alive, zombie = FakeMember("alive"), FakeMember("zombie")
    h.settle([alive, zombie])
    zombie_epoch = zombie.epoch
    h.now_ms += SESSION_MS // 2
    h.beat(alive)
    h.now_ms += SESSION_MS // 2 + 1
    h.expire()
    assert "zombie" not in h.shard.groups[GROUP].members
    h.settle([alive])
    assert len(alive.owned) == 6
    response = h.beat(zombie, epoch=zombie_epoch)
    assert response.header.error_code == common_pb2.UNKNOWN_MEMBER_ID
    commit = h.shard.offsets.commit(
        _commit("zombie", zombie_epoch, 0, 10), topics=TOPICS, wall_ms=h.now_ms
    )
    assert commit.response.header.error_code == common_pb2.UNKNOWN_MEMBER_ID
    assert not commit.records


def test_commits_need_the_current_member_epoch_and_a_tool_needs_an_empty_group() -> None:
    h = Harness()
    member = FakeMember("m")
    h.settle([member])
    ok = h.shard.offsets.commit(_commit("m", member.epoch, 3, 42), topics=TOPICS, wall_ms=5)
    assert ok.response.topics[0].partitions[0].error_code == common_pb2.NONE
    h._written(ok.records)
    stale = h.shard.offsets.commit(_commit("m", member.epoch - 1, 3, 50), topics=TOPICS, wall_ms=5)
    assert stale.response.header.error_code == common_pb2.STALE_MEMBER_EPOCH
    tool = h.shard.offsets.commit(_commit("", -1, 3, 0), topics=TOPICS, wall_ms=5)
    assert tool.response.header.error_code == common_pb2.UNKNOWN_MEMBER_ID
    fetched = h.shard.offsets.fetch(group_pb2.OffsetFetchRequest(group_id=GROUP))
    assert [
        (t.topic, p.partition, p.committed_offset) for t in fetched.topics for p in t.partitions
    ] == [("orders", 3, 42)]
    bad = h.shard.offsets.commit(_commit("m", member.epoch, 99, 1), topics=TOPICS, wall_ms=5)
    assert bad.response.topics[0].partitions[0].error_code == common_pb2.UNKNOWN_TOPIC_OR_PARTITION
    assert h.shard.delete_group(GROUP).response.error_code == common_pb2.NON_EMPTY_GROUP
    h.beat(member, epoch=-1)
    assert h.shard.groups[GROUP].state == EMPTY
    tool = h.shard.offsets.commit(_commit("", -1, 3, 7), topics=TOPICS, wall_ms=5)
    assert tool.response.header.error_code == common_pb2.NONE
    h._written(tool.records)
    deleted = h.shard.delete_group(GROUP)
    assert deleted.response.error_code == common_pb2.NONE
    h._written(deleted.records)
    assert GROUP not in h.shard.groups
    assert h.shard.delete_group(GROUP).response.error_code == common_pb2.GROUP_ID_NOT_FOUND


def test_a_static_member_returns_with_a_new_id_and_keeps_its_partitions() -> None:
    h = Harness()
    static = FakeMember("old", instance_id="worker-1")
    other = FakeMember("other")
    h.settle([static, other])
    owned, epoch = set(static.owned), static.epoch
    group_epoch = h.shard.groups[GROUP].group_epoch
    assert h.beat(static, epoch=-2).member_epoch == -2
    back = FakeMember("new", instance_id="worker-1")
    response = h.beat(back)
    assert {(t.topic, p) for t in response.assignment for p in t.partitions} == owned
    assert response.member_epoch == epoch
    assert h.shard.groups[GROUP].group_epoch == group_epoch, "no rebalance"
    fenced = h.beat(FakeMember("old", instance_id="worker-1"), epoch=epoch)
    assert fenced.header.error_code == common_pb2.FENCED_INSTANCE_ID


def test_bad_heartbeats_get_kafka_codes() -> None:
    h = Harness()
    cases = {
        common_pb2.INVALID_GROUP_ID: group_pb2.ConsumerGroupHeartbeatRequest(member_id="x"),
        common_pb2.INVALID_REGULAR_EXPRESSION: group_pb2.ConsumerGroupHeartbeatRequest(
            group_id=GROUP, member_id="x", subscribed_topic_regex="(", rebalance_timeout_ms=1
        ),
        common_pb2.UNSUPPORTED_ASSIGNOR: group_pb2.ConsumerGroupHeartbeatRequest(
            group_id=GROUP,
            member_id="x",
            subscribed_topic_names=["orders"],
            server_assignor="sticky",
            rebalance_timeout_ms=1,
        ),
        common_pb2.UNKNOWN_MEMBER_ID: group_pb2.ConsumerGroupHeartbeatRequest(
            group_id=GROUP, member_id="x", member_epoch=3
        ),
    }
    for code, request in cases.items():
        decision = h.shard.membership.heartbeat(
            request, client_host="", topics=TOPICS, now_ms=0, wall_ms=0
        )
        assert decision.response.header.error_code == code, common_pb2.ErrorCode.Name(code)
        assert decision.records == []


def test_seeded_simulation_never_shares_a_partition_and_replays_to_the_same_state() -> None:
    seed = int(os.environ.get("PYKRAFT_SEED", random.randrange(1 << 30)))
    print(f"seed={seed} (replay with PYKRAFT_SEED={seed})")
    rng = random.Random(seed)
    h = Harness()
    members: list[FakeMember] = []
    for step in range(400):
        h.now_ms += rng.randrange(0, 3_000)
        roll = rng.random()
        if roll < 0.1 or not members:
            topics = rng.choice([("orders",), ("audit",), ("orders", "audit")])
            members.append(FakeMember(f"m{step}", topics=topics))
            h.beat(members[-1])
        elif roll < 0.15:
            leaving = members.pop(rng.randrange(len(members)))
            h.beat(leaving, epoch=-1)
        elif roll < 0.18:
            members.pop(rng.randrange(len(members)))  # dies silently: its session runs out
        else:
            h.beat(rng.choice(members))
        if rng.random() < 0.1:
            h.expire()
    h.now_ms += SESSION_MS + 1
    for member in members:
        h.beat(member)
    h.expire()
    h.settle(members, rounds=8)
    owned = [p for m in members for p in m.owned]
    wanted = {(t, p) for m in members for t in m.topics for p in range(TOPICS[t])}
    assert len(owned) == len(set(owned)), f"seed {seed}: a partition owned twice"
    assert set(owned) == wanted, f"seed {seed}: not every subscribed partition is owned"

    replayed = GroupShard(h.shard.config)
    for record in h.log:
        replayed.replay(record)
    original = h.shard.groups.get(GROUP)
    copy = replayed.groups.get(GROUP)
    assert (original is None) == (copy is None)
    if original is not None and copy is not None:
        assert copy.group_epoch == original.group_epoch
        assert copy.targets == original.targets
        assert {m: x.current for m, x in copy.members.items()} == {
            m: x.current for m, x in original.members.items()
        }


def _commit(
    member_id: str, epoch: int, partition: int, offset: int
) -> group_pb2.OffsetCommitRequest:
    return group_pb2.OffsetCommitRequest(
        group_id=GROUP,
        member_id=member_id,
        member_epoch=epoch,
        topics=[
            group_pb2.OffsetCommitTopic(
                topic="orders",
                partitions=[
                    group_pb2.OffsetCommitPartition(partition=partition, committed_offset=offset)
                ],
            )
        ],
    )


def test_offsets_expire_only_after_the_group_stayed_empty_for_the_retention() -> None:
    h = Harness()
    retention_ms = h.shard.config.offsets_retention_ms
    member = FakeMember("m")
    h.settle([member])
    commit = h.shard.offsets.commit(_commit("m", member.epoch, 0, 9), topics=TOPICS, wall_ms=0)
    h._written(commit.records)
    kept = h.shard.offsets.expire(wall_ms=retention_ms * 2)
    assert kept == [], "a group with members keeps them"
    h.now_ms = retention_ms  # the group becomes empty now
    h.beat(member, epoch=-1)
    assert h.shard.groups[GROUP].state == EMPTY
    assert h.shard.offsets.expire(wall_ms=retention_ms + retention_ms // 2) == []
    expired = h.shard.offsets.expire(wall_ms=2 * retention_ms)
    assert {r.key.type.name for r in expired if r.value is None} >= {"OFFSET_COMMIT"}
    assert GROUP not in h.shard.groups, "an empty group without offsets is deleted"
    listed = h.shard.describe(GROUP)
    assert (listed.group_state, listed.error_code) == ("Dead", common_pb2.GROUP_ID_NOT_FOUND)


def test_offsets_of_a_classic_group_expire_only_once_it_stayed_empty() -> None:
    """A classic group's members keep its offsets however old; once it is Empty the
    retention runs from when it emptied, and the cleanup then deletes the group's record
    too, as Kafka's does."""
    shard = GroupShard(GroupConfig(initial_rebalance_delay_ms=0))
    retention_ms = shard.config.offsets_retention_ms
    join = JoinRequest(
        GROUP, "", None, "consumer", (("range", b""),), 10_000, 10_000, "c", "h", False
    )
    member_id, _ = shard.classic.join(join, 0, 0)
    shard.classic.sync(GROUP, (member_id, None), 1, {}, 0, 0)
    commit = shard.offsets.commit(_commit(member_id, 1, 0, 9), topics=TOPICS, wall_ms=0)
    assert commit.response.header.error_code == common_pb2.NONE
    shard.decision(None)
    assert shard.offsets.expire(wall_ms=2 * retention_ms) == [], "members keep the offsets"
    shard.classic.leave(GROUP, [(member_id, None)], 0, retention_ms)  # Empty from now on
    shard.decision(None)
    assert shard.offsets.expire(wall_ms=retention_ms + retention_ms // 2) == []
    expired = shard.offsets.expire(wall_ms=2 * retention_ms)
    tombstones = [(r.key.type.name, r.value) for r in expired]
    assert ("OFFSET_COMMIT", None) in tombstones and ("CLASSIC_GROUP", None) in tombstones
    assert shard.list_groups([]) == []


def test_an_empty_classic_group_without_offsets_is_deleted_by_the_cleanup() -> None:
    shard = GroupShard(GroupConfig(initial_rebalance_delay_ms=0))
    join = JoinRequest(
        GROUP, "", None, "consumer", (("range", b""),), 10_000, 10_000, "c", "h", False
    )
    member_id, _ = shard.classic.join(join, 0, 0)
    shard.classic.leave(GROUP, [(member_id, None)], 0, 0)
    assert [g.group_state for g in shard.list_groups([])] == ["Empty"]
    shard.decision(None)
    (tombstone,) = shard.offsets.expire(wall_ms=1)
    assert (tombstone.key.type.name, tombstone.value) == ("CLASSIC_GROUP", None)
    assert shard.list_groups([]) == []


def test_a_regex_subscription_follows_topics_and_range_is_chosen_by_name() -> None:
    h = Harness()
    request = FakeMember("m").request()
    request.ClearField("subscribed_topic_names")
    request.subscribed_topic_regex = "ord.*"
    request.server_assignor = "range"
    topics = {**TOPICS, "__consumer_offsets": 50}
    decision = h.shard.membership.heartbeat(
        request, client_host="", topics=topics, now_ms=0, wall_ms=0
    )
    assigned = {(t.topic, p) for t in decision.response.assignment for p in t.partitions}
    assert assigned == {("orders", p) for p in range(6)}, "internal and other topics excluded"
    assert h.shard.describe(GROUP).assignor_name == "range"
    request.member_epoch = decision.response.member_epoch
    grown = {**topics, "orders-eu": 2}
    decision = h.shard.membership.heartbeat(
        request, client_host="", topics=grown, now_ms=1, wall_ms=1
    )
    target = h.shard.groups[GROUP].targets["m"]
    assert ("orders-eu", 1) in target, "a new matching topic joins the subscription"
