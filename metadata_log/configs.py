"""Kafka's topic and dynamic broker config definitions, and the validation of user values.

The definitions are pure data (`ConfigDef`) with Kafka's names, types and defaults (as of Kafka
3.9). `validate_config` is what the controller runs before it writes a ConfigRecord: it returns
the value in normal form (trimmed, `true`/`false`, `0.5`, `compact,delete`) or raises
`ConfigValidationError` whose message says in one sentence what is wrong.

A topic config falls back to its broker synonym (`BROKER_SYNONYMS`) and then to its default.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Protocol

from pykraft.metadata_log.errors import ConfigValidationError
from pykraft.metadata_log.records import ConfigResourceType

LONG_MAX: Final = (1 << 63) - 1

# A parsed config value: what the validators look at.
ConfigValue = bool | int | float | str | tuple[str, ...]


class ConfigType(enum.Enum):
    """How a config's string value is read (Kafka's ConfigDef.Type)."""

    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"


class Validator(Protocol):
    def problem(self, value: ConfigValue) -> str | None:
        """Why `value` is not acceptable (a clause such as "must be at least 1"), or None."""


@dataclasses.dataclass(frozen=True, slots=True)
class Range:
    """A number within [minimum, maximum]; either bound may be open (None)."""

    minimum: float | None = None
    maximum: float | None = None

    def problem(self, value: ConfigValue) -> str | None:
        assert isinstance(value, int | float), "Range validates numbers only"
        too_low = self.minimum is not None and value < self.minimum
        too_high = self.maximum is not None and value > self.maximum
        if not (too_low or too_high):
            return None
        if self.maximum is None:
            return f"must be at least {self.minimum}"
        if self.minimum is None:
            return f"must be at most {self.maximum}"
        return f"must be between {self.minimum} and {self.maximum}"


@dataclasses.dataclass(frozen=True, slots=True)
class OneOf:
    """A string among `choices` (case-sensitive, as in Kafka)."""

    choices: tuple[str, ...]

    def problem(self, value: ConfigValue) -> str | None:
        if value in self.choices:
            return None
        return f"not one of {', '.join(self.choices)}"


@dataclasses.dataclass(frozen=True, slots=True)
class ListOf:
    """A non-empty list without repeats whose items are all among `choices`."""

    choices: tuple[str, ...]

    def problem(self, value: ConfigValue) -> str | None:
        assert isinstance(value, tuple), "ListOf validates lists only"
        if not value:
            return f"must name one or more of {', '.join(self.choices)}"
        repeated = [item for index, item in enumerate(value) if item in value[:index]]
        if repeated:
            return f"{repeated[0]!r} is repeated"
        unknown = [item for item in value if item not in self.choices]
        if unknown:
            return f"{unknown[0]!r} is not one of {', '.join(self.choices)}"
        return None


_THROTTLED_REPLICA: Final = re.compile(r"[0-9]+:[0-9]+")


@dataclasses.dataclass(frozen=True, slots=True)
class ThrottledReplicas:
    """Kafka's throttled replica list: `partition:broker` items, or `*` for every replica."""

    def problem(self, value: ConfigValue) -> str | None:
        assert isinstance(value, tuple), "ThrottledReplicas validates lists only"
        if value == ("*",):
            return None
        wrong = [item for item in value if not _THROTTLED_REPLICA.fullmatch(item)]
        if wrong:
            return f"{wrong[0]!r} is not partition:broker (or the whole list '*')"
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class ConfigDef:
    """One config: its name, type, default (as a string; None when it has none), documentation
    and the validator its parsed value must pass."""

    name: str
    type: ConfigType
    default: str | None
    documentation: str
    validator: Validator | None = None


_INTEGER_BOUNDS: Final[Mapping[ConfigType, tuple[int, int]]] = {
    ConfigType.SHORT: (-(1 << 15), (1 << 15) - 1),
    ConfigType.INT: (-(1 << 31), (1 << 31) - 1),
    ConfigType.LONG: (-(1 << 63), LONG_MAX),
}
# Plain ASCII forms only: Python's int() and float() would also take "1_000" or Arabic digits.
_INTEGER_FORM: Final = re.compile(r"[+-]?[0-9]+")
_DOUBLE_FORM: Final = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class _BadValue(Exception):
    """The value cannot be read as the config's type; carries the reason as a clause."""


def _parse(config_type: ConfigType, text: str) -> ConfigValue:
    trimmed = text.strip()
    if config_type is ConfigType.BOOLEAN:
        if trimmed.lower() not in ("true", "false"):
            raise _BadValue("not a boolean (true or false)")
        return trimmed.lower() == "true"
    if config_type in _INTEGER_BOUNDS:
        low, high = _INTEGER_BOUNDS[config_type]
        if not _INTEGER_FORM.fullmatch(trimmed):
            raise _BadValue("not an integer")
        number = int(trimmed)
        if not low <= number <= high:
            raise _BadValue(f"out of the {config_type.value} range {low} to {high}")
        return number
    if config_type is ConfigType.DOUBLE:
        if not _DOUBLE_FORM.fullmatch(trimmed) or not math.isfinite(float(trimmed)):
            raise _BadValue("not a finite number")
        return float(trimmed)
    if config_type is ConfigType.LIST:
        items = tuple(item.strip() for item in trimmed.split(",")) if trimmed else ()
        if "" in items:
            raise _BadValue("a list item is empty")
        return items
    return trimmed


