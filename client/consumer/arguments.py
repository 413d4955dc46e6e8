"""The checks of what a caller passes the `Consumer`: each raises TypeError or ValueError
naming the argument, before the consumer changes anything."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from pykraft.client.consumer.commits import Offsets
from pykraft.client.consumer.listener import ConsumerRebalanceListener
from pykraft.client.errors import InvalidRegularExpressionError
from pykraft.client.types import OffsetAndMetadata, TopicPartition


def subscription_topics(
    topics: Iterable[str], pattern: str | None, listener: ConsumerRebalanceListener | None
) -> tuple[str, ...]:
    """The topic names of a `subscribe`, each once, after checking that exactly one of
    `topics` and `pattern` is given, that the pattern compiles (InvalidRegularExpressionError)
    and that the listener is a ConsumerRebalanceListener."""
    if isinstance(topics, str):
        raise TypeError(f"subscribe takes a list of topic names: [{topics!r}]")
    names = tuple(dict.fromkeys(topics))
    for name in names:
        if not isinstance(name, str) or not name:
            raise ValueError(f"topic names must be non-empty strings, not {name!r}.")
    if bool(names) == (pattern is not None):
        raise ValueError("subscribe takes topic names or a pattern: exactly one of them.")
    if pattern is not None:
        _check_pattern(pattern)
    if listener is not None and not isinstance(listener, ConsumerRebalanceListener):
        raise TypeError(
            f"listener must be a ConsumerRebalanceListener, not {type(listener).__name__}"
        )
    return names


def timeout_or(default_ms: int, timeout_ms: int | None) -> int:
    """`timeout_ms`, or `default_ms` when it is None; ValueError unless an int >= 0."""
    if timeout_ms is None:
        return default_ms
    if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or timeout_ms < 0:
        raise ValueError(f"timeout_ms must be an integer of at least 0, not {timeout_ms!r}.")
    return timeout_ms


def check_timestamps(timestamps: Mapping[TopicPartition, int]) -> None:
    """The keys of `offsets_for_times` are partitions, its values ms since the epoch."""
    for tp, timestamp in timestamps.items():
        if not isinstance(tp, TopicPartition):
            raise TypeError(f"offsets_for_times takes TopicPartition keys, not {tp!r}")
        if not isinstance(timestamp, int) or isinstance(timestamp, bool) or timestamp < 0:
            raise ValueError(
                f"the timestamp for {tp} must be an integer of at least 0 (ms since the "
                f"epoch), not {timestamp!r}."
            )


def _check_pattern(pattern: str) -> None:
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"pattern must be a non-empty string, not {pattern!r}.")
    try:
        re.compile(pattern)
    except re.error as error:
        raise InvalidRegularExpressionError(
            f"the subscription pattern {pattern!r} does not compile: {error}"
        ) from None


def checked_offsets(offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> Offsets:
    """The offsets to commit, each checked (TypeError or ValueError naming the partition)."""
    checked: Offsets = {}
    for tp, committed in offsets.items():
        if not isinstance(tp, TopicPartition):
            raise TypeError(f"commit takes TopicPartition keys, not {tp!r}")
        if not isinstance(committed, OffsetAndMetadata):
            raise TypeError(
                f"commit takes OffsetAndMetadata values: OffsetAndMetadata({committed!r}) for {tp}"
            )
        offset, metadata, epoch = committed
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError(f"the offset for {tp} must be an integer of at least 0: {offset!r}")
        if not isinstance(metadata, str):
            raise ValueError(f"the metadata for {tp} must be a string, not {metadata!r}")
        if epoch is not None and (not isinstance(epoch, int) or epoch < 0):
            raise ValueError(f"the leader epoch for {tp} must be None or at least 0: {epoch!r}")
        checked[tp] = committed
    return checked
