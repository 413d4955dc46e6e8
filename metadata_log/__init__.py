"""The metadata log: records, their binary codec, immutable images and the deltas between them.

Pure code: no sockets, threads, files or clocks, and no imports of the rest of pykraft. The
controller quorum writes records; brokers and controllers replay them into `MetadataImage`s.
"""

from __future__ import annotations

from pykraft.metadata_log.codec import decode_record, decode_records, encode_record, encode_records
from pykraft.metadata_log.configs import (
    BROKER_CONFIGS,
    BROKER_SYNONYMS,
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigType,
    config_default,
    config_definition,
    config_definitions,
    validate_config,
)
from pykraft.metadata_log.delta import MetadataDelta, replay_all
from pykraft.metadata_log.errors import (
    ConfigValidationError,
    CorruptRecordError,
    InvariantError,
    MetadataReplayError,
)
from pykraft.metadata_log.image import (
    BrokerRegistration,
    ClusterImage,
    ConfigsImage,
    FeaturesImage,
    MetadataImage,
    PartitionRegistration,
    ProducerIdsImage,
    TopicImage,
    TopicsImage,
)
from pykraft.metadata_log.records import (
    METADATA_VERSION_FEATURE,
    METADATA_VERSION_LATEST,
    NO_LEADER,
    RECORD_CLASSES,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    Endpoint,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RecordType,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)

__all__ = [
    "BROKER_CONFIGS",
    "BROKER_SYNONYMS",
    "METADATA_VERSION_FEATURE",
    "METADATA_VERSION_LATEST",
    "NO_LEADER",
    "RECORD_CLASSES",
    "TOPIC_CONFIGS",
    "BrokerRegistration",
    "BrokerRegistrationChangeRecord",
    "ClusterImage",
    "ConfigDef",
    "ConfigRecord",
    "ConfigResourceType",
    "ConfigType",
    "ConfigValidationError",
    "ConfigsImage",
    "CorruptRecordError",
    "Endpoint",
    "FeatureLevelRecord",
    "FeaturesImage",
    "InvariantError",
    "MetadataDelta",
    "MetadataImage",
    "MetadataReplayError",
    "NoOpRecord",
    "PartitionChangeRecord",
    "PartitionRecord",
    "PartitionRegistration",
    "ProducerIdsImage",
    "ProducerIdsRecord",
    "Record",
    "RecordType",
    "RegisterBrokerRecord",
    "RemoveTopicRecord",
    "TopicImage",
    "TopicRecord",
    "TopicsImage",
    "UnregisterBrokerRecord",
    "config_default",
    "config_definition",
    "config_definitions",
    "decode_record",
    "decode_records",
    "encode_record",
    "encode_records",
    "replay_all",
    "validate_config",
]
