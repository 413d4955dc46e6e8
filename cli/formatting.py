"""How the `pykraft` CLI shows values: JSON objects, aligned text tables and record lines.

The JSON shapes are an interface (scripts parse them); the tables are for people and follow
Kafka's kafka-topics --describe and kafka-metadata-quorum describe --status; offsets print as
kafka-get-offsets prints them, and records as kafka-console-consumer's DefaultMessageFormatter
does, configured by the same properties (`RecordFormat`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pykraft.client.admin_types import (
    ClusterDescription,
    ConfigValue,
    ElectionResult,
    QuorumDescription,
    TopicCreated,
    TopicDescription,
)
from pykraft.client.types import ConsumerRecord, ListOffsetsResult, TopicPartition
from pykraft.proto.record_batch import TimestampType

JsonObject = dict[str, object]
_COLUMN_GAP = "  "
_C = TypeVar("_C")


def format_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Left-aligned columns, each as wide as its widest cell; no trailing spaces."""
    cells = [[str(h) for h in headers], *([str(c) for c in row] for row in rows)]
    assert all(len(row) == len(headers) for row in cells), "every row has a cell per column"
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = (
        _COLUMN_GAP.join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells
    )
    return "\n".join(line.rstrip() for line in lines)


def format_fields(fields: Sequence[tuple[str, object]]) -> str:
    """Lines of `Name: value` with the values aligned, as kafka-metadata-quorum prints them."""
    width = max(len(name) for name, _ in fields) + 1
    return "\n".join(f"{name + ':':<{width}} {value}" for name, value in fields)


def _ids(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in ids)


def _node(node_id: int) -> str:
    return "none" if node_id < 0 else str(node_id)


def topic_overrides(topic: TopicDescription) -> dict[str, str]:
    """The configs set on the topic itself or its brokers (what Kafka's describe lists)."""
    return {k: v.value for k, v in sorted(topic.configs.items()) if not v.is_default}


def topic_json(topic: TopicDescription) -> JsonObject:
    return {
        "name": topic.name,
        "topic_id": topic.topic_id,
        "partitions": [
            {
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
            }
            for p in topic.partitions
        ],
        "configs": topic_overrides(topic),
    }


def topics_table(topics: Sequence[TopicDescription]) -> str:
    """Per topic a summary line, then its partitions as an indented table."""
    blocks = []
    for topic in topics:
        replication_factor = len(topic.partitions[0].replicas) if topic.partitions else 0
        configs = ",".join(f"{k}={v}" for k, v in topic_overrides(topic).items())
        summary = _COLUMN_GAP.join(
            [
                f"Topic: {topic.name}",
                f"TopicId: {topic.topic_id}",
                f"PartitionCount: {len(topic.partitions)}",
                f"ReplicationFactor: {replication_factor}",
                f"Configs: {configs}",
            ]
        )
        partitions = format_table(
            ["Partition", "Leader", "LeaderEpoch", "Replicas", "Isr"],
            [
                [p.partition, _node(p.leader), p.leader_epoch, _ids(p.replicas), _ids(p.isr)]
                for p in topic.partitions
            ],
        )
        indented = "\n".join("    " + line for line in partitions.splitlines())
        blocks.append(f"{summary}\n{indented}")
    return "\n\n".join(blocks)


def topic_created_json(created: TopicCreated) -> JsonObject:
    return {
        "name": created.name,
        "topic_id": created.topic_id,
        "num_partitions": created.num_partitions,
        "replication_factor": created.replication_factor,
    }


def configs_json(configs: Mapping[str, ConfigValue]) -> JsonObject:
    return {
        name: {
            "value": c.value,
            "source": str(c.source),
            "is_default": c.is_default,
            "read_only": c.read_only,
            "type": c.type,
        }
        for name, c in sorted(configs.items())
    }


def configs_table(configs: Mapping[str, ConfigValue]) -> str:
    return format_table(
        ["Name", "Value", "Source", "Default", "ReadOnly", "Type"],
        [
            [name, c.value, c.source, str(c.is_default).lower(), str(c.read_only).lower(), c.type]
            for name, c in sorted(configs.items())
        ],
    )


def cluster_json(cluster: ClusterDescription) -> JsonObject:
    return {
        "cluster_id": cluster.cluster_id,
        "controller_id": cluster.controller_id,
        "controllers": [
            {"id": c.id, "address": c.address, "is_active": c.is_active}
            for c in cluster.controllers
        ],
        "brokers": [
            {"id": b.id, "address": b.address, "rack": b.rack, "state": b.state}
            for b in cluster.brokers
        ],
    }


def cluster_table(cluster: ClusterDescription) -> str:
    fields = format_fields(
        [("ClusterId", cluster.cluster_id), ("ControllerId", _node(cluster.controller_id))]
    )
    controllers = format_table(
        ["ControllerId", "Address", "Active"],
        [[c.id, c.address, str(c.is_active).lower()] for c in cluster.controllers],
    )
    brokers = format_table(
        ["BrokerId", "Address", "Rack", "State", "Epoch"],
        [[b.id, b.address, b.rack or "-", b.state, b.epoch] for b in cluster.brokers],
    )
    return f"{fields}\n\n{controllers}\n\n{brokers}"


