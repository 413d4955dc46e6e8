"""Kafka's "key=value" properties (--property, --producer-property, --producer-prop, and topic
configs) as our configs: the names are Kafka's, the values text, and every unknown name or
malformed value is a ValueError that says which."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TypeVar

_C = TypeVar("_C")


def split_properties(items: Iterable[str]) -> dict[str, str]:
    """Kafka's repeatable "key=value" arguments (split at the first '='; later ones win)."""
    properties: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected key=value, got {item!r}")
        properties[key.strip()] = value
    return properties


def parse_bool(name: str, text: str) -> bool:
    """A boolean property as Kafka writes it ("true"/"false", any case, spaces ignored);
    ValueError for anything else, where Kafka would quietly read false."""
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"{name} must be true or false, not {text!r}")
    return value == "true"


def check_property_names(names: Iterable[str], known: Collection[str], what: str) -> None:
    """ValueError naming every unknown property and listing the known ones."""
    unknown = sorted(set(names) - set(known))
    if unknown:
        noun = "property" if len(unknown) == 1 else "properties"
        raise ValueError(
            f"unknown {what} {noun} {', '.join(map(repr, unknown))}; "
            f"known: {', '.join(sorted(known))}"
        )


def properties_of(config_class: type[object]) -> dict[str, dataclasses.Field[object]]:
    """A properties dataclass's Kafka names (its field names with '.' for '_') to fields."""
    return {f.name.replace("_", "."): f for f in dataclasses.fields(config_class)}  # type: ignore[arg-type]


def from_properties(config_class: type[_C], properties: Mapping[str, str], what: str) -> _C:
    """Builds a properties dataclass from Kafka-named text values: bool fields take
    true/false, the others the text as given; unset ones keep their Kafka default."""
    fields = properties_of(config_class)
    check_property_names(properties, fields, what)
    values: dict[str, object] = {}
    for name, text in properties.items():
        field = fields[name]
        is_bool = isinstance(field.default, bool)
        values[field.name] = parse_bool(name, text) if is_bool else text
    return config_class(**values)


def _int(name: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"{name} must be an integer, not {text!r}") from None


# Kafka producer configs that --producer-property takes: name -> how its text converts. Each
# goes to the Producer keyword of the same name with '_' for '.', which validates the value.
PRODUCER_PROPERTIES: dict[str, Callable[[str, str], object]] = {
    "acks": lambda name, text: text.strip(),
    "batch.size": _int,
    "buffer.memory": _int,
    "client.id": lambda name, text: text,
    "compression.type": lambda name, text: text.strip(),
    "delivery.timeout.ms": _int,
    "enable.idempotence": parse_bool,
    "linger.ms": _int,
    "max.block.ms": _int,
    "max.in.flight.requests.per.connection": _int,
    "max.request.size": _int,
    "request.timeout.ms": _int,
    "retries": _int,
    "retry.backoff.ms": _int,
}


def producer_kwargs(properties: Mapping[str, str]) -> dict[str, object]:
    """Kafka-named producer configs as Producer keyword arguments; ValueError naming every
    unknown name (and listing the known ones) or the first malformed value."""
    check_property_names(properties, PRODUCER_PROPERTIES, "producer")
    return {
        name.replace(".", "_"): PRODUCER_PROPERTIES[name](name, text)
        for name, text in properties.items()
    }
