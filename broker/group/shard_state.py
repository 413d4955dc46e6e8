"""The groups of one `__consumer_offsets` partition as decisions see them, and how decisions
write: `emit` appends a record to the decision's output and replays it at once, so a decision
sees its own earlier steps; `take` hands the records over. Persisted state changes only
through `replay`, which is also how a coordinator loads the partition.

Pure and not thread-safe, as `GroupShard`, which owns one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from google.protobuf.message import Message

from pykraft.broker.group.config import GroupConfig
from pykraft.broker.group.consumer_group import ConsumerGroup
from pykraft.broker.group.records import GroupRecord, GroupRecordValue, RecordKey, RecordType
from pykraft.server_common.errors import ApiError

R = TypeVar("R", bound=Message)


class GroupRequestError(ApiError):
    """A request refused as a whole, with Kafka's error code (`error_code`)."""


@dataclass(frozen=True, slots=True)
class Decision(Generic[R]):
    """The records a decision wrote (and replayed), and the answer to give once they are
    replicated."""

    records: list[GroupRecord]
    response: R


class ShardState:
    """The groups by id, and the records the decision under way has emitted."""

    def __init__(self, config: GroupConfig) -> None:
        self.config = config
        self.groups: dict[str, ConsumerGroup] = {}
        self._pending: list[GroupRecord] = []

    def replay(self, record: GroupRecord) -> None:
        group_id = record.key.group
        group = self.groups.get(group_id)
        if group is None:
            if record.value is None:
                return
            group = self.groups[group_id] = ConsumerGroup(group_id)
        group.replay(record)
        if group.is_gone:
            del self.groups[group_id]

    def emit(self, key: RecordKey, value: GroupRecordValue | None) -> None:
        record = GroupRecord(key, value)
        self._pending.append(record)
        self.replay(record)

    def take(self) -> list[GroupRecord]:
        """The records emitted since the last `take`, which forgets them."""
        records, self._pending = self._pending, []
        return records

    def decision(self, response: R) -> Decision[R]:
        return Decision(self.take(), response)

    def delete_records(self, group: ConsumerGroup) -> None:
        """Emits the tombstones that delete `group`: its offsets, then its metadata."""
        group_id = group.group_id
        for topic, partition in sorted(group.offsets):
            key = RecordKey(RecordType.OFFSET_COMMIT, group_id, topic=topic, partition=partition)
            self.emit(key, None)
        for kind in (
            RecordType.TARGET_ASSIGNMENT_METADATA,
            RecordType.SUBSCRIPTION_METADATA,
            RecordType.GROUP_METADATA,
        ):
            self.emit(RecordKey(kind, group_id), None)
