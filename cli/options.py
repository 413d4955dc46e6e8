"""Click pieces that several `pykraft` commands share: the --bootstrap-server option, a
callback that parses an option's text, and the --partition check."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import click

from pykraft.client.routing import parse_bootstrap

_T = TypeVar("_T")


def parsed(
    parse: Callable[[str], _T],
) -> Callable[[click.Context, click.Parameter, str | None], _T | None]:
    """A click callback applying `parse` (ValueError: a usage error) to an optional value."""

    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> _T | None:
        try:
            return None if value is None else parse(value)
        except ValueError as e:
            raise click.BadParameter(str(e), ctx, param) from None

    return callback


# The --bootstrap-server option of every command that talks to brokers only (produce, consume,
# perf, groups).
bootstrap_server_option = click.option(
    "--bootstrap-server",
    "bootstrap",
    envvar="PYKRAFT_BOOTSTRAP",
    required=True,
    callback=parsed(parse_bootstrap),
    metavar="HOST:PORT[,HOST:PORT...]",
    help="Brokers to contact first; env PYKRAFT_BOOTSTRAP.",
)


def check_partition(partitions: Sequence[int], topic: str, partition: int) -> None:
    """A usage error (exit 2) naming the topic's partitions when --partition is not one."""
    if partition not in partitions:
        raise click.BadParameter(
            f"topic {topic!r} has partitions 0 to {len(partitions) - 1}",
            param_hint="'--partition'",
        )
