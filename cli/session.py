"""What every admin command of the `pykraft` CLI gets from its shared options: where to
connect, how long to try, and how to print (`Session`). `admin_command` adds them with
--bootstrap-controller (the admin tools); `pykraft groups` builds its own with
--bootstrap-server."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from pykraft.cli.options import bootstrap_option
from pykraft.client.admin import AdminClient

_T = TypeVar("_T")


@dataclass(frozen=True)
class Session:
    bootstrap: list[str]
    request_timeout_ms: int
    output: str  # "table" or "json"

    def admin(self) -> AdminClient:
        return AdminClient(self.bootstrap, request_timeout_ms=self.request_timeout_ms)

    def emit(
        self, value: _T, to_json: Callable[[_T], object], to_table: Callable[[_T], str]
    ) -> None:
        """Prints `value` as JSON or as the text `to_table` makes of it (nothing if empty)."""
        if self.output == "json":
            click.echo(json.dumps(to_json(value), indent=2))
        else:
            text = to_table(value)
            if text:
                click.echo(text)


# --output: "table" or "json" (every admin tool's, and `pykraft mirror status`').
output_option = click.option(
    "--output",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Aligned text for people, or JSON for scripts.",
)
_COMMON_OPTIONS = [
    click.option(
        "--request-timeout-ms",
        type=click.IntRange(min=1),
        default=30000,
        show_default=True,
        help="Give up after this long, retries and redirects included.",
    ),
    output_option,
]


def session_command(
    bootstrap_option: Callable[[Callable[..., None]], Callable[..., None]],
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A decorator adding `bootstrap_option` (which must store `bootstrap`),
    --request-timeout-ms and --output to a command, which gets them as its first argument, a
    Session."""

    def decorate(func: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(func)
        def run(bootstrap: list[str], request_timeout_ms: int, output: str, **kwargs: Any) -> None:
            func(Session(bootstrap, request_timeout_ms, output), **kwargs)

        command: Callable[..., None] = run
        options: list[Callable[[Callable[..., None]], Callable[..., None]]] = [
            bootstrap_option,
            *_COMMON_OPTIONS,
        ]
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


admin_command = session_command(
    bootstrap_option(
        "--bootstrap-controller",
        "--bootstrap-server",
        help="Controllers (or brokers) to contact first; env PYKRAFT_BOOTSTRAP.",
    )
)
"""Adds --bootstrap-controller (or --bootstrap-server), --request-timeout-ms and --output to an
admin tool's command, which receives them as its first argument, a Session."""
