"""What every admin command of the `pykraft` CLI gets from its shared options (`cli.py` and
`cli_groups.py` both build one): where to connect, how long to try, and how to print."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import click

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
