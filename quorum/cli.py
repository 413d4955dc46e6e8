"""`pykraft controller run`: starts one controller process (found by `pykraft` through the
`pykraft.commands` entry point, so the client package never imports this one)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click
from prometheus_client import CollectorRegistry

from pykraft.quorum.config import ControllerConfig, load_config
from pykraft.quorum.metrics import ControllerCollector
from pykraft.quorum.quorum_controller import QuorumController
from pykraft.quorum.raft import RaftConfig
from pykraft.quorum.service import serve
from pykraft.quorum.storage import StorageError, check_meta_properties
from pykraft.server_common.config_files import ConfigError
from pykraft.server_common.gc_pauses import bound_full_collections
from pykraft.server_common.node_http import NodeHttpServer
from pykraft.server_common.process import (
    configure_logging,
    raise_open_files_limit,
    stop_on_signals,
)

log = logging.getLogger("pykraft.controller")


@click.group(help="Run a controller of the metadata quorum.")
def controller() -> None:
    pass


@controller.command(help="Start one controller and serve until SIGTERM or Ctrl-C.")
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="TOML config file.")
@click.option("--node-id", type=int, help="This controller's id (node.id).")
@click.option("--voters", help="Raft listeners of every voter: 1@host:port,2@host:port,...")
@click.option("--listeners", help="gRPC listeners of every controller, same form as --voters.")
@click.option("--data-dir", type=click.Path(path_type=Path), help="Where the metadata log lives.")
@click.option("--cluster-id", help="Cluster id; brokers must present the same one.")
@click.option("--broker-session-timeout-ms", type=int, help="Fence a broker after this (9000).")
@click.option("--metadata-tail-records-max", type=int, help="Records kept for MetadataFetch.")
@click.option(
    "--metadata-fetch-bytes-max", type=int, help="Largest MetadataFetch answer message (4 MiB)."
)
@click.option("--raft-compaction-min-entries", type=int, help="Raft entries between snapshots.")
@click.option("--grpc-workers-max", type=int, help="gRPC threads for short requests (64).")
@click.option(
    "--broker-sessions-max", type=int, help="Brokers whose session streams it holds (1000)."
)
@click.option(
    "--append-linger-ms",
    type=int,
    help="Longest wait of a write for the next metadata log entry while one is in flight (25).",
)
@click.option("--entry-operations-max", type=int, help="Writes one log entry holds (1000).")
@click.option(
    "--auto-leader-rebalance-enable/--no-auto-leader-rebalance-enable",
    default=None,
    help="Move leadership back to preferred replicas by itself (default: on).",
)
@click.option(
    "--leader-imbalance-check-interval-seconds",
    type=int,
    help="Seconds between automatic preferred leader elections (300).",
)
@click.option(
    "--metrics-listen",
    help="host:port of the HTTP /metrics, /health and /ready (metrics.listen; port 0 picks one).",
)
@click.option("--log-format", help="text (default) or json: one JSON object per line.")
def run(config_path: Path | None, **flags: object) -> None:
    keys = {
        "node_id": "node.id",
        "voters": "controller.quorum.voters",
        "listeners": "controller.listeners",
        "data_dir": "data.dir",
        "cluster_id": "cluster.id",
        "broker_session_timeout_ms": "broker.session.timeout.ms",
        "metadata_tail_records_max": "metadata.tail.records.max",
        "metadata_fetch_bytes_max": "metadata.fetch.bytes.max",
        "raft_compaction_min_entries": "raft.compaction.min.entries",
        "grpc_workers_max": "grpc.workers.max",
        "broker_sessions_max": "broker.sessions.max",
        "append_linger_ms": "controller.quorum.append.linger.ms",
        "entry_operations_max": "metadata.entry.operations.max",
        "auto_leader_rebalance_enable": "auto.leader.rebalance.enable",
        "leader_imbalance_check_interval_seconds": "leader.imbalance.check.interval.seconds",
        "metrics_listen": "metrics.listen",
        "log_format": "log.format",
    }
    try:
        config = load_config(config_path, {keys[k]: v for k, v in flags.items()})
        check_meta_properties(config.data_dir, node_id=config.node_id, cluster_id=config.cluster_id)
    except (ConfigError, StorageError) as error:
        raise click.UsageError(str(error)) from error
    configure_logging(config.log_format)
    bound_full_collections()
    raise_open_files_limit()
    sys.exit(_serve_until_stopped(config))


def _serve_until_stopped(config: ControllerConfig) -> int:
    raft_config = RaftConfig(
        node_id=config.node_id,
        voters=config.voters,
        listeners=config.controller_listeners,
        data_dir=config.data_dir / "raft",
        compaction_min_entries=config.raft_compaction_min_entries,
        entry_bytes_max=config.raft_entry_bytes_max,
    )
    quorum_controller = QuorumController(config, raft_config)
    quorum_controller.start()
    http: NodeHttpServer | None = None
    try:
        if config.metrics_listen:
            http = _start_http(config.metrics_listen, quorum_controller)
        server = serve(quorum_controller, config.listener)
    except OSError as error:
        log.error("%s", error)
        if http is not None:
            http.stop()
        quorum_controller.stop()
        return 1
    stopped = stop_on_signals()
    log.info("controller %d serving on %s", config.node_id, config.listener)
    while not stopped.wait(0.5):
        if quorum_controller.failed is not None:
            log.error("controller thread died: %s", quorum_controller.failed)
            server.stop(grace=0)
            return 1
    log.info("controller %d stopping", config.node_id)
    # The controller first: once stopping it refuses requests, so the session streams the
    # server's stop ends are not taken for brokers that went away (nothing is fenced).
    quorum_controller.stop()
    server.stop(grace=1).wait()
    if http is not None:
        http.stop()
    return 0


def _start_http(listen: str, controller: QuorumController) -> NodeHttpServer:
    """/metrics, /health and /ready (`server_common.node_http`); ready once this controller is
    in a quorum that has a leader. OSError if it cannot bind."""
    registry = CollectorRegistry()
    registry.register(ControllerCollector(controller.core))

    def health() -> str | None:
        failure = controller.failed
        return None if failure is None else f"controller thread died: {failure}"

    def ready() -> str | None:
        status = controller.core.raft_status
        if status is None or status.leader_id is None:
            return "no Raft leader known: not in a quorum"
        return None

    http = NodeHttpServer(listen, registry, health=health, ready=ready)
    http.start()
    return http
