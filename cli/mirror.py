"""`pykraft mirror`: mirrors topics from one cluster to another (Kafka's MirrorMaker 2), and
`pykraft mirror status` shows how far it got.

    pykraft mirror --source-bootstrap A --target-bootstrap B --topics 'orders.*' [--config FILE]
    pykraft mirror status --source-bootstrap A --target-bootstrap B [--config FILE]

FILE is MM2's connector properties (`pykraft.mirror.config`); --topics wins over its `topics`.
The mirror runs until SIGTERM or SIGINT, then delivers what it sent and writes its last offset
syncs (exit 0); a failure exits 1 with "Error: ...". A bad property is a usage error (exit 2).
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from pykraft.cli.formatting import format_table
from pykraft.cli.options import parsed
from pykraft.cli.session import output_option
from pykraft.client import AdminClient, Consumer
from pykraft.client.routing import parse_bootstrap
from pykraft.mirror.config import MirrorConfig, read_properties
from pykraft.mirror.mirror_maker import MirrorMaker
from pykraft.mirror.resume import UnaccountedTailError
from pykraft.mirror.status import PartitionStatus, read_status

_F = TypeVar("_F", bound=Callable[..., Any])
STATUS_TIMEOUT_MS = 60_000
_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _bootstrap_option(cluster: str, required: bool) -> Callable[[_F], _F]:
    return click.option(
        f"--{cluster}-bootstrap",
        required=required,
        callback=parsed(parse_bootstrap),
        metavar="HOST:PORT[,HOST:PORT...]",
        help=f"The {cluster} cluster's brokers (or controllers).",
    )


def _cluster_options(required: bool) -> Callable[[_F], _F]:
    """--source-bootstrap, --target-bootstrap, --topics and --config."""

    def decorate(func: _F) -> _F:
        for option in reversed(
            [
                _bootstrap_option("source", required),
                _bootstrap_option("target", required),
                click.option(
                    "--topics",
                    metavar="REGEX[,REGEX...]",
                    help="The topics to mirror (MM2's `topics`; default: the config's, '.*').",
                ),
                click.option(
                    "--config",
                    "config_path",
                    type=click.Path(exists=True, dir_okay=False, path_type=Path),
                    help="MM2 connector properties (topics.exclude, replication.factor, ...).",
                ),
            ]
        ):
            func = option(func)
        return func

    return decorate


def _config(config_path: Path | None, topics: str | None) -> MirrorConfig:
    properties = read_properties(config_path) if config_path else {}
    if topics is not None:
        properties["topics"] = topics
    try:
        return MirrorConfig.from_properties(properties)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'--config'") from None


@click.group(invoke_without_command=True)
@_cluster_options(required=False)
@click.pass_context
def mirror(
    ctx: click.Context,
    source_bootstrap: list[str] | None,
    target_bootstrap: list[str] | None,
    topics: str | None,
    config_path: Path | None,
) -> None:
    """Mirror topics and consumer group offsets from a source cluster to a target cluster."""
    if ctx.invoked_subcommand is not None:
        return
    if source_bootstrap is None or target_bootstrap is None:
        raise click.UsageError("--source-bootstrap and --target-bootstrap are required")
    config = _config(config_path, topics)
    logging.basicConfig(level=logging.INFO, format=_LOG_FORMAT)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        MirrorMaker(source_bootstrap, target_bootstrap, config).run(stop)
    except UnaccountedTailError as e:
        raise click.ClickException(str(e)) from None


@mirror.command()
@_cluster_options(required=True)
@output_option
def status(
    source_bootstrap: list[str],
    target_bootstrap: list[str],
    topics: str | None,
    config_path: Path | None,
    output: str,
) -> None:
    """Per mirrored partition: source end offset, mirrored offset, lag, records/s (last minute)."""
    config = _config(config_path, topics)
    with (
        AdminClient(source_bootstrap) as source,
        AdminClient(target_bootstrap) as target,
        Consumer(bootstrap_servers=target_bootstrap, auto_offset_reset="earliest") as consumer,
    ):
        statuses = read_status(
            source,
            target,
            consumer,
            config,
            now_ms=int(time.time() * 1000),
            timeout_ms=STATUS_TIMEOUT_MS,
        )
    if output == "json":
        click.echo(json.dumps([_status_json(s) for s in statuses], indent=2))
    elif statuses:
        click.echo(_status_table(statuses))


def _status_json(status: PartitionStatus) -> dict[str, object]:
    return {
        "topic": status.tp.topic,
        "partition": status.tp.partition,
        "remote_topic": status.remote_topic,
        "source_end_offset": status.source_end,
        "mirrored_offset": status.mirrored,
        "lag": status.lag,
        "records_per_second": round(status.records_per_s, 1),
    }


def _status_table(statuses: list[PartitionStatus]) -> str:
    headers = ("TOPIC", "PARTITION", "REMOTE-TOPIC", "SOURCE-END", "MIRRORED", "LAG", "RECORDS/S")
    rows = [
        (
            s.tp.topic,
            s.tp.partition,
            s.remote_topic,
            s.source_end,
            "-" if s.mirrored is None else s.mirrored,
            "-" if s.lag is None else s.lag,
            f"{s.records_per_s:.1f}",
        )
        for s in statuses
    ]
    return format_table(headers, rows)
