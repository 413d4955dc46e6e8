"""A gRPC Fetch answer serializes itself with its records spliced in (copied once, not into the
message and out again: issue 17 §4), and a reader parses those bytes as exactly the message
that holds the records (`fetch_wire`)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.broker.controller_channel import monotonic_ms
from pykraft.broker.fetch import handle_fetch, handle_fetch_spliced
from pykraft.broker.fetch_wire import SPLICE_BYTES_MIN, SplicedFetch
from pykraft.proto import broker_pb2, common_pb2

from .replica_harness import Harness

# Sizes whose length prefixes take one, two and three varint bytes, and one answers above
# SPLICE_BYTES_MIN (spliced) and below it (set on the message) are made of.
RECORD_SIZES = st.sampled_from([0, 1, 127, 128, 16_383, 16_384, 70_000, SPLICE_BYTES_MIN])


@st.composite
def spliced_fetches(draw: st.DrawFn) -> tuple[SplicedFetch, broker_pb2.FetchResponse]:
    """A response, some of whose partitions' records are held beside it, and the same response
    with every record in the message."""
    response = broker_pb2.FetchResponse()
    if draw(st.booleans()):
        response.header.error_code = common_pb2.NOT_CONTROLLER
        response.header.error_message = "header"
    response.session_id = draw(st.integers(0, (1 << 31) - 1))  # a follower's fetch session
    held: dict[tuple[int, int], bytes] = {}
    for topic_slot in range(draw(st.integers(0, 3))):
        topic = response.topics.add(topic=draw(st.text(max_size=8)))
        for partition_slot in range(draw(st.integers(0, 3))):
            partition = topic.partitions.add(
                partition=partition_slot,
                high_watermark=draw(st.integers(-1, 1 << 40)),
                error_message=draw(st.text(max_size=5)),
            )
            if draw(st.booleans()):
                partition.preferred_read_replica = draw(st.integers(0, 5))
            if draw(st.booleans()):
                held[topic_slot, partition_slot] = b"r" * draw(RECORD_SIZES)
    inline = broker_pb2.FetchResponse()
    inline.CopyFrom(response)
    for (topic_slot, partition_slot), records in held.items():
        inline.topics[topic_slot].partitions[partition_slot].records = records
    return SplicedFetch(response, held), inline


@settings(max_examples=200, deadline=None)
@given(spliced_fetches())
def test_the_spliced_bytes_parse_as_the_message_with_its_records(
    fetches: tuple[SplicedFetch, broker_pb2.FetchResponse],
) -> None:
    spliced, inline = fetches
    assert broker_pb2.FetchResponse.FromString(spliced.serialize()) == inline


@pytest.mark.parametrize("size_bytes", [SPLICE_BYTES_MIN - 1, SPLICE_BYTES_MIN])
def test_only_answers_of_splice_bytes_min_or_more_are_spliced(size_bytes: int) -> None:
    response = broker_pb2.FetchResponse()
    response.topics.add(topic="t").partitions.add(partition=0)
    spliced = SplicedFetch(response, {(0, 0): b"r" * size_bytes})
    parsed = broker_pb2.FetchResponse.FromString(spliced.serialize())
    assert parsed.topics[0].partitions[0].records == b"r" * size_bytes
    in_message = response.topics[0].partitions[0].records
    assert in_message == (b"" if size_bytes >= SPLICE_BYTES_MIN else b"r" * size_bytes)


def test_the_service_answer_is_what_the_fetch_reads(harness: Harness) -> None:
    """Records, an empty partition and an error (orders-2 is led by broker 2), through the
    handler the gRPC service calls and the one that puts the records in the message."""
    harness.produce(0, [b"a", b"b"])
    harness.produce(1, [b"c" * 300])
    request = broker_pb2.FetchRequest(replica_id=-1, max_bytes=1 << 20)
    topic = request.topics.add(topic="orders")
    for partition in (0, 1, 2):
        topic.partitions.add(
            partition=partition, last_fetched_epoch=-1, partition_max_bytes=1 << 20
        )
    spliced = handle_fetch_spliced(harness.manager, request, monotonic_ms)
    assert set(spliced.records) == {(0, 0)}  # orders-1 waits for broker 2: nothing committed
    assert not any(p.records for p in spliced.response.topics[0].partitions)
    inline = handle_fetch(harness.manager, request, monotonic_ms)
    assert inline.topics[0].partitions[0].records
    assert inline.topics[0].partitions[2].error_code == common_pb2.NOT_LEADER_OR_FOLLOWER
    assert broker_pb2.FetchResponse.FromString(spliced.serialize()) == inline
