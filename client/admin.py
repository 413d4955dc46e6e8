"""AdminClient: topics, configs and cluster state over the controllers' AdminService, and
partition offsets from the partition leaders' BrokerService; its consumer-group operations are
`pykraft.client.admin_groups.ConsumerGroupAdmin`, mixed in.

The client needs only some controller addresses, or broker addresses (brokers forward the
AdminService to the active controller): it finds the active controller by itself (see
`pykraft.client.routing`). Every method either returns typed values or raises a `KafkaError`
subclass; per-item errors (one topic of several) raise as well, the first one in request order.
Writes are answered once committed to the metadata log.

`list_offsets` is answered by each partition's leader, which only brokers know: the client
asks DescribeCluster (through the AdminService, so any bootstrap address will do) for the
registered brokers once, then follows the brokers' own Metadata for leaders, as the producer
and consumer do (`pykraft.client.cluster_metadata`). The group operations share those brokers.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Literal

from pykraft.client.admin_groups import ConsumerGroupAdmin
from pykraft.client.admin_types import (
    BrokerInfo,
    ClusterDescription,
    ConfigSource,
    ConfigValue,
    ControllerInfo,
    ElectionResult,
    NewTopic,
    PartitionInfo,
    PartitionReassignment,
    QuorumDescription,
    TopicCreated,
    TopicDescription,
    VoterInfo,
    name_list,
)
from pykraft.client.broker_connection import ConnectionPool
from pykraft.client.cluster_metadata import ClusterMetadata
from pykraft.client.errors import BrokerNotAvailableError, KafkaError, error_for, raise_for
from pykraft.client.group_coordinator import CoordinatorClient
from pykraft.client.offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    OffsetLookup,
)
from pykraft.client.routing import ControllerRouter, parse_bootstrap
from pykraft.client.types import ListOffsetsResult, TopicPartition
from pykraft.proto import admin_pb2, common_pb2

ResourceType = Literal["topic", "broker"]
OffsetSpec = Literal["earliest", "latest"] | int
"""What `list_offsets` looks up per partition: the log start ("earliest"), the high watermark
("latest"), or the first offset whose record timestamp is at least this many ms since the epoch
(Kafka's OffsetSpec.earliest(), latest() and forTimestamp(ms))."""

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


class AdminClient(ConsumerGroupAdmin):
    """Administers a pykraft cluster through any of its controllers.

    `bootstrap` is "host:port[,host:port...]" or a list of such addresses (ValueError if
    malformed). A request, redirects and retries included, gives up after `request_timeout_ms`
    and raises the last error seen. Safe to share between threads; use as a context manager or
    call `close()`. The consumer-group methods (`list_consumer_groups` and the like) are
    `ConsumerGroupAdmin`'s, which this class provides with its connections.
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
        self,
        topics: Sequence[NewTopic],
        *,
        validate_only: bool = False,
        if_not_exists: bool = False,
    ) -> dict[str, TopicCreated]:
        """Creates the topics; raises the first per-topic error (earlier topics may exist).
        With `if_not_exists`, a topic that already exists is no error and not in the result
        (Kafka's `kafka-topics --if-not-exists`); that also makes a create safe to repeat when
        an answer was lost (an election leaves a request's outcome unknown, and the retry finds
        the topics it created)."""
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
        existed = common_pb2.TOPIC_ALREADY_EXISTS if if_not_exists else None
        created = [r for r in response.topics if r.error_code != existed]
        for result in created:
            raise_for(result.error_code, result.error_message)
        return {
            r.name: TopicCreated(r.name, r.topic_id, r.num_partitions, r.replication_factor)
            for r in created
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
            names=name_list(names), timeout_ms=self._router.attempt_timeout_ms
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
            names=name_list(names or ()), include_configs=include_configs
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
            type=_resource_type(resource_type), name=name, keys=name_list(keys)
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

    def add_controller(self, node_id: int, raft_address: str, listener: str) -> None:
        """Makes controller `node_id` a voter of the quorum (KIP-853's AddRaftVoter); start it
        afterwards with the current voters and itself in `controller.quorum.voters`. Raises
        RequestTimedOutError while another voter change is uncommitted (retry),
        InvalidRequestError when the id or an address is already a voter's."""
        request = admin_pb2.AddRaftVoterRequest(
            voter_id=node_id,
            raft_address=raft_address,
            listener=listener,
            timeout_ms=self._router.attempt_timeout_ms,
        )
        self._router.call("AddRaftVoter", request, admin_pb2.AddRaftVoterResponse)

    def remove_controller(self, node_id: int, raft_address: str) -> None:
        """Removes voter `node_id`, whose Raft listener is `raft_address` (a check, as Kafka's
        directory id), from the quorum (KIP-853's RemoveRaftVoter); stop that controller
        afterwards. Removing the leader moves the leadership first (the call follows it).
        Raises InvalidRequestError when `node_id` is no voter, the only one, or elsewhere."""
        request = admin_pb2.RemoveRaftVoterRequest(
            voter_id=node_id,
            raft_address=raft_address,
            timeout_ms=self._router.attempt_timeout_ms,
        )
        self._router.call("RemoveRaftVoter", request, admin_pb2.RemoveRaftVoterResponse)

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

    def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, KafkaError | None]:
        """Reassigns each partition to its target replicas (the preferred leader first), or
        cancels its reassignment in progress when the target is None (Kafka's
        Admin.alterPartitionReassignments). Returns each partition's refusal (None: accepted,
        the new replicas now catching up); a failure of the whole request raises."""
        request = admin_pb2.AlterPartitionReassignmentsRequest(
            partitions=[
                admin_pb2.ReassignablePartition(
                    topic=tp.topic, partition=tp.partition, replicas=list(replicas or ())
                )
                for tp, replicas in targets.items()
            ],
            timeout_ms=self._router.attempt_timeout_ms,
        )
        response = self._router.call(
            "AlterPartitionReassignments", request, admin_pb2.AlterPartitionReassignmentsResponse
        )
        return {
            TopicPartition(r.topic, r.partition): (
                error_for(r.error_code, r.error_message) if r.error_code else None
            )
            for r in response.results
        }

    def list_partition_reassignments(
        self, topics: Iterable[str] = ()
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The partitions being reassigned, of `topics` (none: of every topic)."""
        request = admin_pb2.ListPartitionReassignmentsRequest(topics=list(topics))
        response = self._router.call(
            "ListPartitionReassignments", request, admin_pb2.ListPartitionReassignmentsResponse
        )
        return {
            TopicPartition(r.topic, r.partition): PartitionReassignment(
                r.topic,
                r.partition,
                list(r.replicas),
                list(r.adding_replicas),
                list(r.removing_replicas),
            )
            for r in response.reassignments
        }

    def unregister_broker(self, broker_id: int) -> None:
        """Forgets a stopped broker that hosts no replica (Kafka's Admin.unregisterBroker), the
        last step of decommissioning it; raises why not (BrokerIdNotRegisteredError, or
        InvalidRequestError while it runs or still hosts replicas)."""
        request = admin_pb2.UnregisterBrokerRequest(broker_id=broker_id)
        self._router.call("UnregisterBroker", request, admin_pb2.UnregisterBrokerResponse)

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
