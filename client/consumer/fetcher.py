"""The consumer's requests: Fetch (one per leader broker, sent in parallel) and ListOffsets.

`fetch` returns, per partition, either decoded records at or after the requested offset or the
KafkaError the broker answered; the consumer decides what an error means for its positions.
Metadata errors (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, ...) also ask for a metadata
refresh here, so the next round goes to the new leader.
"""

from __future__ import annotations

import functools
import queue
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from pykraft.client.broker_connection import ConnectionPool
from pykraft.client.clock import monotonic_ms
from pykraft.client.cluster_metadata import ClusterMetadata
from pykraft.client.errors import (
    InvalidMetadataError,
    KafkaConnectionError,
    KafkaError,
    RequestTimedOutError,
    error_for,
)
from pykraft.client.types import ConsumerRecord, TopicPartition
from pykraft.proto import broker_pb2, common_pb2
from pykraft.proto.record_batch import BatchError, decode_batch, iter_batches

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
CONSUMER_REPLICA_ID = -1


@dataclass(frozen=True)
class FetchConfig:
    fetch_min_bytes: int
    fetch_max_wait_ms: int
    max_partition_fetch_bytes: int
    fetch_max_bytes: int
    request_timeout_ms: int
    retry_backoff_ms: int


@dataclass(frozen=True)
class PartitionData:
    """A partition's part of a fetch answer: records from `fetch_offset` on, and the offset
    after the last batch seen (past control batches and records below the fetch offset)."""

    fetch_offset: int
    records: list[ConsumerRecord]
    next_offset: int


