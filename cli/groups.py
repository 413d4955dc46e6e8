"""`pykraft groups`: Kafka's kafka-consumer-groups, one subcommand per action.

    pykraft groups list [--state [STATE,...]]
    pykraft groups describe --group G [--members | --state] [--verbose]
    pykraft groups reset-offsets --group G (--topic T[:P,P...]... | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --to-datetime ISO8601 | --shift-by N)
        (--dry-run | --execute)
    pykraft groups delete --group G [--group G2...]

The group is named with `--group`, as in Kafka's tool (and `pykraft consume --group`).

Tables and messages follow Kafka's tool: `describe` prints one row per partition that has a
committed offset or an owner (GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID
HOST CLIENT-ID, "-" where unknown), `--members` one row per member and `--state` one row for the
group; notes such as "Consumer group 'G' has no active members." go to stderr, as Kafka's do, so
stdout stays a table (or JSON with `--output json`). `reset-offsets` computes new offsets as
Kafka's GroupOffsetsResetter does (`groups_reset.py`; --to-offset and --shift-by are clamped into
[log start, log end]) and commits them only with --execute, only while the group has no
members. Errors print "Error: <CODE_NAME>: <sentence>" and exit 1 (the root group turns
KafkaError into that); bad or conflicting options are usage errors (exit 2).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence

import click

from pykraft.cli.formatting import format_table
from pykraft.cli.groups_reset import (
    LogBounds,
    ResetSpec,
    ResetTo,
    parse_datetime_ms,
    parse_topic_scope,
    plan_reset,
    wanted_partitions,
)
from pykraft.cli.groups_tables import (
    OffsetRow,
    group_json,
    listings_json,
    members_table,
    offset_rows,
    offsets_table,
    reset_json,
    reset_table,
    state_table,
)
from pykraft.cli.options import bootstrap_server_option, parsed
from pykraft.cli.session import Session, session_command
from pykraft.client.admin import AdminClient
from pykraft.client.admin_types import ConsumerGroupDescription, ConsumerGroupListing, GroupState
from pykraft.client.errors import (
    GroupIdNotFoundError,
    KafkaError,
    LeaderNotAvailableError,
    NonEmptyGroupError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from pykraft.client.types import OffsetAndMetadata, TopicPartition

_REBALANCING = (GroupState.ASSIGNING, GroupState.RECONCILING)


# ---------------------------------------------------------------------------------------------
# Shared options


# --bootstrap-server only: groups live on brokers, not controllers.
_groups_command = session_command(bootstrap_server_option)


def _note(text: str) -> None:
    """A remark beside the result (Kafka prints these to stderr too)."""
    click.echo(text, err=True)


@click.group()
def groups() -> None:
    """List, describe, reset the offsets of and delete consumer groups."""


# ---------------------------------------------------------------------------------------------
# list


def parse_states(text: str) -> list[GroupState]:
    """kafka-consumer-groups' --state list: comma-separated names in any case ("" = every
    state); ValueError naming the valid ones."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    states = [GroupState.parse(name) for name in names]
    if GroupState.UNKNOWN in states:
        valid = ", ".join(s.value for s in GroupState if s is not GroupState.UNKNOWN)
        raise ValueError(f"Invalid state list '{text}'. Valid states are: {valid}")
    return states


@groups.command("list")
@_groups_command
@click.option(
    "--state",
    "states",
    is_flag=False,
    flag_value="",
    default=None,
    callback=parsed(parse_states),
    metavar="[STATE,...]",
    help="Show each group's state; given states (e.g. Stable,Empty), only groups in one of them.",
)
def groups_list(session: Session, states: list[GroupState] | None) -> None:
    """List consumer group ids, one a line (with --state, a GROUP STATE table)."""
    with session.admin() as admin:
        listings = admin.list_consumer_groups(states)

    def text(found: Sequence[ConsumerGroupListing]) -> str:
        if states is None:
            return "\n".join(g.group_id for g in found)
        return format_table(["GROUP", "STATE"], [[g.group_id, g.state] for g in found])

    session.emit(listings, listings_json, text)


