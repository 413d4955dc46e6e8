"""The mirror's settings: Kafka MirrorMaker 2's names and defaults, checked once.

`MirrorConfig.from_properties` takes MM2's connector property names (`topics`,
`topics.exclude`, `replication.factor`, `sync.topic.configs.enabled`,
`emit.checkpoints.interval.seconds`, `replication.policy.class`, ...) as text, the way a
`--config FILE` in Java's properties format (`read_properties`) or the command line gives them;
an unknown name or a bad value is a ValueError naming it, so a typo fails before anything runs.

Two settings differ from MM2 on purpose. The offset syncs live on the target cluster (MM2's
`offset-syncs.topic.location=target`), since they are the mirror's own progress and must agree
with the target's data after a crash (see `partition_copier`). `offset.flush.interval.ms`
(Kafka Connect's name, 60000 there) defaults to 5000: it bounds how stale a quiet partition's
offset sync, and so `pykraft mirror status` and a restart's tail check, can be.

Topic and group lists are MM2's: comma-separated names or regular expressions, each matching a
whole name; an exclude wins over an include.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pykraft.mirror.policy import ReplicationPolicy

DEFAULT_POLICY_CLASS: Final = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY_CLASS: Final = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
# The replication factor that leaves the choice to the target (its default.replication.factor).
CLUSTER_DEFAULT_REPLICATION_FACTOR: Final = -1

# Field names whose property name is not the field name with '.' for '_'.
_PROPERTY_NAMES: Final = {
    "offset_syncs_topic_replication_factor": "offset-syncs.topic.replication.factor",
}
_BOOLEANS: Final = {"true": True, "false": False}


@dataclass(frozen=True)
class MirrorConfig:
    """MM2's settings with MM2's defaults (see the module docstring for the two exceptions)."""

    source_cluster_alias: str = "source"
    target_cluster_alias: str = "target"
    topics: str = ".*"
    topics_exclude: str = r".*[\-\.]internal, .*\.replica, __.*"
    groups: str = ".*"
    groups_exclude: str = "console-consumer-.*, connect-.*, __.*"
    config_properties_exclude: str = (
        r"follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, "
        r"message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, "
        r"unclean\.leader\.election\.enable, min\.insync\.replicas"
    )
    replication_factor: int = 2
    offset_syncs_topic_replication_factor: int = 3
    checkpoints_topic_replication_factor: int = 3
    replication_policy_class: str = DEFAULT_POLICY_CLASS
    replication_policy_separator: str = "."
    refresh_topics_enabled: bool = True
    refresh_topics_interval_seconds: int = 600
    sync_topic_configs_enabled: bool = True
    sync_topic_configs_interval_seconds: int = 600
    emit_checkpoints_enabled: bool = True
    emit_checkpoints_interval_seconds: int = 60
    sync_group_offsets_enabled: bool = False
    sync_group_offsets_interval_seconds: int = 60
    offset_lag_max: int = 100
    offset_flush_interval_ms: int = 5000
    consumer_poll_timeout_ms: int = 1000

    def __post_init__(self) -> None:
        for alias in (self.source_cluster_alias, self.target_cluster_alias):
            if not alias.strip() or self.replication_policy_separator in alias:
                raise ValueError(
                    f"cluster aliases must be non-empty and free of the separator "
                    f"{self.replication_policy_separator!r}, not {alias!r}"
                )
        if self.source_cluster_alias == self.target_cluster_alias:
            raise ValueError("source.cluster.alias and target.cluster.alias must differ")
        if not self.replication_policy_separator:
            raise ValueError("replication.policy.separator must not be empty")
        if self.replication_policy_class not in (DEFAULT_POLICY_CLASS, IDENTITY_POLICY_CLASS):
            raise ValueError(
                f"replication.policy.class must be {DEFAULT_POLICY_CLASS} or "
                f"{IDENTITY_POLICY_CLASS}, not {self.replication_policy_class!r}"
            )
        for name in ("topics", "topics_exclude", "groups", "groups_exclude"):
            NameFilter.compile(property_name(name), getattr(self, name))
        NameFilter.compile("config.properties.exclude", self.config_properties_exclude)
        self._check_numbers()

    def _check_numbers(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int):
                continue
            if field.name.endswith("replication_factor"):
                if value < 1 and value != CLUSTER_DEFAULT_REPLICATION_FACTOR:
                    raise ValueError(f"{property_name(field.name)} must be at least 1, or -1")
            elif value < 1:
                raise ValueError(f"{property_name(field.name)} must be at least 1, not {value}")

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> MirrorConfig:
        """The config these MM2-named text values make; unset names keep MM2's defaults.
        ValueError naming an unknown property (and listing the known ones) or a bad value."""
        fields = {property_name(f.name): f for f in dataclasses.fields(cls)}
        unknown = sorted(set(properties) - set(fields))
        if unknown:
            raise ValueError(
                f"unknown mirror properties {', '.join(map(repr, unknown))}; "
                f"known: {', '.join(sorted(fields))}"
            )
        values: dict[str, Any] = {
            fields[name].name: _converted(name, text, fields[name].default)
            for name, text in properties.items()
        }
        return cls(**values)

    def policy(self) -> ReplicationPolicy:
        """The replication policy `replication.policy.class` names, for this source."""
        return ReplicationPolicy(
            self.source_cluster_alias,
            self.replication_policy_separator,
            identity=self.replication_policy_class == IDENTITY_POLICY_CLASS,
        )

    def topic_filter(self) -> NameFilter:
        """Which source topics are mirrored (`topics` and `topics.exclude`)."""
        return NameFilter.of("topics", self.topics, self.topics_exclude)

    def group_filter(self) -> NameFilter:
        """Which source groups are checkpointed (`groups` and `groups.exclude`)."""
        return NameFilter.of("groups", self.groups, self.groups_exclude)

    def config_filter(self) -> NameFilter:
        """Which topic configs are copied: every one not in `config.properties.exclude`."""
        return NameFilter.of("config.properties", ".*", self.config_properties_exclude)


def property_name(field_name: str) -> str:
    """MM2's name of a `MirrorConfig` field."""
    return _PROPERTY_NAMES.get(field_name, field_name.replace("_", "."))