def _format(value: ConfigValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return repr(value) if isinstance(value, float) else str(value)


def _definition(
    name: str,
    config_type: ConfigType,
    default: str | None,
    documentation: str,
    validator: Validator | None = None,
) -> tuple[str, ConfigDef]:
    return name, ConfigDef(name, config_type, default, documentation, validator)


_CLEANUP_POLICIES: Final = ("delete", "compact")
_COMPRESSION_TYPES: Final = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_LONG_MAX_TEXT: Final = str(LONG_MAX)
_WEEK_MS_TEXT: Final = str(7 * 24 * 60 * 60 * 1000)

TOPIC_CONFIGS: Final[Mapping[str, ConfigDef]] = MappingProxyType(
    dict(
        [
            _definition(
                "cleanup.policy",
                ConfigType.LIST,
                "delete",
                "How old segments go: deleted past retention, compacted to the last value of "
                "each key, or both.",
                ListOf(_CLEANUP_POLICIES),
            ),
            _definition(
                "compression.type",
                ConfigType.STRING,
                "producer",
                "The codec batches are stored with; 'producer' keeps whatever the producer used.",
                OneOf(_COMPRESSION_TYPES),
            ),
            _definition(
                "delete.retention.ms",
                ConfigType.LONG,
                "86400000",
                "How long a compacted topic keeps tombstones, so slow readers still see deletes.",
                Range(0),
            ),
            _definition(
                "file.delete.delay.ms",
                ConfigType.LONG,
                "60000",
                "How long a deleted segment file lingers on disk before it is removed.",
                Range(0),
            ),
            _definition(
                "flush.messages",
                ConfigType.LONG,
                _LONG_MAX_TEXT,
                "Force an fsync after this many messages (replication, not fsync, is the norm).",
                Range(1),
            ),
            _definition(
                "flush.ms",
                ConfigType.LONG,
                _LONG_MAX_TEXT,
                "Force an fsync when data has waited this long.",
                Range(0),
            ),
            _definition(
                "index.interval.bytes",
                ConfigType.INT,
                "4096",
                "Bytes of log between two entries of the offset index.",
                Range(0),
            ),
            _definition(
                "max.compaction.lag.ms",
                ConfigType.LONG,
                _LONG_MAX_TEXT,
                "The longest a message may stay uncompacted in a compacted topic.",
                Range(1),
            ),
            _definition(
                "max.message.bytes",
                ConfigType.INT,
                "1048588",
                "The largest record batch the topic accepts.",
                Range(0),
            ),
            _definition(
                "message.timestamp.type",
                ConfigType.STRING,
                "CreateTime",
                "Whether a message keeps its producer's timestamp or takes the append time.",
                OneOf(("CreateTime", "LogAppendTime")),
            ),
            _definition(
                "message.timestamp.before.max.ms",
                ConfigType.LONG,
                _LONG_MAX_TEXT,
                "How far in the past a CreateTime timestamp may be before the batch is refused.",
                Range(0),
            ),
            _definition(
                "message.timestamp.after.max.ms",
                ConfigType.LONG,
                _LONG_MAX_TEXT,
                "How far in the future a CreateTime timestamp may be before the batch is refused.",
                Range(0),
            ),
            _definition(
                "min.cleanable.dirty.ratio",
                ConfigType.DOUBLE,
                "0.5",
                "The share of uncompacted log above which the cleaner compacts the topic.",
                Range(0, 1),
            ),
            _definition(
                "min.compaction.lag.ms",
                ConfigType.LONG,
                "0",
                "The shortest a message stays uncompacted in a compacted topic.",
                Range(0),
            ),
            _definition(
                "min.insync.replicas",
                ConfigType.INT,
                "1",
                "In-sync replicas needed before a write with acks=all succeeds.",
                Range(1),
            ),
            _definition(
                "preallocate",
                ConfigType.BOOLEAN,
                "false",
                "Whether a new segment file is allocated in full when it is created.",
            ),
            _definition(
                "retention.bytes",
                ConfigType.LONG,
                "-1",
                "The size a partition may grow to before old segments go; -1 means no limit.",
            ),
            _definition(
                "retention.ms",
                ConfigType.LONG,
                _WEEK_MS_TEXT,
                "How long segments are kept before they go; -1 means no time limit.",
                Range(-1),
            ),
            _definition(
                "segment.bytes",
                ConfigType.INT,
                "1073741824",
                "The size at which a segment file is closed and a new one started.",
                Range(14),
            ),
            _definition(
                "segment.index.bytes",
                ConfigType.INT,
                "10485760",
                "The size of the offset index file of a segment.",
                Range(4),
            ),
            _definition(
                "segment.jitter.ms",
                ConfigType.LONG,
                "0",
                "A random amount taken off segment.ms so segments do not all roll at once.",
                Range(0),
            ),
            _definition(
                "segment.ms",
                ConfigType.LONG,
                _WEEK_MS_TEXT,
                "The age at which a segment is closed, even if it is not full.",
                Range(1),
            ),
            _definition(
                "leader.replication.throttled.replicas",
                ConfigType.LIST,
                "",
                "The replicas (partition:broker, or *) whose leaders' reassignment traffic is "
                "throttled.",
                ThrottledReplicas(),
            ),
            _definition(
                "follower.replication.throttled.replicas",
                ConfigType.LIST,
                "",
                "The replicas (partition:broker, or *) whose out-of-sync followers fetch at no "
                "more than follower.replication.throttled.rate.",
                ThrottledReplicas(),
            ),
            _definition(
                "unclean.leader.election.enable",
                ConfigType.BOOLEAN,
                "false",
                "Whether a replica outside the ISR may become leader, at the cost of data loss.",
            ),
        ]
    )
)

# Broker-wide defaults of topic configs: broker name -> topic name (Kafka's synonyms).
BROKER_SYNONYMS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "min.insync.replicas": "min.insync.replicas",
        "unclean.leader.election.enable": "unclean.leader.election.enable",
        "log.retention.ms": "retention.ms",
        "log.retention.bytes": "retention.bytes",
        "log.segment.bytes": "segment.bytes",
        "log.flush.interval.messages": "flush.messages",
        "log.flush.interval.ms": "flush.ms",
        "log.cleanup.policy": "cleanup.policy",
        "compression.type": "compression.type",
        "message.max.bytes": "max.message.bytes",
    }
)


