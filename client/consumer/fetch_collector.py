"""Hands out what the fetcher buffered: records in offset order per partition, positions moved
past each record handed out, and the errors a fetch brought raised where the application sees
them (Kafka's FetchCollector). It runs on the consumer's thread, the one that owns positions.

The position of a partition is the offset of the next record `poll` hands out; every record is
handed out once, in offset order per partition. Without a position (just assigned, after
seek_to_beginning/seek_to_end, or after OFFSET_OUT_OF_RANGE) the fetcher looks one up by
`auto_offset_reset`: "earliest", "latest", or "none", which raises NoOffsetForPartitionError
instead. A leader whose log was cut below the position (an unclean election) moves it back to
where the histories part, or raises LogTruncationError with "none" (`truncation`).

The background thread (`fetcher.Fetcher`) fetches ahead of `poll` into a buffer of at most
`fetch_buffer_bytes_max` bytes, kept as raw batches that `poll` decodes one batch at a time.
seek, seek_to_*, an out-of-range reset and unassigning drop what was buffered for the partition;
pause keeps it (the position does not move) but hands nothing out and fetches no more until
resume; only when the partitions still being read need its room is it dropped, to be fetched
again after resume. See `subscription` for who may change what, and `fetcher` for how errors
are treated.

Partitions are visited in turn (`SubscriptionState.rotate`), so one busy partition cannot keep
the others' records from poll. Records fetched before an error are handed out first; the error
comes with the next call.
"""

from __future__ import annotations

from collections.abc import Callable, Sized
from typing import Final, TypeVar

from pykraft.client.consumer.arrow_batch import ColumnRows, take_rows
from pykraft.client.consumer.config import ConsumerConfig
from pykraft.client.consumer.fetch_buffer import CompletedFetch
from pykraft.client.consumer.fetcher import Fetcher
from pykraft.client.consumer.subscription import (
    RESET_TIMESTAMPS,
    PartitionState,
    SubscriptionState,
)
from pykraft.client.consumer.truncation import diverging_fetch, handle_divergence
from pykraft.client.errors import KafkaError, NoOffsetForPartitionError, OffsetOutOfRangeError
from pykraft.client.types import ConsumerRecord

# Iteration waits for records in slices of this long (woken at once by new data or close).
_ITERATION_WAIT_MS: Final = 1000
# What a collect fills: a list of records, or columns.
_Out = TypeVar("_Out", bound=Sized)


