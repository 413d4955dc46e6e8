"""One result per request item, in the request's order: the lists a Kafka request carries
(topics of partitions, resources) walked into pykraft's calls, and the response's lists built in
the same order from pykraft's answers.

Data-path APIs (Produce, Fetch, ListOffsets, OffsetForLeaderEpoch) nest partitions in topics
on both sides (`to_proto_topics`, `per_topic`, `values_unless_failed`); any API that refuses
some items itself before asking pykraft about the rest merges the refusals back in place
(`in_request_order`). Callers may rely on every helper keeping the order it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pykraft.broker.kafka.entities import NO_VALUE, build
from pykraft.proto import common_pb2


def to_proto_topics(
    proto_topics: Any,
    topics: Iterable[Any],
    name_field: str,
    partitions_field: str,
    partition_fields: Callable[[Any], Mapping[str, Any]],
) -> None:
    """Adds to `proto_topics` (a repeated protobuf field of messages with `topic` and
    `partitions`) one message per Kafka request topic of `topics`, in order: named by the
    entity's `name_field`, with one partition per entity of its `partitions_field`, whose
    fields `partition_fields(entity)` gives."""
    for topic in topics:
        item = proto_topics.add(topic=getattr(topic, name_field))
        for data in getattr(topic, partitions_field):
            item.partitions.add(**partition_fields(data))


def per_topic(
    topic_type: type[Any],
    name_field: str,
    partitions_field: str,
    topics: Iterable[tuple[str, Iterable[Any]]],
) -> tuple[Any, ...]:
    """One `topic_type` entity per (name, partition entities) of `topics`, in their order: the
    name in `name_field`, the partition entities as a tuple in `partitions_field`."""
    return tuple(
        build(topic_type, **{name_field: name, partitions_field: tuple(partitions)})
        for name, partitions in topics
    )


def values_unless_failed(result: Any, *names: str) -> dict[str, int]:
    """The fields `names` of a partition's protobuf result, or Kafka's -1 for each of them when
    the result carries an error (Kafka sends no offsets, epochs or timestamps with one)."""
    failed = result.error_code != common_pb2.NONE
    return {name: NO_VALUE if failed else getattr(result, name) for name in names}


def in_request_order(count: int, refused: Mapping[int, Any], answered: Sequence[Any]) -> list[Any]:
    """The results of `count` request items: item i's refusal when refused here, else the next
    answered result (the items asked about keep the request's order)."""
    answers = iter(answered)
    return [refused[i] if i in refused else next(answers) for i in range(count)]
