"""The processes of a local development cluster: start, signal, stop, and wait until ready.

Each node runs the `pykraft` console script next to `sys.executable`, in its own session and
process group (a terminal's Ctrl-C reaches only the launcher), with stdout and stderr appended
to `DIR/<name>.log`. The launcher does not outlive `pykraft dev up`, so nodes are tracked by pid:
a pid counts as the node only while `/proc/<pid>/cmdline` still names the node's data directory
and the process is not a zombie, so a recycled pid is never signalled (Linux only).

Readiness is what a client needs: a controller is ready once the quorum leader counts it as a
live voter (or, while fewer than a majority of controllers run, once it listens: no quorum can
form before more of them start, which is how a full restart begins); a broker once the active
controller reports it unfenced under a registration newer than any it had before this start (a
restarted broker must not pass on its old incarnation's standing) and it answers Metadata
listing itself.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from pykraft.cli.dev.cluster import DevCluster, DevClusterError, Node, save
from pykraft.client.admin import AdminClient
from pykraft.client.admin_types import BrokerInfo
from pykraft.client.broker_connection import BrokerConnection
from pykraft.client.errors import KafkaError
from pykraft.proto import broker_pb2

POLL_INTERVAL_S = 0.3
PROBE_TIMEOUT_MS = 2000
STOP_TIMEOUT_S = 30.0
KILL_TIMEOUT_S = 10.0


def is_running(node: Node) -> bool:
    """True while the node's recorded pid is alive (not a zombie) and still runs this node."""
    if node.pid is None:
        return False
    proc = Path(f"/proc/{node.pid}")
    try:
        state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
        cmdline = (proc / "cmdline").read_bytes().split(b"\0")
    except (OSError, IndexError):
        return False
    return state != "Z" and node.data_dir.encode() in cmdline


