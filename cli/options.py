"""Click pieces that several `pykraft` commands share: the bootstrap options, repeatable
KEY=VALUE property options, a callback that parses an option's text, and the --partition
check."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from pykraft.cli.properties import split_properties
from pykraft.client.routing import parse_bootstrap

_T = TypeVar("_T")
_V = TypeVar("_V")
_F = TypeVar("_F", bound=Callable[..., Any])


def parsed(
    parse: Callable[[_V], _T],
) -> Callable[[click.Context, click.Parameter, _V | None], _T | None]:
    """A click callback applying `parse` to an option's value (a repeatable option's: the tuple
    of them); a ValueError from `parse` is a usage error, and an option not given (None) stays
    None."""

    def callback(ctx: click.Context, param: click.Parameter, value: _V | None) -> _T | None:
        try:
            return None if value is None else parse(value)
        except ValueError as e:
            raise click.BadParameter(str(e), ctx, param) from None

    return callback


def bootstrap_option(*names: str, help: str) -> Callable[[_F], _F]:
    """A required option under `names` (env PYKRAFT_BOOTSTRAP) giving the command `bootstrap`:
    the HOST:PORT addresses of a comma-separated list (malformed: a usage error)."""
    return click.option(
        *names,
        "bootstrap",
        envvar="PYKRAFT_BOOTSTRAP",
        required=True,
        callback=parsed(parse_bootstrap),
        metavar="HOST:PORT[,HOST:PORT...]",
        help=help,
    )


# The --bootstrap-server option of every command that talks to brokers only (produce, consume,
# perf, groups).
bootstrap_server_option = bootstrap_option(
    "--bootstrap-server", help="Brokers to contact first; env PYKRAFT_BOOTSTRAP."
)


def properties_option(
    *names: str, build: Callable[[dict[str, str]], object], help: str
) -> Callable[[_F], _F]:
    """A repeatable KEY=VALUE option under `names` (the last a parameter name where given):
    the command gets `build`'s value for all of them together, split as Kafka's
    properties (`split_properties`); a ValueError, from the split or `build`, is a usage
    error."""
    return click.option(
        *names,
        multiple=True,
        callback=parsed(lambda values: build(split_properties(values))),
        metavar="KEY=VALUE",
        help=help,
    )


def check_partition(partitions: Sequence[int], topic: str, partition: int) -> None:
    """A usage error (exit 2) naming the topic's partitions when --partition is not one."""
    if partition not in partitions:
        raise click.BadParameter(
            f"topic {topic!r} has partitions 0 to {len(partitions) - 1}",
            param_hint="'--partition'",
        )