# ---------------------------------------------------------------------------------------------
# describe


def _partition_leaders(admin: AdminClient, topics: Iterable[str]) -> dict[TopicPartition, bool]:
    """Every partition of the named topics that exist -> whether it has a leader. Topics that
    do not exist (deleted since the group committed) are simply absent."""
    wanted = set(topics)
    if not wanted:
        return {}
    return {
        TopicPartition(t.name, p.partition): p.leader >= 0
        for t in admin.describe_topics(None)
        if t.name in wanted
        for p in t.partitions
    }


def log_end_offsets(
    admin: AdminClient, partitions: Collection[TopicPartition]
) -> dict[TopicPartition, int]:
    """The log end offsets of those partitions that exist and have a leader (Kafka shows "-"
    for the others rather than failing)."""
    leaders = _partition_leaders(admin, {tp.topic for tp in partitions})
    askable = [tp for tp in partitions if leaders.get(tp)]
    results = admin.list_offsets(dict.fromkeys(askable, "latest"))
    return {tp: r.offset for tp, r in results.items()}


def _state_note(group: ConsumerGroupDescription) -> None:
    """Kafka's remarks on a group that is empty or rebalancing; a dead one does not exist."""
    if group.state is GroupState.DEAD:
        raise GroupIdNotFoundError(f"Consumer group '{group.group_id}' does not exist.")
    if group.state is GroupState.EMPTY:
        _note(f"Consumer group '{group.group_id}' has no active members.")
    elif group.state in _REBALANCING:
        _note(f"Warning: Consumer group '{group.group_id}' is rebalancing.")


@groups.command("describe")
@_groups_command
@click.option("--group", "group_id", required=True, metavar="GROUP", help="The consumer group.")
@click.option("--members", is_flag=True, help="One row per member instead of per partition.")
@click.option(
    "--state",
    "show_state",
    is_flag=True,
    help="The group's coordinator, assignor, state and member count.",
)
@click.option(
    "--verbose", is_flag=True, help="With --members or --state: epochs and assignments too."
)
def groups_describe(
    session: Session, group_id: str, members: bool, show_state: bool, verbose: bool
) -> None:
    """Show a group's committed offsets, log end offsets, lag and owners per partition (or,
    with --members / --state, its members or its state), like kafka-consumer-groups
    --describe."""
    if members and show_state:
        raise click.UsageError("give at most one of --members and --state")
    rows: list[OffsetRow] | None = None
    with session.admin() as admin:
        group = admin.describe_consumer_groups([group_id])[group_id]
        _state_note(group)
        if not members and not show_state:
            committed = admin.list_consumer_group_offsets(group_id)
            owned = {tp for m in group.members for tp in m.assignment}
            ends = log_end_offsets(admin, sorted(owned | set(committed)))
            rows = offset_rows(group, committed, ends)

    def text(described: ConsumerGroupDescription) -> str:
        if members:
            return members_table(described, verbose)
        if show_state:
            return state_table(described, verbose)
        return offsets_table(described.group_id, rows or [])

    session.emit(group, lambda g: group_json(g, rows), text)


# ---------------------------------------------------------------------------------------------
# reset-offsets


