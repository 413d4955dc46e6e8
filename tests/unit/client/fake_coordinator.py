"""A fake consumer-group coordinator over real gRPC, next to fake_broker's brokers, for the
consumer group unit tests.

The brokers answer FindCoordinator with the coordinator's own server (its own port and
threads, so long-polling Fetches never starve group calls). It serves ConsumerGroupHeartbeat,
OffsetCommit and OffsetFetch with a simple version of KIP-848:

- Targets: every partition of the topics each member subscribes to (names, or a regex matched
  with `re.fullmatch`), dealt round-robin over the members sorted by instance id or member id.
  A join, a leave or a subscription change bumps the group epoch and recomputes them.
- Each heartbeat answers the member's next step: while it owns partitions outside its target,
  the assignment without them, at its current epoch (revoke first); otherwise its target minus
  what other members still own or were last sent, at the group epoch. `has_assignment` in
  every answer, as pykraft's broker does (with `always_send_assignment` False: only when it
  differs from what the member was last sent).
- Epoch 0 joins (or rejoins, same id), -1 leaves, -2 (static) leaves for now: the member stays
  in the assignment, and a join with its instance id takes its place without a new epoch.
- A member whose epoch does not match is fenced (FENCED_MEMBER_EPOCH), an unknown one gets
  UNKNOWN_MEMBER_ID. OffsetCommit checks the member and epoch (STALE_MEMBER_EPOCH for an older
  epoch); "" and -1 pass only while the group has no members.

Tests script failures: `heartbeat_errors` / `commit_errors` (header codes for the next calls),
`partition_commit_errors`, `fence(member_id)`, `stale_next_commit` (the next commit answers
STALE_MEMBER_EPOCH and the member's next heartbeat moves it to a new epoch, as a rebalance
would). They read what clients sent in `heartbeats` and `commits`, and `committed`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc

from pykraft.client.types import OffsetAndMetadata, TopicPartition
from pykraft.proto import common_pb2
from pykraft.proto import group_pb2 as gpb
from tests.unit.client.fake_broker import FakeCluster, running
from tests.unit.client.fake_grpc import UnaryHandler, unary_service

COORDINATOR_ID = 100
HEARTBEAT_INTERVAL_MS = 50


@dataclass
class FakeMember:
    member_id: str
    instance_id: str
    epoch: int = 0
    topics: tuple[str, ...] = ()
    regex: str = ""
    owned: frozenset[TopicPartition] = frozenset()
    sent: frozenset[TopicPartition] | None = None  # the last assignment sent
    away: bool = False  # a static member that left for now
    bump_epoch: bool = False  # the next heartbeat moves it to a new epoch

    @property
    def key(self) -> str:
        return self.instance_id or self.member_id


@dataclass
class FakeCoordinator:
    cluster: FakeCluster
    heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS
    lock: threading.Condition = field(default_factory=threading.Condition)
    members: dict[str, FakeMember] = field(default_factory=dict)
    group_epoch: int = 0
    targets: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)
    committed: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    heartbeats: list[gpb.ConsumerGroupHeartbeatRequest] = field(default_factory=list)
    commits: list[gpb.OffsetCommitRequest] = field(default_factory=list)
    heartbeat_errors: list[int] = field(default_factory=list)
    commit_errors: list[int] = field(default_factory=list)
    partition_commit_errors: dict[TopicPartition, int] = field(default_factory=dict)
    fenced: set[str] = field(default_factory=set)
    stale_next_commit: bool = False
    # As pykraft's broker does: the whole assignment in every answer (False: only changes).
    always_send_assignment: bool = True

    def __post_init__(self) -> None:
        self.server = grpc.server(ThreadPoolExecutor(max_workers=8))
        methods: dict[str, tuple[Any, Callable[[Any], Any]]] = {
            "ConsumerGroupHeartbeat": (gpb.ConsumerGroupHeartbeatRequest, self.heartbeat),
            "OffsetCommit": (gpb.OffsetCommitRequest, self.offset_commit),
            "OffsetFetch": (gpb.OffsetFetchRequest, self.offset_fetch),
        }
        self.server.add_generic_rpc_handlers([_handler(methods)])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        for broker in self.cluster.brokers:
            find: dict[str, tuple[Any, Callable[[Any], Any]]] = {
                "FindCoordinator": (gpb.FindCoordinatorRequest, self.find_coordinator)
            }
            broker.server.add_generic_rpc_handlers([_handler(find)])

    # --- what tests call ---

    def fence(self, member_id: str) -> None:
        """The member's next heartbeat answers FENCED_MEMBER_EPOCH (it is removed)."""
        with self.lock:
            self.fenced.add(member_id)

    def active(self) -> list[FakeMember]:
        with self.lock:
            return [m for m in self.members.values() if not m.away]

    def owned(self, member_id: str) -> frozenset[TopicPartition]:
        with self.lock:
            member = self.members.get(member_id)
            return frozenset() if member is None else member.owned

    def commit_offset(self, tp: TopicPartition) -> int | None:
        with self.lock:
            found = self.committed.get(tp)
            return None if found is None else found.offset

    # --- RPCs ---

    def find_coordinator(self, request: gpb.FindCoordinatorRequest) -> gpb.FindCoordinatorResponse:
        return gpb.FindCoordinatorResponse(node_id=COORDINATOR_ID, host="127.0.0.1", port=self.port)

    def heartbeat(
        self, request: gpb.ConsumerGroupHeartbeatRequest
    ) -> gpb.ConsumerGroupHeartbeatResponse:
        with self.lock:
            self.heartbeats.append(request)
            self.lock.notify_all()
            if self.heartbeat_errors:
                return gpb.ConsumerGroupHeartbeatResponse(
                    header=_header(self.heartbeat_errors.pop(0))
                )
            member_id, epoch = request.member_id, request.member_epoch
            if epoch < 0:
                self._leave(member_id, static=epoch == -2)
                return gpb.ConsumerGroupHeartbeatResponse(member_id=member_id, member_epoch=epoch)
            if member_id in self.fenced:
                self.fenced.discard(member_id)
                self._remove(member_id)
                return gpb.ConsumerGroupHeartbeatResponse(
                    header=_header(common_pb2.FENCED_MEMBER_EPOCH)
                )
            member = self.members.get(member_id)
            if epoch == 0:
                member = self._join(request)
            elif member is None:
                return gpb.ConsumerGroupHeartbeatResponse(
                    header=_header(common_pb2.UNKNOWN_MEMBER_ID)
                )
            elif epoch != member.epoch:
                return gpb.ConsumerGroupHeartbeatResponse(
                    header=_header(common_pb2.FENCED_MEMBER_EPOCH)
                )
            member.owned = _partitions(request.owned_partitions)
            subscription = (tuple(request.subscribed_topic_names), request.subscribed_topic_regex)
            if subscription != (member.topics, member.regex):
                member.topics, member.regex = subscription
                self._compute_targets()
            return self._answer(member)

    def offset_commit(self, request: gpb.OffsetCommitRequest) -> gpb.OffsetCommitResponse:
        with self.lock:
            self.commits.append(request)
            self.lock.notify_all()
            code = self._commit_error(request)
            if code != common_pb2.NONE:
                return gpb.OffsetCommitResponse(header=_header(code))
            topics = []
            for topic in request.topics:
                results = []
                for p in topic.partitions:
                    tp = TopicPartition(topic.topic, p.partition)
                    code = self.partition_commit_errors.get(tp, common_pb2.NONE)
                    if code == common_pb2.NONE:
                        epoch = None if p.committed_leader_epoch < 0 else p.committed_leader_epoch
                        self.committed[tp] = OffsetAndMetadata(
                            p.committed_offset, p.committed_metadata, epoch
                        )
                    results.append(
                        gpb.OffsetCommitPartitionResult(
                            partition=p.partition,
                            error_code=code,  # type: ignore[arg-type]
                            error_message="scripted" if code else "",
                        )
                    )
                topics.append(gpb.OffsetCommitTopicResult(topic=topic.topic, partitions=results))
            return gpb.OffsetCommitResponse(topics=topics)

    def offset_fetch(self, request: gpb.OffsetFetchRequest) -> gpb.OffsetFetchResponse:
        with self.lock:
            topics = []
            for topic in request.topics:
                results = []
                for partition in topic.partitions:
                    found = self.committed.get(TopicPartition(topic.topic, partition))
                    results.append(
                        gpb.OffsetFetchPartition(
                            partition=partition,
                            committed_offset=-1 if found is None else found.offset,
                            committed_leader_epoch=-1
                            if found is None or found.leader_epoch is None
                            else found.leader_epoch,
                            metadata="" if found is None else found.metadata,
                        )
                    )
                topics.append(gpb.OffsetFetchTopic(topic=topic.topic, partitions=results))
            return gpb.OffsetFetchResponse(topics=topics)

    # --- the group (lock held) ---

    def _commit_error(self, request: gpb.OffsetCommitRequest) -> int:
        if self.commit_errors:
            return self.commit_errors.pop(0)
        if request.member_id == "" and request.member_epoch == -1:
            return common_pb2.UNKNOWN_MEMBER_ID if self.active_members() else common_pb2.NONE
        member = self.members.get(request.member_id)
        if member is None or member.away:
            return common_pb2.UNKNOWN_MEMBER_ID
        if self.stale_next_commit:
            self.stale_next_commit = False
            member.bump_epoch = True
            return common_pb2.STALE_MEMBER_EPOCH
        if request.member_epoch < member.epoch:
            return common_pb2.STALE_MEMBER_EPOCH
        if request.member_epoch > member.epoch:
            return common_pb2.FENCED_MEMBER_EPOCH
        return common_pb2.NONE

    def active_members(self) -> list[FakeMember]:
        return [m for m in self.members.values() if not m.away]

    def _join(self, request: gpb.ConsumerGroupHeartbeatRequest) -> FakeMember:
        away = next(
            (
                m
                for m in self.members.values()
                if m.away and request.instance_id and m.instance_id == request.instance_id
            ),
            None,
        )
        if away is not None:  # a static member back: its place, its target, its epoch
            del self.members[away.member_id]
            away.member_id, away.away, away.sent = request.member_id, False, None
            self.members[away.member_id] = away
            return away
        member = FakeMember(request.member_id, request.instance_id)
        self.members[member.member_id] = member
        self._compute_targets()
        return member

    def _leave(self, member_id: str, *, static: bool) -> None:
        member = self.members.get(member_id)
        if member is None:
            return
        if static:
            member.away, member.owned = True, frozenset()
        else:
            self._remove(member_id)

    def _remove(self, member_id: str) -> None:
        if self.members.pop(member_id, None) is not None:
            self._compute_targets()

    def _compute_targets(self) -> None:
        self.group_epoch += 1
        members = sorted(self.members.values(), key=lambda m: m.key)
        with self.cluster.lock:
            partitions = sorted(self.cluster.partitions)
        targets: dict[str, set[TopicPartition]] = {m.key: set() for m in members}
        turn = 0
        for tp in partitions:
            eligible = [m for m in members if _subscribes(m, tp.topic)]
            if eligible:
                targets[eligible[turn % len(eligible)].key].add(tp)
                turn += 1
        self.targets = {key: frozenset(tps) for key, tps in targets.items()}

    def _answer(self, member: FakeMember) -> gpb.ConsumerGroupHeartbeatResponse:
        target = self.targets.get(member.key, frozenset())
        if member.owned - target:
            assignment, epoch = member.owned & target, member.epoch
        else:
            others = [m for m in self.members.values() if m is not member]
            held = frozenset().union(*(m.owned | (m.sent or frozenset()) for m in others))
            assignment, epoch = target - held, max(member.epoch, self.group_epoch)
        if member.bump_epoch:
            member.bump_epoch, epoch = False, max(epoch, member.epoch + 1)
            member.sent = None
        changed = assignment != member.sent or self.always_send_assignment
        member.sent, member.epoch = assignment, epoch
        return gpb.ConsumerGroupHeartbeatResponse(
            member_id=member.member_id,
            member_epoch=epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            has_assignment=changed,
            assignment=_by_topic(assignment) if changed else [],
        )


