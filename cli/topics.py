"""`pykraft topics`: Kafka's kafka-topics (create, list, describe, alter and delete)."""

from __future__ import annotations

import click

from pykraft.cli import formatting
from pykraft.cli.options import properties_option
from pykraft.cli.session import Session, admin_command


@click.group()
def topics() -> None:
    """Create, list, describe, alter and delete topics."""


@topics.command("create")
@admin_command
@click.option("--topic", required=True, help="Name of the topic to create.")
@click.option("--partitions", type=click.IntRange(min=1), help="Default: num.partitions.")
@click.option(
    "--replication-factor",
    type=click.IntRange(min=1),
    help="Default: default.replication.factor.",
)
@properties_option(
    "--config", "configs", build=dict, help="A topic config override; repeat for more."
)
def topics_create(
    session: Session,
    topic: str,
    partitions: int | None,
    replication_factor: int | None,
    configs: dict[str, str],
) -> None:
    """Create a topic."""
    with session.admin() as admin:
        created = admin.create_topic(
            topic,
            -1 if partitions is None else partitions,
            -1 if replication_factor is None else replication_factor,
            configs,
        )
    session.emit(created, formatting.topic_created_json, lambda c: f"Created topic {c.name}.")


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