def quorum_json(quorum: QuorumDescription) -> JsonObject:
    return {
        "leader_id": quorum.leader_id,
        "leader_epoch": quorum.leader_epoch,
        "high_watermark": quorum.high_watermark,
        "voters": [
            {
                "id": v.id,
                "address": v.address,
                "log_end_offset": v.log_end_offset,
                "lag": v.lag,
                "status": v.status,
            }
            for v in quorum.voters
        ],
        "observers": list(quorum.observers),
    }


def quorum_table(quorum: QuorumDescription) -> str:
    """The --status summary, then one row per voter as in --replication."""
    fields = format_fields(
        [
            ("LeaderId", _node(quorum.leader_id)),
            ("LeaderEpoch", quorum.leader_epoch),
            ("HighWatermark", quorum.high_watermark),
            ("MaxFollowerLag", max((v.lag for v in quorum.voters), default=0)),
            ("CurrentVoters", f"[{_ids(v.id for v in quorum.voters)}]"),
            ("CurrentObservers", f"[{_ids(quorum.observers)}]"),
        ]
    )
    voters = format_table(
        ["NodeId", "Address", "LogEndOffset", "Lag", "Status"],
        [[v.id, v.address, v.log_end_offset, v.lag, v.status] for v in quorum.voters],
    )
    return f"{fields}\n\n{voters}"


def _election_outcome(result: ElectionResult) -> tuple[str, str]:
    """(result name, message): "NONE" when leadership moved, else the error's code name."""
    if result.error is None:
        return "NONE", "the preferred replica now leads"
    return result.error.name, result.error.message


def elections_json(results: Sequence[ElectionResult]) -> list[JsonObject]:
    return [
        {"topic": r.topic, "partition": r.partition, "result": name, "message": message}
        for r in results
        for name, message in [_election_outcome(r)]
    ]


def elections_table(results: Sequence[ElectionResult]) -> str:
    """One line per partition, as kafka-leader-election reports successes and failures."""
    rows = ((r.topic, r.partition, *_election_outcome(r)) for r in results)
    return format_table(["TOPIC", "PARTITION", "RESULT", "MESSAGE"], rows)


def offsets_lines(results: Mapping[TopicPartition, ListOffsetsResult]) -> str:
    """kafka-get-offsets' `topic:partition:offset` lines, by topic then partition number;
    partitions with no offset for the time asked (-1) are left out, as Kafka leaves them."""
    return "\n".join(
        f"{tp.topic}:{tp.partition}:{r.offset}"
        for tp, r in sorted(results.items())
        if r.offset >= 0
    )


def offsets_json(results: Mapping[TopicPartition, ListOffsetsResult]) -> list[JsonObject]:
    """Every partition asked, by topic then partition; offset and timestamp -1 mean none."""
    return [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "offset": r.offset,
            "timestamp": r.timestamp,
            "leader_epoch": r.leader_epoch,
        }
        for tp, r in sorted(results.items())
    ]


# Kafka's TimestampType names, as records print them ("CreateTime:1700000000000").
TIMESTAMP_TYPE_NAMES: dict[TimestampType, str] = {
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}

Decoder = Callable[[bytes], str]


@dataclass(frozen=True)
class RecordFormat:
    """kafka-console-consumer's --property settings of its DefaultMessageFormatter, with
    Kafka's defaults: only the value prints unless asked, columns are separated by
    key.separator, and null keys, values and header values print as null.literal."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: str = "\t"
    line_separator: str = "\n"
    headers_separator: str = ","
    null_literal: str = "null"


def format_record(record: ConsumerRecord, fmt: RecordFormat, decode: Decoder) -> str:
    """One record as DefaultMessageFormatter writes it: the chosen columns in Kafka's order
    (timestamp, partition, offset, headers, key, value) joined by key.separator, then
    line.separator. Nothing at all prints when every column is off, as in Kafka."""

    def show(data: bytes | None) -> str:
        return fmt.null_literal if data is None else decode(data)

    columns: list[str] = []
    if fmt.print_timestamp:
        columns.append(f"{TIMESTAMP_TYPE_NAMES[record.timestamp_type]}:{record.timestamp}")
    if fmt.print_partition:
        columns.append(f"Partition:{record.partition}")
    if fmt.print_offset:
        columns.append(f"Offset:{record.offset}")
    if fmt.print_headers:
        headers = fmt.headers_separator.join(f"{k}:{show(v)}" for k, v in record.headers)
        columns.append(headers if record.headers else "NO_HEADERS")
    if fmt.print_key:
        columns.append(show(record.key))
    if fmt.print_value:
        columns.append(show(record.value))
    return fmt.key_separator.join(columns) + fmt.line_separator if columns else ""


def record_json(record: ConsumerRecord, decode: Decoder) -> JsonObject:
    """Every field of a record; null keys, values and header values stay null."""

    def show(data: bytes | None) -> str | None:
        return None if data is None else decode(data)

    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestamp_type": TIMESTAMP_TYPE_NAMES[record.timestamp_type],
        "key": show(record.key),
        "value": show(record.value),
        "headers": [{"key": k, "value": show(v)} for k, v in record.headers],
    }
