"""What the AdminClient takes and returns: plain frozen values, free of protobuf types.

Ids follow Kafka: -1 means "none" (no leader, no controller known); lists keep the order the
controller sent (replicas in assignment order, the first being the preferred leader).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from pykraft.client.errors import KafkaError
from pykraft.client.types import TopicPartition


@dataclass(frozen=True)
class NewTopic:
    """A topic to create; -1 takes the cluster default (num.partitions or
    default.replication.factor)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicCreated:
    """The outcome of creating one topic (with validate_only, what would have been created)."""

    name: str
    topic_id: str
    num_partitions: int
    replication_factor: int


class ConfigSource(StrEnum):
    """Where a config value comes from, named as Kafka's ConfigEntry.ConfigSource."""

    UNKNOWN = "UNKNOWN"
    DYNAMIC_TOPIC_CONFIG = "DYNAMIC_TOPIC_CONFIG"
    DYNAMIC_BROKER_CONFIG = "DYNAMIC_BROKER_CONFIG"
    DYNAMIC_DEFAULT_BROKER_CONFIG = "DYNAMIC_DEFAULT_BROKER_CONFIG"
    DEFAULT_CONFIG = "DEFAULT_CONFIG"


@dataclass(frozen=True)
class ConfigValue:
    """One config entry; `type` is Kafka's name for it (INT, LONG, STRING, LIST, ...) and
    `documentation` the node's description of it ("" when it sent none)."""

    value: str
    source: ConfigSource
    is_default: bool
    read_only: bool
    type: str
    documentation: str = ""


@dataclass(frozen=True)
class PartitionInfo:
    """One partition as the controller describes it: `leader` -1 when it has none;
    `partition_epoch` (from 0) grows with every change of its replicas, ISR or leader."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    partition_epoch: int = 0


@dataclass(frozen=True)
class TopicDescription:
    """A topic and its partitions (by partition number); `configs` is empty unless asked for."""

    name: str
    topic_id: str
    partitions: list[PartitionInfo]
    configs: dict[str, ConfigValue]


@dataclass(frozen=True)
class ControllerInfo:
    """A controller's id and gRPC listener; `is_active` marks the one that decides."""

    id: int
    address: str
    is_active: bool


@dataclass(frozen=True)
class BrokerInfo:
    """A registered broker; `state` is "fenced", "unfenced" or "controlled_shutdown";
    `incarnation_id` changes each time the broker process starts ("" if not sent)."""

    id: int
    address: str
    rack: str
    state: str
    epoch: int
    incarnation_id: str = ""


@dataclass(frozen=True)
class ClusterDescription:
    """What DescribeCluster answers: `controller_id` is the active controller (-1: none
    known), `brokers` every registered broker, fenced or not."""

    cluster_id: str
    controller_id: int
    controllers: list[ControllerInfo]
    brokers: list[BrokerInfo]


@dataclass(frozen=True)
class VoterInfo:
    """A quorum voter as the leader sees it; `status` is "Leader", "Follower" or "Unreachable"."""

    id: int
    address: str
    log_end_offset: int
    lag: int
    status: str


@dataclass(frozen=True)
class QuorumDescription:
    """The Raft quorum of controllers; `observers` are the broker ids fetching the metadata log."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list[VoterInfo]
    observers: list[int]


@dataclass(frozen=True)
class ElectionResult:
    """One partition's preferred leader election: `error` is None when leadership moved, else
    why not (ElectionNotNeededError when the preferred replica already leads)."""

    topic: str
    partition: int
    error: KafkaError | None


@dataclass(frozen=True)
class PartitionReassignment:
    """A partition being reassigned (KIP-455): `replicas` is the target followed by the
    replicas leaving; `adding_replicas` are catching up, `removing_replicas` leave once every
    target replica is in sync."""

    topic: str
    partition: int
    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]

    @property
    def target_replicas(self) -> list[int]:
        return [r for r in self.replicas if r not in self.removing_replicas]


class GroupState(StrEnum):
    """A consumer group's state as its coordinator reports it (Kafka's GroupState, for groups of
    the KIP-848 protocol): EMPTY has no members, ASSIGNING is computing a new target assignment,
    RECONCILING waits for members to reach it, STABLE has every member on it, DEAD is being
    removed. UNKNOWN stands for a name this client does not know."""

    UNKNOWN = "Unknown"
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    @classmethod
    def parse(cls, name: str) -> GroupState:
        """The state of that name, in any case ("stable", "STABLE"); UNKNOWN if none."""
        wanted = name.strip().lower()
        return next((s for s in cls if s.value.lower() == wanted), cls.UNKNOWN)


@dataclass(frozen=True)
class ConsumerGroupListing:
    """One group as `list_consumer_groups` finds it (Kafka's ConsumerGroupListing)."""

    group_id: str
    state: GroupState


@dataclass(frozen=True)
class Node:
    """A broker as a group's coordinator (Kafka's Node): its id and "host:port"."""

    id: int
    address: str


@dataclass(frozen=True)
class MemberDescription:
    """One member of a consumer group (Kafka's MemberDescription). `assignment` is what the
    member owns now, `target_assignment` what the coordinator wants it to own (the two differ
    while the group reconciles); `instance_id` is its group.instance.id, None for a dynamic
    member; `host` is the address the coordinator saw it connect from."""

    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: frozenset[TopicPartition]
    target_assignment: frozenset[TopicPartition]
    member_epoch: int


@dataclass(frozen=True)
class ConsumerGroupDescription:
    """A consumer group as its coordinator describes it (Kafka's ConsumerGroupDescription).

    `group_epoch` grows with every change of membership or subscriptions; `assignment_epoch`
    is the group epoch the current target assignment was computed for (behind `group_epoch`
    while ASSIGNING); `assignor` is the server-side assignor's name ("uniform", "range").
    Members keep the coordinator's order."""

    group_id: str
    state: GroupState
    coordinator: Node
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: list[MemberDescription]


def name_list(names: str | Iterable[str]) -> list[str]:
    """The names an admin method was given; a bare string is one name, not a sequence of
    one-letter names."""
    return [names] if isinstance(names, str) else list(names)
