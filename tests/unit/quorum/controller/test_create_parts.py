"""A large CreateTopics decided in parts (`quorum/controller/create_parts.py`): deciding the parts
in turn gives the answer and the records of one decision; requests whose checks span every topic
stay whole; and the service submits a 9,000-partition request as parts of at most 3,000
partitions (it was one write that held the controller thread for about 100 ms)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import grpc
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.metadata_log.image import MetadataImage
from pykraft.metadata_log.records import Record
from pykraft.proto import admin_pb2, common_pb2
from pykraft.quorum.config import ControllerConfig
from pykraft.quorum.controller import RECORDS_PER_OPERATION_MAX, create_topics
from pykraft.quorum.controller.create_parts import (
    CREATE_PARTITIONS_PER_WRITE_MAX,
    merged,
    parts_of,
)
from pykraft.quorum.controller.heartbeats import HeartbeatTracker
from pykraft.quorum.events import DecideContext
from pykraft.quorum.service import AdminService
from tests.unit.quorum.controller.conftest import brokers, image_with, topic_ids

THREE_BROKERS = image_with(*brokers(1, 2, 3))

creatable_topics = st.lists(
    st.builds(
        admin_pb2.CreatableTopic,
        # Few names, '.' and '_' among them: collisions between parts happen.
        name=st.text(alphabet="ab._", min_size=1, max_size=3),
        num_partitions=st.integers(1, 6),
        replication_factor=st.integers(1, 4),
        configs=st.dictionaries(st.sampled_from(["retention.ms"]), st.sampled_from(["1", "x"])),
    ),
    max_size=8,
    unique_by=lambda topic: topic.name,
)


def _decided_in_turn(
    requests: list[admin_pb2.CreateTopicsRequest],
) -> tuple[list[admin_pb2.CreateTopicsResponse], list[Record]]:
    """Each request decided against the image the ones before left, one id source for all."""
    image, new_id = THREE_BROKERS, topic_ids()
    responses: list[admin_pb2.CreateTopicsResponse] = []
    records: list[Record] = []
    for request in requests:
        result = create_topics(image, request, new_topic_id=new_id)
        responses.append(result.response)
        records.extend(result.records)
        image = image_with(*result.records, base=image)
    return responses, records


@settings(max_examples=200)
@given(creatable_topics, st.integers(1, 8))
def test_parts_decided_in_turn_answer_and_write_as_one_decision(
    topics: list[admin_pb2.CreatableTopic], partitions_max: int
) -> None:
    request = admin_pb2.CreateTopicsRequest(topics=topics, timeout_ms=500)
    parts = parts_of(request, partitions_max)
    assert [t.name for part in parts for t in part.topics] == [t.name for t in topics]
    if len(parts) > 1:
        for part in parts:
            partitions = sum(t.num_partitions for t in part.topics)
            assert partitions <= partitions_max or len(part.topics) == 1
    (whole,), records = _decided_in_turn([request])
    responses, records_in_parts = _decided_in_turn(parts)
    assert merged(responses) == whole
    assert records_in_parts == records


def test_requests_checked_across_every_topic_stay_whole() -> None:
    def big(name: str, partitions: int = 4000) -> admin_pb2.CreatableTopic:
        return admin_pb2.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)

    whole = [
        admin_pb2.CreateTopicsRequest(topics=[big("a"), big("b")], validate_only=True),
        admin_pb2.CreateTopicsRequest(topics=[big("a"), big("a")]),
        admin_pb2.CreateTopicsRequest(topics=[big("a"), big("b", partitions=-1)]),
        admin_pb2.CreateTopicsRequest(topics=[big("a"), big("b", RECORDS_PER_OPERATION_MAX)]),
        admin_pb2.CreateTopicsRequest(topics=[big("a", 1000), big("b", 2000)]),
    ]
    for request in whole:
        assert parts_of(request) == [request]
    split = parts_of(admin_pb2.CreateTopicsRequest(topics=[big("a"), big("b")], timeout_ms=7))
    assert [[t.name for t in part.topics] for part in split] == [["a"], ["b"]]
    assert all(part.timeout_ms == 7 and not part.validate_only for part in split)


def test_a_part_that_failed_as_a_whole_answers_for_the_request() -> None:
    created = admin_pb2.CreateTopicsResponse(topics=[admin_pb2.CreateTopicsResult(name="a")])
    failed = admin_pb2.CreateTopicsResponse()
    failed.header.error_code = common_pb2.NOT_CONTROLLER
    assert merged([created, failed]) == failed


class _Controller:
    """The AdminService's view of the controller: each write decided on the image at once."""

    def __init__(self) -> None:
        self.config = ControllerConfig(
            node_id=1, voters={1: "-"}, controller_listeners={1: "-"}, data_dir=Path("-")
        )
        self.image: MetadataImage = THREE_BROKERS
        self.written: list[int] = []  # partitions per write
        self._new_id = topic_ids()

    def write(self, decide: Callable[[DecideContext], Any], cls: type, timeout_ms: int) -> Any:
        assert timeout_ms > 0
        heartbeats = cast(HeartbeatTracker, None)  # CreateTopics reads no session
        context = DecideContext(self.image, self.image.offset + 1, 0, "c", heartbeats, self._new_id)
        result = decide(context)
        self.written.append(sum(1 for r in result.records if type(r).__name__ == "PartitionRecord"))
        self.image = image_with(*result.records, base=self.image)
        return result.response


def test_the_service_decides_a_9000_partition_request_in_parts_of_3000() -> None:
    controller = _Controller()
    service = AdminService(controller)  # type: ignore[arg-type]
    request = admin_pb2.CreateTopicsRequest(
        topics=[
            admin_pb2.CreatableTopic(name=f"t{i}", num_partitions=100, replication_factor=3)
            for i in range(90)
        ]
    )
    response = service.CreateTopics(request, cast(grpc.ServicerContext, None))
    assert controller.written == [CREATE_PARTITIONS_PER_WRITE_MAX] * 3
    assert [t.name for t in response.topics] == [f"t{i}" for i in range(90)]
    assert {t.error_code for t in response.topics} == {common_pb2.NONE}
    assert sum(len(t.partitions) for t in controller.image.topics.by_id.values()) == 9000
