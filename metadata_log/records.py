"""The metadata record types: every change to the cluster state is one of these.

Modelled on Kafka's KRaft records (KIP-631, revised by KIP-746); each type keeps Kafka's api key as
its stable `TYPE_ID` and carries a `VERSION`. Records are frozen: once written to the log they
never change. `codec.py` turns them into bytes and back.

Sentinels follow Kafka: a leader of `NO_LEADER` (-1) means the partition has none; in a
`PartitionChangeRecord`, `None` means "unchanged" for every field.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar
from uuid import UUID

NO_LEADER = -1


class RecordType(IntEnum):
    """Kafka's api keys for metadata records (metadata/src/main/resources/common/metadata)."""

    REGISTER_BROKER = 0
    UNREGISTER_BROKER = 1
    TOPIC = 2
    PARTITION = 3
    CONFIG = 4
    PARTITION_CHANGE = 5
    REMOVE_TOPIC = 9
    FEATURE_LEVEL = 12
    PRODUCER_IDS = 15
    BROKER_REGISTRATION_CHANGE = 17
    NO_OP = 20


class ConfigResourceType(IntEnum):
    """Kafka's ConfigResource.Type numbers."""

    TOPIC = 2
    BROKER = 4


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener of a broker."""

    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    """A broker registered (or re-registered with a new incarnation); it starts fenced."""

    TYPE_ID: ClassVar[RecordType] = RecordType.REGISTER_BROKER
    VERSION: ClassVar[int] = 0

    broker_id: int
    incarnation_id: UUID
    broker_epoch: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord:
    TYPE_ID: ClassVar[RecordType] = RecordType.UNREGISTER_BROKER
    VERSION: ClassVar[int] = 0

    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord:
    """Fences, unfences or marks a broker in controlled shutdown; `None` leaves a flag as it is."""

    TYPE_ID: ClassVar[RecordType] = RecordType.BROKER_REGISTRATION_CHANGE
    VERSION: ClassVar[int] = 0

    broker_id: int
    broker_epoch: int
    fenced: bool | None = None
    in_controlled_shutdown: bool | None = None


@dataclass(frozen=True, slots=True)
class TopicRecord:
    TYPE_ID: ClassVar[RecordType] = RecordType.TOPIC
    VERSION: ClassVar[int] = 0

    name: str
    topic_id: UUID


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    """The full state of one partition; follows its TopicRecord.

    During a reassignment (KIP-455) `replicas` is the target followed by the replicas leaving;
    `adding_replicas` are the target's newcomers still catching up and `removing_replicas` the
    replicas that leave once every newcomer is in the ISR. Both are empty otherwise.
    """

    TYPE_ID: ClassVar[RecordType] = RecordType.PARTITION
    VERSION: ClassVar[int] = 1

    topic_id: UUID
    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    """A sparse change to one partition: only the fields that are not `None` change.

    Replaying it always bumps the partition epoch, and bumps the leader epoch when the leader
    changes (Kafka's rule), so the record itself carries no epochs.
    """

    TYPE_ID: ClassVar[RecordType] = RecordType.PARTITION_CHANGE
    VERSION: ClassVar[int] = 1

    topic_id: UUID
    partition_id: int
    isr: tuple[int, ...] | None = None
    leader: int | None = None
    replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    """Sets one config key of a resource; a `value` of `None` deletes the key (back to default)."""

    TYPE_ID: ClassVar[RecordType] = RecordType.CONFIG
    VERSION: ClassVar[int] = 0

    resource_type: ConfigResourceType
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    TYPE_ID: ClassVar[RecordType] = RecordType.REMOVE_TOPIC
    VERSION: ClassVar[int] = 0

    topic_id: UUID


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    """A block of producer ids was handed to a broker; the next block starts at next_producer_id."""

    TYPE_ID: ClassVar[RecordType] = RecordType.PRODUCER_IDS
    VERSION: ClassVar[int] = 0

    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord:
    """Sets a feature's level, such as `metadata.version`; written first in every snapshot."""

    TYPE_ID: ClassVar[RecordType] = RecordType.FEATURE_LEVEL
    VERSION: ClassVar[int] = 0

    name: str
    feature_level: int


@dataclass(frozen=True, slots=True)
class NoOpRecord:
    """Changes nothing; marks a new active controller and keeps an idle log moving."""

    TYPE_ID: ClassVar[RecordType] = RecordType.NO_OP
    VERSION: ClassVar[int] = 0


Record = (
    RegisterBrokerRecord
    | UnregisterBrokerRecord
    | BrokerRegistrationChangeRecord
    | TopicRecord
    | PartitionRecord
    | PartitionChangeRecord
    | ConfigRecord
    | RemoveTopicRecord
    | ProducerIdsRecord
    | FeatureLevelRecord
    | NoOpRecord
)

RECORD_CLASSES: tuple[type[Record], ...] = (
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
    BrokerRegistrationChangeRecord,
    TopicRecord,
    PartitionRecord,
    PartitionChangeRecord,
    ConfigRecord,
    RemoveTopicRecord,
    ProducerIdsRecord,
    FeatureLevelRecord,
    NoOpRecord,
)

METADATA_VERSION_FEATURE = "metadata.version"
METADATA_VERSION_LATEST = 1
