"""AdminClient: topics, configs and cluster state over the controllers' AdminService, and
partition offsets from the partition leaders' BrokerService.

The client needs only some controller addresses, or broker addresses (brokers forward the
AdminService to the active controller): it finds the active controller by itself (see
`pykraft.client.routing`). Every method either returns typed values or raises a `KafkaError`
subclass; per-item errors (one topic of several) raise as well, the first one in request order.
Writes are answered once committed to the metadata log.

`list_offsets` is answered by each partition's leader, which only brokers know: the client
asks DescribeCluster (through the AdminService, so any bootstrap address will do) for the
registered brokers once, then follows the brokers' own Metadata for leaders, as the producer
and consumer do (`pykraft.client.cluster_metadata`).

Consumer groups live on brokers too (group.proto). `list_consumer_groups` asks every live
broker (DescribeCluster's brokers that are not fenced) for the groups it coordinates and
merges the answers; the other group methods send one request per group to that group's
coordinator through `pykraft.client.group_coordinator.CoordinatorClient`, which finds it and
follows it when it moves. Without a reachable broker they fail with BROKER_NOT_AVAILABLE (none
registered) or the connection error of the last broker tried.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Final, Literal, Protocol

from pykraft.client.admin_types import (
    BrokerInfo,
    ClusterDescription,
    ConfigSource,
    ConfigValue,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ControllerInfo,
    ElectionResult,
    GroupState,
    MemberDescription,
    NewTopic,
    Node,
    PartitionInfo,
    QuorumDescription,
    TopicCreated,
    TopicDescription,
    VoterInfo,
)
from pykraft.client.broker_connection import ConnectionPool
from pykraft.client.clock import monotonic_ms
from pykraft.client.cluster_metadata import ClusterMetadata
from pykraft.client.errors import (
    BrokerNotAvailableError,
    KafkaError,
    RequestTimedOutError,
    UnknownServerError,
    error_for,
    raise_for,
)
from pykraft.client.group_coordinator import CoordinatorClient
from pykraft.client.group_offsets import (
    commit_request,
    fetch_request,
    fetch_results,
    partition_errors,
)
from pykraft.client.offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    OffsetLookup,
)
from pykraft.client.routing import ControllerRouter, parse_bootstrap
from pykraft.client.transport import Backoff
from pykraft.client.types import ListOffsetsResult, OffsetAndMetadata, TopicPartition
from pykraft.proto import admin_pb2, common_pb2, group_pb2

ResourceType = Literal["topic", "broker"]
OffsetSpec = Literal["earliest", "latest"] | int
"""What `list_offsets` looks up per partition: the log start ("earliest"), the high watermark
("latest"), or the first offset whose record timestamp is at least this many ms since the epoch
(Kafka's OffsetSpec.earliest(), latest() and forTimestamp(ms))."""

# ListGroups' protocol type of consumer groups (an empty one is taken as consumer too).
CONSUMER_PROTOCOL_TYPE: Final = "consumer"
# How an admin tool commits offsets: no member, which only a group without members accepts.
ADMIN_MEMBER_ID: Final = ""
ADMIN_MEMBER_EPOCH: Final = -1


_RESOURCE_TYPES: dict[str, admin_pb2.ConfigResourceType] = {
    "topic": admin_pb2.CONFIG_RESOURCE_TOPIC,
    "broker": admin_pb2.CONFIG_RESOURCE_BROKER,
}
_CONFIG_SOURCES: dict[int, ConfigSource] = {
    admin_pb2.CONFIG_SOURCE_DYNAMIC_TOPIC: ConfigSource.DYNAMIC_TOPIC_CONFIG,
    admin_pb2.CONFIG_SOURCE_DYNAMIC_BROKER: ConfigSource.DYNAMIC_BROKER_CONFIG,
    admin_pb2.CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER: ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    admin_pb2.CONFIG_SOURCE_DEFAULT: ConfigSource.DEFAULT_CONFIG,
}


class AdminClient:
    """Administers a pykraft cluster through any of its controllers.

    `bootstrap` is "host:port[,host:port...]" or a list of such addresses (ValueError if
    malformed). A request, redirects and retries included, gives up after `request_timeout_ms`
    and raises the last error seen. Safe to share between threads; use as a context manager or
    call `close()`.
    """

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
    ) -> None:
        if request_timeout_ms <= 0 or retry_backoff_ms < 0:
            raise ValueError("request_timeout_ms must be > 0 and retry_backoff_ms >= 0")
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._router = ControllerRouter(
            parse_bootstrap(bootstrap),
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
        )
        # Brokers, for list_offsets and the group methods: connected on first use.
        self._pool = ConnectionPool(retry_backoff_ms=retry_backoff_ms)
        self._broker_metadata: ClusterMetadata | None = None
        self._coordinator_client: CoordinatorClient | None = None
        self._broker_metadata_lock = threading.Lock()

    def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> dict[str, TopicCreated]:
        """Creates the topics; raises the first per-topic error (earlier topics may exist)."""
        request = admin_pb2.CreateTopicsRequest(
            topics=[
                admin_pb2.CreatableTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    configs=dict(t.configs),
                )
                for t in topics
            ],
            timeout_ms=self._router.attempt_timeout_ms,
            validate_only=validate_only,
        )
        response = self._router.call("CreateTopics", request, admin_pb2.CreateTopicsResponse)
        for result in response.topics:
            raise_for(result.error_code, result.error_message)
        return {
            r.name: TopicCreated(r.name, r.topic_id, r.num_partitions, r.replication_factor)
            for r in response.topics
        }

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicCreated:
        """Creates one topic; see `create_topics`."""
        topic = NewTopic(name, num_partitions, replication_factor, dict(configs or {}))
        return self.create_topics([topic], validate_only=validate_only)[name]

    def delete_topics(self, names: str | Iterable[str]) -> None:
        """Deletes the topics; raises the first per-topic error (e.g. an unknown topic)."""
        request = admin_pb2.DeleteTopicsRequest(
            names=_names(names), timeout_ms=self._router.attempt_timeout_ms
        )
        response = self._router.call("DeleteTopics", request, admin_pb2.DeleteTopicsResponse)
        for result in response.topics:
            raise_for(result.error_code, result.error_message)

    def create_partitions(
        self, new_totals: Mapping[str, int], *, validate_only: bool = False
    ) -> None:
        """Grows each topic to the given total partition count (Kafka never shrinks a topic)."""
        request = admin_pb2.CreatePartitionsRequest(
            topics=[admin_pb2.PartitionCount(name=n, count=c) for n, c in new_totals.items()],
            timeout_ms=self._router.attempt_timeout_ms,
            validate_only=validate_only,
        )
        response = self._router.call(
            "CreatePartitions", request, admin_pb2.CreatePartitionsResponse
        )
        for result in response.topics:
            raise_for(result.error_code, result.error_message)

    def list_topics(self) -> list[str]:
        """The names of every topic, sorted."""
        return sorted(t.name for t in self.describe_topics(None))

    def describe_topics(
        self, names: str | Iterable[str] | None = None, *, include_configs: bool = False
    ) -> list[TopicDescription]:
        """The named topics (None: every topic); an unknown name raises its error."""
        request = admin_pb2.DescribeTopicsRequest(
            names=_names(names or ()), include_configs=include_configs
        )
        response = self._router.call("DescribeTopics", request, admin_pb2.DescribeTopicsResponse)
        for topic in response.topics:
            raise_for(topic.error_code, topic.error_message)
        return [_topic_description(t) for t in response.topics]

    def describe_configs(
        self, resource_type: ResourceType, name: str, keys: Iterable[str] = ()
    ) -> dict[str, ConfigValue]:
        """The configs of a topic, or of a broker (name: its id; "" the cluster default):
        those named in `keys`, or every one when `keys` is empty."""
        resource = admin_pb2.ConfigResource(
            type=_resource_type(resource_type), name=name, keys=_names(keys)
        )
        request = admin_pb2.DescribeConfigsRequest(resources=[resource])
        response = self._router.call("DescribeConfigs", request, admin_pb2.DescribeConfigsResponse)
        for result in response.results:
            raise_for(result.error_code, result.error_message)
        return {e.name: _config_value(e) for r in response.results for e in r.entries}

    def alter_configs(
        self,
        resource_type: ResourceType,
        name: str,
        *,
        set: Mapping[str, str] | None = None,
        delete: Iterable[str] = (),
        validate_only: bool = False,
    ) -> None:
        """Sets and deletes (reverts to default) configs in one IncrementalAlterConfigs."""
        ops = [
            admin_pb2.AlterableConfig(name=k, op=admin_pb2.ALTER_CONFIG_SET, value=v)
            for k, v in (set or {}).items()
        ]
        ops += [admin_pb2.AlterableConfig(name=k, op=admin_pb2.ALTER_CONFIG_DELETE) for k in delete]
        resource = admin_pb2.AlterConfigsResource(
            type=_resource_type(resource_type), name=name, configs=ops
        )
        request = admin_pb2.AlterConfigsRequest(resources=[resource], validate_only=validate_only)
        response = self._router.call(
            "IncrementalAlterConfigs", request, admin_pb2.AlterConfigsResponse
        )
        for result in response.results:
            raise_for(result.error_code, result.error_message)

    def describe_cluster(self) -> ClusterDescription:
        """The cluster id, the controllers (which one is active) and the registered brokers."""
        response = self._router.call(
            "DescribeCluster", admin_pb2.DescribeClusterRequest(), admin_pb2.DescribeClusterResponse
        )
        return ClusterDescription(
            cluster_id=response.cluster_id,
            controller_id=response.controller_id,
            controllers=[
                ControllerInfo(c.id, c.address, c.is_active) for c in response.controllers
            ],
            brokers=[
                BrokerInfo(b.id, b.address, b.rack, b.state, b.epoch, b.incarnation_id)
                for b in response.brokers
            ],
        )

    def describe_quorum(self) -> QuorumDescription:
        """The metadata quorum as its leader sees it: epoch, high watermark, voters' lag."""
        response = self._router.call(
            "DescribeQuorum", admin_pb2.DescribeQuorumRequest(), admin_pb2.DescribeQuorumResponse
        )
        return QuorumDescription(
            leader_id=response.leader_id,
            leader_epoch=response.leader_epoch,
            high_watermark=response.high_watermark,
            voters=[
                VoterInfo(v.id, v.address, v.log_end_offset, v.lag, v.status)
                for v in response.voters
            ],
            observers=list(response.observers),
        )

    def elect_leaders(
        self, partitions: Mapping[str, Sequence[int]] | None = None
    ) -> list[ElectionResult]:
        """Preferred leader election (Kafka's ElectLeaders, type PREFERRED): leadership moves
        back to each partition's first replica where it is in the ISR and can lead.

        `partitions` maps topic -> partition ids (an empty list: every partition of the topic);
        None elects every partition of the cluster. Per-partition outcomes are returned, not
        raised (ElectionNotNeededError, PreferredLeaderNotAvailableError,
        UnknownTopicOrPartitionError); a failure of the whole request raises.
        """
        request = admin_pb2.ElectLeadersRequest(
            election_type=admin_pb2.ELECTION_TYPE_PREFERRED,
            topic_partitions=[
                admin_pb2.ElectLeadersPartitions(topic=topic, partitions=list(ids))
                for topic, ids in (partitions or {}).items()
            ],
            timeout_ms=self._router.attempt_timeout_ms,
        )
        response = self._router.call("ElectLeaders", request, admin_pb2.ElectLeadersResponse)
        return [
            ElectionResult(
                r.topic,
                r.partition,
                error_for(r.error_code, r.error_message) if r.error_code else None,
            )
            for r in response.results
        ]

    def list_offsets(
        self, partitions: Mapping[TopicPartition, OffsetSpec]
    ) -> dict[TopicPartition, ListOffsetsResult]:
        """Each partition's offset for its spec, asked of the partition's leader (Kafka's
        Admin.listOffsets, read_uncommitted).

        Leader changes, unreachable brokers and topics the brokers have not learned yet are
        retried until `request_timeout_ms` runs out, which raises the last such error; a
        partition the topic does not have raises UnknownTopicOrPartitionError at once, as does
        any other error that retrying cannot fix. ValueError for a spec that is not
        "earliest", "latest" or a timestamp in ms >= 0.
        """
        timestamps = {tp: _spec_timestamp(tp, spec) for tp, spec in partitions.items()}
        if not timestamps:
            return {}
        lookup = OffsetLookup(
            self._brokers(),
            self._pool,
            request_timeout_ms=self._router.attempt_timeout_ms,
            retry_backoff_ms=self._retry_backoff_ms,
            isolation_level=0,
            exact_errors=True,
        )
        return lookup.list_offsets(timestamps, self._request_timeout_ms)

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
        return {g: self._describe_group(g, deadline_ms) for g in dict.fromkeys(_names(group_ids))}

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
        for group_id in dict.fromkeys(_names(group_ids)):
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

    def _coordinators(self) -> CoordinatorClient:
        """Group requests' route to each group's coordinator, built on first use."""
        metadata = self._brokers()
        with self._broker_metadata_lock:
            if self._coordinator_client is None:
                self._coordinator_client = CoordinatorClient(
                    metadata,
                    self._pool,
                    request_timeout_ms=self._router.attempt_timeout_ms,
                    retry_backoff_ms=self._retry_backoff_ms,
                )
            return self._coordinator_client

    def _brokers(self) -> ClusterMetadata:
        """The brokers' view of leaders, bootstrapped from DescribeCluster on first use."""
        with self._broker_metadata_lock:
            if self._broker_metadata is None:
                self._broker_metadata = ClusterMetadata(
                    self._broker_addresses(),
                    self._pool,
                    request_timeout_ms=self._router.attempt_timeout_ms,
                    retry_backoff_ms=self._retry_backoff_ms,
                )
            return self._broker_metadata

    def _broker_addresses(self) -> list[str]:
        """Registered brokers, unfenced ones first (fenced ones still answer Metadata)."""
        brokers = [b for b in self.describe_cluster().brokers if b.address]
        if not brokers:
            raise BrokerNotAvailableError(
                "the cluster has no registered broker to ask for offsets or groups; start a broker"
            )
        return [b.address for b in sorted(brokers, key=lambda b: b.state == "fenced")]

    def close(self) -> None:
        """Closes the connections; the client cannot be used afterwards."""
        self._router.close()
        self._pool.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _names(names: str | Iterable[str]) -> list[str]:
    """A bare string is one name, not a sequence of one-letter names."""
    return [names] if isinstance(names, str) else list(names)


