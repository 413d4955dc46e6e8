"""`pykraft dev`: start, inspect, break and stop a local cluster for trying things by hand.

    pykraft dev up --controllers 3 --brokers 3 --data-dir DIR [--base-port 9090]
    pykraft dev status --data-dir DIR [--output json]
    pykraft dev kill|stop|start NODE --data-dir DIR
    pykraft dev down --data-dir DIR

`up` returns once every broker is unfenced and serving, leaving the nodes running in the
background; DIR/cluster.json then holds each node's name, role, id, address, pid, data_dir and
arguments, plus `bootstrap_servers`, `kafka_bootstrap_servers` (Kafka clients) and
`bootstrap_controllers` for other commands. Failures print "Error: <sentence>" and exit 1.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from pykraft.cli.dev import cluster as dev_cluster
from pykraft.cli.dev import processes
from pykraft.cli.dev.cluster import DevCluster, DevClusterError, Node
from pykraft.client.admin import AdminClient
from pykraft.client.errors import KafkaError

DEFAULT_READY_TIMEOUT_S = 60.0

_data_dir_option = click.option(
    "--data-dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The cluster's directory: data, logs and cluster.json.",
)


def _fail_clearly(func: Callable[..., None]) -> Callable[..., None]:
    """Turns DevClusterError into click's "Error: ..." and exit code 1."""

    @functools.wraps(func)  # keeps click's parameters too
    def run(**kwargs: Any) -> None:
        try:
            func(**kwargs)
        except DevClusterError as error:
            raise click.ClickException(str(error)) from None

    return run


@click.group()
def dev() -> None:
    """Run a local cluster of controller and broker processes (for development)."""


@dev.command("up")
@click.option("--controllers", type=int, default=3, show_default=True, help="An odd number.")
@click.option("--brokers", type=int, default=3, show_default=True)
@_data_dir_option
@click.option(
    "--base-port",
    type=int,
    default=dev_cluster.DEFAULT_BASE_PORT,
    show_default=True,
    help="Controllers' gRPC at P+1.., their Raft at P+101.., brokers at P+201...",
)
@click.option("--cluster-id", default=dev_cluster.DEFAULT_CLUSTER_ID, show_default=True)
@click.option(
    "--timeout-s",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_READY_TIMEOUT_S,
    show_default=True,
    help="Give up if the brokers are not all unfenced by then.",
)
@_fail_clearly
def up(
    controllers: int,
    brokers: int,
    data_dir: Path,
    base_port: int,
    cluster_id: str,
    timeout_s: float,
) -> None:
    """Start a cluster and wait until every broker is unfenced."""
    try:
        cluster = dev_cluster.plan_cluster(controllers, brokers, data_dir, base_port, cluster_id)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    data_dir.mkdir(parents=True, exist_ok=True)
    if dev_cluster.cluster_file(data_dir).exists():
        running = [n.name for n in dev_cluster.load(data_dir).nodes if processes.is_running(n)]
        if running:
            raise DevClusterError(
                f"a cluster is already running in {data_dir} ({', '.join(running)}); "
                f"stop it first with: pykraft dev down --data-dir {data_dir}"
            )
    taken = dev_cluster.taken_ports(cluster)
    if taken:
        raise DevClusterError(
            f"ports already in use: {', '.join(map(str, taken))}; pick another --base-port"
        )
    try:
        cluster = processes.start_all(
            cluster,
            data_dir,
            timeout_s,
            lambda n: click.echo(f"started {n.name} on {n.address} (log: {n.log_path})"),
        )
    except DevClusterError as error:
        raise DevClusterError(
            f"{error}\nThe nodes that started are left running for a look; stop them with: "
            f"pykraft dev down --data-dir {data_dir}"
        ) from None
    click.echo(
        f"cluster ready; bootstrap servers {cluster.bootstrap_servers}, "
        f"Kafka bootstrap servers {cluster.kafka_bootstrap_servers}"
    )


