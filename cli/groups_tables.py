"""What `pykraft groups` prints: Kafka's kafka-consumer-groups tables (one row per partition
for --describe, per member for --members, one for --state; GROUP TOPIC PARTITION NEW-OFFSET for
--reset-offsets) with "-" where a value is unknown, and the JSON shapes of `--output json`,
which scripts parse (an interface)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from pykraft.cli.formatting import JsonObject, format_table
from pykraft.client.admin_types import (
    ConsumerGroupDescription,
    ConsumerGroupListing,
    MemberDescription,
)
from pykraft.client.types import OffsetAndMetadata, TopicPartition

MISSING = "-"  # Kafka's MISSING_COLUMN_VALUE


def listings_json(listings: Sequence[ConsumerGroupListing]) -> list[JsonObject]:
    return [{"group_id": g.group_id, "state": str(g.state)} for g in listings]


@dataclass(frozen=True)
class OffsetRow:
    """One row of `describe`: a partition with its committed offset, log end and owner; None
    where unknown (no committed offset, no leader to ask, no owner)."""

    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None

    @property
    def lag(self) -> int | None:
        """How many records the group is behind: log end - committed, when both are known."""
        if self.current_offset is None or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.current_offset


def offset_rows(
    group: ConsumerGroupDescription,
    committed: Mapping[TopicPartition, OffsetAndMetadata],
    log_end_offsets: Mapping[TopicPartition, int],
) -> list[OffsetRow]:
    """Kafka's order: members owning the most partitions first, each member's partitions by
    topic and number; then the partitions with a committed offset that nobody owns. Members
    that own nothing get no row."""
    rows: list[OffsetRow] = []
    owned: set[TopicPartition] = set()
    owners = sorted(
        (m for m in group.members if m.assignment), key=lambda m: (-len(m.assignment), m.member_id)
    )
    for member in owners:
        for tp in sorted(member.assignment):
            owned.add(tp)
            rows.append(_offset_row(tp, committed, log_end_offsets, member))
    for tp in sorted(set(committed) - owned):
        rows.append(_offset_row(tp, committed, log_end_offsets, None))
    return rows


def _offset_row(
    tp: TopicPartition,
    committed: Mapping[TopicPartition, OffsetAndMetadata],
    log_end_offsets: Mapping[TopicPartition, int],
    owner: MemberDescription | None,
) -> OffsetRow:
    offset = committed.get(tp)
    return OffsetRow(
        tp.topic,
        tp.partition,
        None if offset is None else offset.offset,
        log_end_offsets.get(tp),
        None if owner is None else owner.member_id,
        None if owner is None else owner.host,
        None if owner is None else owner.client_id,
    )


def _cell(value: object) -> object:
    return MISSING if value is None or value == "" else value


def offsets_table(group_id: str, rows: Sequence[OffsetRow]) -> str:
    """kafka-consumer-groups --describe's table; nothing when there is no row, as in Kafka."""
    if not rows:
        return ""
    headers = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
    headers += ["CONSUMER-ID", "HOST", "CLIENT-ID"]
    return format_table(
        headers,
        [[group_id, r.topic, r.partition, *map(_cell, _row_values(r))] for r in rows],
    )


def _row_values(row: OffsetRow) -> list[object]:
    return [
        row.current_offset,
        row.log_end_offset,
        row.lag,
        row.consumer_id,
        row.host,
        row.client_id,
    ]


def assignment_text(partitions: Collection[TopicPartition]) -> str:
    """Kafka's "topic:0,1;other:2" (topics and partitions sorted), or "-" for none."""
    if not partitions:
        return MISSING
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ";".join(f"{t}:{','.join(map(str, ps))}" for t, ps in by_topic.items())


def members_table(group: ConsumerGroupDescription, verbose: bool) -> str:
    """kafka-consumer-groups --describe --members [--verbose]: GROUP-INSTANCE-ID only when a
    member is static; --verbose adds each member's epoch and current and target assignment."""
    static = any(m.instance_id for m in group.members)
    headers = ["GROUP", "CONSUMER-ID", *(["GROUP-INSTANCE-ID"] if static else [])]
    headers += ["HOST", "CLIENT-ID", "#PARTITIONS"]
    if verbose:
        headers += ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    rows = []
    for m in group.members:
        row: list[object] = [group.group_id, m.member_id]
        row += [_cell(m.instance_id)] if static else []
        row += [_cell(m.host), _cell(m.client_id), len(m.assignment)]
        if verbose:
            row += [m.member_epoch, assignment_text(m.assignment), group.assignment_epoch]
            row += [assignment_text(m.target_assignment)]
        rows.append(row)
    return format_table(headers, rows)


def state_table(group: ConsumerGroupDescription, verbose: bool) -> str:
    """kafka-consumer-groups --describe --state [--verbose]."""
    coordinator = f"{group.coordinator.address} ({group.coordinator.id})"
    headers = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"]
    row: list[object] = [group.group_id, coordinator, _cell(group.assignor), group.state]
    if verbose:
        headers += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
        row += [group.group_epoch, group.assignment_epoch]
    return format_table([*headers, "#MEMBERS"], [[*row, len(group.members)]])


def _partitions_json(partitions: Collection[TopicPartition]) -> list[JsonObject]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(partitions)]


def group_json(group: ConsumerGroupDescription, rows: Sequence[OffsetRow] | None) -> JsonObject:
    """The whole description; with the offsets view, also its rows ("offsets", null where
    unknown)."""
    described: JsonObject = {
        "group_id": group.group_id,
        "state": str(group.state),
        "coordinator": {"id": group.coordinator.id, "address": group.coordinator.address},
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor": group.assignor,
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "client_id": m.client_id,
                "host": m.host,
                "member_epoch": m.member_epoch,
                "assignment": _partitions_json(m.assignment),
                "target_assignment": _partitions_json(m.target_assignment),
            }
            for m in group.members
        ],
    }
    if rows is not None:
        described["offsets"] = [
            {
                "topic": r.topic,
                "partition": r.partition,
                "current_offset": r.current_offset,
                "log_end_offset": r.log_end_offset,
                "lag": r.lag,
                "consumer_id": r.consumer_id,
                "host": r.host,
                "client_id": r.client_id,
            }
            for r in rows
        ]
    return described


def reset_json(group_id: str, plan: Mapping[TopicPartition, int]) -> list[JsonObject]:
    return [
        {"group": group_id, "topic": tp.topic, "partition": tp.partition, "new_offset": offset}
        for tp, offset in sorted(plan.items())
    ]


def reset_table(group_id: str, plan: Mapping[TopicPartition, int]) -> str:
    """Kafka's GROUP TOPIC PARTITION NEW-OFFSET table (the header even with no partition)."""
    return format_table(
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        [[group_id, tp.topic, tp.partition, offset] for tp, offset in sorted(plan.items())],
    )