class Fetcher:
    def __init__(
        self, metadata: ClusterMetadata, pool: ConnectionPool, config: FetchConfig
    ) -> None:
        self._metadata = metadata
        self._pool = pool
        self._config = config

    def fetch(
        self, positions: Mapping[TopicPartition, int], max_wait_ms: int
    ) -> dict[TopicPartition, PartitionData | KafkaError]:
        """One Fetch per leader broker for the partitions whose leader is known."""
        by_address: dict[str, dict[TopicPartition, broker_pb2.FetchPartition]] = defaultdict(dict)
        for tp, offset in positions.items():
            leader = self._metadata.leader(tp)
            if leader is None:
                self._metadata.request_update()
                continue
            by_address[leader.address][tp] = broker_pb2.FetchPartition(
                partition=tp.partition,
                current_leader_epoch=leader.leader_epoch,
                fetch_offset=offset,
                last_fetched_epoch=-1,
                log_start_offset=-1,
                partition_max_bytes=self._config.max_partition_fetch_bytes,
            )
        answers: queue.SimpleQueue[tuple[str, broker_pb2.FetchResponse | KafkaError]]
        answers = queue.SimpleQueue()
        for address, partitions in by_address.items():
            self._pool.get(address).call_async(
                "Fetch",
                self._fetch_request(partitions, max_wait_ms),
                broker_pb2.FetchResponse,
                max_wait_ms + self._config.request_timeout_ms,
                functools.partial(_put_answer, answers, address),
            )
        results: dict[TopicPartition, PartitionData | KafkaError] = {}
        for _ in by_address:
            address, answer = answers.get()
            if isinstance(answer, KafkaError):
                self._metadata.request_update()
                results.update(dict.fromkeys(by_address[address], answer))
            else:
                results.update(self._parse(answer, positions))
        return results

    def _fetch_request(
        self, partitions: Mapping[TopicPartition, broker_pb2.FetchPartition], max_wait_ms: int
    ) -> broker_pb2.FetchRequest:
        topics: dict[str, list[broker_pb2.FetchPartition]] = defaultdict(list)
        for tp, partition in partitions.items():
            topics[tp.topic].append(partition)
        return broker_pb2.FetchRequest(
            replica_id=CONSUMER_REPLICA_ID,
            replica_epoch=-1,
            max_wait_ms=max_wait_ms,
            min_bytes=self._config.fetch_min_bytes,
            max_bytes=self._config.fetch_max_bytes,
            isolation_level=0,
            topics=[broker_pb2.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
        )

    def _parse(
        self, response: broker_pb2.FetchResponse, positions: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, PartitionData | KafkaError]:
        results: dict[TopicPartition, PartitionData | KafkaError] = {}
        for topic in response.topics:
            for answer in topic.partitions:
                tp = TopicPartition(topic.topic, answer.partition)
                if tp not in positions:
                    continue
                if answer.error_code != common_pb2.NONE:
                    error = error_for(answer.error_code, answer.error_message or f"fetching {tp}")
                    if isinstance(error, InvalidMetadataError):
                        self._metadata.request_update()
                    results[tp] = error
                    continue
                try:
                    results[tp] = decode_records(tp, answer.records, positions[tp])
                except BatchError as e:
                    results[tp] = error_for(e.error_code, f"{tp}: {e}")
        return results

    def list_offsets(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: int
    ) -> dict[TopicPartition, int]:
        """Each partition's offset for its timestamp (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP or
        a time), retrying metadata and connection errors until `timeout_ms` runs out."""
        self._metadata.add_topics({tp.topic for tp in timestamps})
        deadline_ms = monotonic_ms() + timeout_ms
        offsets: dict[TopicPartition, int] = {}
        last_error: KafkaError | None = None
        while True:
            missing = {tp: ts for tp, ts in timestamps.items() if tp not in offsets}
            if not missing:
                return offsets
            for tp, result in self._list_offsets_once(missing).items():
                if isinstance(result, int):
                    offsets[tp] = result
                elif not result.retriable:
                    raise result
                else:
                    last_error = result
            if len(offsets) == len(timestamps):
                return offsets
            if monotonic_ms() >= deadline_ms:
                raise RequestTimedOutError(
                    f"no offsets for {sorted(str(tp) for tp in missing)} within {timeout_ms} ms"
                    f" (last error: {last_error})"
                )
            time.sleep(self._config.retry_backoff_ms / 1000)
            self._metadata.maybe_refresh(monotonic_ms())

    def _list_offsets_once(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | KafkaError]:
        by_address: dict[str, dict[TopicPartition, int]] = defaultdict(dict)
        results: dict[TopicPartition, int | KafkaError] = {}
        for tp, timestamp in timestamps.items():
            leader = self._metadata.leader(tp)
            if leader is None:
                self._metadata.request_update()
                results[tp] = KafkaConnectionError(f"no known leader for {tp}")
            else:
                by_address[leader.address][tp] = timestamp
        for address, wanted in by_address.items():
            try:
                response = self._pool.get(address).call(
                    "ListOffsets",
                    _list_offsets_request(wanted),
                    broker_pb2.ListOffsetsResponse,
                    self._config.request_timeout_ms,
                )
            except KafkaError as e:
                self._metadata.request_update()
                results.update(dict.fromkeys(wanted, e))
                continue
            for topic in response.topics:
                for p in topic.partitions:
                    tp = TopicPartition(topic.topic, p.partition)
                    if p.error_code == common_pb2.NONE:
                        results[tp] = p.offset
                        continue
                    results[tp] = error_for(p.error_code, p.error_message or f"offsets of {tp}")
                    if isinstance(results[tp], InvalidMetadataError):
                        self._metadata.request_update()
        return results


def _put_answer(
    answers: queue.SimpleQueue[tuple[str, broker_pb2.FetchResponse | KafkaError]],
    address: str,
    answer: broker_pb2.FetchResponse | KafkaError,
) -> None:
    answers.put((address, answer))


def _list_offsets_request(
    timestamps: Mapping[TopicPartition, int],
) -> broker_pb2.ListOffsetsRequest:
    topics: dict[str, list[broker_pb2.ListOffsetsPartition]] = defaultdict(list)
    for tp, timestamp in timestamps.items():
        topics[tp.topic].append(
            broker_pb2.ListOffsetsPartition(
                partition=tp.partition, current_leader_epoch=-1, timestamp=timestamp
            )
        )
    return broker_pb2.ListOffsetsRequest(
        replica_id=CONSUMER_REPLICA_ID,
        isolation_level=0,
        topics=[broker_pb2.ListOffsetsTopic(topic=t, partitions=ps) for t, ps in topics.items()],
    )


def decode_records(tp: TopicPartition, data: bytes, fetch_offset: int) -> PartitionData:
    """The records at or after `fetch_offset` in whole batches of `data` (a torn last batch is
    ignored); control batches are skipped but still move `next_offset` past them."""
    records: list[ConsumerRecord] = []
    next_offset = fetch_offset
    for position, header in iter_batches(data):
        if header.next_offset <= fetch_offset:
            continue
        next_offset = max(next_offset, header.next_offset)
        if header.is_control:
            continue
        timestamp_type = header.timestamp_type
        for r in decode_batch(data, position):
            if r.offset >= fetch_offset:
                records.append(
                    ConsumerRecord(
                        tp.topic,
                        tp.partition,
                        r.offset,
                        r.timestamp,
                        timestamp_type,
                        r.key,
                        r.value,
                        tuple((h.key, h.value) for h in r.headers),
                    )
                )
    return PartitionData(fetch_offset, records, next_offset)
