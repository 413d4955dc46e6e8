"""The `pykraft` command: Kafka's kafka-topics (`topics`), kafka-configs (`configs`),
kafka-metadata-quorum (`quorum`), kafka-leader-election (`leaders`), kafka-get-offsets
(`offsets`), the console producer and consumer (`produce`, `consume`), kafka-consumer-groups
(`groups`), the perf-test tools (`perf`), MirrorMaker 2 (`mirror`) and a local cluster (`dev`),
one module each.

Subcommands of other packages (`pykraft controller ...`) come from the entry-point group
`pykraft.commands` and are loaded only when named (or listed by --help), so this package
depends on no server package. A Kafka error prints "Error: <CODE_NAME>: <message>" to stderr and
exits 1; bad arguments exit 2 via click.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any

import click

from pykraft.cli.cluster import cluster, leaders, quorum
from pykraft.cli.configs import configs
from pykraft.cli.console_consumer import consume
from pykraft.cli.console_producer import produce
from pykraft.cli.dev.commands import dev
from pykraft.cli.groups import groups
from pykraft.cli.mirror import mirror
from pykraft.cli.offsets import offsets
from pykraft.cli.perf import perf
from pykraft.cli.reassign import reassign
from pykraft.cli.topics import topics
from pykraft.client.errors import KafkaError

PLUGIN_GROUP = "pykraft.commands"


class _RootGroup(click.Group):
    """Adds the entry-point subcommands and turns KafkaError into click's error exit."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_plugins()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        entry_point = _plugins().get(cmd_name)
        if command is None and entry_point is not None:
            command = _load_plugin(entry_point)
            self.add_command(command, cmd_name)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KafkaError as e:
            raise click.ClickException(str(e)) from None


def _plugins() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=PLUGIN_GROUP)}


def _load_plugin(entry_point: EntryPoint) -> click.Command:
    """The entry point's command, or one explaining why it is unavailable when run."""
    try:
        loaded = entry_point.load()
    except Exception as e:  # a broken plugin must not take the other commands down
        reason = f"{type(e).__name__}: {e}"
    else:
        if isinstance(loaded, click.Command):
            return loaded
        reason = f"{entry_point.value} is not a click command"

    def fail() -> None:
        raise click.ClickException(f"'pykraft {entry_point.name}' is unavailable: {reason}")

    return click.Command(
        entry_point.name,
        callback=fail,
        short_help=f"(unavailable: {reason})",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )


@click.group(cls=_RootGroup, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Administer a pykraft cluster (and run its nodes)."""


for _command in (
    topics,
    configs,
    cluster,
    quorum,
    leaders,
    reassign,
    offsets,
    produce,
    consume,
    groups,
    perf,
    mirror,
    dev,
):
    cli.add_command(_command)


def main() -> None:
    """Entry point of the `pykraft` console script."""
    cli(prog_name="pykraft")
