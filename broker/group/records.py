"""The records of `__consumer_offsets`: what a group coordinator writes, and replays to load.

Every record's key starts with an int16 type (Kafka's key "version") followed by Kafka's key
fields, strings as int16 length + UTF-8, so compaction keeps the latest record per group, member
and partition. A record with a null value is a tombstone: the thing is gone.

| type | key fields                 | value                                                   |
|------|----------------------------|---------------------------------------------------------|
| 1    | group, topic, partition    | OffsetCommitValue v3 (Kafka's layout, below)             |
| 2    | group                      | GroupMetadataValue v3: a classic group (Kafka's layout)  |
| 3    | group                      | GroupMetadata: the group epoch                           |
| 4    | group                      | SubscriptionMetadata: partition counts of its topics     |
| 5    | group, member              | MemberMetadata: subscription, client, timeouts           |
| 6    | group                      | TargetAssignmentMetadata: the assignment epoch           |
| 7    | group, member              | TargetAssignmentMember: the member's target partitions   |
| 8    | group, member              | CurrentAssignment: epochs, state, owned, being revoked   |

Types 1-8 are Kafka's key versions for the same things. Offset commit values keep Kafka's v3
bytes (int16 version 3, int64 offset, int32 leader epoch, string metadata, int64 commit
timestamp), and so do classic groups' (int16 version 3, string protocol type, int32 generation,
nullable strings protocol and leader, int64 current state timestamp, then an int32 count of
members, each: strings member id, nullable instance id, client id, client host, int32 rebalance
and session timeouts, int32-length bytes subscription and assignment); neither schema has
tagged fields at those versions. The values of types 3-8 are pykraft's own, compact JSON, as
their Kafka schemas use tagged fields we have no use for. Decoding raises RecordError for
anything else, so a corrupt or foreign record stops a load instead of being half understood.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Final

Partition = tuple[str, int]

OFFSET_COMMIT_VALUE_VERSION: Final = 3
CLASSIC_GROUP_VALUE_VERSION: Final = 3
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_NULL_LENGTH: Final = -1


class RecordError(ValueError):
    """A `__consumer_offsets` record this coordinator cannot read."""


class RecordType(IntEnum):
    OFFSET_COMMIT = 1
    CLASSIC_GROUP = 2
    GROUP_METADATA = 3
    SUBSCRIPTION_METADATA = 4
    MEMBER_METADATA = 5
    TARGET_ASSIGNMENT_METADATA = 6
    TARGET_ASSIGNMENT_MEMBER = 7
    CURRENT_ASSIGNMENT = 8


_KEY_FIELDS: Final = {
    RecordType.OFFSET_COMMIT: ("group", "topic", "partition"),
    RecordType.CLASSIC_GROUP: ("group",),
    RecordType.GROUP_METADATA: ("group",),
    RecordType.SUBSCRIPTION_METADATA: ("group",),
    RecordType.MEMBER_METADATA: ("group", "member"),
    RecordType.TARGET_ASSIGNMENT_METADATA: ("group",),
    RecordType.TARGET_ASSIGNMENT_MEMBER: ("group", "member"),
    RecordType.CURRENT_ASSIGNMENT: ("group", "member"),
}


@dataclass(frozen=True, slots=True)
class RecordKey:
    type: RecordType
    group: str
    member: str = ""
    topic: str = ""
    partition: int = -1


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    instance_id: str
    rack_id: str
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str
    server_assignor: str
    rebalance_timeout_ms: int


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: str
    assigned: frozenset[Partition] = field(default_factory=frozenset)
    revoking: frozenset[Partition] = field(default_factory=frozenset)


@dataclass(frozen=True, slots=True)
class ClassicMemberValue:
    member_id: str
    instance_id: str | None  # group.instance.id of a static member
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes  # the member's metadata for the group's protocol
    assignment: bytes


@dataclass(frozen=True, slots=True)
class ClassicGroupValue:
    """A classic group as its last rebalance left it (Kafka's GroupMetadataValue)."""

    protocol_type: str
    generation: int
    protocol_name: str | None
    leader: str | None
    state_timestamp_ms: int  # wall clock of the last state change, -1 if unknown
    members: tuple[ClassicMemberValue, ...]


# Values of the small records: an int or a mapping, carried as JSON.
GroupRecordValue = (
    OffsetCommitValue
    | ClassicGroupValue
    | MemberMetadataValue
    | CurrentAssignmentValue
    | int
    | frozenset[Partition]
    | Mapping[str, int]
)


@dataclass(frozen=True, slots=True)
class GroupRecord:
    key: RecordKey
    value: GroupRecordValue | None  # None: a tombstone


# --- keys ---


def encode_key(key: RecordKey) -> bytes:
    parts = [_INT16.pack(key.type)]
    for name in _KEY_FIELDS[key.type]:
        if name == "partition":
            parts.append(_INT32.pack(key.partition))
        else:
            parts.append(_string(getattr(key, name)))
    return b"".join(parts)


def decode_key(data: bytes) -> RecordKey:
    try:
        reader = _Reader(data)
        record_type = RecordType(reader.unpack(_INT16))
        fields: dict[str, Any] = {}
        for name in _KEY_FIELDS[record_type]:
            fields[name] = reader.unpack(_INT32) if name == "partition" else reader.string()
        reader.check_end()
    except (struct.error, ValueError, UnicodeDecodeError) as error:
        raise RecordError(f"unreadable __consumer_offsets key {data[:64]!r}: {error}") from None
    return RecordKey(type=record_type, **fields)


# --- values ---


def encode_value(record: GroupRecord) -> bytes | None:
    value = record.value
    if value is None:
        return None
    if isinstance(value, OffsetCommitValue):
        return b"".join(
            (
                _INT16.pack(OFFSET_COMMIT_VALUE_VERSION),
                _INT64.pack(value.offset),
                _INT32.pack(value.leader_epoch),
                _string(value.metadata),
                _INT64.pack(value.commit_timestamp_ms),
            )
        )
    if isinstance(value, ClassicGroupValue):
        return _encode_classic_group(value)
    return json.dumps(_jsonable(value), separators=(",", ":"), sort_keys=True).encode()


def decode_value(key: RecordKey, data: bytes | None) -> GroupRecordValue | None:
    if data is None:
        return None
    try:
        if key.type is RecordType.OFFSET_COMMIT:
            return _decode_offset_commit(_Reader(data))
        if key.type is RecordType.CLASSIC_GROUP:
            return _decode_classic_group(_Reader(data))
        return _from_json(key.type, json.loads(data))
    except (struct.error, ValueError, KeyError, TypeError, UnicodeDecodeError) as error:
        raise RecordError(f"unreadable value of {key}: {error}") from None


def _decode_offset_commit(reader: _Reader) -> OffsetCommitValue:
    reader.version(OFFSET_COMMIT_VALUE_VERSION)
    offset, leader_epoch = reader.unpack(_INT64), reader.unpack(_INT32)
    value = OffsetCommitValue(offset, leader_epoch, reader.string(), reader.unpack(_INT64))
    reader.check_end()
    return value


def _encode_classic_group(value: ClassicGroupValue) -> bytes:
    parts = [
        _INT16.pack(CLASSIC_GROUP_VALUE_VERSION),
        _string(value.protocol_type),
        _INT32.pack(value.generation),
        _string(value.protocol_name),
        _string(value.leader),
        _INT64.pack(value.state_timestamp_ms),
        _INT32.pack(len(value.members)),
    ]
    for member in value.members:
        parts += [
            _string(member.member_id),
            _string(member.instance_id),
            _string(member.client_id),
            _string(member.client_host),
            _INT32.pack(member.rebalance_timeout_ms),
            _INT32.pack(member.session_timeout_ms),
            _INT32.pack(len(member.subscription)) + member.subscription,
            _INT32.pack(len(member.assignment)) + member.assignment,
        ]
    return b"".join(parts)


def _decode_classic_group(reader: _Reader) -> ClassicGroupValue:
    reader.version(CLASSIC_GROUP_VALUE_VERSION)
    protocol_type, generation = reader.string(), reader.unpack(_INT32)
    protocol_name, leader = reader.nullable_string(), reader.nullable_string()
    state_timestamp_ms, count = reader.unpack(_INT64), reader.unpack(_INT32)
    if count < 0:
        raise ValueError(f"{count} members")
    members = tuple(
        ClassicMemberValue(
            member_id=reader.string(),
            instance_id=reader.nullable_string(),
            client_id=reader.string(),
            client_host=reader.string(),
            rebalance_timeout_ms=reader.unpack(_INT32),
            session_timeout_ms=reader.unpack(_INT32),
            subscription=reader.binary(),
            assignment=reader.binary(),
        )
        for _ in range(count)
    )
    reader.check_end()
    return ClassicGroupValue(
        protocol_type, generation, protocol_name, leader, state_timestamp_ms, members
    )


def _jsonable(value: GroupRecordValue) -> Any:
    if isinstance(value, int):
        return {"epoch": value}
    if isinstance(value, frozenset):
        return {"partitions": _partitions_json(value)}
    if isinstance(value, MemberMetadataValue):
        return {
            "instance_id": value.instance_id,
            "rack_id": value.rack_id,
            "client_id": value.client_id,
            "client_host": value.client_host,
            "topics": list(value.subscribed_topic_names),
            "regex": value.subscribed_topic_regex,
            "assignor": value.server_assignor,
            "rebalance_timeout_ms": value.rebalance_timeout_ms,
        }
    if isinstance(value, CurrentAssignmentValue):
        return {
            "epoch": value.member_epoch,
            "previous_epoch": value.previous_member_epoch,
            "state": value.state,
            "assigned": _partitions_json(value.assigned),
            "revoking": _partitions_json(value.revoking),
        }
    assert isinstance(value, Mapping), value
    return {"topics": dict(value)}


def _from_json(record_type: RecordType, data: dict[str, Any]) -> GroupRecordValue:
    if record_type in (RecordType.GROUP_METADATA, RecordType.TARGET_ASSIGNMENT_METADATA):
        return _int(data["epoch"])
    if record_type is RecordType.SUBSCRIPTION_METADATA:
        return {str(topic): _int(count) for topic, count in data["topics"].items()}
    if record_type is RecordType.TARGET_ASSIGNMENT_MEMBER:
        return _partitions(data["partitions"])
    if record_type is RecordType.MEMBER_METADATA:
        return MemberMetadataValue(
            instance_id=str(data["instance_id"]),
            rack_id=str(data["rack_id"]),
            client_id=str(data["client_id"]),
            client_host=str(data["client_host"]),
            subscribed_topic_names=tuple(str(t) for t in data["topics"]),
            subscribed_topic_regex=str(data["regex"]),
            server_assignor=str(data["assignor"]),
            rebalance_timeout_ms=_int(data["rebalance_timeout_ms"]),
        )
    assert record_type is RecordType.CURRENT_ASSIGNMENT, record_type
    return CurrentAssignmentValue(
        member_epoch=_int(data["epoch"]),
        previous_member_epoch=_int(data["previous_epoch"]),
        state=str(data["state"]),
        assigned=_partitions(data["assigned"]),
        revoking=_partitions(data["revoking"]),
    )


def _partitions_json(partitions: Iterable[Partition]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return by_topic


def _partitions(data: Mapping[str, list[int]]) -> frozenset[Partition]:
    return frozenset((str(topic), _int(p)) for topic, ps in data.items() for p in ps)


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"expected an integer, not {value!r}")
    return value


def _string(text: str | None) -> bytes:
    """Kafka's (nullable) string: int16 length (-1 for null), then UTF-8."""
    if text is None:
        return _INT16.pack(_NULL_LENGTH)
    data = text.encode()
    return _INT16.pack(len(data)) + data


class _Reader:
    """Reads Kafka's primitive types from `data` in order; struct.error or ValueError when the
    bytes do not hold what is asked for."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._position = 0

    def unpack(self, layout: struct.Struct) -> int:
        (value,) = layout.unpack_from(self._data, self._position)
        self._position += layout.size
        return int(value)

    def version(self, expected: int) -> None:
        version = self.unpack(_INT16)
        if version != expected:
            raise ValueError(f"value version {version}, not {expected}")

    def nullable_string(self) -> str | None:
        length = self.unpack(_INT16)
        return None if length == _NULL_LENGTH else self._take(length).decode()

    def string(self) -> str:
        text = self.nullable_string()
        if text is None:
            raise ValueError("a null string where one is required")
        return text

    def binary(self) -> bytes:
        return self._take(self.unpack(_INT32))

    def _take(self, length: int) -> bytes:
        end = self._position + length
        if length < 0 or end > len(self._data):
            raise ValueError(f"{length} bytes past the end")
        taken = self._data[self._position : end]
        self._position = end
        return taken

    def check_end(self) -> None:
        if self._position != len(self._data):
            raise ValueError(f"{len(self._data) - self._position} trailing bytes")
