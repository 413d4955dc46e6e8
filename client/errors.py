"""Kafka's error codes as one exception hierarchy, so callers catch by meaning, not by number.

Every class carries Kafka's code, its name and whether Kafka calls it retriable (the same
operation may succeed if simply tried again, e.g. after a leader election), and its docstring
says what the error means and what to do about it. Retriable errors share the base
`RetriableError`; those that mean "your view of the cluster is stale, refresh metadata and
retry" share `InvalidMetadataError`, as in Kafka's Java client. The clients already retry
retriable errors until their timeout, so one that reaches a caller means the condition lasted::

    KafkaError                                     any code; a code unknown to this client
    │                                              gives a plain, non-retriable instance
    ├── RetriableError                             (retriable: try again after a backoff)
    │   ├── InvalidMetadataError                   (refresh metadata, then retry)
    │   │   ├── UnknownTopicOrPartitionError           3
    │   │   ├── LeaderNotAvailableError                5
    │   │   ├── NotLeaderOrFollowerError               6
    │   │   ├── ReplicaNotAvailableError               9
    │   │   ├── NetworkError                           13
    │   │   │   └── KafkaConnectionError               13 (client side: node unreachable)
    │   │   ├── KafkaStorageError                      56
    │   │   ├── FencedLeaderEpochError                 74
    │   │   ├── PreferredLeaderNotAvailableError       80
    │   │   ├── EligibleLeadersNotAvailableError       83
    │   │   ├── ElectionNotNeededError                 84
    │   │   ├── UnknownTopicIdError                    100
    │   │   └── InconsistentTopicIdError               103
    │   ├── CorruptMessageError                        2
    │   ├── RequestTimedOutError                       7
    │   │   └── BufferExhaustedError                   7 (producer: no buffer space in time)
    │   ├── CoordinatorLoadInProgressError             14
    │   ├── CoordinatorNotAvailableError               15
    │   ├── NotCoordinatorError                        16
    │   ├── NotEnoughReplicasError                     19
    │   ├── NotEnoughReplicasAfterAppendError          20
    │   ├── NotControllerError                         41
    │   ├── FetchSessionIdNotFoundError                70
    │   ├── InvalidFetchSessionEpochError              71
    │   ├── UnknownLeaderEpochError                    75
    │   └── OffsetNotAvailableError                    78
    ├── UnknownServerError                             -1
    ├── OffsetOutOfRangeError                          1
    │   ├── NoOffsetForPartitionError                  1 (consumer: no position, no reset)
    │   └── LogTruncationError                         1 (consumer: the leader's log was cut)
    ├── InvalidFetchSizeError                          4
    ├── BrokerNotAvailableError                        8
    ├── MessageTooLargeError                           10
    ├── StaleControllerEpochError                      11
    ├── OffsetMetadataTooLargeError                    12
    ├── InvalidTopicError                              17
    ├── RecordListTooLargeError                        18
    ├── InvalidRequiredAcksError                       21
    ├── IllegalGenerationError                         22
    ├── InvalidGroupIdError                            24
    ├── UnknownMemberIdError                           25
    ├── InvalidSessionTimeoutError                     26
    ├── RebalanceInProgressError                       27
    ├── InvalidCommitOffsetSizeError                   28
    ├── InvalidTimestampError                          32
    ├── UnsupportedVersionError                        35
    ├── TopicAlreadyExistsError                        36
    ├── InvalidPartitionsError                         37
    ├── InvalidReplicationFactorError                  38
    ├── InvalidReplicaAssignmentError                  39
    ├── InvalidConfigError                             40
    ├── InvalidRequestError                            42
    ├── PolicyViolationError                           44
    ├── OutOfOrderSequenceNumberError                  45
    ├── DuplicateSequenceNumberError                   46
    ├── InvalidProducerEpochError                      47
    ├── UnknownProducerIdError                         59
    ├── ReassignmentInProgressError                    60
    ├── NoReassignmentInProgressError                  85
    ├── NonEmptyGroupError                             68
    ├── GroupIdNotFoundError                           69
    ├── StaleBrokerEpochError                          77
    ├── FencedInstanceIdError                          82
    ├── InvalidRecordError                             87
    ├── ResourceNotFoundError                          91
    ├── InvalidUpdateVersionError                      95
    ├── DuplicateBrokerRegistrationError               101
    ├── BrokerIdNotRegisteredError                     102
    ├── InconsistentClusterIdError                     104
    ├── IneligibleReplicaError                         107
    ├── NewLeaderElectedError                          108
    ├── FencedMemberEpochError                         110
    ├── UnreleasedInstanceIdError                      111
    ├── UnsupportedAssignorError                       112
    ├── StaleMemberEpochError                          113
    │   └── CommitFailedError                          113 (consumer: the commit cannot succeed)
    └── InvalidRegularExpressionError                  128

`BufferExhaustedError` lives in `pykraft.client.producer.accumulator`; it is exported by
`pykraft.client` like every class here. `error_for(code, message)` builds the right class for a
code read off the wire; a code this client has no class for yields a plain `KafkaError` that
still reports the code and its name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from pykraft.client.types import OffsetAndMetadata, TopicPartition
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
    """The broker or controller failed in an unexpected way (a bug or an unhandled
    condition). Not retriable: read the node's log for the cause, and report it if it recurs."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(KafkaError):
    """The requested offset is below the log start or above the log end (retention
    deleted it, or it was never written). Seek to a valid offset, or let the consumer reset
    with auto_offset_reset "earliest" or "latest"."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE


class NoOffsetForPartitionError(OffsetOutOfRangeError):
    """A partition has no valid position and auto_offset_reset is "none" (Kafka's
    NoOffsetForPartitionException); seek to an offset first."""


class LogTruncationError(OffsetOutOfRangeError):
    """The consumer read records that the partition's current leader does not have: the log
    was truncated (an unclean leader election) and other records may now stand at those
    offsets. Raised only with auto_offset_reset "none" (Kafka's LogTruncationException);
    `fetch_offsets` holds the positions the consumer had and `divergent_offsets` the first
    offset, with its leader epoch, known to differ from what it read (none when the leader
    could not say). Seek there to read the new history, or elsewhere."""

    def __init__(
        self,
        message: str = "",
        *,
        fetch_offsets: Mapping[TopicPartition, int] | None = None,
        divergent_offsets: Mapping[TopicPartition, OffsetAndMetadata] | None = None,
    ) -> None:
        super().__init__(message)
        self.fetch_offsets: dict[TopicPartition, int] = dict(fetch_offsets or {})
        self.divergent_offsets: dict[TopicPartition, OffsetAndMetadata] = dict(
            divergent_offsets or {}
        )


class CorruptMessageError(RetriableError):
    """A record batch failed its CRC or size check on the way. Retriable: the client
    sends or fetches it again; if it persists, the data on disk or the network is damaged."""

    code = ErrorCode.CORRUPT_MESSAGE


class UnknownTopicOrPartitionError(InvalidMetadataError):
    """The topic or partition does not exist, or this node has not learned of it
    yet. Retriable for a while after creation; if it persists, check the name (`pykraft topics
    list`) and the partition count, or create the topic."""

    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class InvalidFetchSizeError(KafkaError):
    """A fetch asked for a negative or zero maximum size. Fix fetch_max_bytes or
    max_partition_fetch_bytes."""

    code = ErrorCode.INVALID_FETCH_SIZE


class LeaderNotAvailableError(InvalidMetadataError):
    """The partition has no leader right now (an election is under way, or every
    replica is offline). Retriable: wait; if it lasts, start the brokers holding its replicas."""

    code = ErrorCode.LEADER_NOT_AVAILABLE


class NotLeaderOrFollowerError(InvalidMetadataError):
    """The request went to a broker that no longer leads the partition. Retriable:
    the client refreshes metadata and sends it to the new leader."""

    code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class RequestTimedOutError(RetriableError):
    """No answer came within the request timeout (the cluster is slow, overloaded or
    lost its quorum). Retriable: try again, or raise request_timeout_ms / delivery_timeout_ms."""

    code = ErrorCode.REQUEST_TIMED_OUT


class BrokerNotAvailableError(KafkaError):
    """The broker named is not registered or not running. Start it, or use another
    bootstrap address."""

    code = ErrorCode.BROKER_NOT_AVAILABLE


class ReplicaNotAvailableError(InvalidMetadataError):
    """A replica of the partition is offline. Retriable: refresh metadata; start the
    broker that holds it if it stays offline."""

    code = ErrorCode.REPLICA_NOT_AVAILABLE


class MessageTooLargeError(KafkaError):
    """A record or request is larger than the broker accepts (max.message.bytes) or
    than the client may send (max_request_size). Send smaller records, compress them, or raise
    those limits."""

    code = ErrorCode.MESSAGE_TOO_LARGE


class StaleControllerEpochError(KafkaError):
    """A request carried an older controller epoch than the node knows: it came
    from a deposed controller. Nothing to do as a client; the new controller takes over."""

    code = ErrorCode.STALE_CONTROLLER_EPOCH


class OffsetMetadataTooLargeError(KafkaError):
    """The metadata string of an offset commit is too long. Commit a shorter
    string."""

    code = ErrorCode.OFFSET_METADATA_TOO_LARGE


class NetworkError(InvalidMetadataError):
    """The connection broke while the request was in flight. Retriable: the client
    reconnects (to another node if needed) and retries."""

    code = ErrorCode.NETWORK_EXCEPTION


class KafkaConnectionError(NetworkError):
    """Raised by the client itself when a node cannot be reached (refused, down, timed
    out). Retriable: check the address and that the node runs; the client tries the others."""


class CoordinatorLoadInProgressError(RetriableError):
    """The group coordinator is still loading its state. Retriable: wait and
    try again."""

    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


class CoordinatorNotAvailableError(RetriableError):
    """No group coordinator is available yet. Retriable: wait and try again."""

    code = ErrorCode.COORDINATOR_NOT_AVAILABLE


class NotCoordinatorError(RetriableError):
    """The request went to a broker that is not the group's coordinator. Retriable:
    find the coordinator again and resend."""

    code = ErrorCode.NOT_COORDINATOR


class InvalidTopicError(KafkaError):
    """The topic name is not legal (empty, "." or "..", longer than 249 characters,
    or with characters other than ASCII letters, digits, '.', '_' and '-'). Pick another name."""

    code = ErrorCode.INVALID_TOPIC_EXCEPTION


class RecordListTooLargeError(KafkaError):
    """A produce request holds more bytes than the broker accepts for one
    partition. Lower batch_size or max_request_size."""

    code = ErrorCode.RECORD_LIST_TOO_LARGE


class NotEnoughReplicasError(RetriableError):
    """Fewer replicas are in sync than the topic's min.insync.replicas, so an
    acks=all write was refused before it was appended. Retriable: wait for replicas to catch
    up or restart the missing brokers, or lower min.insync.replicas."""

    code = ErrorCode.NOT_ENOUGH_REPLICAS


class NotEnoughReplicasAfterAppendError(RetriableError):
    """The record was appended on the leader but the ISR shrank below
    min.insync.replicas before it was replicated. Retriable, but a retry may write it twice
    unless the producer is idempotent."""

    code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


class InvalidRequiredAcksError(KafkaError):
    """acks is not -1 (all), 0 or 1. Use one of those."""

    code = ErrorCode.INVALID_REQUIRED_ACKS


class IllegalGenerationError(KafkaError):
    """The consumer's group generation is out of date (the group rebalanced). Rejoin
    the group."""

    code = ErrorCode.ILLEGAL_GENERATION


class InvalidGroupIdError(KafkaError):
    """The group id is empty or not legal. Give a non-empty group id."""

    code = ErrorCode.INVALID_GROUP_ID


class UnknownMemberIdError(KafkaError):
    """The group coordinator does not know this member (it was removed after a
    timeout). Rejoin the group."""

    code = ErrorCode.UNKNOWN_MEMBER_ID


class InvalidSessionTimeoutError(KafkaError):
    """The session timeout is outside the broker's allowed range. Pick one within
    group.min.session.timeout.ms and group.max.session.timeout.ms."""

    code = ErrorCode.INVALID_SESSION_TIMEOUT


class RebalanceInProgressError(KafkaError):
    """The group is rebalancing. Rejoin the group, then commit again."""

    code = ErrorCode.REBALANCE_IN_PROGRESS


class InvalidCommitOffsetSizeError(KafkaError):
    """The offset commit request is too large. Commit fewer partitions at once."""

    code = ErrorCode.INVALID_COMMIT_OFFSET_SIZE


class InvalidTimestampError(KafkaError):
    """A record's timestamp is out of the range the topic accepts
    (message.timestamp.*.ms). Send a current timestamp or change those topic configs."""

    code = ErrorCode.INVALID_TIMESTAMP


class UnsupportedVersionError(KafkaError):
    """The node does not implement this request (an older or different server, or a
    broker asked something only controllers answer). Check the address points at the right
    kind of node and that client and cluster versions match."""

    code = ErrorCode.UNSUPPORTED_VERSION


class TopicAlreadyExistsError(KafkaError):
    """A topic with that name exists. Use it, delete it first, or pick another name."""

    code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidPartitionsError(KafkaError):
    """The partition count is not valid (below 1, or lower than the topic's
    current count: partitions never shrink). Ask for a larger total."""

    code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(KafkaError):
    """The replication factor is below 1 or above the number of registered
    brokers. Lower it, or start more brokers."""

    code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(KafkaError):
    """A manual replica assignment names unknown brokers, repeats one, or has
    uneven lengths. Fix the assignment."""

    code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class InvalidConfigError(KafkaError):
    """A config name is unknown or its value is not valid for it. The message names
    it; see `pykraft configs describe` for the accepted names and their types."""

    code = ErrorCode.INVALID_CONFIG


class NotControllerError(RetriableError):
    """The node is not the active controller (a standby, or an election is under
    way). Retriable: the admin client follows the redirect to the active controller."""

    code = ErrorCode.NOT_CONTROLLER


class InvalidRequestError(KafkaError):
    """The request is malformed or inconsistent (a client bug or a mismatched
    version). Not retriable: check the arguments the message names."""

    code = ErrorCode.INVALID_REQUEST


class PolicyViolationError(KafkaError):
    """The cluster's policy refuses the request (e.g. a topic creation policy).
    Change the request to fit the policy."""

    code = ErrorCode.POLICY_VIOLATION


class OutOfOrderSequenceNumberError(KafkaError):
    """The broker received a batch whose sequence number leaves a gap: records
    of this idempotent producer may have been lost. The producer fails the batch; resend it
    from the application if it must arrive."""

    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceNumberError(KafkaError):
    """The broker already has this batch of the idempotent producer. Nothing
    to do: it was written once."""

    code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(KafkaError):
    """The producer's epoch is older than the one the broker knows: another
    instance with the same id took over. Close this producer."""

    code = ErrorCode.INVALID_PRODUCER_EPOCH


class KafkaStorageError(InvalidMetadataError):
    """The replica's log directory failed on the broker. Retriable: metadata refreshes
    to another leader; the operator must repair the disk."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


class UnknownProducerIdError(KafkaError):
    """The broker no longer knows this idempotent producer (its state expired).
    The producer takes a new id and retries by itself."""

    code = ErrorCode.UNKNOWN_PRODUCER_ID


class ReassignmentInProgressError(KafkaError):
    """A partition reassignment is in progress for this topic. Wait for it to
    finish, then try again."""

    code = ErrorCode.REASSIGNMENT_IN_PROGRESS


class NoReassignmentInProgressError(KafkaError):
    """A cancel named a partition that is not being reassigned. Nothing to cancel."""

    code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


class NonEmptyGroupError(KafkaError):
    """The group still has members, so it cannot be deleted (or have its offsets reset by a
    tool). Stop its consumers first."""

    code = ErrorCode.NON_EMPTY_GROUP


class GroupIdNotFoundError(KafkaError):
    """No such consumer group. Check the group id."""

    code = ErrorCode.GROUP_ID_NOT_FOUND


class FetchSessionIdNotFoundError(RetriableError):
    """The broker holds no fetch session of that id (it evicted it, or restarted): the
    fetcher opens a new one with a whole fetch (KIP-227). Retriable."""

    code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND


class InvalidFetchSessionEpochError(RetriableError):
    """The fetch session's epoch is not the one the broker expects (a request or an answer
    was lost): the fetcher opens a new session with a whole fetch (KIP-227). Retriable."""

    code = ErrorCode.INVALID_FETCH_SESSION_EPOCH


class FencedLeaderEpochError(InvalidMetadataError):
    """The request carried an older leader epoch than the broker's: the caller
    missed a leader change. Retriable: refresh metadata and retry."""

    code = ErrorCode.FENCED_LEADER_EPOCH


class UnknownLeaderEpochError(RetriableError):
    """The request carried a newer leader epoch than the broker knows: the broker
    lags behind the metadata log. Retriable: wait and retry."""

    code = ErrorCode.UNKNOWN_LEADER_EPOCH


class StaleBrokerEpochError(KafkaError):
    """A broker sent an epoch older than its current registration (a previous
    incarnation). Nothing to do as a client; the broker re-registers."""

    code = ErrorCode.STALE_BROKER_EPOCH


class OffsetNotAvailableError(RetriableError):
    """The leader cannot answer for this offset yet (its high watermark is behind
    after an election). Retriable: wait and retry."""

    code = ErrorCode.OFFSET_NOT_AVAILABLE


class PreferredLeaderNotAvailableError(InvalidMetadataError):
    """The preferred replica cannot lead now (it is offline or out of the
    ISR). Bring it back in sync, then elect again."""

    code = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


class EligibleLeadersNotAvailableError(InvalidMetadataError):
    """No replica is eligible to lead (none in the ISR or ELR). Restart the
    partition's brokers; the partition stays offline until one can lead."""

    code = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


class ElectionNotNeededError(InvalidMetadataError):
    """The preferred replica already leads (an answer of ElectLeaders rather than a
    failure). Nothing to do."""

    code = ErrorCode.ELECTION_NOT_NEEDED


class FencedInstanceIdError(KafkaError):
    """Another consumer joined the group with this consumer's group.instance.id and took over
    its partitions. Fatal for this consumer: give each consumer its own instance id."""

    code = ErrorCode.FENCED_INSTANCE_ID


class InvalidRecordError(KafkaError):
    """A record was refused as malformed, or a line of input could not be made into a
    record. The message says which; fix the record or the input."""

    code = ErrorCode.INVALID_RECORD


class ResourceNotFoundError(KafkaError):
    """The named resource (a broker id or config entity) does not exist. Check the
    name or id."""

    code = ErrorCode.RESOURCE_NOT_FOUND


class InvalidUpdateVersionError(KafkaError):
    """A partition change carried a partition epoch that is not the current one.
    Nothing to do as a client; the broker retries with fresh state."""

    code = ErrorCode.INVALID_UPDATE_VERSION


class UnknownTopicIdError(InvalidMetadataError):
    """No topic has this topic id (it was deleted, perhaps recreated under the same
    name). Retriable: refresh metadata; recreate the topic if it is gone."""

    code = ErrorCode.UNKNOWN_TOPIC_ID


class DuplicateBrokerRegistrationError(KafkaError):
    """Another live broker registered with the same node.id. Give each broker
    its own node.id, or stop the other one."""

    code = ErrorCode.DUPLICATE_BROKER_REGISTRATION


class BrokerIdNotRegisteredError(KafkaError):
    """The broker is not registered with the controller. Restart the broker so it
    registers again."""

    code = ErrorCode.BROKER_ID_NOT_REGISTERED


class InconsistentTopicIdError(InvalidMetadataError):
    """The topic id in the request does not match the broker's (the topic was
    recreated). Retriable: refresh metadata."""

    code = ErrorCode.INCONSISTENT_TOPIC_ID


class InconsistentClusterIdError(KafkaError):
    """The node belongs to another cluster (its cluster id differs). Point it at
    the right controllers, or format its data directory for this cluster."""

    code = ErrorCode.INCONSISTENT_CLUSTER_ID


class IneligibleReplicaError(KafkaError):
    """A proposed ISR includes a replica that may not join it (fenced or shutting
    down). Nothing to do as a client; the leader proposes again."""

    code = ErrorCode.INELIGIBLE_REPLICA


class NewLeaderElectedError(KafkaError):
    """The ISR change was dropped because a new leader was elected meanwhile.
    Nothing to do as a client."""

    code = ErrorCode.NEW_LEADER_ELECTED


class FencedMemberEpochError(KafkaError):
    """The group member's epoch is older than the coordinator's. Rejoin the group."""

    code = ErrorCode.FENCED_MEMBER_EPOCH


class UnreleasedInstanceIdError(KafkaError):
    """Another member holds this group.instance.id and has not left. Give each consumer its
    own instance id."""

    code = ErrorCode.UNRELEASED_INSTANCE_ID


class UnsupportedAssignorError(KafkaError):
    """The broker has no assignor of that name. Use "uniform" or "range"."""

    code = ErrorCode.UNSUPPORTED_ASSIGNOR


class StaleMemberEpochError(KafkaError):
    """The group member's epoch is stale for an offset commit. Rejoin the group,
    then commit again."""

    code = ErrorCode.STALE_MEMBER_EPOCH


class CommitFailedError(StaleMemberEpochError):
    """The consumer's commit cannot succeed: it is no longer a member of the group (removed
    after its session timed out, or fenced), so another member may own the partitions now.
    The records since the last commit may be processed again by that member."""


class InvalidRegularExpressionError(KafkaError):
    """The subscription's regular expression does not compile. Fix the pattern."""

    code = ErrorCode.INVALID_REGULAR_EXPRESSION


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
