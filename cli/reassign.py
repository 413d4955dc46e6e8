"""`pykraft reassign`: Kafka's kafka-reassign-partitions, on its JSON files.

--generate proposes a balanced plan moving the topics of --topics-to-move-json-file
(`{"version": 1, "topics": [{"topic": "t"}]}`) onto --broker-list; --execute starts the
reassignment a --reassignment-json-file describes (`{"version": 1, "partitions": [{"topic": "t",
"partition": 0, "replicas": [1, 2, 3]}]}`) and prints the current assignment to keep for a
rollback; --verify says per partition whether it is complete; --cancel puts the original replicas
back where a reassignment is still in progress.

--execute --throttle N caps reassignment traffic at N bytes/s as Kafka's tool does: it sets
leader/follower.replication.throttled.rate on every broker involved, and on each topic
leader.replication.throttled.replicas (the current replicas) and
follower.replication.throttled.replicas (the replicas being added). --verify removes them all
once every partition is complete.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from pykraft.cli.session import Session, admin_command
from pykraft.client import AdminClient, TopicPartition

Plan = dict[TopicPartition, list[int]]

_RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
_LEADER_REPLICAS_KEY = "leader.replication.throttled.replicas"
_FOLLOWER_REPLICAS_KEY = "follower.replication.throttled.replicas"


def _read_json(path: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise click.UsageError(f"cannot read {path}: {error}") from None


def _plan_of(document: Any) -> Plan:
    """The partitions -> target replicas of a reassignment JSON document."""
    try:
        return {
            TopicPartition(str(item["topic"]), int(item["partition"])): [
                int(r) for r in item["replicas"]
            ]
            for item in document["partitions"]
        }
    except (KeyError, TypeError, ValueError) as error:
        raise click.UsageError(f"not a reassignment JSON document: {error!r}") from None


def plan_json(plan: Mapping[TopicPartition, Sequence[int]]) -> dict[str, Any]:
    """Kafka's reassignment JSON for `plan`, partitions in order."""
    return {
        "version": 1,
        "partitions": [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "replicas": list(replicas),
                "log_dirs": ["any"] * len(replicas),
            }
            for tp, replicas in sorted(plan.items())
        ],
    }


def balanced_plan(current: Mapping[TopicPartition, Sequence[int]], brokers: Sequence[int]) -> Plan:
    """Each partition's replicas spread round-robin over `brokers` (Kafka's assignment without
    racks): partition p of a topic gets brokers p, p+1, ... (mod the count), shifted per topic,
    keeping its replication factor. ValueError when a partition has more replicas than brokers."""
    ordered = sorted(set(brokers))
    plan: Plan = {}
    topics = sorted({tp.topic for tp in current})
    for tp, replicas in sorted(current.items()):
        if len(replicas) > len(ordered):
            raise ValueError(
                f"{tp.topic}-{tp.partition} has {len(replicas)} replicas, more than the "
                f"{len(ordered)} brokers of the list"
            )
        start = tp.partition + topics.index(tp.topic)
        plan[tp] = [ordered[(start + i) % len(ordered)] for i in range(len(replicas))]
    return plan


def _current(admin: AdminClient, topics: Sequence[str]) -> Plan:
    return {
        TopicPartition(topic.name, p.partition): list(p.replicas)
        for topic in admin.describe_topics(topics)
        for p in topic.partitions
    }


def _echo_plan(title: str, plan: Mapping[TopicPartition, Sequence[int]]) -> None:
    click.echo(title)
    click.echo(json.dumps(plan_json(plan)))


def _generate(admin: AdminClient, topics_file: str | None, broker_list: str | None) -> None:
    if topics_file is None or broker_list is None:
        raise click.UsageError("--generate needs --topics-to-move-json-file and --broker-list")
    try:
        topics = [str(t["topic"]) for t in _read_json(topics_file)["topics"]]
        brokers = [int(b) for b in broker_list.split(",")]
    except (KeyError, TypeError, ValueError) as error:
        raise click.UsageError(f"bad topics file or broker list: {error!r}") from None
    current = _current(admin, topics)
    try:
        proposed = balanced_plan(current, brokers)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    _echo_plan("Current partition replica assignment", current)
    _echo_plan("Proposed partition reassignment configuration", proposed)


def _alter(admin: AdminClient, targets: Mapping[TopicPartition, Sequence[int] | None]) -> bool:
    """Sends the targets and prints each refusal; True when every partition was accepted."""
    refusals = {
        tp: error for tp, error in admin.alter_partition_reassignments(targets).items() if error
    }
    for tp, error in sorted(refusals.items()):
        click.echo(f"{tp.topic}-{tp.partition}: {type(error).__name__}: {error}", err=True)
    return not refusals


