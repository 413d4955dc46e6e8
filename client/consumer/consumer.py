"""`Consumer`: reads records from partitions it is assigned, from positions it tracks.

    from pykraft.client import Consumer, TopicPartition

    with Consumer(bootstrap_servers="127.0.0.1:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("orders", 0)])
        for record in consumer.poll(timeout_ms=1000):
            print(record.offset, record.value)

The position of a partition is the offset of the next record `poll` hands out; every record is
handed out once, in offset order per partition. Without a position (just assigned, or after
OFFSET_OUT_OF_RANGE) the consumer resets by `auto_offset_reset`: "earliest", "latest", or
"none", which raises NoOffsetForPartitionError instead. No group management and no committed
offsets yet (issue 5): positions live in this object only.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Self

from pykraft.client.broker_connection import ConnectionPool
from pykraft.client.clock import monotonic_ms
from pykraft.client.cluster_metadata import ClusterMetadata
from pykraft.client.consumer.fetcher import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchConfig,
    Fetcher,
    PartitionData,
)
from pykraft.client.errors import (
    KafkaError,
    OffsetOutOfRangeError,
)
from pykraft.client.routing import parse_bootstrap
from pykraft.client.types import ConsumerRecord, TopicPartition

_RESET_TIMESTAMPS = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP}


class NoOffsetForPartitionError(OffsetOutOfRangeError):
    """A partition has no valid position and auto_offset_reset is "none" (Kafka's
    NoOffsetForPartitionException); seek to an offset first."""


class Consumer:
    """Not thread-safe, like Kafka's consumer: use it from one thread."""

    def __init__(
        self,
        *,
        bootstrap_servers: str | Sequence[str],
        auto_offset_reset: str = "latest",
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        max_partition_fetch_bytes: int = 1048576,
        fetch_max_bytes: int = 52428800,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        client_id: str = "",
    ) -> None:
        bootstrap = parse_bootstrap(bootstrap_servers)
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(
                f"auto_offset_reset must be 'earliest', 'latest' or 'none', "
                f"not {auto_offset_reset!r}."
            )
        limits = [
            ("fetch_min_bytes", fetch_min_bytes, 0),
            ("fetch_max_wait_ms", fetch_max_wait_ms, 0),
            ("max_partition_fetch_bytes", max_partition_fetch_bytes, 1),
            ("fetch_max_bytes", fetch_max_bytes, 1),
            ("request_timeout_ms", request_timeout_ms, 1),
            ("retry_backoff_ms", retry_backoff_ms, 0),
        ]
        for name, value, low in limits:
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer of at least {low}, not {value!r}.")
        self.client_id = client_id
        self._auto_offset_reset = auto_offset_reset
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._fetch_max_wait_ms = fetch_max_wait_ms
        self._pool = ConnectionPool(retry_backoff_ms=retry_backoff_ms)
        self._metadata = ClusterMetadata(
            bootstrap,
            self._pool,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
        )
        config = FetchConfig(
            fetch_min_bytes=fetch_min_bytes,
            fetch_max_wait_ms=fetch_max_wait_ms,
            max_partition_fetch_bytes=max_partition_fetch_bytes,
            fetch_max_bytes=fetch_max_bytes,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
        )
        self._fetcher = Fetcher(self._metadata, self._pool, config)
        # Assigned partitions -> position (None: reset by policy before the next fetch).
        self._positions: dict[TopicPartition, int | None] = {}
        # Explicit resets asked for by seek_to_beginning / seek_to_end.
        self._pending_resets: dict[TopicPartition, int] = {}
        self._buffered: dict[TopicPartition, deque[ConsumerRecord]] = {}
        self._closed = False

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Replaces the assignment; partitions kept keep their positions."""
        self._check_open()
        wanted = list(dict.fromkeys(partitions))
        for tp in wanted:
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"assign takes TopicPartition values, not {type(tp).__name__}")
        self._positions = {tp: self._positions.get(tp) for tp in wanted}
        self._pending_resets = {
            tp: ts for tp, ts in self._pending_resets.items() if tp in self._positions
        }
        self._buffered = {tp: b for tp, b in self._buffered.items() if tp in self._positions}
        self._metadata.add_topics({tp.topic for tp in wanted})

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition numbers, from the cluster's metadata."""
        self._check_open()
        return list(range(self._metadata.wait_for_topic(topic, self._request_timeout_ms)))

    def assignment(self) -> set[TopicPartition]:
        return set(self._positions)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """The next poll returns records of `partition` from `offset` on."""
        self._check_assigned(partition)
        if offset < 0:
            raise ValueError(f"offset must be at least 0, not {offset}")
        self._set_position(partition, offset)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Moves to the log start offset, looked up lazily (at the next poll or position)."""
        self._seek_to(partitions, EARLIEST_TIMESTAMP)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Moves to the high-water mark, looked up lazily (at the next poll or position)."""
        self._seek_to(partitions, LATEST_TIMESTAMP)

    def _seek_to(self, partitions: Iterable[TopicPartition] | None, timestamp: int) -> None:
        chosen = list(self._positions) if partitions is None else list(partitions)
        for tp in chosen:
            self._check_assigned(tp)
            self._set_position(tp, None)
            self._pending_resets[tp] = timestamp

    def position(self, partition: TopicPartition) -> int:
        """The offset of the next record poll would hand out (resetting first if needed)."""
        self._check_assigned(partition)
        self._update_positions([partition])
        position = self._positions[partition]
        assert position is not None
        return position

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from the assigned partitions, at most `max_records` (all fetched if None).

        Returns as soon as some records are there, or an empty list after `timeout_ms`.
        Raises NoOffsetForPartitionError (auto_offset_reset "none") and non-retriable errors.
        """
        self._check_open()
        if max_records is not None and max_records < 1:
            raise ValueError(f"max_records must be at least 1, not {max_records}")
        deadline_ms = monotonic_ms() + timeout_ms
        while True:
            records = self._take_buffered(max_records)
            remaining_ms = deadline_ms - monotonic_ms()
            if records or remaining_ms <= 0 or not self._positions:
                return records
            self._update_positions(list(self._positions))
            self._metadata.maybe_refresh(monotonic_ms())
            wanted = {tp: p for tp, p in self._positions.items() if p is not None}
            results = self._fetcher.fetch(wanted, min(self._fetch_max_wait_ms, remaining_ms))
            self._apply(results)
            if not results or any(isinstance(r, KafkaError) for r in results.values()):
                # No leader known, or an error to retry: back off before asking again.
                time.sleep(min(self._retry_backoff_ms, max(remaining_ms, 0)) / 1000)

    def _apply(self, results: dict[TopicPartition, PartitionData | KafkaError]) -> None:
        for tp, result in results.items():
            if self._positions.get(tp) is None or tp in self._buffered:
                continue  # sought elsewhere or unassigned meanwhile: stale answer
            if isinstance(result, PartitionData):
                if result.fetch_offset != self._positions[tp]:
                    continue
                if result.records:
                    self._buffered[tp] = deque(result.records)
                else:
                    self._positions[tp] = result.next_offset
            elif isinstance(result, OffsetOutOfRangeError):
                if self._auto_offset_reset == "none":
                    raise NoOffsetForPartitionError(
                        f"offset {self._positions[tp]} is out of range for {tp} and "
                        f"auto_offset_reset is 'none': seek to a valid offset ({result})"
                    )
                self._set_position(tp, None)
            elif not result.retriable:
                raise result

    def _take_buffered(self, max_records: int | None) -> list[ConsumerRecord]:
        records: list[ConsumerRecord] = []
        for tp in list(self._buffered):
            buffered = self._buffered[tp]
            while buffered and (max_records is None or len(records) < max_records):
                record = buffered.popleft()
                position = self._positions[tp]
                assert position is not None and record.offset >= position, "positions only grow"
                records.append(record)
                self._positions[tp] = record.offset + 1
            if not buffered:
                del self._buffered[tp]
        return records

    def _update_positions(self, partitions: list[TopicPartition]) -> None:
        """Looks up the offsets of partitions without a position (ListOffsets)."""
        timestamps: dict[TopicPartition, int] = {}
        for tp in partitions:
            if self._positions[tp] is not None:
                continue
            reset = self._pending_resets.get(tp)
            if reset is None and self._auto_offset_reset == "none":
                raise NoOffsetForPartitionError(
                    f"no position for {tp} and auto_offset_reset is 'none': seek first"
                )
            timestamps[tp] = (
                reset if reset is not None else _RESET_TIMESTAMPS[self._auto_offset_reset]
            )
        if timestamps:
            offsets = self._fetcher.list_offsets(timestamps, self._request_timeout_ms)
            for tp, offset in offsets.items():
                self._pending_resets.pop(tp, None)
                self._positions[tp] = offset

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's log start offset."""
        self._check_open()
        wanted = dict.fromkeys(partitions, EARLIEST_TIMESTAMP)
        return self._fetcher.list_offsets(wanted, self._request_timeout_ms)

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's high-water mark: the offset the next committed record gets."""
        self._check_open()
        wanted = dict.fromkeys(partitions, LATEST_TIMESTAMP)
        return self._fetcher.list_offsets(wanted, self._request_timeout_ms)

    def _set_position(self, tp: TopicPartition, offset: int | None) -> None:
        self._positions[tp] = offset
        self._pending_resets.pop(tp, None)
        self._buffered.pop(tp, None)

    def _check_assigned(self, tp: TopicPartition) -> None:
        self._check_open()
        if tp not in self._positions:
            raise ValueError(f"{tp} is not assigned to this consumer")

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the consumer is closed")

    def close(self) -> None:
        """Closes the connections; idempotent."""
        if not self._closed:
            self._closed = True
            self._pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