class FetchCollector:
    """Takes records out of the partitions' fetch queues for `poll` and iteration, moving
    positions as it goes. `collect`, `wait_for_fetch` and `finish` take the subscription's
    lock themselves; the `check_*` methods and `raise_queued_error` expect it held."""

    def __init__(
        self, subscription: SubscriptionState, fetcher: Fetcher, config: ConsumerConfig
    ) -> None:
        self._subscription = subscription
        self._fetcher = fetcher
        self._config = config

    def collect(self, limit: int) -> list[ConsumerRecord]:
        """Takes up to `limit` buffered records, visiting the partitions in turn."""
        out: list[ConsumerRecord] = []
        self._collect(out, limit, CompletedFetch.take)
        return out

    def collect_columns(self, limit: int) -> ColumnRows:
        """As `collect`, the records decoded into columns (for `Consumer.poll_arrow`)."""
        rows = ColumnRows()
        self._collect(rows, limit, take_rows)
        return rows

    def _collect(
        self, out: _Out, limit: int, take: Callable[[CompletedFetch, _Out, int], None]
    ) -> None:
        """Fills `out` (up to `limit` long) with `take(fetch, out, wanted)` from the partitions'
        fetches in turn, moving positions past what was taken."""
        subscription = self._subscription
        with subscription.lock:
            self.check_fetcher()
            ready = []
            for state in list(subscription.partitions.values()):
                self.check_reset_possible(state)
                if state.fetches and not state.paused:
                    self.check_divergence(state)
                    ready.append(state)
        for state in ready:
            if not self._take(state, out, limit, take):
                break
            if len(out) >= limit:
                break

    def _take(
        self,
        state: PartitionState,
        out: _Out,
        limit: int,
        take: Callable[[CompletedFetch, _Out, int], None],
    ) -> bool:
        """Moves `state`'s records into `out`; False when poll should return what it has
        (an error waits, to be raised by the next poll)."""
        subscription = self._subscription
        took = False
        while len(out) < limit and state.fetches:
            fetch = state.fetches[0]
            if fetch.error is not None:
                if out:
                    return False
                with subscription.lock:
                    self.raise_queued_error(state)
                continue
            before = len(out)
            try:
                take(fetch, out, limit - len(out))
            except KafkaError:
                if out:
                    return False
                raise
            finally:
                state.position = fetch.position
                if fetch.leader_epoch is not None:
                    state.position_epoch = fetch.leader_epoch
            took = took or len(out) > before
            if not fetch.exhausted:
                break
            with subscription.lock:
                subscription.pop(state)
            self._fetcher.wakeup()
        if took:
            with subscription.lock:
                if subscription.partitions.get(state.tp) is state:
                    subscription.rotate(state.tp)
        return True

    def wait_for_fetch(
        self, closing: Callable[[], bool]
    ) -> tuple[PartitionState, CompletedFetch] | None:
        """The first partition with a fetch to read, waiting up to _ITERATION_WAIT_MS (or
        until woken) for one; None when there is none yet, or the consumer is closing."""
        subscription = self._subscription
        with subscription.lock:
            for waited in (False, True):
                if closing():
                    return None
                self.check_fetcher()
                for state in list(subscription.partitions.values()):
                    self.check_reset_possible(state)
                    if not state.fetches or state.paused:
                        continue
                    self.check_divergence(state)
                    if not state.fetches:
                        continue
                    if state.fetches[0].error is None:
                        return state, state.fetches[0]
                    self.raise_queued_error(state)
                if not waited:
                    subscription.lock.wait(_ITERATION_WAIT_MS / 1000)
        return None

    def finish(self, state: PartitionState, fetch: CompletedFetch, generation: int) -> None:
        """After iterating over `fetch`: drops it once read to the end, if still current."""
        subscription = self._subscription
        with subscription.lock:
            if not subscription.current(state, generation):
                return
            if fetch.exhausted and state.fetches and state.fetches[0] is fetch:
                state.position = fetch.position
                if fetch.leader_epoch is not None:
                    state.position_epoch = fetch.leader_epoch
                subscription.pop(state)
                subscription.rotate(state.tp)
        self._fetcher.wakeup()

    def raise_queued_error(self, state: PartitionState) -> None:
        """Handles the error first in `state`'s queue: resets by policy after
        OFFSET_OUT_OF_RANGE (and returns), raises otherwise. Call with the lock held."""
        fetch = state.fetches[0]
        error = fetch.error
        assert error is not None
        if fetch.diverging is not None:
            self.check_divergence(state)
            return
        self._subscription.pop(state)
        self._fetcher.wakeup()
        policy = self._config.auto_offset_reset
        if isinstance(error, OffsetOutOfRangeError):
            if policy == "none":
                raise NoOffsetForPartitionError(
                    f"offset {fetch.fetch_offset} is out of range for {state.tp} and "
                    f"auto_offset_reset is 'none': seek to a valid offset ({error})"
                )
            self._subscription.move(state, None, RESET_TIMESTAMPS[policy])
            return
        raise error

    def check_divergence(self, state: PartitionState) -> None:
        """Settles the leader's diverging answer, if one waits for `state`, before any more of
        its records go out: reset, re-fetch, or LogTruncationError (see `truncation`). Call
        with the lock held."""
        if diverging_fetch(state) is not None:
            handle_divergence(self._subscription, state, self._config.auto_offset_reset)
            self._fetcher.wakeup()

    def check_reset_possible(self, state: PartitionState) -> None:
        if state.position is None and state.reset_timestamp is None:
            raise NoOffsetForPartitionError(
                f"no position for {state.tp} and auto_offset_reset is 'none': seek first"
            )

    def check_fetcher(self) -> None:
        error = self._subscription.fatal_error
        if error is not None:
            raise KafkaError(f"the consumer's fetcher thread failed: {error!r}") from error
