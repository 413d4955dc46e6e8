"""`pykraft broker run`: starts one broker process (found by `pykraft` through the
`pykraft.commands` entry point, so the client package never imports this one)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from pykraft.broker.config import BrokerConfig, check_open_files_limit, load_config
from pykraft.broker.server import Broker
from pykraft.server_common.config_files import ConfigError
from pykraft.server_common.gc_pauses import bound_full_collections
from pykraft.server_common.process import (
    configure_logging,
    raise_open_files_limit,
    stop_on_signals,
)

log = logging.getLogger("pykraft.broker")

# click parameter name -> config key (Kafka's name).
_FLAG_KEYS = {
    "node_id": "node.id",
    "listeners": "listeners",
    "advertised_listeners": "advertised.listeners",
    "rack": "broker.rack",
    "log_dirs": "log.dirs",
    "bootstrap_controllers": "controller.quorum.bootstrap.servers",
    "cluster_id": "cluster.id",
    "heartbeat_interval_ms": "broker.heartbeat.interval.ms",
    "session_timeout_ms": "broker.session.timeout.ms",
    "replica_lag_time_max_ms": "replica.lag.time.max.ms",
    "test_drop_produce_responses_every": "test.drop.produce.responses.every",
    "metrics_listen": "metrics.listen",
    "log_format": "log.format",
    "log_open_files_max": "log.open.files.max",
}


@click.group(help="Run a broker (the data plane).")
def broker() -> None:
    pass


@broker.command(help="Start one broker and serve until SIGTERM (controlled shutdown) or Ctrl-C.")
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="TOML config file.")
@click.option("--node-id", type=int, help="This broker's id (node.id).")
@click.option(
    "--listeners",
    help="GRPC://host:port,KAFKA://host:port (listeners; a bare host:port is the gRPC one).",
)
@click.option("--advertised-listeners", help="Same form: the addresses clients are given.")
@click.option("--rack", help="This broker's rack (broker.rack).")
@click.option("--log-dirs", help="Comma-separated data directories (log.dirs).")
@click.option(
    "--bootstrap-controllers",
    help="Controllers' gRPC addresses, host:port,... (controller.quorum.bootstrap.servers).",
)
@click.option("--cluster-id", help="Must match the controllers' cluster.id.")
@click.option("--heartbeat-interval-ms", type=int, help="broker.heartbeat.interval.ms (2000).")
@click.option("--session-timeout-ms", type=int, help="broker.session.timeout.ms (9000).")
@click.option("--replica-lag-time-max-ms", type=int, help="replica.lag.time.max.ms (30000).")
@click.option(
    "--test-drop-produce-responses-every",
    type=int,
    help="TESTS ONLY: drop the response of every Nth Produce request with idempotent batches "
    "after processing it (test.drop.produce.responses.every; 0 = off).",
)
@click.option(
    "--metrics-listen",
    help="host:port of the HTTP /metrics, /health and /ready (metrics.listen; port 0 picks one).",
)
@click.option("--log-format", help="text (default) or json: one JSON object per line.")
@click.option("--log-open-files-max", type=int, help="log.open.files.max: segment files open.")
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Any config key, as in the TOML file (Kafka's --override); repeatable.",
)
def run(config_path: Path | None, overrides: tuple[str, ...], **flags: object) -> None:
    settings: dict[str, object] = {_FLAG_KEYS[k]: v for k, v in flags.items()}
    for override in overrides:
        key, equals, value = override.partition("=")
        if not equals or not key.strip():
            raise click.UsageError(f"--override takes KEY=VALUE, not {override!r}")
        settings[key.strip()] = value.strip()
    try:
        config = load_config(config_path, settings)
        check_open_files_limit(config, raise_open_files_limit())
    except ConfigError as error:
        raise click.UsageError(str(error)) from error
    configure_logging(config.log_format)
    bound_full_collections()
    sys.exit(_serve_until_stopped(config))


def _serve_until_stopped(config: BrokerConfig) -> int:
    broker_ = Broker(config)
    stopped = stop_on_signals(broker_.cancel_start)
    try:
        started = broker_.start()
    except (OSError, RuntimeError) as error:
        log.error("%s", error)
        broker_.stop()
        return 1
    code = 0
    while started and not stopped.wait(0.5):
        if broker_.failure is not None:
            log.error("metadata could not be applied: %s", broker_.failure)
            code = 1
            break
    log.info("broker %d stopping", config.node_id)
    broker_.stop()
    return code
