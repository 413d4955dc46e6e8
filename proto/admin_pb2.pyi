from pykraft.proto import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConfigResourceType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONFIG_RESOURCE_UNKNOWN: _ClassVar[ConfigResourceType]
    CONFIG_RESOURCE_TOPIC: _ClassVar[ConfigResourceType]
    CONFIG_RESOURCE_BROKER: _ClassVar[ConfigResourceType]

class ConfigSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONFIG_SOURCE_UNKNOWN: _ClassVar[ConfigSource]
    CONFIG_SOURCE_DYNAMIC_TOPIC: _ClassVar[ConfigSource]
    CONFIG_SOURCE_DYNAMIC_BROKER: _ClassVar[ConfigSource]
    CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER: _ClassVar[ConfigSource]
    CONFIG_SOURCE_DEFAULT: _ClassVar[ConfigSource]

class AlterConfigOp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ALTER_CONFIG_SET: _ClassVar[AlterConfigOp]
    ALTER_CONFIG_DELETE: _ClassVar[AlterConfigOp]

class ElectionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ELECTION_TYPE_PREFERRED: _ClassVar[ElectionType]
CONFIG_RESOURCE_UNKNOWN: ConfigResourceType
CONFIG_RESOURCE_TOPIC: ConfigResourceType
CONFIG_RESOURCE_BROKER: ConfigResourceType
CONFIG_SOURCE_UNKNOWN: ConfigSource
CONFIG_SOURCE_DYNAMIC_TOPIC: ConfigSource
CONFIG_SOURCE_DYNAMIC_BROKER: ConfigSource
CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER: ConfigSource
CONFIG_SOURCE_DEFAULT: ConfigSource
ALTER_CONFIG_SET: AlterConfigOp
ALTER_CONFIG_DELETE: AlterConfigOp
ELECTION_TYPE_PREFERRED: ElectionType

class CreatableTopic(_message.Message):
    __slots__ = ("name", "num_partitions", "replication_factor", "configs")
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    num_partitions: int
    replication_factor: int
    configs: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., configs: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CreateTopicsRequest(_message.Message):
    __slots__ = ("topics", "timeout_ms", "validate_only")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreatableTopic]
    timeout_ms: int
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreatableTopic, _Mapping]]] = ..., timeout_ms: _Optional[int] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreateTopicsResult(_message.Message):
    __slots__ = ("name", "topic_id", "error_code", "error_message", "num_partitions", "replication_factor")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: str
    error_code: _common_pb2.ErrorCode
    error_message: str
    num_partitions: int
    replication_factor: int
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[str] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ...) -> None: ...

class CreateTopicsResponse(_message.Message):
    __slots__ = ("header", "topics")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    topics: _containers.RepeatedCompositeFieldContainer[CreateTopicsResult]
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[CreateTopicsResult, _Mapping]]] = ...) -> None: ...

class DeleteTopicsRequest(_message.Message):
    __slots__ = ("names", "timeout_ms")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    timeout_ms: int
    def __init__(self, names: _Optional[_Iterable[str]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class DeleteTopicsResult(_message.Message):
    __slots__ = ("name", "topic_id", "error_code", "error_message")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: str
    error_code: _common_pb2.ErrorCode
    error_message: str
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[str] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class DeleteTopicsResponse(_message.Message):
    __slots__ = ("header", "topics")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    topics: _containers.RepeatedCompositeFieldContainer[DeleteTopicsResult]
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[DeleteTopicsResult, _Mapping]]] = ...) -> None: ...

class PartitionCount(_message.Message):
    __slots__ = ("name", "count")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    name: str
    count: int
    def __init__(self, name: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class CreatePartitionsRequest(_message.Message):
    __slots__ = ("topics", "timeout_ms", "validate_only")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[PartitionCount]
    timeout_ms: int
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[PartitionCount, _Mapping]]] = ..., timeout_ms: _Optional[int] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreatePartitionsResult(_message.Message):
    __slots__ = ("name", "error_code", "error_message")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    error_code: _common_pb2.ErrorCode
    error_message: str
    def __init__(self, name: _Optional[str] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class CreatePartitionsResponse(_message.Message):
    __slots__ = ("header", "topics")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    topics: _containers.RepeatedCompositeFieldContainer[CreatePartitionsResult]
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[CreatePartitionsResult, _Mapping]]] = ...) -> None: ...

class DescribeTopicsRequest(_message.Message):
    __slots__ = ("names", "include_configs")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    include_configs: bool
    def __init__(self, names: _Optional[_Iterable[str]] = ..., include_configs: _Optional[bool] = ...) -> None: ...

class PartitionDescription(_message.Message):
    __slots__ = ("partition", "leader", "leader_epoch", "partition_epoch", "replicas", "isr")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, partition: _Optional[int] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ...) -> None: ...

