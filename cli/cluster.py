"""`pykraft cluster`, `pykraft quorum` and `pykraft leaders`: the cluster's controllers and
brokers, Kafka's kafka-metadata-quorum (describe, add-controller, remove-controller) and
kafka-leader-election."""

from __future__ import annotations

import click

from pykraft.cli import formatting
from pykraft.cli.session import Session, admin_command


@click.group()
def cluster() -> None:
    """Show the cluster's controllers and brokers."""


@cluster.command("describe")
@admin_command
def cluster_describe(session: Session) -> None:
    """Cluster id, controllers (which is active) and registered brokers."""
    with session.admin() as admin:
        described = admin.describe_cluster()
    session.emit(described, formatting.cluster_json, formatting.cluster_table)


@cluster.command("unregister")
@admin_command
@click.option("--id", "broker_id", type=int, required=True, help="The broker to forget.")
def cluster_unregister(session: Session, broker_id: int) -> None:
    """Forget a stopped broker that hosts no replica (Kafka's kafka-cluster unregister), the
    last step of decommissioning it: reassign its partitions away and stop it first."""
    with session.admin() as admin:
        admin.unregister_broker(broker_id)
    click.echo(f"Broker {broker_id} unregistered.")


@click.group()
def quorum() -> None:
    """Show the controllers' Raft quorum and change its voters (KIP-853)."""


@quorum.command("describe")
@admin_command
def quorum_describe(session: Session) -> None:
    """Leader, epoch, high watermark and each voter's lag."""
    with session.admin() as admin:
        described = admin.describe_quorum()
    session.emit(described, formatting.quorum_json, formatting.quorum_table)


@quorum.command("add-controller")
@admin_command
@click.option("--controller-id", type=click.IntRange(min=0), required=True, help="Its node.id.")
@click.option("--raft-address", required=True, help="Its Raft listener, host:port.")
@click.option("--listener", required=True, help="Its gRPC listener, host:port.")
def quorum_add_controller(
    session: Session, controller_id: int, raft_address: str, listener: str
) -> None:
    """Make a controller a voter, then start it (see the README's "Replacing a controller")."""
    with session.admin() as admin:
        admin.add_controller(controller_id, raft_address, listener)
    added = {"id": controller_id, "raft_address": raft_address, "listener": listener}
    session.emit(added, dict, lambda a: f"Added controller {controller_id} as a voter.")


@quorum.command("remove-controller")
@admin_command
@click.option("--controller-id", type=click.IntRange(min=0), required=True, help="Its node.id.")
@click.option("--raft-address", required=True, help="Its Raft listener (must match), host:port.")
def quorum_remove_controller(session: Session, controller_id: int, raft_address: str) -> None:
    """Remove a voter; stop that controller afterwards and delete its data directory."""
    with session.admin() as admin:
        admin.remove_controller(controller_id, raft_address)
    removed = {"id": controller_id}
    session.emit(removed, dict, lambda r: f"Removed controller {controller_id} from the voters.")


@click.group()
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
