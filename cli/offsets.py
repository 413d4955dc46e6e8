"""`pykraft offsets`: Kafka's kafka-get-offsets (each partition's offset at a time)."""

from __future__ import annotations

import re

import click

from pykraft.cli import formatting
from pykraft.cli.options import parsed
from pykraft.cli.session import Session, admin_command
from pykraft.client.admin import AdminClient, OffsetSpec
from pykraft.client.admin_types import TopicDescription
from pykraft.client.errors import UnknownTopicOrPartitionError
from pykraft.client.types import TopicPartition

# kafka-get-offsets' names for the special times, and their numbers.
_NAMED_TIMES: dict[str, OffsetSpec] = {
    "earliest": "earliest",
    "-2": "earliest",
    "latest": "latest",
    "-1": "latest",
}


def parse_time(text: str) -> OffsetSpec:
    """kafka-get-offsets' --time: earliest or -2, latest or -1, or a timestamp in ms."""
    spec = _NAMED_TIMES.get(text.strip().lower())
    if spec is not None:
        return spec
    try:
        timestamp_ms = int(text)
    except ValueError:
        timestamp_ms = -1
    if timestamp_ms < 0:
        raise ValueError(
            f"malformed time {text!r}: use earliest (-2), latest (-1) or a timestamp in ms since "
            "the epoch (max-timestamp and the tiered-storage specs are not supported)"
        )
    return timestamp_ms


def parse_partition_ids(text: str) -> list[int]:
    """A comma-separated list of partition ids, as kafka-get-offsets' --partitions."""
    ids = [item.strip() for item in text.split(",") if item.strip()]
    if not ids or not all(item.isdigit() for item in ids):
        raise ValueError(f"expected partition ids like 0,1,2, got {text!r}")
    return sorted({int(item) for item in ids})


def _topic_pattern(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as e:
        raise ValueError(f"not a regular expression: {e}") from None


def _chosen_partitions(
    admin: AdminClient, topic: re.Pattern[str] | None, partitions: list[int] | None
) -> list[TopicPartition]:
    """The partitions whose topic matches --topic in full (every topic without it) and whose
    id is in --partitions (any without it). A plain name is described alone, so an unknown
    one fails at once with UNKNOWN_TOPIC_OR_PARTITION."""
    described: list[TopicDescription]
    if topic is not None and re.escape(topic.pattern) == topic.pattern:
        described = admin.describe_topics([topic.pattern])
    else:
        described = admin.describe_topics(None)
    return [
        TopicPartition(t.name, p.partition)
        for t in described
        if topic is None or topic.fullmatch(t.name)
        for p in t.partitions
        if partitions is None or p.partition in partitions
    ]


@click.command("offsets")
@admin_command
@click.option(
    "--topic",
    callback=parsed(_topic_pattern),
    help="A topic, or a regular expression matching whole names (default: every topic).",
)
@click.option(
    "--partitions",
    callback=parsed(parse_partition_ids),
    metavar="P[,P...]",
    help="Only these partition ids (default: every partition).",
)
@click.option(
    "--time",
    "time_spec",
    default="latest",
    show_default=True,
    callback=parsed(parse_time),
    metavar="earliest|latest|-2|-1|MS",
    help="The log start, the high watermark, or the first offset with a timestamp >= MS.",
)
def offsets(
    session: Session,
    topic: re.Pattern[str] | None,
    partitions: list[int] | None,
    time_spec: OffsetSpec,
) -> None:
    """Print each partition's offset at a time as `topic:partition:offset`, like
    kafka-get-offsets; a partition with no record at or after --time MS is left out."""
    with session.admin() as admin:
        chosen = _chosen_partitions(admin, topic, partitions)
        if not chosen:
            raise UnknownTopicOrPartitionError(
                "no topic-partition matches --topic and --partitions; see `pykraft topics list`"
            )
        results = admin.list_offsets(dict.fromkeys(chosen, time_spec))
    session.emit(results, formatting.offsets_json, formatting.offsets_lines)