class TopicDescription(_message.Message):
    __slots__ = ("name", "topic_id", "error_code", "error_message", "partitions", "configs")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: str
    error_code: _common_pb2.ErrorCode
    error_message: str
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionDescription]
    configs: _containers.RepeatedCompositeFieldContainer[ConfigEntry]
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[str] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[PartitionDescription, _Mapping]]] = ..., configs: _Optional[_Iterable[_Union[ConfigEntry, _Mapping]]] = ...) -> None: ...

class DescribeTopicsResponse(_message.Message):
    __slots__ = ("header", "topics")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    topics: _containers.RepeatedCompositeFieldContainer[TopicDescription]
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[TopicDescription, _Mapping]]] = ...) -> None: ...

class ConfigEntry(_message.Message):
    __slots__ = ("name", "value", "source", "is_default", "read_only", "type", "documentation")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    IS_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTATION_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    source: ConfigSource
    is_default: bool
    read_only: bool
    type: str
    documentation: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., source: _Optional[_Union[ConfigSource, str]] = ..., is_default: _Optional[bool] = ..., read_only: _Optional[bool] = ..., type: _Optional[str] = ..., documentation: _Optional[str] = ...) -> None: ...

class ConfigResource(_message.Message):
    __slots__ = ("type", "name", "keys")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    type: ConfigResourceType
    name: str
    keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, type: _Optional[_Union[ConfigResourceType, str]] = ..., name: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribeConfigsRequest(_message.Message):
    __slots__ = ("resources",)
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[ConfigResource]
    def __init__(self, resources: _Optional[_Iterable[_Union[ConfigResource, _Mapping]]] = ...) -> None: ...

class DescribeConfigsResult(_message.Message):
    __slots__ = ("type", "name", "error_code", "error_message", "entries")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    type: ConfigResourceType
    name: str
    error_code: _common_pb2.ErrorCode
    error_message: str
    entries: _containers.RepeatedCompositeFieldContainer[ConfigEntry]
    def __init__(self, type: _Optional[_Union[ConfigResourceType, str]] = ..., name: _Optional[str] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[ConfigEntry, _Mapping]]] = ...) -> None: ...

class DescribeConfigsResponse(_message.Message):
    __slots__ = ("header", "results")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    results: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResult]
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., results: _Optional[_Iterable[_Union[DescribeConfigsResult, _Mapping]]] = ...) -> None: ...

