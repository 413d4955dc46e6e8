"""Kafka's error codes as one exception hierarchy, so callers catch by meaning, not by number.

Every class carries Kafka's code, its name and whether Kafka calls it retriable (the same
operation may succeed if simply tried again, e.g. after a leader election). Retriable errors
share the base `RetriableError`; those that mean "your view of the cluster is stale, refresh
metadata and retry" share `InvalidMetadataError`, as in Kafka's Java client::

    KafkaError                               code unknown to this client (generic instance)
    ├── RetriableError
    │   ├── InvalidMetadataError
    │   │   ├── UnknownTopicOrPartitionError          3
    │   │   ├── LeaderNotAvailableError               5
    │   │   ├── NotLeaderOrFollowerError              6
    │   │   ├── ReplicaNotAvailableError              9
    │   │   ├── NetworkError                          13
    │   │   │   └── KafkaConnectionError              (client side: node unreachable)
    │   │   ├── KafkaStorageError                     56
    │   │   ├── FencedLeaderEpochError                74
    │   │   ├── PreferredLeaderNotAvailableError      80
    │   │   ├── EligibleLeadersNotAvailableError      83
    │   │   ├── ElectionNotNeededError                84
    │   │   ├── UnknownTopicIdError                   100
    │   │   └── InconsistentTopicIdError              103
    │   ├── CorruptMessageError                       2
    │   ├── RequestTimedOutError                      7
    │   ├── CoordinatorLoadInProgressError            14
    │   ├── CoordinatorNotAvailableError              15
    │   ├── NotCoordinatorError                       16
    │   ├── NotEnoughReplicasError                    19
    │   ├── NotEnoughReplicasAfterAppendError         20
    │   ├── NotControllerError                        41
    │   ├── UnknownLeaderEpochError                   75
    │   └── OffsetNotAvailableError                   78
    └── every other named error (not retriable), e.g.
        UnknownServerError -1, TopicAlreadyExistsError 36, InvalidPartitionsError 37,
        InvalidReplicationFactorError 38, InvalidConfigError 40, InvalidRequestError 42,
        PolicyViolationError 44, StaleBrokerEpochError 77, BrokerIdNotRegisteredError 102, ...

`error_for(code, message)` builds the right class for a code read off the wire; a code this
client has no class for yields a plain `KafkaError` that still reports the code and its name.
"""

from __future__ import annotations

from typing import ClassVar

from pykraft.proto.common_pb2 import ErrorCode

_BY_CODE: dict[int, type[KafkaError]] = {}


def code_name(code: int) -> str:
    """Kafka's name for `code` ("TOPIC_ALREADY_EXISTS"), or "UNKNOWN_ERROR_CODE_<n>"."""
    try:
        return ErrorCode.Name(code)
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


