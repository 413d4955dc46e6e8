"""`pykraft topics`: Kafka's kafka-topics (create, list, describe, alter and delete)."""

from __future__ import annotations

from typing import Final, TextIO

import click

from pykraft.cli import formatting
from pykraft.cli.options import properties_option
from pykraft.cli.session import Session, admin_command
from pykraft.client import NewTopic, TopicCreated


@click.group()
def topics() -> None:
    """Create, list, describe, alter and delete topics."""


# Topics per CreateTopics request of a batch creation, and partitions (records, nearly) per
# request: the controller refuses an operation of more than 10,000 records as a whole.
TOPICS_PER_REQUEST_MAX: Final = 500
PARTITIONS_PER_REQUEST_MAX: Final = 9_000


def topic_names(topic: str | None, count: int | None, topics_file: TextIO | None) -> list[str]:
    """The names a create asks for: `topic`, or `topic-0` .. `topic-{count-1}` with a count,
    then every non-blank line of `topics_file`."""
    names = [] if topic is None else [topic]
    if count is not None:
        if topic is None:
            raise click.UsageError("--count needs --topic, the names' prefix.")
        names = [f"{topic}-{i}" for i in range(count)]
    if topics_file is not None:
        names += [line.strip() for line in topics_file if line.strip()]
    if not names:
        raise click.UsageError("Name the topics: --topic, --topic with --count, or --topics-file.")
    return names


def request_batches(topics: list[NewTopic]) -> list[list[NewTopic]]:
    """`topics` cut into requests of at most TOPICS_PER_REQUEST_MAX topics and, where the
    partition counts are given, PARTITIONS_PER_REQUEST_MAX partitions (one topic at least)."""
    batches: list[list[NewTopic]] = []
    partitions = 0
    for topic in topics:
        weight = max(topic.num_partitions, 1)
        full = batches and (
            len(batches[-1]) >= TOPICS_PER_REQUEST_MAX
            or partitions + weight > PARTITIONS_PER_REQUEST_MAX
        )
        if not batches or full:
            batches.append([])
            partitions = 0
        batches[-1].append(topic)
        partitions += weight
    return batches


@topics.command("create")
@admin_command
@click.option("--topic", help="Name of the topic to create (the names' prefix with --count).")
@click.option(
    "--count", type=click.IntRange(min=1), help="Create TOPIC-0 .. TOPIC-<count-1> at once."
)
@click.option(
    "--topics-file",
    type=click.File("r"),
    help="Create the topics this file names, one a line ('-': standard input).",
)
@click.option("--partitions", type=click.IntRange(min=1), help="Default: num.partitions.")
@click.option(
    "--replication-factor",
    type=click.IntRange(min=1),
    help="Default: default.replication.factor.",
)
@properties_option(
    "--config", "configs", build=dict, help="A topic config override; repeat for more."
)
@click.option(
    "--if-not-exists",
    is_flag=True,
    help="Leave topics that already exist as they are instead of failing.",
)
def topics_create(
    session: Session,
    topic: str | None,
    count: int | None,
    topics_file: TextIO | None,
    partitions: int | None,
    replication_factor: int | None,
    configs: dict[str, str],
    if_not_exists: bool,
) -> None:
    """Create a topic, or many at once (--count, --topics-file): many topics go in few
    CreateTopics requests, each of which the controller commits together. With
    --if-not-exists (Kafka's flag) the command can be repeated: only missing topics are made,
    and only they are reported."""
    new_topics = [
        NewTopic(
            name,
            -1 if partitions is None else partitions,
            -1 if replication_factor is None else replication_factor,
            configs,
        )
        for name in topic_names(topic, count, topics_file)
    ]
    created: list[TopicCreated] = []
    with session.admin() as admin:
        for batch in request_batches(new_topics):
            created += admin.create_topics(batch, if_not_exists=if_not_exists).values()
    if count is None and topics_file is None:
        for one in created:  # none when the topic existed and --if-not-exists
            session.emit(one, formatting.topic_created_json, lambda c: f"Created topic {c.name}.")
    else:
        session.emit(
            created,
            lambda cs: [formatting.topic_created_json(c) for c in cs],
            lambda cs: "\n".join(f"Created topic {c.name}." for c in cs),
        )


@topics.command("list")
@admin_command
def topics_list(session: Session) -> None:
    """List topic names."""
    with session.admin() as admin:
        names = admin.list_topics()
    session.emit(names, list, "\n".join)


@topics.command("describe")
@admin_command
@click.option("--topic", help="Only this topic (default: every topic).")
def topics_describe(session: Session, topic: str | None) -> None:
    """Show partitions, leaders, replicas, ISR and config overrides."""
    with session.admin() as admin:
        described = admin.describe_topics(topic, include_configs=True)
    session.emit(
        described, lambda ts: [formatting.topic_json(t) for t in ts], formatting.topics_table
    )


@topics.command("delete")
@admin_command
@click.option("--topic", required=True, help="Name of the topic to delete.")
def topics_delete(session: Session, topic: str) -> None:
    """Delete a topic."""
    with session.admin() as admin:
        admin.delete_topics([topic])
    session.emit(topic, lambda t: {"name": t}, lambda t: f"Deleted topic {t}.")


@topics.command("alter")
@admin_command
@click.option("--topic", required=True, help="Name of the topic to grow.")
@click.option(
    "--partitions", required=True, type=click.IntRange(min=1), help="New total partition count."
)
def topics_alter(session: Session, topic: str, partitions: int) -> None:
    """Add partitions to a topic (the count never shrinks)."""
    with session.admin() as admin:
        admin.create_partitions({topic: partitions})
    session.emit(
        {"name": topic, "partitions": partitions},
        dict,
        lambda r: f"Topic {topic} now has {partitions} partitions.",
    )