class AlterableConfig(_message.Message):
    __slots__ = ("name", "op", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    op: AlterConfigOp
    value: str
    def __init__(self, name: _Optional[str] = ..., op: _Optional[_Union[AlterConfigOp, str]] = ..., value: _Optional[str] = ...) -> None: ...

class AlterConfigsResource(_message.Message):
    __slots__ = ("type", "name", "configs")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    type: ConfigResourceType
    name: str
    configs: _containers.RepeatedCompositeFieldContainer[AlterableConfig]
    def __init__(self, type: _Optional[_Union[ConfigResourceType, str]] = ..., name: _Optional[str] = ..., configs: _Optional[_Iterable[_Union[AlterableConfig, _Mapping]]] = ...) -> None: ...

class AlterConfigsRequest(_message.Message):
    __slots__ = ("resources", "validate_only")
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[AlterConfigsResource]
    validate_only: bool
    def __init__(self, resources: _Optional[_Iterable[_Union[AlterConfigsResource, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class AlterConfigsResult(_message.Message):
    __slots__ = ("type", "name", "error_code", "error_message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: ConfigResourceType
    name: str
    error_code: _common_pb2.ErrorCode
    error_message: str
    def __init__(self, type: _Optional[_Union[ConfigResourceType, str]] = ..., name: _Optional[str] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class AlterConfigsResponse(_message.Message):
    __slots__ = ("header", "results")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    results: _containers.RepeatedCompositeFieldContainer[AlterConfigsResult]
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., results: _Optional[_Iterable[_Union[AlterConfigsResult, _Mapping]]] = ...) -> None: ...

class DescribeClusterRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ControllerNode(_message.Message):
    __slots__ = ("id", "address", "is_active")
    ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    IS_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    id: int
    address: str
    is_active: bool
    def __init__(self, id: _Optional[int] = ..., address: _Optional[str] = ..., is_active: _Optional[bool] = ...) -> None: ...

class BrokerNode(_message.Message):
    __slots__ = ("id", "address", "rack", "state", "epoch", "incarnation_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    address: str
    rack: str
    state: str
    epoch: int
    incarnation_id: str
    def __init__(self, id: _Optional[int] = ..., address: _Optional[str] = ..., rack: _Optional[str] = ..., state: _Optional[str] = ..., epoch: _Optional[int] = ..., incarnation_id: _Optional[str] = ...) -> None: ...

class DescribeClusterResponse(_message.Message):
    __slots__ = ("header", "cluster_id", "controller_id", "controllers", "brokers")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLERS_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    cluster_id: str
    controller_id: int
    controllers: _containers.RepeatedCompositeFieldContainer[ControllerNode]
    brokers: _containers.RepeatedCompositeFieldContainer[BrokerNode]
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., cluster_id: _Optional[str] = ..., controller_id: _Optional[int] = ..., controllers: _Optional[_Iterable[_Union[ControllerNode, _Mapping]]] = ..., brokers: _Optional[_Iterable[_Union[BrokerNode, _Mapping]]] = ...) -> None: ...

class DescribeQuorumRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class VoterState(_message.Message):
    __slots__ = ("id", "address", "log_end_offset", "lag", "status")
    ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    id: int
    address: str
    log_end_offset: int
    lag: int
    status: str
    def __init__(self, id: _Optional[int] = ..., address: _Optional[str] = ..., log_end_offset: _Optional[int] = ..., lag: _Optional[int] = ..., status: _Optional[str] = ...) -> None: ...

class DescribeQuorumResponse(_message.Message):
    __slots__ = ("header", "leader_id", "leader_epoch", "high_watermark", "voters", "observers")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    OBSERVERS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: _containers.RepeatedCompositeFieldContainer[VoterState]
    observers: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., high_watermark: _Optional[int] = ..., voters: _Optional[_Iterable[_Union[VoterState, _Mapping]]] = ..., observers: _Optional[_Iterable[int]] = ...) -> None: ...

class ElectLeadersPartitions(_message.Message):
    __slots__ = ("topic", "partitions")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class ElectLeadersRequest(_message.Message):
    __slots__ = ("election_type", "topic_partitions", "timeout_ms")
    ELECTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    election_type: ElectionType
    topic_partitions: _containers.RepeatedCompositeFieldContainer[ElectLeadersPartitions]
    timeout_ms: int
    def __init__(self, election_type: _Optional[_Union[ElectionType, str]] = ..., topic_partitions: _Optional[_Iterable[_Union[ElectLeadersPartitions, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ElectLeadersResult(_message.Message):
    __slots__ = ("topic", "partition", "error_code", "error_message")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error_code: _common_pb2.ErrorCode
    error_message: str
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class ElectLeadersResponse(_message.Message):
    __slots__ = ("header", "results")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    results: _containers.RepeatedCompositeFieldContainer[ElectLeadersResult]
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., results: _Optional[_Iterable[_Union[ElectLeadersResult, _Mapping]]] = ...) -> None: ...

class AddRaftVoterRequest(_message.Message):
    __slots__ = ("voter_id", "raft_address", "listener", "timeout_ms")
    VOTER_ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LISTENER_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    voter_id: int
    raft_address: str
    listener: str
    timeout_ms: int
    def __init__(self, voter_id: _Optional[int] = ..., raft_address: _Optional[str] = ..., listener: _Optional[str] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class AddRaftVoterResponse(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ...) -> None: ...

class RemoveRaftVoterRequest(_message.Message):
    __slots__ = ("voter_id", "raft_address", "timeout_ms")
    VOTER_ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    voter_id: int
    raft_address: str
    timeout_ms: int
    def __init__(self, voter_id: _Optional[int] = ..., raft_address: _Optional[str] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class RemoveRaftVoterResponse(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ...) -> None: ...

class ReassignablePartition(_message.Message):
    __slots__ = ("topic", "partition", "replicas")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class AlterPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("partitions", "timeout_ms")
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[ReassignablePartition]
    timeout_ms: int
    def __init__(self, partitions: _Optional[_Iterable[_Union[ReassignablePartition, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ReassignmentResult(_message.Message):
    __slots__ = ("topic", "partition", "error_code", "error_message")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error_code: _common_pb2.ErrorCode
    error_message: str
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class AlterPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("header", "results")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    results: _containers.RepeatedCompositeFieldContainer[ReassignmentResult]
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., results: _Optional[_Iterable[_Union[ReassignmentResult, _Mapping]]] = ...) -> None: ...

class ListPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topics: _Optional[_Iterable[str]] = ...) -> None: ...

class OngoingReassignment(_message.Message):
    __slots__ = ("topic", "partition", "replicas", "adding_replicas", "removing_replicas")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class ListPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("header", "reassignments")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    REASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    reassignments: _containers.RepeatedCompositeFieldContainer[OngoingReassignment]
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., reassignments: _Optional[_Iterable[_Union[OngoingReassignment, _Mapping]]] = ...) -> None: ...

class UnregisterBrokerRequest(_message.Message):
    __slots__ = ("broker_id",)
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    def __init__(self, broker_id: _Optional[int] = ...) -> None: ...

class UnregisterBrokerResponse(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ...) -> None: ...