def start_node(node: Node) -> Node:
    """Starts the node's process; the node with its new pid."""
    assert not is_running(node), f"{node.name} is already running"
    Path(node.data_dir).parent.mkdir(parents=True, exist_ok=True)
    pykraft = str(Path(sys.executable).parent / "pykraft")
    with open(node.log_path, "ab") as log:
        process = subprocess.Popen(
            [pykraft, *node.args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
    # The node outlives this handle (and usually this process), so its exit status is never
    # collected here; marking the handle done keeps Popen from warning about it.
    process.returncode = 0
    return replace(node, pid=process.pid)


def signal_node(node: Node, signum: signal.Signals) -> bool:
    """Sends `signum` to the node's process group; False if the node was not running."""
    if node.pid is None or not is_running(node):
        return False
    try:
        os.killpg(node.pid, signum)
    except ProcessLookupError:
        return False
    return True


def wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    """Polls `condition` until it holds or `timeout_s` passes; whether it came to hold."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_INTERVAL_S)
    return True


def kill_node(node: Node) -> None:
    """SIGKILL, then wait for the process to be gone; DevClusterError if it was not running."""
    if not signal_node(node, signal.SIGKILL):
        raise DevClusterError(f"{node.name} is not running")
    if not wait_until(lambda: not is_running(node), KILL_TIMEOUT_S):
        raise DevClusterError(f"{node.name} survived SIGKILL")


def stop_nodes(nodes: Sequence[Node], timeout_s: float = STOP_TIMEOUT_S) -> list[Node]:
    """SIGTERM to each running node, SIGKILL to those still up after `timeout_s`; returns the
    nodes that needed SIGKILL."""
    running = [n for n in nodes if signal_node(n, signal.SIGTERM)]
    wait_until(lambda: not any(is_running(n) for n in running), timeout_s)
    stragglers = [n for n in running if signal_node(n, signal.SIGKILL)]
    if not wait_until(lambda: not any(is_running(n) for n in stragglers), KILL_TIMEOUT_S):
        names = ", ".join(n.name for n in stragglers if is_running(n))
        raise DevClusterError(f"{names} survived SIGKILL")
    return stragglers


def down(cluster: DevCluster, timeout_s: float = STOP_TIMEOUT_S) -> list[Node]:
    """Stops brokers first (their controlled shutdown needs the controllers), then controllers;
    returns the nodes that needed SIGKILL."""
    return [
        *stop_nodes(cluster.by_role("broker"), timeout_s),
        *stop_nodes(cluster.by_role("controller"), timeout_s),
    ]


def registered_brokers(cluster: DevCluster) -> dict[int, BrokerInfo] | None:
    """The brokers the active controller knows, by id; None while no controller answers."""
    try:
        with AdminClient(cluster.bootstrap_controllers, request_timeout_ms=PROBE_TIMEOUT_MS) as a:
            return {b.id: b for b in a.describe_cluster().brokers}
    except KafkaError:
        return None


def broker_epochs(cluster: DevCluster) -> dict[int, int]:
    """Each registered broker's epoch (empty if no controller answers)."""
    return {i: b.epoch for i, b in (registered_brokers(cluster) or {}).items()}


def broker_serving(node: Node) -> bool:
    """Whether the broker answers Metadata and lists itself among the unfenced brokers."""
    connection = BrokerConnection(node.address, retry_backoff_ms=100)
    try:
        response = connection.call(
            "Metadata", broker_pb2.MetadataRequest(), broker_pb2.MetadataResponse, PROBE_TIMEOUT_MS
        )
    except KafkaError:
        return False
    finally:
        connection.close()
    return any(b.id == node.id for b in response.brokers)


def controller_following(cluster: DevCluster, node: Node) -> bool:
    """Whether the quorum leader counts the controller as a live voter (Leader or Follower)."""
    try:
        with AdminClient(cluster.bootstrap_controllers, request_timeout_ms=PROBE_TIMEOUT_MS) as a:
            quorum = a.describe_quorum()
    except KafkaError:
        return False
    return any(v.id == node.id and v.status != "Unreachable" for v in quorum.voters)


def not_ready(
    cluster: DevCluster, nodes: Sequence[Node], epochs_before: Mapping[int, int]
) -> list[Node]:
    """Those of `nodes` not ready yet (see the module's docstring); DevClusterError naming the
    log if one has exited."""
    _check_alive(nodes)
    brokers = registered_brokers(cluster) or {}

    def ready(node: Node) -> bool:
        if node.role == "controller":
            return controller_following(cluster, node)
        info = brokers.get(node.id)
        return (
            info is not None
            and info.state == "unfenced"
            and info.epoch > epochs_before.get(node.id, -1)
            and broker_serving(node)
        )

    return [n for n in nodes if not ready(n)]


def _check_alive(nodes: Sequence[Node]) -> None:
    for node in nodes:
        if not is_running(node):
            raise DevClusterError(f"{node.name} exited{_how_it_ended(node)}; see {node.log_path}")


def _how_it_ended(node: Node) -> str:
    """How the node ended, " with code N" or " (killed by SIGNAME)", when it is this process's
    own child (the launcher that started it) and has ended; "" otherwise. A node killed by a
    signal writes nothing more to its log, so this is often the only trace of why."""
    if node.pid is None:
        return ""
    try:
        pid, status = os.waitpid(node.pid, os.WNOHANG)
    except ChildProcessError:
        return ""
    if pid == 0:
        return ""
    code = os.waitstatus_to_exitcode(status)
    return f" (killed by {signal.Signals(-code).name})" if code < 0 else f" with code {code}"


def wait_ready(
    cluster: DevCluster, nodes: Sequence[Node], epochs_before: Mapping[int, int], timeout_s: float
) -> None:
    """Returns once every one of `nodes` is ready; DevClusterError naming the laggards and their
    logs at the deadline, or at once if one exits."""
    pending = list(nodes)

    def all_ready() -> bool:
        nonlocal pending
        pending = not_ready(cluster, pending, epochs_before)
        return not pending

    if not wait_until(all_ready, timeout_s):
        late = "; ".join(f"{n.name} (log: {n.log_path})" for n in pending)
        raise DevClusterError(f"not ready within {timeout_s:g}s: {late}")


def start_all(
    cluster: DevCluster,
    data_dir: Path,
    timeout_s: float,
    on_started: Callable[[Node], None],
) -> DevCluster:
    """Starts the controllers, waits for an active one, then starts the brokers and waits until
    all are ready. cluster.json is saved after every start, so `down` finds whatever did start."""
    deadline = time.monotonic() + timeout_s
    cluster = _start(cluster, cluster.by_role("controller"), data_dir, on_started)
    controllers = cluster.by_role("controller")

    def quorum_answers() -> bool:
        _check_alive(controllers)
        return registered_brokers(cluster) is not None

    if not wait_until(quorum_answers, timeout_s):
        logs = ", ".join(str(n.log_path) for n in controllers)
        raise DevClusterError(f"no active controller within {timeout_s:g}s; see {logs}")
    epochs_before = broker_epochs(cluster)
    cluster = _start(cluster, cluster.by_role("broker"), data_dir, on_started)
    left_s = max(deadline - time.monotonic(), POLL_INTERVAL_S)
    wait_ready(cluster, cluster.by_role("broker"), epochs_before, left_s)
    return cluster


def listening(node: Node) -> bool:
    """Whether the node accepts TCP connections on its address."""
    host, _, port = node.address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_MS / 1000):
            return True
    except OSError:
        return False


def voters_awaited(cluster: DevCluster) -> int:
    """How many more controllers must run before a majority of the voters does (0 once one
    does): until then no quorum can form, whatever the running ones wait for."""
    controllers = cluster.by_role("controller")
    running = sum(is_running(n) for n in controllers)
    return max(len(controllers) // 2 + 1 - running, 0)


def restart(
    cluster: DevCluster, name: str, data_dir: Path, timeout_s: float
) -> tuple[DevCluster, int]:
    """Starts one stopped node again with its data and arguments, and waits until it is ready;
    the cluster and how many more voters the quorum waits for. A controller started while too
    few run for a majority is ready once it listens (the quorum waits for the others)."""
    node = cluster.node(name)
    if is_running(node):
        raise DevClusterError(f"{name} is already running (pid {node.pid})")
    epochs_before = broker_epochs(cluster)
    cluster = _start(cluster, [node], data_dir, lambda _: None)
    started = cluster.node(name)
    awaited = voters_awaited(cluster)
    if node.role == "controller" and awaited:

        def up() -> bool:
            _check_alive([started])
            return listening(started)

        if not wait_until(up, timeout_s):
            raise DevClusterError(
                f"{name} not listening within {timeout_s:g}s; see {started.log_path}"
            )
        return cluster, awaited
    wait_ready(cluster, [started], epochs_before, timeout_s)
    return cluster, 0


def _start(
    cluster: DevCluster,
    nodes: Sequence[Node],
    data_dir: Path,
    on_started: Callable[[Node], None],
) -> DevCluster:
    for node in nodes:
        started = start_node(node)
        cluster = cluster.with_node(started)
        save(cluster, data_dir)
        on_started(started)
    return cluster
