"""The positions a `Consumer` tracks: `seek` (to an offset, the beginning or the end), `position`,
`pause` and `resume`. Each changes a partition's state under the subscription's lock and wakes
the fetcher; `fetch_collector` says what becomes of records already buffered for it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable

from pykraft.client.clock import monotonic_ms
from pykraft.client.consumer.config import ConsumerConfig
from pykraft.client.consumer.fetch_collector import FetchCollector
from pykraft.client.consumer.fetcher import Fetcher
from pykraft.client.consumer.subscription import PartitionState, SubscriptionState
from pykraft.client.errors import RequestTimedOutError
from pykraft.client.offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from pykraft.client.types import TopicPartition


class Positions(ABC):
    """Seek, position and pause of `Consumer`, which mixes them in and provides the
    subscription, fetcher, collector and the open check."""

    _config: ConsumerConfig
    _subscription: SubscriptionState
    _fetcher: Fetcher
    _collector: FetchCollector

    @abstractmethod
    def _check_open(self) -> None:
        """Raises once the consumer is closed."""

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """The next poll returns records of `partition` from `offset` on; whatever was
        buffered for it is dropped."""
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError(f"offset must be an integer of at least 0, not {offset!r}.")
        with self._subscription.lock:
            self._subscription.move(self._assigned(partition), offset, None)
        self._fetcher.wakeup()

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Moves to the log start offset (all assigned partitions when none are named),
        looked up in the background; `position` waits for it."""
        self._seek_to(partitions, EARLIEST_TIMESTAMP)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Moves to the high-water mark (all assigned partitions when none are named),
        looked up in the background; `position` waits for it."""
        self._seek_to(partitions, LATEST_TIMESTAMP)

    def _seek_to(self, partitions: Iterable[TopicPartition] | None, timestamp: int) -> None:
        chosen = list(partitions or ())
        with self._subscription.lock:
            states = [self._assigned(tp) for tp in chosen] or [
                self._assigned(tp) for tp in self._subscription.partitions
            ]
            for state in states:
                self._subscription.move(state, None, timestamp)
        self._fetcher.wakeup()

    def position(self, partition: TopicPartition) -> int:
        """The offset of the next record poll would hand out. Waits (up to
        default_api_timeout_ms, then RequestTimedOutError) while it is being looked up."""
        self._check_open()
        subscription = self._subscription
        deadline_ms = monotonic_ms() + self._config.default_api_timeout_ms
        with subscription.lock:
            while True:
                self._collector.check_fetcher()
                state = self._assigned(partition)
                if state.position is not None:
                    return state.position
                self._collector.check_reset_possible(state)
                if state.fetches:
                    self._collector.raise_queued_error(state)
                left_ms = deadline_ms - monotonic_ms()
                if left_ms <= 0:
                    raise RequestTimedOutError(
                        f"no position for {partition} within "
                        f"{self._config.default_api_timeout_ms} ms (no leader reachable?)"
                    )
                subscription.lock.wait(left_ms / 1000)
                self._check_open()

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stops fetching `partitions` and handing out their records; what was fetched for
        them stays buffered for `resume`."""
        with self._subscription.lock:
            for state in [self._assigned(tp) for tp in partitions]:
                state.paused = True
        self._fetcher.wakeup()  # what it fetches, and what the buffer may hold, changed

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        with self._subscription.lock:
            for state in [self._assigned(tp) for tp in partitions]:
                state.paused = False
            self._subscription.changed()
        self._fetcher.wakeup()

    def paused(self) -> set[TopicPartition]:
        with self._subscription.lock:
            return {tp for tp, s in self._subscription.partitions.items() if s.paused}

    def _assigned(self, tp: TopicPartition) -> PartitionState:
        self._check_open()
        state = self._subscription.partitions.get(tp)
        if state is None:
            raise ValueError(f"{tp} is not assigned to this consumer")
        return state