def _subscribes(member: FakeMember, topic: str) -> bool:
    if member.regex:
        return re.fullmatch(member.regex, topic) is not None
    return topic in member.topics


def _partitions(topics: Any) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(t.topic, p) for t in topics for p in t.partitions)


def _by_topic(partitions: frozenset[TopicPartition]) -> list[gpb.TopicPartitions]:
    topics: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        topics.setdefault(tp.topic, []).append(tp.partition)
    return [gpb.TopicPartitions(topic=t, partitions=ps) for t, ps in topics.items()]


def _header(code: int) -> common_pb2.ResponseHeader:
    return common_pb2.ResponseHeader(error_code=code, error_message="scripted")  # type: ignore[arg-type]


def _handler(
    methods: dict[str, tuple[Any, Callable[[Any], Any]]],
) -> grpc.GenericRpcHandler[Any, Any]:
    """The BrokerService serving `methods`, whose handlers take the request alone."""

    def served(handle: Callable[[Any], Any]) -> UnaryHandler:
        return lambda request, context: handle(request)

    return unary_service(
        "pykraft.BrokerService",
        {name: (request_type, served(handle)) for name, (request_type, handle) in methods.items()},
    )


@contextmanager
def running_group(
    topics: dict[str, int], brokers: int = 1
) -> Iterator[tuple[FakeCluster, FakeCoordinator]]:
    """fake_broker's `running`, plus the coordinator (stopped first: it never waits)."""
    with running(topics, brokers) as cluster:
        coordinator = FakeCoordinator(cluster)
        coordinator.server.start()
        try:
            yield cluster, coordinator
        finally:
            coordinator.server.stop(grace=None)