@dataclass(frozen=True)
class Status:
    """What `dev status` shows: each node's process state, the quorum leader, broker states."""

    nodes: list[tuple[Node, bool]]
    leader_id: int | None
    broker_states: dict[int, str]

    def to_json(self) -> dict[str, Any]:
        return {
            "leader_id": self.leader_id,
            "nodes": [
                {
                    "name": n.name,
                    "role": n.role,
                    "id": n.id,
                    "address": n.address,
                    "pid": n.pid,
                    "alive": alive,
                    **({"state": self.broker_state(n)} if n.role == "broker" else {}),
                }
                for n, alive in self.nodes
            ],
        }

    def broker_state(self, node: Node) -> str:
        return self.broker_states.get(node.id, "unknown")

    def table(self) -> str:
        leader = "none" if self.leader_id is None else f"controller-{self.leader_id}"
        rows = [f"{'NAME':<14} {'ADDRESS':<16} {'PID':>8} {'PROCESS':<8} STATE"]
        for node, alive in self.nodes:
            if node.role == "controller":
                state = "leader" if node.id == self.leader_id else "follower" if alive else ""
            else:
                state = self.broker_state(node)
            pid = "-" if node.pid is None else str(node.pid)
            process = "alive" if alive else "dead"
            rows.append(f"{node.name:<14} {node.address:<16} {pid:>8} {process:<8} {state}")
        return "\n".join([f"quorum leader: {leader}", *rows])

    def summary(self) -> str:
        """One line for a live display: leader and unfenced brokers."""
        leader = "none" if self.leader_id is None else f"controller-{self.leader_id}"
        brokers = [n for n, _ in self.nodes if n.role == "broker"]
        unfenced = sum(self.broker_state(n) == "unfenced" for n in brokers)
        alive = sum(alive for _, alive in self.nodes)
        return (
            f"leader {leader} | brokers unfenced {unfenced}/{len(brokers)} | "
            f"processes alive {alive}/{len(self.nodes)}"
        )


def cluster_status(cluster: DevCluster) -> Status:
    """Asks the controllers for the leader and broker states (none if they do not answer)."""
    nodes = [(n, processes.is_running(n)) for n in cluster.nodes]
    timeout_ms = processes.PROBE_TIMEOUT_MS
    try:
        with AdminClient(cluster.bootstrap_controllers, request_timeout_ms=timeout_ms) as admin:
            leader_id: int | None = admin.describe_quorum().leader_id
            states = {b.id: b.state for b in admin.describe_cluster().brokers}
    except KafkaError:
        leader_id, states = None, {}
    return Status(nodes, None if leader_id == -1 else leader_id, states)


@dev.command("status")
@_data_dir_option
@click.option("--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@_fail_clearly
def status(data_dir: Path, output: str) -> None:
    """Show each node's process, the quorum leader and each broker's state."""
    result = cluster_status(dev_cluster.load(data_dir))
    click.echo(json.dumps(result.to_json(), indent=2) if output == "json" else result.table())


@dev.command("down")
@_data_dir_option
@_fail_clearly
def down(data_dir: Path) -> None:
    """Stop every node: SIGTERM (brokers first), SIGKILL those still up after a while."""
    killed = processes.down(dev_cluster.load(data_dir))
    for node in killed:
        click.echo(f"{node.name} ignored SIGTERM and was killed (log: {node.log_path})", err=True)
    click.echo("cluster stopped")


def _node_command(name: str, help_text: str) -> Callable[[Callable[..., None]], click.Command]:
    """A `dev <name> NODE --data-dir DIR` command."""

    def decorate(func: Callable[..., None]) -> click.Command:
        wrapped = click.argument("node")(_data_dir_option(_fail_clearly(func)))
        return dev.command(name, help=help_text)(wrapped)

    return decorate


@_node_command("kill", "SIGKILL one node (no shutdown code runs).")
def kill(node: str, data_dir: Path) -> None:
    processes.kill_node(dev_cluster.load(data_dir).node(node))
    click.echo(f"killed {node}")


@_node_command("stop", "SIGTERM one node (a broker shuts down in a controlled way).")
def stop(node: str, data_dir: Path) -> None:
    target = dev_cluster.load(data_dir).node(node)
    if not processes.is_running(target):
        raise DevClusterError(f"{node} is not running")
    if processes.stop_nodes([target]):
        click.echo(f"{node} ignored SIGTERM and was killed (log: {target.log_path})", err=True)
    click.echo(f"stopped {node}")


@_node_command(
    "start",
    "Start a stopped node again, with its data and arguments; wait until ready. A controller "
    "started while fewer than a majority run returns once it listens, saying how many more "
    "voters the quorum waits for.",
)
@click.option(
    "--timeout-s",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_READY_TIMEOUT_S,
    show_default=True,
)
def start(node: str, data_dir: Path, timeout_s: float) -> None:
    cluster, awaited = processes.restart(dev_cluster.load(data_dir), node, data_dir, timeout_s)
    started = cluster.node(node)
    click.echo(f"started {node} (pid {started.pid}, log: {started.log_path})")
    if awaited:
        voters = len(cluster.by_role("controller"))
        stopped = [n.name for n in cluster.by_role("controller") if not processes.is_running(n)]
        click.echo(
            f"{node} listens on {started.address}; the quorum waits for {awaited} more voter"
            f"{'s' if awaited > 1 else ''} of {voters} (start {' or '.join(stopped)})"
        )
