from pykraft.proto import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Listener(_message.Message):
    __slots__ = ("name", "host", "port", "security_protocol")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    SECURITY_PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    name: str
    host: str
    port: int
    security_protocol: str
    def __init__(self, name: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., security_protocol: _Optional[str] = ...) -> None: ...

class BrokerRegistrationRequest(_message.Message):
    __slots__ = ("broker_id", "cluster_id", "incarnation_id", "listeners", "rack", "previous_broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    LISTENERS_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    cluster_id: str
    incarnation_id: str
    listeners: _containers.RepeatedCompositeFieldContainer[Listener]
    rack: str
    previous_broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., cluster_id: _Optional[str] = ..., incarnation_id: _Optional[str] = ..., listeners: _Optional[_Iterable[_Union[Listener, _Mapping]]] = ..., rack: _Optional[str] = ..., previous_broker_epoch: _Optional[int] = ...) -> None: ...

class BrokerRegistrationResponse(_message.Message):
    __slots__ = ("header", "broker_epoch")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    broker_epoch: int
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class BrokerHeartbeatRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "current_metadata_offset", "want_fence", "want_shut_down", "offline_replicas")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CURRENT_METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    WANT_FENCE_FIELD_NUMBER: _ClassVar[int]
    WANT_SHUT_DOWN_FIELD_NUMBER: _ClassVar[int]
    OFFLINE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool
    want_shut_down: bool
    offline_replicas: _containers.RepeatedCompositeFieldContainer[OfflineReplicas]
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., current_metadata_offset: _Optional[int] = ..., want_fence: _Optional[bool] = ..., want_shut_down: _Optional[bool] = ..., offline_replicas: _Optional[_Iterable[_Union[OfflineReplicas, _Mapping]]] = ...) -> None: ...

class OfflineReplicas(_message.Message):
    __slots__ = ("topic_id", "partitions")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class BrokerHeartbeatResponse(_message.Message):
    __slots__ = ("header", "is_caught_up", "is_fenced", "should_shut_down", "controller_listeners")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    IS_CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    IS_FENCED_FIELD_NUMBER: _ClassVar[int]
    SHOULD_SHUT_DOWN_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_LISTENERS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool
    controller_listeners: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., is_caught_up: _Optional[bool] = ..., is_fenced: _Optional[bool] = ..., should_shut_down: _Optional[bool] = ..., controller_listeners: _Optional[_Iterable[str]] = ...) -> None: ...

class BrokerSessionRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class BrokerSessionResponse(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ...) -> None: ...

class BrokerState(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class AlterPartitionItem(_message.Message):
    __slots__ = ("partition", "leader_epoch", "partition_epoch", "new_isr_with_epochs")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    NEW_ISR_WITH_EPOCHS_FIELD_NUMBER: _ClassVar[int]
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr_with_epochs: _containers.RepeatedCompositeFieldContainer[BrokerState]
    def __init__(self, partition: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., new_isr_with_epochs: _Optional[_Iterable[_Union[BrokerState, _Mapping]]] = ...) -> None: ...

class AlterPartitionTopic(_message.Message):
    __slots__ = ("topic_id", "partitions")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionItem]
    def __init__(self, topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionItem, _Mapping]]] = ...) -> None: ...

class AlterPartitionRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "topics")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    topics: _containers.RepeatedCompositeFieldContainer[AlterPartitionTopic]
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[AlterPartitionTopic, _Mapping]]] = ...) -> None: ...

class AlterPartitionResult(_message.Message):
    __slots__ = ("topic_id", "partition", "error_code", "error_message", "leader", "leader_epoch", "partition_epoch", "isr")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partition: int
    error_code: _common_pb2.ErrorCode
    error_message: str
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic_id: _Optional[str] = ..., partition: _Optional[int] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., isr: _Optional[_Iterable[int]] = ...) -> None: ...

class AlterPartitionResponse(_message.Message):
    __slots__ = ("header", "partitions")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionResult]
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionResult, _Mapping]]] = ...) -> None: ...

class AllocateProducerIdsRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class AllocateProducerIdsResponse(_message.Message):
    __slots__ = ("header", "producer_id_start", "producer_id_len")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_START_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_LEN_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    producer_id_start: int
    producer_id_len: int
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., producer_id_start: _Optional[int] = ..., producer_id_len: _Optional[int] = ...) -> None: ...

class MetadataFetchRequest(_message.Message):
    __slots__ = ("broker_id", "after_offset", "max_wait_ms", "max_bytes", "allow_standby")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    ALLOW_STANDBY_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    after_offset: int
    max_wait_ms: int
    max_bytes: int
    allow_standby: bool
    def __init__(self, broker_id: _Optional[int] = ..., after_offset: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., max_bytes: _Optional[int] = ..., allow_standby: _Optional[bool] = ...) -> None: ...

class MetadataBatch(_message.Message):
    __slots__ = ("base_offset", "epoch", "records")
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    base_offset: int
    epoch: int
    records: bytes
    def __init__(self, base_offset: _Optional[int] = ..., epoch: _Optional[int] = ..., records: _Optional[bytes] = ...) -> None: ...

class MetadataSnapshot(_message.Message):
    __slots__ = ("offset", "epoch", "records", "last_chunk")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    LAST_CHUNK_FIELD_NUMBER: _ClassVar[int]
    offset: int
    epoch: int
    records: bytes
    last_chunk: bool
    def __init__(self, offset: _Optional[int] = ..., epoch: _Optional[int] = ..., records: _Optional[bytes] = ..., last_chunk: _Optional[bool] = ...) -> None: ...

class MetadataFetchResponse(_message.Message):
    __slots__ = ("header", "snapshot", "batches", "high_watermark")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    snapshot: MetadataSnapshot
    batches: _containers.RepeatedCompositeFieldContainer[MetadataBatch]
    high_watermark: int
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., snapshot: _Optional[_Union[MetadataSnapshot, _Mapping]] = ..., batches: _Optional[_Iterable[_Union[MetadataBatch, _Mapping]]] = ..., high_watermark: _Optional[int] = ...) -> None: ...
