"""The consumer-group operations of `AdminClient` (Kafka's Admin.listConsumerGroups,
describeConsumerGroups, listConsumerGroupOffsets, alterConsumerGroupOffsets,
deleteConsumerGroups), apart from its controller-routed topics, configs and cluster calls.

Consumer groups live on brokers (group.proto). `list_consumer_groups` asks every live broker
(DescribeCluster's brokers that are not fenced) for the groups it coordinates and merges the
answers; the other methods send one request per group to that group's coordinator through
`pykraft.client.group_coordinator.CoordinatorClient`, which finds it and follows it when it
moves. Without a reachable broker they fail with BROKER_NOT_AVAILABLE (none registered) or the
connection error of the last broker tried.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Final, Protocol

from pykraft.client.admin_types import (
    ClusterDescription,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    GroupState,
    MemberDescription,
    Node,
    name_list,
)
from pykraft.client.broker_connection import ConnectionPool
from pykraft.client.clock import monotonic_ms
from pykraft.client.errors import (
    BrokerNotAvailableError,
    KafkaError,
    RequestTimedOutError,
    UnknownServerError,
)
from pykraft.client.group_coordinator import CoordinatorClient
from pykraft.client.group_offsets import (
    commit_request,
    fetch_request,
    fetch_results,
    partition_errors,
)
from pykraft.client.routing import ControllerRouter
from pykraft.client.transport import Backoff
from pykraft.client.types import OffsetAndMetadata, TopicPartition
from pykraft.proto import common_pb2, group_pb2

# ListGroups' protocol type of consumer groups (an empty one is taken as consumer too).
CONSUMER_PROTOCOL_TYPE: Final = "consumer"
# How an admin tool commits offsets: no member, which only a group without members accepts.
ADMIN_MEMBER_ID: Final = ""
ADMIN_MEMBER_EPOCH: Final = -1


class ConsumerGroupAdmin(ABC):
    """The group half of `AdminClient`, which mixes it in and provides the connections: the
    controller route (`describe_cluster`, `_router`), the broker pool and each group's
    coordinator (`_coordinators`). Every method gives up after `_request_timeout_ms`."""

    _request_timeout_ms: int
    _retry_backoff_ms: int
    _router: ControllerRouter
    _pool: ConnectionPool

    @abstractmethod
    def describe_cluster(self) -> ClusterDescription:
        """The registered brokers, of which the live ones are asked for their groups."""

    @abstractmethod
    def _coordinators(self) -> CoordinatorClient:
        """The route of group requests to each group's coordinator."""

    def list_consumer_groups(
        self, states: Iterable[str] | None = None
    ) -> list[ConsumerGroupListing]:
        """Every consumer group of the cluster, sorted by group id (Kafka's
        Admin.listConsumerGroups); with `states` (names of `GroupState`s, any case) only the
        groups in one of them. ValueError for an unknown state name.

        Each live broker answers for the groups it coordinates. One that cannot be reached or
        is still loading its groups is asked again, as is the list of live brokers, until
        `request_timeout_ms` runs out; then the last error raises: a partial list is never
        returned. A group seen twice (its coordinator moved between answers) is listed once.
        """
        wanted = _group_states(states)
        request = group_pb2.ListGroupsRequest(states_filter=[str(s) for s in sorted(wanted)])
        deadline_ms = monotonic_ms() + self._request_timeout_ms
        answers: dict[int, list[group_pb2.ListedGroup]] = {}
        backoff = Backoff(self._retry_backoff_ms)
        while True:
            error = self._list_groups_once(self._live_brokers(), request, answers, deadline_ms)
            if error is None:
                break
            left_ms = deadline_ms - monotonic_ms()
            if left_ms <= 0:
                raise error
            time.sleep(min(backoff.next_ms(), left_ms) / 1000)
        listings: dict[str, ConsumerGroupListing] = {}
        for broker_id in sorted(answers):
            for group in answers[broker_id]:
                if group.protocol_type not in ("", CONSUMER_PROTOCOL_TYPE):
                    continue
                state = GroupState.parse(group.group_state)
                if not wanted or state in wanted:
                    listings.setdefault(group.group_id, ConsumerGroupListing(group.group_id, state))
        return [listings[group_id] for group_id in sorted(listings)]

    def describe_consumer_groups(
        self, group_ids: str | Iterable[str]
    ) -> dict[str, ConsumerGroupDescription]:
        """Each group as its coordinator describes it, in the order asked (Kafka's
        Admin.describeConsumerGroups). An unknown group raises GroupIdNotFoundError; the
        first error raises, in request order."""
        deadline_ms = monotonic_ms() + self._request_timeout_ms
        return {
            g: self._describe_group(g, deadline_ms) for g in dict.fromkeys(name_list(group_ids))
        }

    def list_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (Kafka's Admin.listConsumerGroupOffsets): of the given
        partitions, or of every partition it has one for (None). Partitions without a
        committed offset are left out, so an unknown group gives {}; a per-partition error
        raises (the first one)."""
        wanted = None if partitions is None else list(partitions)
        if wanted is not None and not wanted:
            return {}  # an empty list on the wire would mean every partition
        response = self._coordinators().call(
            group_id,
            "OffsetFetch",
            fetch_request(group_id, wanted or ()),
            group_pb2.OffsetFetchResponse,
            self._request_timeout_ms,
            item_errors=partition_errors,
        )
        return {tp: o for tp, o in fetch_results(response).items() if o is not None}

    def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """Commits `offsets` for the group as an admin tool does (Kafka's
        Admin.alterConsumerGroupOffsets): without a member, which the coordinator accepts
        only while the group has no members; otherwise UnknownMemberIdError raises and
        nothing is committed. A group that does not exist yet is created, empty. The first
        per-partition error raises. ValueError for a negative offset."""
        negative = sorted(str(tp) for tp, o in offsets.items() if o.offset < 0)
        if negative:
            raise ValueError(f"offsets must be >= 0; negative for {', '.join(negative)}")
        if not offsets:
            return
        self._coordinators().call(
            group_id,
            "OffsetCommit",
            commit_request(group_id, ADMIN_MEMBER_ID, ADMIN_MEMBER_EPOCH, offsets),
            group_pb2.OffsetCommitResponse,
            self._request_timeout_ms,
            item_errors=partition_errors,
        )

    def delete_consumer_groups(self, group_ids: str | Iterable[str]) -> None:
        """Deletes the groups with their committed offsets (Kafka's
        Admin.deleteConsumerGroups). Every group is tried; then the first error raises, in
        request order (the other groups may be gone): NonEmptyGroupError for a group with
        members, GroupIdNotFoundError for an unknown one."""
        deadline_ms = monotonic_ms() + self._request_timeout_ms
        errors: list[KafkaError] = []
        for group_id in dict.fromkeys(name_list(group_ids)):
            try:
                self._delete_group(group_id, deadline_ms)
            except KafkaError as error:
                errors.append(error)
        if errors:
            raise errors[0]

    def _describe_group(self, group_id: str, deadline_ms: int) -> ConsumerGroupDescription:
        coordinators = self._coordinators()
        response = coordinators.call(
            group_id,
            "ConsumerGroupDescribe",
            group_pb2.ConsumerGroupDescribeRequest(group_ids=[group_id]),
            group_pb2.ConsumerGroupDescribeResponse,
            _left_ms(deadline_ms, f"describing group {group_id!r}"),
            item_errors=lambda r: _group_errors(r.groups),
        )
        described = next((g for g in response.groups if g.group_id == group_id), None)
        if described is None:
            raise UnknownServerError(f"the coordinator did not describe group {group_id!r}")
        node_id, address = coordinators.coordinator(
            group_id, _left_ms(deadline_ms, f"finding the coordinator of {group_id!r}")
        )
        return _group_description(described, Node(node_id, address))

    def _delete_group(self, group_id: str, deadline_ms: int) -> None:
        self._coordinators().call(
            group_id,
            "DeleteGroups",
            group_pb2.DeleteGroupsRequest(group_ids=[group_id]),
            group_pb2.DeleteGroupsResponse,
            _left_ms(deadline_ms, f"deleting group {group_id!r}"),
            item_errors=lambda r: _group_errors(r.results),
        )

    def _list_groups_once(
        self,
        brokers: Mapping[int, str],
        request: group_pb2.ListGroupsRequest,
        answers: dict[int, list[group_pb2.ListedGroup]],
        deadline_ms: int,
    ) -> KafkaError | None:
        """Asks each broker not yet in `answers`; the last retriable error if one did not
        answer (a non-retriable one raises), else None."""
        error: KafkaError | None = None
        for broker_id, address in sorted(brokers.items()):
            if broker_id in answers:
                continue
            timeout_ms = max(1, min(self._router.attempt_timeout_ms, deadline_ms - monotonic_ms()))
            try:
                response = self._pool.get(address).call(
                    "ListGroups", request, group_pb2.ListGroupsResponse, timeout_ms
                )
            except KafkaError as e:
                if not e.retriable:
                    raise
                error = e
                continue
            answers[broker_id] = list(response.groups)
        return error

    def _live_brokers(self) -> dict[int, str]:
        """Broker id -> address of every registered broker that is not fenced."""
        brokers = {
            b.id: b.address
            for b in self.describe_cluster().brokers
            if b.address and b.state != "fenced"
        }
        if not brokers:
            raise BrokerNotAvailableError(
                "the cluster has no live broker to ask for consumer groups; start a broker"
            )
        return brokers


def _left_ms(deadline_ms: int, doing: str) -> int:
    """What is left of the request timeout; RequestTimedOutError once it is spent."""
    left_ms = deadline_ms - monotonic_ms()
    if left_ms <= 0:
        raise RequestTimedOutError(f"the request timeout ran out before {doing}")
    return left_ms


def _group_states(states: Iterable[str] | None) -> frozenset[GroupState]:
    """The states named (empty: every state); ValueError naming an unknown one."""
    parsed = {name: GroupState.parse(name) for name in name_list(states or ())}
    unknown = sorted(name for name, state in parsed.items() if state is GroupState.UNKNOWN)
    if unknown:
        valid = ", ".join(sorted(s.value for s in GroupState if s is not GroupState.UNKNOWN))
        raise ValueError(f"unknown group state {unknown[0]!r}; valid states are: {valid}")
    return frozenset(parsed.values())


class _GroupItem(Protocol):
    @property
    def group_id(self) -> str: ...
    @property
    def error_code(self) -> int: ...
    @property
    def error_message(self) -> str: ...


def _group_errors(groups: Iterable[_GroupItem]) -> list[tuple[int, str]]:
    """(code, message) of each group item that failed (ConsumerGroupDescribe, DeleteGroups)."""
    return [
        (g.error_code, g.error_message or f"group {g.group_id!r}")
        for g in groups
        if g.error_code != common_pb2.NONE
    ]


def _partitions(assigned: Iterable[group_pb2.TopicPartitions]) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(t.topic, p) for t in assigned for p in t.partitions)


def _group_description(
    group: group_pb2.DescribedGroup, coordinator: Node
) -> ConsumerGroupDescription:
    members = [
        MemberDescription(
            member_id=m.member_id,
            instance_id=m.instance_id or None,
            client_id=m.client_id,
            host=m.client_host,
            assignment=_partitions(m.assignment),
            target_assignment=_partitions(m.target_assignment),
            member_epoch=m.member_epoch,
        )
        for m in group.members
    ]
    return ConsumerGroupDescription(
        group_id=group.group_id,
        state=GroupState.parse(group.group_state),
        coordinator=coordinator,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor=group.assignor_name,
        members=members,
    )