def _broker_synonym(broker_name: str, topic_name: str) -> tuple[str, ConfigDef]:
    topic_def = TOPIC_CONFIGS[topic_name]
    # Kafka leaves log.flush.interval.ms unset, so flushing falls to the scheduler's interval.
    default = None if broker_name == "log.flush.interval.ms" else topic_def.default
    return broker_name, dataclasses.replace(topic_def, name=broker_name, default=default)


BROKER_CONFIGS: Final[Mapping[str, ConfigDef]] = MappingProxyType(
    dict(
        [
            _definition(
                "num.partitions",
                ConfigType.INT,
                "1",
                "Partitions of a topic created without saying how many.",
                Range(1),
            ),
            _definition(
                "default.replication.factor",
                ConfigType.INT,
                "1",
                "Replicas of each partition of a topic created without saying how many.",
                Range(1),
            ),
            _definition(
                "leader.replication.throttled.rate",
                ConfigType.LONG,
                _LONG_MAX_TEXT,
                "Bytes/s a broker sends to the throttled replicas it leads.",
                Range(1),
            ),
            _definition(
                "follower.replication.throttled.rate",
                ConfigType.LONG,
                _LONG_MAX_TEXT,
                "Bytes/s a broker fetches for the throttled replicas it follows out of sync.",
                Range(1),
            ),
            *(_broker_synonym(broker, topic) for broker, topic in BROKER_SYNONYMS.items()),
        ]
    )
)

_DEFINITIONS: Final[Mapping[ConfigResourceType, Mapping[str, ConfigDef]]] = MappingProxyType(
    {ConfigResourceType.TOPIC: TOPIC_CONFIGS, ConfigResourceType.BROKER: BROKER_CONFIGS}
)


def config_definitions(resource_type: ConfigResourceType) -> Mapping[str, ConfigDef]:
    """Every config a resource of this type accepts, by name."""
    return _DEFINITIONS[resource_type]


def config_definition(resource_type: ConfigResourceType, name: str) -> ConfigDef:
    """The definition of one config; ConfigValidationError if the resource type has no such key."""
    definition = _DEFINITIONS[resource_type].get(name)
    if definition is None:
        raise ConfigValidationError(f"Unknown {resource_type.name.lower()} config {name!r}.")
    return definition


def config_default(resource_type: ConfigResourceType, name: str) -> str | None:
    """The default of a config (None when Kafka defines none); ConfigValidationError if unknown."""
    return config_definition(resource_type, name).default


def validate_config(resource_type: ConfigResourceType, name: str, value: str) -> str:
    """`value` in normal form if the config accepts it, else ConfigValidationError saying why."""
    definition = config_definition(resource_type, name)
    try:
        parsed = _parse(definition.type, value)
    except _BadValue as bad:
        raise _invalid(resource_type, name, value, str(bad)) from None
    problem = None if definition.validator is None else definition.validator.problem(parsed)
    if problem is not None:
        raise _invalid(resource_type, name, value, problem)
    return _format(parsed)


def _invalid(
    resource_type: ConfigResourceType, name: str, value: str, problem: str
) -> ConfigValidationError:
    return ConfigValidationError(
        f"Invalid value {value!r} for {resource_type.name.lower()} config {name!r}: {problem}."
    )