def _scopes_callback(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> list[tuple[str, list[int] | None]]:
    try:
        return [parse_topic_scope(v) for v in values]
    except ValueError as e:
        raise click.BadParameter(str(e), ctx, param) from None


def _reset_spec(
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime_ms: int | None,
    shift_by: int | None,
) -> ResetSpec:
    """The one scenario given; UsageError unless exactly one is."""
    chosen = [
        spec
        for given, spec in [
            (to_earliest, ResetSpec(ResetTo.EARLIEST)),
            (to_latest, ResetSpec(ResetTo.LATEST)),
            (to_offset is not None, ResetSpec(ResetTo.OFFSET, to_offset or 0)),
            (to_datetime_ms is not None, ResetSpec(ResetTo.DATETIME, to_datetime_ms or 0)),
            (shift_by is not None, ResetSpec(ResetTo.SHIFT_BY, shift_by or 0)),
        ]
        if given
    ]
    if len(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime and "
            "--shift-by"
        )
    return chosen[0]


def _check_inactive(admin: AdminClient, group_id: str) -> None:
    """Kafka resets only groups without members: Empty, Dead or unknown ones."""
    try:
        group = admin.describe_consumer_groups([group_id])[group_id]
    except GroupIdNotFoundError:
        return
    if group.state not in (GroupState.EMPTY, GroupState.DEAD):
        raise NonEmptyGroupError(
            f"Assignments can only be reset if the group '{group_id}' is inactive, but the "
            f"current state is {group.state}."
        )


def checked_partitions(
    admin: AdminClient, scopes: Mapping[str, Iterable[int] | None]
) -> list[TopicPartition]:
    """The partitions of each topic (None: all of them), after Kafka's checks: an unknown
    topic raises its UNKNOWN_TOPIC_OR_PARTITION, so do partitions the topic lacks, and
    partitions without a leader raise LeaderNotAvailableError."""
    if not scopes:
        return []
    described = {t.name: t for t in admin.describe_topics(sorted(scopes))}
    chosen: list[TopicPartition] = []
    missing: list[TopicPartition] = []
    leaderless: list[TopicPartition] = []
    for topic, ids in sorted(scopes.items()):
        leaders = {p.partition: p.leader for p in described[topic].partitions}
        for partition in sorted(leaders) if ids is None else sorted(set(ids)):
            tp = TopicPartition(topic, partition)
            if partition not in leaders:
                missing.append(tp)
            elif leaders[partition] < 0:
                leaderless.append(tp)
            chosen.append(tp)
    if missing:
        names = ",".join(map(str, missing))
        raise UnknownTopicOrPartitionError(f'The partitions "{names}" do not exist')
    if leaderless:
        names = ",".join(map(str, leaderless))
        raise LeaderNotAvailableError(f'The partitions "{names}" have no leader')
    return chosen


def _log_bounds(
    admin: AdminClient, partitions: Sequence[TopicPartition]
) -> dict[TopicPartition, LogBounds]:
    starts = admin.list_offsets(dict.fromkeys(partitions, "earliest"))
    ends = admin.list_offsets(dict.fromkeys(partitions, "latest"))
    return {tp: LogBounds(starts[tp].offset, ends[tp].offset) for tp in partitions}


def _offsets_for_time(
    admin: AdminClient, partitions: Sequence[TopicPartition], timestamp_ms: int
) -> dict[TopicPartition, int]:
    """The first offset at or after the time, per partition; Kafka's warning for those with no
    such record (their new offset is the log end)."""
    found = admin.list_offsets(dict.fromkeys(partitions, max(0, timestamp_ms)))
    for tp in sorted(tp for tp, r in found.items() if r.offset < 0):
        _note(
            f"Warn: Partition {tp.partition} from topic {tp.topic} is empty. Falling back to "
            "latest known offset."
        )
    return {tp: r.offset for tp, r in found.items()}


@groups.command("reset-offsets")
@_groups_command
@click.option("--group", "group_id", required=True, metavar="GROUP", help="The consumer group.")
@click.option(
    "--topic",
    "scopes",
    multiple=True,
    callback=_scopes_callback,
    metavar="T[:P,P...]",
    help="A topic (every partition) or some of its partitions; repeat for more.",
)
@click.option("--all-topics", is_flag=True, help="Every partition the group has an offset for.")
@click.option("--to-earliest", is_flag=True, help="The log start offset.")
@click.option("--to-latest", is_flag=True, help="The log end offset.")
@click.option("--to-offset", type=int, metavar="N", help="Offset N, clamped into the log.")
@click.option(
    "--to-datetime",
    "to_datetime_ms",
    callback=parsed(parse_datetime_ms),
    metavar="YYYY-MM-DDTHH:mm:SS.sss",
    help="The first offset at or after this time (zone optional, default local time).",
)
@click.option(
    "--shift-by", type=int, metavar="N", help="The committed offset plus N (may be negative)."
)
@click.option("--dry-run", is_flag=True, help="Only print the new offsets.")
@click.option("--execute", is_flag=True, help="Commit the new offsets.")
def groups_reset_offsets(
    session: Session,
    group_id: str,
    scopes: list[tuple[str, list[int] | None]],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime_ms: int | None,
    shift_by: int | None,
    dry_run: bool,
    execute: bool,
) -> None:
    """Move a group's committed offsets, like kafka-consumer-groups --reset-offsets; the group
    must have no members. Prints GROUP TOPIC PARTITION NEW-OFFSET."""
    if bool(scopes) == all_topics:
        raise click.UsageError("give exactly one of --topic and --all-topics")
    spec = _reset_spec(to_earliest, to_latest, to_offset, to_datetime_ms, shift_by)
    if dry_run == execute:
        raise click.UsageError("give exactly one of --dry-run and --execute")
    with session.admin() as admin:
        plan = _reset_plan(admin, group_id, spec, scopes, all_topics)
        if execute and plan:
            _commit(admin, group_id, plan)
    session.emit(plan, lambda p: reset_json(group_id, p), lambda p: reset_table(group_id, p))


def _reset_plan(
    admin: AdminClient,
    group_id: str,
    spec: ResetSpec,
    scopes: Sequence[tuple[str, list[int] | None]],
    all_topics: bool,
) -> dict[TopicPartition, int]:
    """The new offsets, after checking that the group has no members and that every partition
    exists and has a leader."""
    _check_inactive(admin, group_id)
    committed = admin.list_consumer_group_offsets(group_id)
    partitions = checked_partitions(admin, wanted_partitions(scopes, committed, all_topics))
    if not partitions:
        return {}
    bounds = _log_bounds(admin, partitions)
    by_time = (
        _offsets_for_time(admin, partitions, spec.value) if spec.to is ResetTo.DATETIME else {}
    )
    try:
        return plan_reset(spec, bounds, committed, by_time)
    except ValueError as e:
        raise click.UsageError(str(e)) from None


def _commit(admin: AdminClient, group_id: str, plan: Mapping[TopicPartition, int]) -> None:
    """Commits the plan; a member that joined since the check makes the coordinator refuse."""
    try:
        admin.alter_consumer_group_offsets(
            group_id, {tp: OffsetAndMetadata(offset) for tp, offset in plan.items()}
        )
    except UnknownMemberIdError as e:
        raise NonEmptyGroupError(
            f"Assignments can only be reset if the group '{group_id}' is inactive, but it has "
            f"members now ({e.message})"
        ) from None


# ---------------------------------------------------------------------------------------------
# delete


def _quoted(group_ids: Iterable[str]) -> str:
    return ", ".join(f"'{g}'" for g in group_ids)


@groups.command("delete")
@_groups_command
@click.option(
    "--group",
    "group_ids",
    multiple=True,
    required=True,
    metavar="GROUP",
    help="A consumer group to delete; repeat for more.",
)
def groups_delete(session: Session, group_ids: tuple[str, ...]) -> None:
    """Delete groups and their committed offsets, like kafka-consumer-groups --delete; a
    group with members is refused (NON_EMPTY_GROUP). Each group is tried; exits 1 if any
    failed, with one "Error:" line per failure."""
    deleted: list[str] = []
    failed: list[tuple[str, KafkaError]] = []
    with session.admin() as admin:
        for group_id in dict.fromkeys(group_ids):
            try:
                admin.delete_consumer_groups([group_id])
            except KafkaError as e:
                failed.append((group_id, e))
            else:
                deleted.append(group_id)
    if session.output == "json":
        outcome = {
            "deleted": deleted,
            "failed": [{"group_id": g, "error": e.name, "message": e.message} for g, e in failed],
        }
        click.echo(json.dumps(outcome, indent=2))
    elif not failed:
        click.echo(f"Deletion of requested consumer groups ({_quoted(deleted)}) was successful.")
    elif deleted:
        click.echo(f"These consumer groups were deleted successfully: {_quoted(deleted)}")
    for group_id, error in failed:
        _note(f"Error: {error.name}: Group '{group_id}' could not be deleted: {error.message}")
    if failed:
        click.get_current_context().exit(1)