def _converted(name: str, text: str, default: object) -> object:
    value = text.strip()
    if isinstance(default, bool):
        if value.lower() not in _BOOLEANS:
            raise ValueError(f"{name} must be true or false, not {text!r}")
        return _BOOLEANS[value.lower()]
    if isinstance(default, int):
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{name} must be an integer, not {text!r}") from None
    return value


@dataclass(frozen=True)
class NameFilter:
    """MM2's include and exclude lists, compiled: a name passes when it wholly matches an
    include and no exclude."""

    include: re.Pattern[str]
    exclude: re.Pattern[str] | None

    @classmethod
    def of(cls, what: str, include: str, exclude: str) -> NameFilter:
        included = cls.compile(what, include)
        assert included is not None, f"{what} includes nothing"
        return cls(included, cls.compile(f"{what}.exclude", exclude))

    @staticmethod
    def compile(name: str, patterns: str) -> re.Pattern[str] | None:
        """One pattern for a comma-separated list (None when empty); ValueError naming the
        property when an item is not a regular expression."""
        items = [item.strip() for item in patterns.split(",") if item.strip()]
        if not items:
            return None
        try:
            return re.compile("|".join(f"(?:{item})" for item in items))
        except re.error as e:
            raise ValueError(
                f"{name}: {patterns!r} is not a list of regular expressions: {e}"
            ) from None

    def matches(self, name: str) -> bool:
        if self.include.fullmatch(name) is None:
            return False
        return self.exclude is None or self.exclude.fullmatch(name) is None


def read_properties(path: Path) -> dict[str, str]:
    """A Java properties file as Kafka's tools read it: `key=value`, `key: value` or
    `key value` lines, `#` and `!` comments, a trailing backslash continuing a line, and
    backslash escapes (`\\\\` is one backslash, so MM2's regular expressions read as written
    for MM2). Later keys win. OSError when unreadable."""
    properties: dict[str, str] = {}
    for line in _logical_lines(path.read_text(encoding="utf-8")):
        match = re.match(r"((?:\\.|[^\s=:\\])+)\s*[=:\s]?\s*(.*)", line)
        if match is not None:
            properties[_unescaped(match.group(1))] = _unescaped(match.group(2))
    return properties


def _logical_lines(text: str) -> list[str]:
    """Lines without comments or blanks, continuations joined (Java's LineReader)."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd number of backslashes: the last one continues the line
            pending += line[:-1]
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescaped(text: str) -> str:
    """Java properties' escapes: \\t \\n \\r \\f and \\uXXXX; any other \\c is c."""

    def replace(match: re.Match[str]) -> str:
        escaped = match.group(1)
        if escaped.startswith("u"):
            return chr(int(escaped[1:], 16))
        return _ESCAPES.get(escaped, escaped)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", replace, text.rstrip())