def _throttle(admin: AdminClient, plan: Plan, current: Plan, rate_bytes_per_s: int) -> None:
    """Kafka's reassignment throttle: the rate on every broker of the old and new replicas, and
    per topic its current replicas (leaders) and the replicas being added (followers)."""
    brokers = {b for replicas in (*plan.values(), *current.values()) for b in replicas}
    for broker_id in sorted(brokers):
        rates = dict.fromkeys(_RATE_KEYS, str(rate_bytes_per_s))
        admin.alter_configs("broker", str(broker_id), set=rates)
    for topic in sorted({tp.topic for tp in plan}):
        moving = {tp: target for tp, target in plan.items() if tp.topic == topic}
        leaders = [f"{tp.partition}:{b}" for tp in sorted(moving) for b in current.get(tp, [])]
        followers = [
            f"{tp.partition}:{b}"
            for tp, target in sorted(moving.items())
            for b in target
            if b not in current.get(tp, [])
        ]
        throttled = {_LEADER_REPLICAS_KEY: ",".join(leaders)}
        throttled[_FOLLOWER_REPLICAS_KEY] = ",".join(followers)
        admin.alter_configs("topic", topic, set=throttled)
    click.echo(f"The inter-broker throttle limit was set to {rate_bytes_per_s} B/s")


def _remove_throttle(admin: AdminClient, plan: Plan) -> None:
    for broker in admin.describe_cluster().brokers:
        admin.alter_configs("broker", str(broker.id), delete=_RATE_KEYS)
    for topic in sorted({tp.topic for tp in plan}):
        admin.alter_configs("topic", topic, delete=(_LEADER_REPLICAS_KEY, _FOLLOWER_REPLICAS_KEY))
    click.echo("Throttle was removed.")


def _execute(admin: AdminClient, plan: Plan, throttle: int | None) -> bool:
    current = _current(admin, sorted({tp.topic for tp in plan}))
    _echo_plan("Current partition replica assignment (save it to roll back)", current)
    if throttle is not None:
        _throttle(admin, plan, current, throttle)
    ok = _alter(admin, dict(plan))
    if ok:
        click.echo("Successfully started the partition reassignments.")
    return ok


def _verify(admin: AdminClient, plan: Plan) -> bool:
    """Prints each partition's state; True when every one is complete."""
    ongoing = admin.list_partition_reassignments(sorted({tp.topic for tp in plan}))
    current = _current(admin, sorted({tp.topic for tp in plan}))
    complete = True
    for tp, target in sorted(plan.items()):
        name = f"{tp.topic}-{tp.partition}"
        if tp in ongoing:
            state = "is still in progress"
        elif current.get(tp) == target:
            state = "is complete"
        else:
            state = f"has replicas {current.get(tp)}, not the target {target}"
        complete = complete and state == "is complete"
        click.echo(f"Reassignment of partition {name} {state}.")
    if complete:
        _remove_throttle(admin, plan)
    return complete


@click.command("reassign")
@admin_command
@click.option("--generate", "action", flag_value="generate", help="Propose a balanced plan.")
@click.option("--execute", "action", flag_value="execute", help="Start the reassignment.")
@click.option("--verify", "action", flag_value="verify", help="Say which partitions are done.")
@click.option("--cancel", "action", flag_value="cancel", help="Cancel those still moving.")
@click.option("--topics-to-move-json-file", "topics_file", help="For --generate.")
@click.option("--broker-list", help="For --generate: the brokers to spread over, as 1,2,3.")
@click.option("--reassignment-json-file", "plan_file", help="For --execute/--verify/--cancel.")
@click.option(
    "--throttle",
    type=click.IntRange(min=1),
    help="For --execute: cap reassignment traffic at this many bytes/s per broker.",
)
def reassign(
    session: Session,
    action: str | None,
    topics_file: str | None,
    broker_list: str | None,
    plan_file: str | None,
    throttle: int | None,
) -> None:
    """Move partitions between brokers, like kafka-reassign-partitions (KIP-455: new replicas
    catch up before the old ones leave). Exits 1 when a partition is refused or, for --verify,
    not yet complete."""
    if action is None:
        raise click.UsageError("give one of --generate, --execute, --verify, --cancel")
    with session.admin() as admin:
        if action == "generate":
            _generate(admin, topics_file, broker_list)
            return
        if plan_file is None:
            raise click.UsageError(f"--{action} needs --reassignment-json-file")
        plan = _plan_of(_read_json(plan_file))
        if action == "execute":
            ok = _execute(admin, plan, throttle)
        elif action == "cancel":
            ongoing = admin.list_partition_reassignments(sorted({tp.topic for tp in plan}))
            ok = _alter(admin, dict.fromkeys(tp for tp in plan if tp in ongoing))
        else:
            ok = _verify(admin, plan)
    if not ok:
        raise SystemExit(1)
