"""The `pykraft` command: Kafka's kafka-topics, kafka-configs, kafka-metadata-quorum,
kafka-leader-election and kafka-get-offsets in one, plus the console producer and consumer
(`produce`, `consume`, from cli_data).

Admin subcommands live here; subcommands of other packages (`pykraft controller ...`) come from
the entry-point group `pykraft.commands` and are loaded only when named (or listed by --help),
so this module depends on no other package of ours. A Kafka error prints
"Error: <CODE_NAME>: <message>" to stderr and exits 1; bad arguments exit 2 via click.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any, TypeVar

import click

from pykraft.cli import formatting
from pykraft.cli.console import COMMANDS, bootstrap_callback
from pykraft.cli.dev.commands import dev
from pykraft.cli.groups import groups
from pykraft.cli.perf import perf
from pykraft.cli.session import Session, session_command
from pykraft.client.admin import AdminClient, OffsetSpec, ResourceType
from pykraft.client.admin_types import TopicDescription
from pykraft.client.errors import KafkaError, UnknownTopicOrPartitionError
from pykraft.client.types import TopicPartition

PLUGIN_GROUP = "pykraft.commands"
_ENTITY_TYPES: dict[str, ResourceType] = {"topics": "topic", "brokers": "broker"}
_T = TypeVar("_T")


class _RootGroup(click.Group):
    """Adds the entry-point subcommands and turns KafkaError into click's error exit."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_plugins()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        entry_point = _plugins().get(cmd_name)
        if command is None and entry_point is not None:
            command = _load_plugin(entry_point)
            self.add_command(command, cmd_name)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KafkaError as e:
            raise click.ClickException(str(e)) from None


def _plugins() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=PLUGIN_GROUP)}


def _load_plugin(entry_point: EntryPoint) -> click.Command:
    """The entry point's command, or one explaining why it is unavailable when run."""
    try:
        loaded = entry_point.load()
    except Exception as e:  # a broken plugin must not take the other commands down
        reason = f"{type(e).__name__}: {e}"
    else:
        if isinstance(loaded, click.Command):
            return loaded
        reason = f"{entry_point.value} is not a click command"

    def fail() -> None:
        raise click.ClickException(f"'pykraft {entry_point.name}' is unavailable: {reason}")

    return click.Command(
        entry_point.name,
        callback=fail,
        short_help=f"(unavailable: {reason})",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )


admin_command = session_command(
    click.option(
        "--bootstrap-controller",
        "--bootstrap-server",
        "bootstrap",
        envvar="PYKRAFT_BOOTSTRAP",
        required=True,
        callback=bootstrap_callback,
        metavar="HOST:PORT[,HOST:PORT...]",
        help="Controllers (or brokers) to contact first; env PYKRAFT_BOOTSTRAP.",
    )
)
"""Adds the shared options to a command, which receives them as its first arg, a Session."""


def parse_config(text: str) -> tuple[str, str]:
    """One "key=value" (the value may hold '=' and ','); ValueError says what is wrong."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"expected key=value, got {text!r}")
    return key.strip(), value


def parse_config_list(text: str) -> dict[str, str]:
    """Kafka's --add-config syntax "k1=v1,k2=[a,b]": brackets keep a list value's commas."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth < 0:
            raise ValueError(f"unbalanced ']' in {text!r}")
        if char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise ValueError(f"unbalanced '[' in {text!r}")
    items.append(text[start:])
    configs = dict(parse_config(item) for item in items if item.strip())
    return {k: v[1:-1] if v.startswith("[") and v.endswith("]") else v for k, v in configs.items()}


def _config_callback(
    parse: Callable[[str], dict[str, str]],
) -> Callable[[click.Context, click.Parameter, tuple[str, ...]], dict[str, str]]:
    """A click callback merging every occurrence of a repeatable config option."""

    def callback(
        ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
    ) -> dict[str, str]:
        try:
            return {k: v for text in values for k, v in parse(text).items()}
        except ValueError as e:
            raise click.BadParameter(str(e), ctx, param) from None

    return callback


