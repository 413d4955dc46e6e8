"""`pykraft configs`: Kafka's kafka-configs (describe and alter topic and broker configs), with
the parsing of its --add-config lists."""

from __future__ import annotations

from collections.abc import Callable

import click

from pykraft.cli import formatting
from pykraft.cli.options import parsed
from pykraft.cli.properties import split_properties
from pykraft.cli.session import Session, admin_command
from pykraft.client.admin import ResourceType

_ENTITY_TYPES: dict[str, ResourceType] = {"topics": "topic", "brokers": "broker"}


def parse_config_list(text: str) -> dict[str, str]:
    """Kafka's --add-config syntax "k1=v1,k2=[a,b]": brackets keep a list value's commas."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth < 0:
            raise ValueError(f"unbalanced ']' in {text!r}")
        if char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise ValueError(f"unbalanced '[' in {text!r}")
    items.append(text[start:])
    configs = split_properties(item for item in items if item.strip())
    return {k: v[1:-1] if v.startswith("[") and v.endswith("]") else v for k, v in configs.items()}


@click.group()
def configs() -> None:
    """Describe and alter topic and broker configs."""


def _entity_options(func: Callable[..., None]) -> Callable[..., None]:
    """kafka-configs' way of naming what to describe or alter."""
    entity_type = click.option(
        "--entity-type", required=True, type=click.Choice(sorted(_ENTITY_TYPES))
    )
    entity_name = click.option("--entity-name", help="Topic name or broker id.")
    entity_default = click.option(
        "--entity-default",
        is_flag=True,
        help="The cluster-wide broker default (brokers only), instead of --entity-name.",
    )
    return entity_type(entity_name(entity_default(func)))


def _entity(entity_type: str, entity_name: str | None, entity_default: bool) -> str:
    """The resource name the request carries ("" for the broker default); UsageError if unclear."""
    if entity_default:
        if entity_type != "brokers" or entity_name is not None:
            raise click.UsageError("--entity-default applies to brokers, without --entity-name")
        return ""
    if entity_name is None:
        raise click.UsageError("give --entity-name (or --entity-default for brokers)")
    return entity_name


@configs.command("describe")
@admin_command
@_entity_options
def configs_describe(
    session: Session, entity_type: str, entity_name: str | None, entity_default: bool
) -> None:
    """Show every config of a topic or broker, with its source."""
    name = _entity(entity_type, entity_name, entity_default)
    with session.admin() as admin:
        described = admin.describe_configs(_ENTITY_TYPES[entity_type], name)
    session.emit(described, formatting.configs_json, formatting.configs_table)


@configs.command("alter")
@admin_command
@_entity_options
@click.option(
    "--add-config",
    multiple=True,
    callback=parsed(
        lambda values: {k: v for text in values for k, v in parse_config_list(text).items()}
    ),
    metavar="K=V[,K2=V2...]",
    help="Configs to set; a list value goes in brackets: k=[a,b].",
)
@click.option("--delete-config", multiple=True, metavar="K[,K2...]", help="Configs to reset.")
def configs_alter(
    session: Session,
    entity_type: str,
    entity_name: str | None,
    entity_default: bool,
    add_config: dict[str, str],
    delete_config: tuple[str, ...],
) -> None:
    """Set or delete configs of a topic or broker."""
    name = _entity(entity_type, entity_name, entity_default)
    deleted = [k.strip() for text in delete_config for k in text.split(",") if k.strip()]
    if not add_config and not deleted:
        raise click.UsageError("nothing to alter: give --add-config and/or --delete-config")
    with session.admin() as admin:
        admin.alter_configs(_ENTITY_TYPES[entity_type], name, set=add_config, delete=deleted)
    result = {
        "entity_type": entity_type,
        "entity_name": name,
        "set": add_config,
        "deleted": deleted,
    }
    label = f"{entity_type[:-1]} {name}" if name else "the broker default"
    session.emit(result, dict, lambda r: f"Completed updating config for {label}.")
