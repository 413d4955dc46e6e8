"""A large CreateTopics decided as several writes, so no controller turn holds Raft for long.

The controller thread is also the one that runs Raft: one 9,000-partition CreateTopics (placement,
records, their encoding, the pending image's replay) held it for about 100 ms, plus a full
collection when one fell due, and turns of 400-500 ms on a loaded machine deposed the active
controller while a million partitions were created. `parts_of` cuts such a request into requests
of whole topics, at most `CREATE_PARTITIONS_PER_WRITE_MAX` partitions each, which the service
submits one after the other (each decided against the image the previous ones left, Raft polled
between them), and `merged` answers with their results in the request's order.

Deciding the parts in turn gives the answer and records one decision would (the placer starts
from the image's counts, which hold the earlier parts' placements; names created by an earlier
part collide as names created earlier in the request do), except that the parts commit one by
one: a failure after the first part (NOT_CONTROLLER when leadership moves) leaves the earlier
parts created, as a lost answer does, and a client retrying finds them (TOPIC_ALREADY_EXISTS,
or nothing with `--if-not-exists`). Requests whose checks span every topic stay whole: with
`validate_only` (nothing written, so a part could not see the topics of the parts before it), a
name given twice, a default partition count, or more records than one operation may write
(refused whole).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pykraft.proto import admin_pb2, common_pb2
from pykraft.quorum.controller.result import RECORDS_PER_OPERATION_MAX

# About a third of the 9,000-partition requests that held the controller thread for 100 ms.
CREATE_PARTITIONS_PER_WRITE_MAX: Final = 3_000


def parts_of(
    request: admin_pb2.CreateTopicsRequest,
    partitions_max: int = CREATE_PARTITIONS_PER_WRITE_MAX,
) -> list[admin_pb2.CreateTopicsRequest]:
    """The requests to decide in turn: `request` alone, or its topics in order in parts of at
    most `partitions_max` partitions (a larger topic alone)."""
    assert partitions_max > 0
    topics = request.topics
    names = [topic.name for topic in topics]
    records = sum(1 + len(topic.configs) + topic.num_partitions for topic in topics)
    if (
        request.validate_only
        or len(set(names)) < len(names)
        or any(topic.num_partitions <= 0 for topic in topics)
        or records > RECORDS_PER_OPERATION_MAX
        or sum(topic.num_partitions for topic in topics) <= partitions_max
    ):
        return [request]
    parts: list[list[admin_pb2.CreatableTopic]] = [[]]
    partitions = 0
    for topic in topics:
        if parts[-1] and partitions + topic.num_partitions > partitions_max:
            parts.append([])
            partitions = 0
        parts[-1].append(topic)
        partitions += topic.num_partitions
    return [
        admin_pb2.CreateTopicsRequest(topics=part, timeout_ms=request.timeout_ms) for part in parts
    ]


def merged(responses: Sequence[admin_pb2.CreateTopicsResponse]) -> admin_pb2.CreateTopicsResponse:
    """The answer to the whole request from the answers to its parts, decided in turn until one
    failed as a whole: that one's answer (its header says why), else every topic's result."""
    assert responses
    if responses[-1].header.error_code != common_pb2.NONE or len(responses) == 1:
        return responses[-1]
    whole = admin_pb2.CreateTopicsResponse(header=responses[0].header)
    for response in responses:
        whole.topics.extend(response.topics)
    return whole