@click.group(cls=_RootGroup, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Administer a pykraft cluster (and run its nodes)."""


for _command in (*COMMANDS, dev, perf, groups):  # produce, consume, dev, perf, groups
    cli.add_command(_command)


@cli.group()
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
@click.option(
    "--config",
    "configs",
    multiple=True,
    callback=_config_callback(lambda text: dict([parse_config(text)])),
    metavar="KEY=VALUE",
    help="A topic config override; repeat for more.",
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


@cli.group()
def configs() -> None:
    """Describe and alter topic and broker configs."""


def _entity_options(func: Callable[..., None]) -> Callable[..., None]:
    """kafka-configs' way of naming what to describe or alter."""
    entity_type = click.option(
        "--entity-type", required=True, type=click.Choice(sorted(_ENTITY_TYPES))
    )
    entity_name = click.option("--entity-name", help="Topic name or broker id.")
    entity_default = click.option(
        "--entity-default",
        is_flag=True,
        help="The cluster-wide broker default (brokers only), instead of --entity-name.",
    )
    return entity_type(entity_name(entity_default(func)))


def _entity(entity_type: str, entity_name: str | None, entity_default: bool) -> str:
    """The resource name the request carries ("" for the broker default); UsageError if unclear."""
    if entity_default:
        if entity_type != "brokers" or entity_name is not None:
            raise click.UsageError("--entity-default applies to brokers, without --entity-name")
        return ""
    if entity_name is None:
        raise click.UsageError("give --entity-name (or --entity-default for brokers)")
    return entity_name


@configs.command("describe")
@admin_command
@_entity_options
def configs_describe(
    session: Session, entity_type: str, entity_name: str | None, entity_default: bool
) -> None:
    """Show every config of a topic or broker, with its source."""
    name = _entity(entity_type, entity_name, entity_default)
    with session.admin() as admin:
        described = admin.describe_configs(_ENTITY_TYPES[entity_type], name)
    session.emit(described, formatting.configs_json, formatting.configs_table)


@configs.command("alter")
@admin_command
@_entity_options
@click.option(
    "--add-config",
    multiple=True,
    callback=_config_callback(parse_config_list),
    metavar="K=V[,K2=V2...]",
    help="Configs to set; a list value goes in brackets: k=[a,b].",
)
@click.option("--delete-config", multiple=True, metavar="K[,K2...]", help="Configs to reset.")
def configs_alter(
    session: Session,
    entity_type: str,
    entity_name: str | None,
    entity_default: bool,
    add_config: dict[str, str],
    delete_config: tuple[str, ...],
) -> None:
    """Set or delete configs of a topic or broker."""
    name = _entity(entity_type, entity_name, entity_default)
    deleted = [k.strip() for text in delete_config for k in text.split(",") if k.strip()]
    if not add_config and not deleted:
        raise click.UsageError("nothing to alter: give --add-config and/or --delete-config")
    with session.admin() as admin:
        admin.alter_configs(_ENTITY_TYPES[entity_type], name, set=add_config, delete=deleted)
    result = {
        "entity_type": entity_type,
        "entity_name": name,
        "set": add_config,
        "deleted": deleted,
    }
    label = f"{entity_type[:-1]} {name}" if name else "the broker default"
    session.emit(result, dict, lambda r: f"Completed updating config for {label}.")


@cli.group()
def cluster() -> None:
    """Show the cluster's controllers and brokers."""


@cluster.command("describe")
@admin_command
def cluster_describe(session: Session) -> None:
    """Cluster id, controllers (which is active) and registered brokers."""
    with session.admin() as admin:
        described = admin.describe_cluster()
    session.emit(described, formatting.cluster_json, formatting.cluster_table)


@cli.group()
def quorum() -> None:
    """Show the controllers' Raft quorum."""


@quorum.command("describe")
@admin_command
def quorum_describe(session: Session) -> None:
    """Leader, epoch, high watermark and each voter's lag."""
    with session.admin() as admin:
        described = admin.describe_quorum()
    session.emit(described, formatting.quorum_json, formatting.quorum_table)


@cli.group()
def leaders() -> None:
    """Move partition leadership back to preferred replicas."""


@leaders.command("elect")
@admin_command
@click.option("--topic", help="Only this topic (default: every partition of the cluster).")
@click.option("--partition", type=click.IntRange(min=0), help="Only this partition of --topic.")
@click.option(
    "--election-type",
    type=click.Choice(["preferred"]),
    default="preferred",
    show_default=True,
    help="Kafka's election type; only PREFERRED is supported.",
)
def leaders_elect(
    session: Session, topic: str | None, partition: int | None, election_type: str
) -> None:
    """Elect each partition's preferred replica (its first) as leader, like
    kafka-leader-election --election-type PREFERRED; per-partition outcomes are printed."""
    if partition is not None and topic is None:
        raise click.UsageError("--partition needs --topic")
    wanted = None if topic is None else {topic: [] if partition is None else [partition]}
    with session.admin() as admin:
        results = admin.elect_leaders(wanted)
    session.emit(results, formatting.elections_json, formatting.elections_table)


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


def _parsed(
    parse: Callable[[str], _T],
) -> Callable[[click.Context, click.Parameter, str | None], _T | None]:
    """A click callback applying `parse` (ValueError: a usage error) to an optional value."""

    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> _T | None:
        try:
            return None if value is None else parse(value)
        except ValueError as e:
            raise click.BadParameter(str(e), ctx, param) from None

    return callback


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


@cli.command("offsets")
@admin_command
@click.option(
    "--topic",
    callback=_parsed(_topic_pattern),
    help="A topic, or a regular expression matching whole names (default: every topic).",
)
@click.option(
    "--partitions",
    callback=_parsed(parse_partition_ids),
    metavar="P[,P...]",
    help="Only these partition ids (default: every partition).",
)
@click.option(
    "--time",
    "time_spec",
    default="latest",
    show_default=True,
    callback=_parsed(parse_time),
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


def main() -> None:
    """Entry point of the `pykraft` console script."""
    cli(prog_name="pykraft")