def _resource_type(resource_type: str) -> admin_pb2.ConfigResourceType:
    try:
        return _RESOURCE_TYPES[resource_type]
    except KeyError:
        raise ValueError(
            f"resource_type must be one of {sorted(_RESOURCE_TYPES)}, not {resource_type!r}"
        ) from None


def _config_value(entry: admin_pb2.ConfigEntry) -> ConfigValue:
    return ConfigValue(
        value=entry.value,
        source=_CONFIG_SOURCES.get(entry.source, ConfigSource.UNKNOWN),
        is_default=entry.is_default,
        read_only=entry.read_only,
        type=entry.type,
        documentation=entry.documentation,
    )


def _topic_description(topic: admin_pb2.TopicDescription) -> TopicDescription:
    partitions = [
        PartitionInfo(
            p.partition,
            p.leader,
            p.leader_epoch,
            list(p.replicas),
            list(p.isr),
            p.partition_epoch,
        )
        for p in sorted(topic.partitions, key=lambda p: p.partition)
    ]
    configs = {e.name: _config_value(e) for e in topic.configs}
    return TopicDescription(topic.name, topic.topic_id, partitions, configs)


def _spec_timestamp(tp: TopicPartition, spec: OffsetSpec) -> int:
    """The ListOffsets timestamp for a spec; ValueError for anything else."""
    if spec == "earliest":
        return EARLIEST_TIMESTAMP
    if spec == "latest":
        return LATEST_TIMESTAMP
    if isinstance(spec, int) and not isinstance(spec, bool) and spec >= 0:
        return spec
    raise ValueError(
        f"the offset spec of {tp} must be 'earliest', 'latest' or a timestamp in ms >= 0, "
        f"not {spec!r}"
    )


def _left_ms(deadline_ms: int, doing: str) -> int:
    """What is left of the request timeout; RequestTimedOutError once it is spent."""
    left_ms = deadline_ms - monotonic_ms()
    if left_ms <= 0:
        raise RequestTimedOutError(f"the request timeout ran out before {doing}")
    return left_ms


def _group_states(states: Iterable[str] | None) -> frozenset[GroupState]:
    """The states named (empty: every state); ValueError naming an unknown one."""
    parsed = {name: GroupState.parse(name) for name in _names(states or ())}
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
