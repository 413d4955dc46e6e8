"""The questions a `Consumer` asks the cluster rather than its own state: the offsets at a time,
at the log start or at the high-water mark (ListOffsets to the partition leaders, Kafka's
OffsetFetcher), and a topic's partitions (metadata). They work for any partition, assigned or
not, and never move a position."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping

from pykraft.client.cluster_metadata import ClusterMetadata
from pykraft.client.consumer.arguments import check_timestamps
from pykraft.client.consumer.config import ConsumerConfig
from pykraft.client.offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, OffsetLookup
from pykraft.client.types import OffsetAndTimestamp, TopicPartition


class OffsetQueries(ABC):
    """The offset and partition queries of `Consumer`, which mixes them in and provides the
    lookups (`_offsets`, `_metadata`) and the open check. Each waits up to
    default_api_timeout_ms."""

    _config: ConsumerConfig
    _metadata: ClusterMetadata
    _offsets: OffsetLookup

    @abstractmethod
    def _check_open(self) -> None:
        """Raises once the consumer is closed (its connections are gone)."""

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the earliest offset whose record timestamp (ms) is at least
        the one given, with that timestamp; None when no record is that recent. Partitions
        need not be assigned. Waits up to default_api_timeout_ms."""
        self._check_open()
        check_timestamps(timestamps)
        found = self._offsets.list_offsets(timestamps, self._config.default_api_timeout_ms)
        return {
            tp: None
            if found[tp].offset < 0
            else OffsetAndTimestamp(found[tp].offset, found[tp].timestamp)
            for tp in timestamps
        }

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's log start offset (need not be assigned)."""
        return self._offsets_at(partitions, EARLIEST_TIMESTAMP)

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's high-water mark: the offset the next committed record gets."""
        return self._offsets_at(partitions, LATEST_TIMESTAMP)

    def _offsets_at(
        self, partitions: Iterable[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        self._check_open()
        wanted = dict.fromkeys(partitions, timestamp)
        found = self._offsets.list_offsets(wanted, self._config.default_api_timeout_ms)
        return {tp: found[tp].offset for tp in wanted}

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition numbers, from the cluster's metadata."""
        self._check_open()
        count = self._metadata.wait_for_topic(topic, self._config.default_api_timeout_ms)
        return list(range(count))
