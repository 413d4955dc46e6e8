"""kafka-python's codec against our handlers: its requests encoded by kafka-python (built from
Kafka's JSON message schemas at run time, not by kio) and answered through kio on our side
(`kio_wire.answer_bytes`), its answers decoded by kafka-python, and its record parser. What
these tests read is what an unchanged client reads."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer.fetch import FetchRequest
from kafka.record import MemoryRecords

from pykraft.broker.kafka.api import Api, RequestContext

from .kio_wire import answer_bytes


def exchange(api: Api, ctx: RequestContext, request: Any, response_type: Any) -> Any:
    """kafka-python's `response_type` decoded from the handler's answer to `request`, both at
    the context's version."""
    version = ctx.api_version
    answer = answer_bytes(api, ctx, bytes(request.encode(version=version)))
    assert answer is not None
    return response_type.decode(answer, version=version)


def fetch_request(version: int, topic: str = "orders") -> Any:
    """kafka-python's Fetch of `topic`-0 from offset 0 at `version`: no wait, up to 1 MiB."""
    item = FetchRequest.FetchTopic.FetchPartition(
        partition=0, fetch_offset=0, partition_max_bytes=1 << 20
    )
    return FetchRequest(
        version=version,
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[item])],
    )


def record_values(records: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in `records`, read by kafka-python's record parser."""
    parsed = MemoryRecords(records)
    values = []
    while parsed.has_next():
        values += [(record.offset, record.value) for record in parsed.next_batch()]
    return values
