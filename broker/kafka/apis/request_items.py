"""One result per request item, in the request's order: the lists a Kafka request carries
(topics of partitions, resources) walked into pykraft's calls, and the response's lists built in
the same order from pykraft's answers.

Data-path APIs (Produce, Fetch, ListOffsets, OffsetForLeaderEpoch) nest partitions in topics on
both sides. A request's partitions are answered one by one (`per_partition`), or the broker's
answers become the response's topics (`per_topic`); a failed partition's offsets are Kafka's -1
(`values_unless_failed`). An API that
refuses some items itself before asking pykraft about the rest merges the refusals back in place
(`in_request_order`). Callers may rely on every helper keeping the order it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pykraft.broker.kafka.entities import NO_VALUE, build
from pykraft.proto import common_pb2


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


def per_partition(
    topic_type: type[Any],
    name_field: str,
    partitions_field: str,
    topics: Iterable[Any],
    answer: Callable[[str, Any], Any],
) -> tuple[Any, ...]:
    """The response topics of an API whose request and response topics name their fields alike
    (`name_field`, `partitions_field`): one `topic_type` entity per request topic of `topics`,
    each request partition answered by `answer(topic name, partition entity)`, all in order."""
    answered = []
    for topic in topics:
        name = getattr(topic, name_field)
        answered.append((name, [answer(name, data) for data in getattr(topic, partitions_field)]))
    return per_topic(topic_type, name_field, partitions_field, answered)


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
