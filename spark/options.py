"""The `pykraft` data source's options, named as Spark's Kafka source names them, checked once.

`SourceOptions.parse(options)` takes Spark's case-insensitive option map and raises
`OptionError` (a ValueError whose message names the option) for anything unknown, missing,
contradictory or malformed, so a typo fails when the query is defined rather than as an odd
read later. What callers may rely on: every field of a parsed value is valid.

Offsets specs (`startingOffsets`, `endingOffsets`) are "earliest", "latest" or Spark's JSON
`{"topic": {"0": 23, "1": -2}}` where -2 means earliest and -1 latest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

EARLIEST: Final = -2
LATEST: Final = -1
# Option names as Spark's Kafka source spells them, lower-cased (Spark hands them over so).
_BOOTSTRAP_KEYS: Final = ("bootstrap.servers", "kafka.bootstrap.servers")
_KNOWN: Final = frozenset(
    {
        *_BOOTSTRAP_KEYS,
        "subscribe",
        "subscribepattern",
        "assign",
        "startingoffsets",
        "startingtimestamp",
        "endingoffsets",
        "maxoffsetspertrigger",
        "minpartitions",
        "failondataloss",
        "includeheaders",
        "groupidprefix",
        "group.id",
        "kafka.group.id",
        "topic",
        "path",  # Spark passes load(path) through here; refused below when set
    }
)

OffsetSpec = str | dict[str, dict[int, int]]


class OptionError(ValueError):
    """A bad option; the message names it."""


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str = ""
    assign: tuple[tuple[str, int], ...] = ()
    starting_offsets: OffsetSpec = "latest"
    starting_timestamp: int | None = None
    ending_offsets: OffsetSpec = "latest"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    group_id: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str], *, batch: bool) -> SourceOptions:
        """`batch`: a `spark.read` query, whose startingOffsets default to earliest."""
        given = {key.lower(): value for key, value in options.items()}
        check_known(given, _KNOWN)
        if given.get("path"):
            raise OptionError("pykraft takes no path: name topics with subscribe or assign")
        subscribe, pattern, assign = _subscription(given)
        starting = parse_offsets(
            given.get("startingoffsets", "earliest" if batch else "latest"),
            option="startingOffsets",
        )
        if not batch and "endingoffsets" in given:
            raise OptionError("endingOffsets is for batch queries (spark.read) only")
        ending = parse_offsets(given.get("endingoffsets", "latest"), option="endingOffsets")
        if _names_earliest(ending):
            raise OptionError("endingOffsets cannot be 'earliest' (nor -2 in its JSON)")
        return cls(
            bootstrap_servers=bootstrap_servers(given),
            subscribe=subscribe,
            subscribe_pattern=pattern,
            assign=assign,
            starting_offsets=starting,
            starting_timestamp=_optional_int(given, "startingtimestamp", 0),
            ending_offsets=ending,
            max_offsets_per_trigger=_optional_int(given, "maxoffsetspertrigger", 1),
            min_partitions=_optional_int(given, "minpartitions", 1),
            fail_on_data_loss=_bool(given, "failondataloss", True),
            include_headers=_bool(given, "includeheaders", False),
            group_id=_group_id(given, subscribe, pattern, assign),
        )

    def wants(self, topic: str) -> bool:
        """Whether a topic belongs to the subscription (assign is resolved separately)."""
        if self.subscribe_pattern:
            return (
                not topic.startswith("__")
                and re.fullmatch(self.subscribe_pattern, topic) is not None
            )
        return topic in self.subscribe


def check_known(given: Mapping[str, str], known: frozenset[str]) -> None:
    unknown = sorted(set(given) - known)
    if unknown:
        raise OptionError(
            f"unknown option(s) {', '.join(unknown)} for format pykraft; known: "
            f"{', '.join(sorted(known - {'path'}))}"
        )


def bootstrap_servers(given: Mapping[str, str]) -> str:
    for key in _BOOTSTRAP_KEYS:
        if given.get(key):
            return given[key]
    raise OptionError("option bootstrap.servers is required (host:port[,host:port...])")


def parse_offsets(text: str, *, option: str) -> OffsetSpec:
    """ "earliest", "latest" or {topic: {partition: offset}} (-2 earliest, -1 latest); errors
    name `option`, the option `text` was given as."""
    stripped = text.strip()
    if stripped.lower() in ("earliest", "latest"):
        return stripped.lower()
    try:
        raw = json.loads(stripped)
        spec = {
            str(topic): {int(p): int(o) for p, o in partitions.items()}
            for topic, partitions in raw.items()
        }
    except (ValueError, AttributeError, TypeError, OverflowError):
        raise OptionError(
            f'{option} must be earliest, latest or JSON like {{"t":{{"0":23}}}}, not {text!r}'
        ) from None
    for topic, partitions in spec.items():
        for partition, offset in partitions.items():
            if partition < 0 or offset < EARLIEST:
                raise OptionError(f"{option}: bad offset {offset} for {topic}-{partition}")
    return spec


def _names_earliest(spec: OffsetSpec) -> bool:
    """Whether a spec ends anywhere at earliest, which Spark refuses for endingOffsets."""
    if isinstance(spec, str):
        return spec == "earliest"
    return any(offset == EARLIEST for offsets in spec.values() for offset in offsets.values())


def _subscription(
    given: Mapping[str, str],
) -> tuple[tuple[str, ...], str, tuple[tuple[str, int], ...]]:
    chosen = [key for key in ("subscribe", "subscribepattern", "assign") if given.get(key)]
    if len(chosen) != 1:
        raise OptionError(
            "give exactly one of subscribe, subscribePattern and assign"
            + (f" (got {', '.join(chosen)})" if chosen else "")
        )
    if chosen[0] == "subscribe":
        topics = tuple(t.strip() for t in given["subscribe"].split(",") if t.strip())
        if not topics:
            raise OptionError("subscribe names no topic")
        return topics, "", ()
    if chosen[0] == "subscribepattern":
        pattern = given["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as error:
            raise OptionError(f"subscribePattern {pattern!r} is not a regex: {error}") from None
        return (), pattern, ()
    return (), "", _assign(given["assign"])


def _assign(text: str) -> tuple[tuple[str, int], ...]:
    try:
        raw = json.loads(text)
        pairs = tuple((str(topic), int(p)) for topic, partitions in raw.items() for p in partitions)
    except (ValueError, AttributeError, TypeError, OverflowError):
        raise OptionError(f'assign must be JSON like {{"t":[0,1]}}, not {text!r}') from None
    if not pairs or any(p < 0 for _, p in pairs):
        raise OptionError(f"assign names no valid partition: {text!r}")
    return pairs


def _group_id(
    given: Mapping[str, str],
    subscribe: tuple[str, ...],
    pattern: str,
    assign: tuple[tuple[str, int], ...],
) -> str | None:
    """The group the source commits processed offsets to, for `pykraft groups describe`:
    group.id as given, or groupIdPrefix plus what the query reads (stable across restarts)."""
    for key in ("group.id", "kafka.group.id"):
        if given.get(key):
            return given[key]
    prefix = given.get("groupidprefix")
    if not prefix:
        return None
    what = ",".join(subscribe) or pattern or ",".join(f"{t}:{p}" for t, p in assign)
    return f"{prefix}-{what}"


def _optional_int(given: Mapping[str, str], key: str, low: int) -> int | None:
    if key not in given:
        return None
    try:
        value = int(given[key])
    except ValueError:
        raise OptionError(f"{key} must be an integer, not {given[key]!r}") from None
    if value < low:
        raise OptionError(f"{key} must be at least {low}, not {value}")
    return value


def _bool(given: Mapping[str, str], key: str, default: bool) -> bool:
    if key not in given:
        return default
    value = given[key].strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"{key} must be true or false, not {given[key]!r}")
    return value == "true"