class KafkaError(Exception):
    """An error with a Kafka error code; `str()` gives "NAME: message".

    Subclasses fix `code` and `retriable`; a plain `KafkaError(message, code=n)` stands for a
    code this client does not know, and is never retriable (Kafka's rule for unknown codes).
    """

    code: int = ErrorCode.UNKNOWN_SERVER_ERROR
    retriable: ClassVar[bool] = False

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        if "code" in cls.__dict__:
            assert cls.code not in _BY_CODE, f"two classes for error code {cls.code}"
            _BY_CODE[cls.code] = cls

    def __init__(self, message: str = "", *, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.name: str = code_name(self.code)
        self.message: str = message

    def __str__(self) -> str:
        return f"{self.name}: {self.message}" if self.message else self.name


class RetriableError(KafkaError):
    """The same request may succeed if sent again after a backoff."""

    retriable = True


class InvalidMetadataError(RetriableError):
    """The caller's view of leaders or topics is stale: refresh metadata, then retry."""


class UnknownServerError(KafkaError):
    code = ErrorCode.UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(KafkaError):
    code = ErrorCode.OFFSET_OUT_OF_RANGE


class CorruptMessageError(RetriableError):
    code = ErrorCode.CORRUPT_MESSAGE


class UnknownTopicOrPartitionError(InvalidMetadataError):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class InvalidFetchSizeError(KafkaError):
    code = ErrorCode.INVALID_FETCH_SIZE


class LeaderNotAvailableError(InvalidMetadataError):
    code = ErrorCode.LEADER_NOT_AVAILABLE


class NotLeaderOrFollowerError(InvalidMetadataError):
    code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class RequestTimedOutError(RetriableError):
    code = ErrorCode.REQUEST_TIMED_OUT


class BrokerNotAvailableError(KafkaError):
    code = ErrorCode.BROKER_NOT_AVAILABLE


class ReplicaNotAvailableError(InvalidMetadataError):
    code = ErrorCode.REPLICA_NOT_AVAILABLE


class MessageTooLargeError(KafkaError):
    code = ErrorCode.MESSAGE_TOO_LARGE


class StaleControllerEpochError(KafkaError):
    code = ErrorCode.STALE_CONTROLLER_EPOCH


class OffsetMetadataTooLargeError(KafkaError):
    code = ErrorCode.OFFSET_METADATA_TOO_LARGE


class NetworkError(InvalidMetadataError):
    code = ErrorCode.NETWORK_EXCEPTION


class KafkaConnectionError(NetworkError):
    """Raised by the client itself when a node cannot be reached (refused, down, timed out)."""


class CoordinatorLoadInProgressError(RetriableError):
    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


class CoordinatorNotAvailableError(RetriableError):
    code = ErrorCode.COORDINATOR_NOT_AVAILABLE


class NotCoordinatorError(RetriableError):
    code = ErrorCode.NOT_COORDINATOR


class InvalidTopicError(KafkaError):
    code = ErrorCode.INVALID_TOPIC_EXCEPTION


class RecordListTooLargeError(KafkaError):
    code = ErrorCode.RECORD_LIST_TOO_LARGE


class NotEnoughReplicasError(RetriableError):
    code = ErrorCode.NOT_ENOUGH_REPLICAS


class NotEnoughReplicasAfterAppendError(RetriableError):
    code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


class InvalidRequiredAcksError(KafkaError):
    code = ErrorCode.INVALID_REQUIRED_ACKS


class IllegalGenerationError(KafkaError):
    code = ErrorCode.ILLEGAL_GENERATION


class InvalidGroupIdError(KafkaError):
    code = ErrorCode.INVALID_GROUP_ID


class UnknownMemberIdError(KafkaError):
    code = ErrorCode.UNKNOWN_MEMBER_ID


class InvalidSessionTimeoutError(KafkaError):
    code = ErrorCode.INVALID_SESSION_TIMEOUT


class RebalanceInProgressError(KafkaError):
    code = ErrorCode.REBALANCE_IN_PROGRESS


class InvalidCommitOffsetSizeError(KafkaError):
    code = ErrorCode.INVALID_COMMIT_OFFSET_SIZE


class InvalidTimestampError(KafkaError):
    code = ErrorCode.INVALID_TIMESTAMP


class UnsupportedVersionError(KafkaError):
    code = ErrorCode.UNSUPPORTED_VERSION


class TopicAlreadyExistsError(KafkaError):
    code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidPartitionsError(KafkaError):
    code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(KafkaError):
    code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(KafkaError):
    code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class InvalidConfigError(KafkaError):
    code = ErrorCode.INVALID_CONFIG


class NotControllerError(RetriableError):
    code = ErrorCode.NOT_CONTROLLER


class InvalidRequestError(KafkaError):
    code = ErrorCode.INVALID_REQUEST


class PolicyViolationError(KafkaError):
    code = ErrorCode.POLICY_VIOLATION


class OutOfOrderSequenceNumberError(KafkaError):
    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceNumberError(KafkaError):
    code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(KafkaError):
    code = ErrorCode.INVALID_PRODUCER_EPOCH


class KafkaStorageError(InvalidMetadataError):
    code = ErrorCode.KAFKA_STORAGE_ERROR


class UnknownProducerIdError(KafkaError):
    code = ErrorCode.UNKNOWN_PRODUCER_ID


class ReassignmentInProgressError(KafkaError):
    code = ErrorCode.REASSIGNMENT_IN_PROGRESS


class GroupIdNotFoundError(KafkaError):
    code = ErrorCode.GROUP_ID_NOT_FOUND


class FencedLeaderEpochError(InvalidMetadataError):
    code = ErrorCode.FENCED_LEADER_EPOCH


class UnknownLeaderEpochError(RetriableError):
    code = ErrorCode.UNKNOWN_LEADER_EPOCH


class StaleBrokerEpochError(KafkaError):
    code = ErrorCode.STALE_BROKER_EPOCH


class OffsetNotAvailableError(RetriableError):
    code = ErrorCode.OFFSET_NOT_AVAILABLE


class PreferredLeaderNotAvailableError(InvalidMetadataError):
    code = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


class EligibleLeadersNotAvailableError(InvalidMetadataError):
    code = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


class ElectionNotNeededError(InvalidMetadataError):
    """The preferred replica already leads (an answer of ElectLeaders rather than a failure)."""

    code = ErrorCode.ELECTION_NOT_NEEDED


class InvalidRecordError(KafkaError):
    code = ErrorCode.INVALID_RECORD


class ResourceNotFoundError(KafkaError):
    code = ErrorCode.RESOURCE_NOT_FOUND


class InvalidUpdateVersionError(KafkaError):
    code = ErrorCode.INVALID_UPDATE_VERSION


class UnknownTopicIdError(InvalidMetadataError):
    code = ErrorCode.UNKNOWN_TOPIC_ID


class DuplicateBrokerRegistrationError(KafkaError):
    code = ErrorCode.DUPLICATE_BROKER_REGISTRATION


class BrokerIdNotRegisteredError(KafkaError):
    code = ErrorCode.BROKER_ID_NOT_REGISTERED


class InconsistentTopicIdError(InvalidMetadataError):
    code = ErrorCode.INCONSISTENT_TOPIC_ID


class InconsistentClusterIdError(KafkaError):
    code = ErrorCode.INCONSISTENT_CLUSTER_ID


class IneligibleReplicaError(KafkaError):
    code = ErrorCode.INELIGIBLE_REPLICA


class NewLeaderElectedError(KafkaError):
    code = ErrorCode.NEW_LEADER_ELECTED


class FencedMemberEpochError(KafkaError):
    code = ErrorCode.FENCED_MEMBER_EPOCH


class StaleMemberEpochError(KafkaError):
    code = ErrorCode.STALE_MEMBER_EPOCH


def error_for(code: int, message: str = "") -> KafkaError:
    """The exception for a non-NONE error code read off the wire (not raised, returned)."""
    if code == ErrorCode.NONE:
        raise ValueError("error code NONE is not an error")
    cls = _BY_CODE.get(code)
    return cls(message) if cls is not None else KafkaError(message, code=code)


def raise_for(code: int, message: str = "") -> None:
    """Raises `error_for(code, message)` unless `code` is NONE."""
    if code != ErrorCode.NONE:
        raise error_for(code, message)
