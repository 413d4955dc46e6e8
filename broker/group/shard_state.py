"""The groups of one `__consumer_offsets` partition as decisions see them, and how decisions
write: `emit` appends a record to the decision's output and replays it at once, so a decision
sees its own earlier steps; `take` hands the records over. Persisted state changes only
through `replay`, which is also how a coordinator loads the partition.

Classic groups (`classic_group`) are the exception, as in Kafka: their decisions change the
group in memory and `write` its record without replaying it (the group in memory holds more
than the record: the join barrier, waiting answers, timers); replay builds them at load.

Pure and not thread-safe, as `GroupShard`, which owns one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from pykraft.broker.group.classic_group import ClassicGroup, loaded_group
from pykraft.broker.group.config import GroupConfig
from pykraft.broker.group.consumer_group import ConsumerGroup
from pykraft.broker.group.records import (
    ClassicGroupValue,
    GroupRecord,
    GroupRecordValue,
    RecordKey,
    RecordType,
)
from pykraft.server_common.errors import ApiError

R = TypeVar("R")


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
        # KIP-848 groups, and the committed offsets of every group.
        self.groups: dict[str, ConsumerGroup] = {}
        self.classic: dict[str, ClassicGroup] = {}
        self._pending: list[GroupRecord] = []

    def replay(self, record: GroupRecord) -> None:
        group_id = record.key.group
        if record.key.type is RecordType.CLASSIC_GROUP:
            if record.value is None:
                self.classic.pop(group_id, None)
            else:
                assert isinstance(record.value, ClassicGroupValue), record
                self.classic[group_id] = loaded_group(group_id, record.value)
            return
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

    def write(self, group: ClassicGroup) -> None:
        """Writes a classic group's record, not replayed (see the module docstring)."""
        self._pending.append(
            GroupRecord(RecordKey(RecordType.CLASSIC_GROUP, group.group_id), group.value())
        )

    def take(self) -> list[GroupRecord]:
        """The records emitted since the last `take`, which forgets them."""
        records, self._pending = self._pending, []
        return records

    def decision(self, response: R) -> Decision[R]:
        return Decision(self.take(), response)

    def delete_records(self, group_id: str) -> None:
        """Emits the tombstones that delete the group: its offsets, then its metadata (a
        KIP-848 group's, a classic group's)."""
        group = self.groups.get(group_id)
        if group is not None:
            for topic, partition in sorted(group.offsets):
                key = RecordKey(
                    RecordType.OFFSET_COMMIT, group_id, topic=topic, partition=partition
                )
                self.emit(key, None)
            for kind in (
                RecordType.TARGET_ASSIGNMENT_METADATA,
                RecordType.SUBSCRIPTION_METADATA,
                RecordType.GROUP_METADATA,
            ):
                self.emit(RecordKey(kind, group_id), None)
        if group_id in self.classic:
            self.emit(RecordKey(RecordType.CLASSIC_GROUP, group_id), None)
