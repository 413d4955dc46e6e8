"""ListOffsets: the offset of a timestamp (or of the log's start or end) for each partition.

`list_offsets` asks each leader and waits, retrying what Kafka retries (stale metadata,
unreachable brokers, leader elections) until its deadline; `beginning_offsets`, `end_offsets`
and `offsets_for_times` use it from the consumer's thread. The request and answer helpers are
shared with the fetcher thread, which looks up positions to reset asynchronously.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from typing import Final

from pykraft.client.broker_connection import ConnectionPool
from pykraft.client.clock import monotonic_ms
from pykraft.client.cluster_metadata import ClusterMetadata
from pykraft.client.errors import (
    InvalidMetadataError,
    KafkaConnectionError,
    KafkaError,
    RequestTimedOutError,
    UnknownLeaderEpochError,
    error_for,
)
from pykraft.client.types import OffsetAndTimestamp, TopicPartition
from pykraft.proto import broker_pb2, common_pb2

EARLIEST_TIMESTAMP: Final = -2
LATEST_TIMESTAMP: Final = -1
CONSUMER_REPLICA_ID: Final = -1


def wants_metadata(error: KafkaError) -> bool:
    """Whether `error` means the client's view of leaders is stale (refresh, then retry)."""
    return isinstance(error, InvalidMetadataError | UnknownLeaderEpochError)


def list_offsets_request(
    timestamps: Mapping[TopicPartition, tuple[int, int]], isolation_level: int
) -> broker_pb2.ListOffsetsRequest:
    """The request for {tp: (timestamp, leader epoch)}."""
    topics: dict[str, list[broker_pb2.ListOffsetsPartition]] = defaultdict(list)
    for tp, (timestamp, leader_epoch) in timestamps.items():
        topics[tp.topic].append(
            broker_pb2.ListOffsetsPartition(
                partition=tp.partition, current_leader_epoch=leader_epoch, timestamp=timestamp
            )
        )
    return broker_pb2.ListOffsetsRequest(
        replica_id=CONSUMER_REPLICA_ID,
        isolation_level=isolation_level,
        topics=[broker_pb2.ListOffsetsTopic(topic=t, partitions=ps) for t, ps in topics.items()],
    )


def list_offsets_results(
    response: broker_pb2.ListOffsetsResponse,
) -> dict[TopicPartition, OffsetAndTimestamp | KafkaError]:
    """Each partition's (offset, timestamp), -1/-1 when no record has such a timestamp."""
    results: dict[TopicPartition, OffsetAndTimestamp | KafkaError] = {}
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.topic, p.partition)
            if p.error_code == common_pb2.NONE:
                results[tp] = OffsetAndTimestamp(p.offset, p.timestamp)
            else:
                results[tp] = error_for(p.error_code, p.error_message or f"offsets of {tp}")
    return results


class OffsetLookup:
    """Blocking ListOffsets for the consumer's thread; thread-safe (it keeps no state)."""

    def __init__(
        self,
        metadata: ClusterMetadata,
        pool: ConnectionPool,
        *,
        request_timeout_ms: int,
        retry_backoff_ms: int,
        isolation_level: int,
    ) -> None:
        self._metadata = metadata
        self._pool = pool
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._isolation_level = isolation_level

    def list_offsets(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: int
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """Each partition's answer for its timestamp (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP or
        a time in ms), retrying retriable errors until `timeout_ms` runs out (then
        RequestTimedOutError naming the partitions left); other errors raise at once."""
        self._metadata.add_topics({tp.topic for tp in timestamps})
        deadline_ms = monotonic_ms() + timeout_ms
        found: dict[TopicPartition, OffsetAndTimestamp] = {}
        last_error: KafkaError | None = None
        while True:
            missing = {tp: ts for tp, ts in timestamps.items() if tp not in found}
            for tp, result in self._list_offsets_once(missing).items():
                if isinstance(result, OffsetAndTimestamp):
                    found[tp] = result
                elif not result.retriable:
                    raise result
                else:
                    last_error = result
            if len(found) == len(timestamps):
                return found
            left_ms = deadline_ms - monotonic_ms()
            if left_ms <= 0:
                raise RequestTimedOutError(
                    f"no offsets for {sorted(str(tp) for tp in missing if tp not in found)} "
                    f"within {timeout_ms} ms (last error: {last_error})"
                )
            time.sleep(min(self._retry_backoff_ms, left_ms) / 1000)
            self._metadata.maybe_refresh(monotonic_ms())

    def _list_offsets_once(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | KafkaError]:
        by_address: dict[str, dict[TopicPartition, tuple[int, int]]] = defaultdict(dict)
        results: dict[TopicPartition, OffsetAndTimestamp | KafkaError] = {}
        for tp, timestamp in timestamps.items():
            leader = self._metadata.leader(tp)
            if leader is None:
                self._metadata.request_update()
                results[tp] = KafkaConnectionError(f"no known leader for {tp}")
            else:
                by_address[leader.address][tp] = (timestamp, leader.leader_epoch)
        for address, wanted in by_address.items():
            try:
                response = self._pool.get(address).call(
                    "ListOffsets",
                    list_offsets_request(wanted, self._isolation_level),
                    broker_pb2.ListOffsetsResponse,
                    self._request_timeout_ms,
                )
            except KafkaError as e:
                self._metadata.request_update()
                results.update(dict.fromkeys(wanted, e))
                continue
            answers = list_offsets_results(response)
            for tp in wanted:
                result = answers.get(tp, KafkaConnectionError(f"{address} did not answer {tp}"))
                if isinstance(result, KafkaError) and wants_metadata(result):
                    self._metadata.request_update()
                results[tp] = result
        return results
