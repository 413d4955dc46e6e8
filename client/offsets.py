"""ListOffsets: the offset of a timestamp (or of the log's start or end) for each partition,
asked of each partition's leader.

`OffsetLookup.list_offsets` waits, retrying what Kafka retries (stale metadata, unreachable
brokers, leader elections) with exponential backoff until its deadline. The consumer's
`beginning_offsets`, `end_offsets` and `offsets_for_times` and `AdminClient.list_offsets` use
it; the request and answer helpers also serve the consumer's fetcher thread, which looks up
positions to reset asynchronously.
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
    LeaderNotAvailableError,
    RequestTimedOutError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
    error_for,
)
from pykraft.client.transport import Backoff
from pykraft.client.types import ListOffsetsResult, TopicPartition
from pykraft.proto import broker_pb2, common_pb2

EARLIEST_TIMESTAMP: Final = -2
LATEST_TIMESTAMP: Final = -1
CONSUMER_REPLICA_ID: Final = -1
# Kafka's retry.backoff.max.ms default: retries back off exponentially up to this.


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
) -> dict[TopicPartition, ListOffsetsResult | KafkaError]:
    """Each partition's answer; offset and timestamp -1 when no record has such a timestamp."""
    results: dict[TopicPartition, ListOffsetsResult | KafkaError] = {}
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.topic, p.partition)
            if p.error_code == common_pb2.NONE:
                results[tp] = ListOffsetsResult(p.offset, p.timestamp, p.leader_epoch)
            else:
                results[tp] = error_for(p.error_code, p.error_message or f"offsets of {tp}")
    return results


class OffsetLookup:
    """Blocking ListOffsets for the caller's thread; thread-safe (it keeps no state).

    `exact_errors` is the AdminClient's way (Kafka's Admin): a partition number its topic does
    not have raises UnknownTopicOrPartitionError at once, and a timeout raises the last
    retriable error itself. Without it, the consumer's way (Kafka's consumer): such a
    partition is retried like one without a leader, and a timeout raises RequestTimedOutError.
    """

    def __init__(
        self,
        metadata: ClusterMetadata,
        pool: ConnectionPool,
        *,
        request_timeout_ms: int,
        retry_backoff_ms: int,
        isolation_level: int,
        exact_errors: bool = False,
    ) -> None:
        self._metadata = metadata
        self._pool = pool
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._isolation_level = isolation_level
        self._exact_errors = exact_errors

    def list_offsets(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: int
    ) -> dict[TopicPartition, ListOffsetsResult]:
        """Each partition's answer for its timestamp (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP or
        a time in ms), retrying retriable errors with exponential backoff until `timeout_ms`
        runs out (then see `exact_errors`); other errors raise at once."""
        self._metadata.add_topics({tp.topic for tp in timestamps})
        deadline_ms = monotonic_ms() + timeout_ms
        backoff = Backoff(self._retry_backoff_ms)
        found: dict[TopicPartition, ListOffsetsResult] = {}
        last_error: KafkaError | None = None
        while True:
            self._metadata.maybe_refresh(monotonic_ms())
            missing = {tp: ts for tp, ts in timestamps.items() if tp not in found}
            for tp, result in self._list_offsets_once(missing).items():
                if isinstance(result, ListOffsetsResult):
                    found[tp] = result
                elif not result.retriable:
                    raise result
                else:
                    last_error = result
            if len(found) == len(timestamps):
                return found
            left_ms = deadline_ms - monotonic_ms()
            if left_ms <= 0:
                left = sorted(str(tp) for tp in timestamps if tp not in found)
                why = f"no offsets for {', '.join(left)} within {timeout_ms} ms"
                if self._exact_errors:
                    raise last_error or RequestTimedOutError(why)
                raise RequestTimedOutError(f"{why} (last error: {last_error})")
            time.sleep(min(backoff.next_ms(), left_ms) / 1000)

    def _list_offsets_once(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, ListOffsetsResult | KafkaError]:
        by_address: dict[str, dict[TopicPartition, tuple[int, int]]] = defaultdict(dict)
        results: dict[TopicPartition, ListOffsetsResult | KafkaError] = {}
        for tp, timestamp in timestamps.items():
            if self._exact_errors:
                self._check_partition_exists(tp)
            leader = self._metadata.leader(tp)
            if leader is None:
                self._metadata.request_update()
                results[tp] = self._metadata.topic_error(tp.topic) or LeaderNotAvailableError(
                    f"{tp} has no known leader right now"
                )
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

    def _check_partition_exists(self, tp: TopicPartition) -> None:
        """A partition number the topic does not have is a mistake no retry fixes."""
        count = self._metadata.partition_count(tp.topic)
        if count is not None and not 0 <= tp.partition < count:
            raise UnknownTopicOrPartitionError(
                f"topic {tp.topic!r} has partitions 0 to {count - 1}, not {tp.partition}"
            )
