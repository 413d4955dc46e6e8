"""`Consumer`: reads records from the partitions it is assigned, from positions it tracks.

    from pykraft.client import Consumer, TopicPartition

    with Consumer(bootstrap_servers="127.0.0.1:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("orders", 0)])
        for record in consumer:  # blocks for more; ends when the consumer is closed
            print(record.offset, record.value)

With a `group_id` the consumer can instead `subscribe` to topics (or a pattern) and let the
group's coordinator share their partitions among the group's members (Kafka's KIP-848
protocol; see `group` for how assignments are reconciled inside poll, `membership` for the
heartbeat thread, `commits` for committed offsets and `listener` for the rebalance listener).
Newly owned partitions start at the group's committed offsets; `commit`, `commit_async` and
auto commit (`enable_auto_commit`, every `auto_commit_interval_ms`, inside poll) store
positions, i.e. the offset after the last record poll handed out. `assign` and `subscribe`
exclude each other (IllegalStateError); `commit` and `committed` work with either, given a
group_id (with `assign` the commits carry no member id, which the coordinator accepts only
while the group has no members).

The position of a partition is the offset of the next record `poll` hands out; every record is
handed out once, in offset order per partition (`fetch_collector` hands them out and moves
positions). Without a position the consumer looks one up by `auto_offset_reset` ("earliest",
"latest", or "none", which raises NoOffsetForPartitionError instead); for a partition a group
gives the consumer, only when the group has no committed offset for it.

A background thread (`fetcher.Fetcher`) fetches ahead of `poll` into a bounded buffer that
`fetch_collector` hands out from; see there for what seek and pause do to it.

Settings are Kafka's consumer configs with `_` for `.`, with Kafka's defaults (`config`).
`offsets_for_times`, `beginning_offsets`, `end_offsets` and `partitions_for` ask the cluster
and work for any partition (`offset_queries`).

The consumer is not thread-safe, like Kafka's: use it from one thread. The one exception is
`close`, which any thread may call: a `poll` or an iteration blocked in another thread then
returns (an empty list, or the end of the iteration) promptly, and the group work of close
(commit, listener, leave) runs after it, on the closing thread (`shutdown`). The rebalance
listener and `commit_async` callbacks run on the thread that calls poll (or commit,
unsubscribe, close).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from typing import TYPE_CHECKING, Literal, TypeVar

from pykraft.client.broker_connection import ConnectionPool
from pykraft.client.clock import monotonic_ms
from pykraft.client.cluster_metadata import ClusterMetadata
from pykraft.client.consumer.arguments import checked_offsets, subscription_topics, timeout_or
from pykraft.client.consumer.arrow_batch import ARROW_ROWS_MAX, to_record_batch
from pykraft.client.consumer.commits import CommitCallback
from pykraft.client.consumer.config import ConsumerConfig
from pykraft.client.consumer.fetch_collector import FetchCollector
from pykraft.client.consumer.fetcher import Fetcher
from pykraft.client.consumer.group import ConsumerGroup
from pykraft.client.consumer.listener import ConsumerRebalanceListener
from pykraft.client.consumer.offset_queries import OffsetQueries
from pykraft.client.consumer.positions import Positions
from pykraft.client.consumer.shutdown import Shutdown, shut_down
from pykraft.client.consumer.subscription import (
    RESET_TIMESTAMPS,
    SubscriptionState,
)
from pykraft.client.errors import InvalidGroupIdError
from pykraft.client.offsets import OffsetLookup
from pykraft.client.routing import parse_bootstrap
from pykraft.client.types import ConsumerRecord, OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    import pyarrow as pa

# What a poll returns: records, or their columns.
_Polled = TypeVar("_Polled", bound=Sized)


class IllegalStateError(RuntimeError):
    """The call does not fit the consumer's state (Kafka's IllegalStateException): `assign`
    while subscribed, or `subscribe` while partitions are assigned. Call `unsubscribe` first."""


class Consumer(Shutdown, OffsetQueries, Positions):
    """Manual assignment (`assign`) or group subscription (`subscribe`), prefetching `poll`,
    iteration and committed offsets; the offset queries are `OffsetQueries`', seek, position
    and pause are `Positions`' and `close` is `Shutdown`'s, mixed in."""

    def __init__(
        self,
        *,
        bootstrap_servers: str | Sequence[str],
        auto_offset_reset: str = "latest",
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        max_partition_fetch_bytes: int = 1048576,
        fetch_max_bytes: int = 52428800,
        fetch_buffer_bytes_max: int | None = None,
        max_poll_records: int = 500,
        isolation_level: str = "read_uncommitted",
        request_timeout_ms: int = 30000,
        default_api_timeout_ms: int = 60000,
        retry_backoff_ms: int = 100,
        client_id: str = "",
        check_crcs: bool = True,
        group_id: str | None = None,
        group_instance_id: str | None = None,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        max_poll_interval_ms: int = 300000,
        group_remote_assignor: str | None = None,
        client_rack: str = "",
        metadata_max_age_ms: int = 300000,
    ) -> None:
        """Kafka's consumer configs with `_` for `.`. The group settings need `group_id`:
        `group_instance_id` makes a static member (its partitions wait for it across a
        restart within the session timeout), `group_remote_assignor` names the coordinator's
        assignor ("uniform" or "range"; None: the broker's default), and
        `max_poll_interval_ms` is how long the application may go without poll before the
        consumer leaves the group (and its rebalance timeout). With `client_rack` the consumer
        reads each partition from a replica in that rack when the leader names one (KIP-392),
        asking the leader again every `metadata_max_age_ms`."""
        bootstrap = parse_bootstrap(bootstrap_servers)
        self._config = config = ConsumerConfig(
            auto_offset_reset=auto_offset_reset,
            fetch_min_bytes=fetch_min_bytes,
            fetch_max_wait_ms=fetch_max_wait_ms,
            max_partition_fetch_bytes=max_partition_fetch_bytes,
            fetch_max_bytes=fetch_max_bytes,
            fetch_buffer_bytes_max=(
                fetch_max_bytes if fetch_buffer_bytes_max is None else fetch_buffer_bytes_max
            ),
            max_poll_records=max_poll_records,
            isolation_level=isolation_level,
            request_timeout_ms=request_timeout_ms,
            default_api_timeout_ms=default_api_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            client_id=client_id,
            check_crcs=check_crcs,
            group_id=group_id,
            group_instance_id=group_instance_id,
            enable_auto_commit=enable_auto_commit,
            auto_commit_interval_ms=auto_commit_interval_ms,
            max_poll_interval_ms=max_poll_interval_ms,
            group_remote_assignor=group_remote_assignor,
            client_rack=client_rack,
            metadata_max_age_ms=metadata_max_age_ms,
        )
        self.client_id = client_id
        self._pool = ConnectionPool(retry_backoff_ms=retry_backoff_ms)
        self._metadata = ClusterMetadata(
            bootstrap,
            self._pool,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
        )
        self._offsets = OffsetLookup(
            self._metadata,
            self._pool,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            isolation_level=config.isolation_level_id,
        )
        self._subscription = SubscriptionState(config.fetch_buffer_bytes_max)
        self._fetcher = Fetcher(self._subscription, self._metadata, self._pool, config)
        self._collector = FetchCollector(self._subscription, self._fetcher, config)
        self._group: ConsumerGroup | None = None
        if group_id is not None:
            self._group = ConsumerGroup(
                config, self._subscription, self._metadata, self._pool, self._fetcher
            )
        self._mode: Literal["none", "assigned", "subscribed"] = "none"
        # Held by the application thread's group work (poll, commit, subscribe, ...) and by
        # close's, so a close from another thread never runs beside a reconciliation.
        self._app_lock = threading.RLock()
        self._closing = False  # close() began: poll and iteration return
        self._closed = False  # close() is past the group work: every other call raises
        # A consumer dropped without close() still stops its threads and connections.
        self._shut_down = weakref.finalize(
            self,
            shut_down,
            self._fetcher,
            self._pool,
            None if self._group is None else self._group.stopper(),
        )
        self._fetcher.start()

    # --- assignment and positions ---

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Replaces the assignment (an empty one unassigns everything). Partitions kept keep
        their positions, pause and buffered records; new ones start without a position.
        Raises IllegalStateError while subscribed (an empty assignment unsubscribes, as in
        Kafka)."""
        self._check_open()
        wanted = list(dict.fromkeys(partitions))
        for tp in wanted:
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"assign takes TopicPartition values, not {type(tp).__name__}")
        if self._mode == "subscribed":
            if not wanted:
                self.unsubscribe()
                return
            raise IllegalStateError(
                "this consumer is subscribed: assign and subscribe exclude each other "
                "(call unsubscribe() first)"
            )
        self._mode = "assigned" if wanted else "none"
        reset = RESET_TIMESTAMPS.get(self._config.auto_offset_reset)
        with self._subscription.lock:
            self._subscription.assign(wanted, reset)
        self._metadata.add_topics({tp.topic for tp in wanted})
        self._fetcher.wakeup()

    def assignment(self) -> set[TopicPartition]:
        """The partitions the consumer reads now: assigned, or owned in its group."""
        with self._subscription.lock:
            return set(self._subscription.partitions)

    # --- groups ---

    def subscribe(
        self,
        topics: Iterable[str] = (),
        *,
        pattern: str | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Joins the group (or changes the subscription) to read `topics`, or every topic
        whose whole name matches `pattern` (a Python regular expression, resolved by the
        coordinator); exactly one of the two. The partitions come and go inside poll, which
        calls `listener` (see ConsumerRebalanceListener). Raises InvalidGroupIdError without
        a group_id, IllegalStateError while partitions are assigned, and
        InvalidRegularExpressionError when the pattern does not compile."""
        self._check_open()
        group = self._group_or_raise("subscribe")
        names = subscription_topics(topics, pattern, listener)
        if self._mode == "assigned":
            raise IllegalStateError(
                "this consumer has assigned partitions: assign and subscribe exclude each "
                "other (call unsubscribe() first)"
            )
        with self._app_lock:
            errors = group.subscribe(names, pattern, listener)
            self._mode = "subscribed"
        if errors:
            raise errors[0]

    def subscription(self) -> set[str]:
        """The topics subscribed to (with a pattern: the topics of the partitions owned
        now); empty when not subscribed."""
        if self._group is None or self._mode != "subscribed":
            return set()
        return self._group.subscription()

    def unsubscribe(self) -> None:
        """Leaves the group (after committing, with auto commit, and on_partitions_revoked)
        and drops every partition, subscribed or assigned. Raises what the listener raised,
        after all of that."""
        self._check_open()
        errors: list[Exception] = []
        with self._app_lock:
            if self._group is not None and self._mode == "subscribed":
                errors = self._group.leave(self._config.default_api_timeout_ms)
            with self._subscription.lock:
                self._subscription.assign([], None)
            self._mode = "none"
        self._fetcher.wakeup()
        if errors:
            raise errors[0]

    def commit(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata] | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        """Commits `offsets` for the group and waits for it (up to timeout_ms, default
        default_api_timeout_ms); without offsets, the position of every partition read now:
        the offset after the last record poll handed out (or where auto_offset_reset or a
        seek put it, if poll has handed out nothing since). Raises CommitFailedError when the
        consumer is no longer a member (another member may own the partitions now), a
        partition's error naming it, InvalidGroupIdError without a group_id. Also runs the
        callbacks of finished commit_async calls."""
        self._check_open()
        group = self._group_or_raise("commit")
        with self._app_lock:
            chosen = group.positions() if offsets is None else checked_offsets(offsets)
            group.commit(chosen, self._timeout(timeout_ms))

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata] | None = None,
        callback: CommitCallback | None = None,
    ) -> None:
        """Like `commit`, without waiting: `callback(offsets, exception or None)` runs on
        this thread during a later poll, commit or close (Kafka's rule). Commits land in the
        order they were made."""
        self._check_open()
        group = self._group_or_raise("commit_async")
        with self._app_lock:
            chosen = group.positions() if offsets is None else checked_offsets(offsets)
            group.commit_async(chosen, callback)

    def committed(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offset of each partition (None: none yet); the partitions
        need not be read by this consumer. Waits up to timeout_ms (default
        default_api_timeout_ms)."""
        self._check_open()
        group = self._group_or_raise("committed")
        wanted = list(dict.fromkeys(partitions))
        for tp in wanted:
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"committed takes TopicPartition values, not {tp!r}")
        return group.committed(wanted, self._timeout(timeout_ms))

    def _group_or_raise(self, what: str) -> ConsumerGroup:
        if self._group is None:
            raise InvalidGroupIdError(
                f"{what} needs a consumer group: create the Consumer with group_id=..."
            )
        return self._group

    def _timeout(self, timeout_ms: int | None) -> int:
        return timeout_or(self._config.default_api_timeout_ms, timeout_ms)

    # --- records ---

    def poll(self, timeout_ms: int = 0, records_max: int | None = None) -> list[ConsumerRecord]:
        """Up to `records_max` (default max_poll_records) records of the assigned, unpaused
        partitions, taken from what is buffered: at once if any are, else as soon as some
        arrive, else an empty list after `timeout_ms` (0: never blocks).

        Raises NoOffsetForPartitionError (auto_offset_reset "none"), UnknownTopicOrPartitionError
        for a deleted topic, CorruptMessageError for a batch that fails its CRC (until a seek
        past it), and other non-retriable KafkaErrors. Records fetched before an error are
        returned first; the error comes with the next poll.

        Subscribed, poll is also where the group's changes happen (see `group`): partitions
        given up or added, the rebalance listener called, auto commit, and fatal group errors
        raised (UnreleasedInstanceIdError, UnsupportedAssignorError, ...). It waits out its
        timeout while the group has not assigned anything yet.
        """
        limit = self._config.max_poll_records if records_max is None else records_max
        return self._poll(timeout_ms, limit, self._collector.collect)

    def poll_arrow(self, timeout_ms: int = 0, rows_max: int = ARROW_ROWS_MAX) -> pa.RecordBatch:
        """As `poll` (same records, positions, waiting and errors), the records as one
        `pyarrow.RecordBatch` of up to `rows_max` rows, decoded straight into its columns
        without a Python object per record (schema: `arrow_batch.arrow_schema()`: key, value,
        topic, partition, offset, timestamp, timestamp_type, headers). Empty (0 rows) when
        `poll` would return no records. Needs pyarrow (the `arrow` extra); poll and
        poll_arrow may be mixed freely."""
        rows = self._poll(timeout_ms, rows_max, self._collector.collect_columns)
        return to_record_batch(rows)

    def _poll(self, timeout_ms: int, limit: int, collect: Callable[[int], _Polled]) -> _Polled:
        self._check_open()
        if not isinstance(timeout_ms, int) or timeout_ms < 0:
            raise ValueError(f"timeout_ms must be an integer of at least 0, not {timeout_ms!r}.")
        if limit < 1:
            raise ValueError(f"records_max must be at least 1, not {limit}.")
        deadline_ms = monotonic_ms() + timeout_ms
        group = self._group
        with self._app_lock:
            if group is None:
                return self._poll_until(deadline_ms, limit, None, collect)
            group.poll_started(monotonic_ms())
            try:
                return self._poll_until(deadline_ms, limit, group, collect)
            finally:
                group.poll_ended(monotonic_ms())

    def _poll_until(
        self,
        deadline_ms: int,
        limit: int,
        group: ConsumerGroup | None,
        collect: Callable[[int], _Polled],
    ) -> _Polled:
        subscription = self._subscription
        while True:
            version = subscription.version
            if group is not None and not self._closing:
                group.step(monotonic_ms())
            records = collect(limit)
            if len(records):
                return records
            with subscription.lock:
                left_ms = deadline_ms - monotonic_ms()
                waits = bool(subscription.partitions) or self._mode == "subscribed"
                if self._closing or left_ms <= 0 or not waits:
                    return records
                if subscription.version == version:
                    subscription.lock.wait(left_ms / 1000)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Records one by one, waiting for more, until the consumer is closed (from another
        thread, or in the loop's body). Each record moves the position past it as it is
        handed out, so leaving the loop early loses nothing. Raises what poll raises, and
        does poll's group work between fetches (and as soon as the group has something)."""
        group = self._group
        while not self._closing:
            if group is not None:
                with self._app_lock:
                    group.step(monotonic_ms())
                group.poll_started(monotonic_ms())
            found = self._collector.wait_for_fetch(lambda: self._closing)
            if group is not None:
                group.poll_ended(monotonic_ms())
            if found is None:
                continue
            state, fetch = found
            generation = state.generation
            while (record := fetch.next_record()) is not None:
                state.position = fetch.position
                state.position_epoch = fetch.leader_epoch
                yield record
                if group is not None:
                    group.poll_ended(monotonic_ms())  # the application is back: its poll timer
                    if group.needs_step:
                        break
                if self._closing or state.generation != generation or state.paused:
                    break
            self._collector.finish(state, fetch, generation)
