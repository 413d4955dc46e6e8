"""Which partitions go in the consumer's next Fetches, and how many bytes each may bring (Kafka's
AbstractFetch.prepareFetchRequests); the fetcher thread (`fetcher`) sends them.

A partition is fetched when it has a position and is neither paused, nor already being fetched,
nor backing off, nor holding an error for the user; from its leader, or from the replica the
leader named for the consumer's `client_rack` (`read_replica`, KIP-392). Each broker has at most
one Fetch in flight, and each Fetch reserves in the buffer the bytes its answer may bring, so
answers never overfill it. A partition whose answer did not fit is starved: nothing is fetched
until its size is free, then it goes first. When the buffer has room for some Fetches only, the
least recently asked broker goes first, so long polls to brokers with nothing new do not keep
the others waiting forever; paused partitions give up their buffered data to make room.

Every method is called with the subscription's lock held.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from pykraft.client.cluster_metadata import ClusterMetadata
from pykraft.client.consumer.config import ConsumerConfig
from pykraft.client.consumer.read_replica import fetch_address
from pykraft.client.consumer.subscription import PartitionState, SubscriptionState
from pykraft.client.types import TopicPartition


@dataclass(frozen=True, slots=True)
class Sent:
    """A partition in a request: its state, the generation it was sent under, and what was
    asked: the fetch offset (Fetch) or the timestamp to look up (ListOffsets), and for a Fetch
    the epoch of the last batch fetched and whether it went to a named read replica."""

    state: PartitionState
    generation: int
    at: int
    epoch: int | None = None
    to_read_replica: bool = False


@dataclass(frozen=True, slots=True)
class Planned:
    """A Fetch to send: its partitions, the bytes it may bring (`bytes_max`, the request's
    max_bytes) and the buffer bytes it reserved."""

    partitions: dict[TopicPartition, Sent]
    bytes_max: int
    reserved_bytes: int


class FetchPlanner:
    """The consumer's Fetches in flight, by broker, and the partition starved of room."""

    def __init__(
        self, subscription: SubscriptionState, metadata: ClusterMetadata, config: ConsumerConfig
    ) -> None:
        self._subscription = subscription
        self._metadata = metadata
        self._config = config
        self._fetching_addresses: set[str] = set()
        # When each broker was last sent a Fetch (one entry per broker address).
        self._last_fetch_ms: dict[str, int] = {}
        # A partition whose answer did not fit the buffer, and its size: nothing is fetched
        # until that much is free, then it goes first (so it cannot be starved).
        self._starved: tuple[PartitionState, int] | None = None

    def starve(self, state: PartitionState, size_bytes: int) -> None:
        """`state`'s answer of `size_bytes` did not fit the buffer and was dropped: it is
        fetched again, first, once there is room for the largest such answer."""
        if self._starved is None or self._starved[1] < size_bytes:
            self._starved = (state, size_bytes)

    def answered(self, address: str, planned: Planned) -> None:
        """`planned`'s Fetch to `address` ended (answered or failed): its reservation is
        given back, and the broker and its partitions may be fetched again."""
        self._fetching_addresses.discard(address)
        self._subscription.reserved_bytes -= planned.reserved_bytes
        for sent in planned.partitions.values():
            sent.state.fetch_in_flight = False

    def plan(self, now_ms: int) -> dict[str, Planned]:
        """The Fetch for each broker, each reserving the bytes its answer may bring; its
        partitions are marked in flight until `answered`."""
        subscription = self._subscription
        states = list(subscription.partitions.values())
        need_bytes = 1
        if self._starved is not None:
            starved, need_bytes = self._starved
            if subscription.partitions.get(starved.tp) is not starved or starved.paused:
                self._starved, need_bytes = None, 1
            else:
                states.remove(starved)
                states.insert(0, starved)
        need_bytes = min(need_bytes, subscription.buffer_bytes_max)
        if subscription.free_bytes() < need_bytes:
            if any(_fetchable(state, now_ms) for state in states):
                self._drop_paused(need_bytes)
            if subscription.free_bytes() < need_bytes:
                return {}
        return self._reserve(self._by_address(states, now_ms), need_bytes, now_ms)

    def _by_address(
        self, states: list[PartitionState], now_ms: int
    ) -> dict[str, dict[TopicPartition, Sent]]:
        """The fetchable partitions of `states`, by the broker to fetch each from (brokers
        with a Fetch in flight left out)."""
        by_address: dict[str, dict[TopicPartition, Sent]] = defaultdict(dict)
        for state in states:
            if not _fetchable(state, now_ms):
                continue
            leader = self._metadata.leader(state.tp)
            if leader is None:
                self._metadata.request_update()
                continue
            address = fetch_address(state, leader, self._metadata, now_ms)
            if address in self._fetching_addresses:
                continue
            by_address[address][state.tp] = Sent(
                state,
                state.generation,
                state.fetch_offset,
                state.fetch_epoch,
                to_read_replica=state.read_replica is not None,
            )
        return by_address

    def _reserve(
        self, by_address: dict[str, dict[TopicPartition, Sent]], need_bytes: int, now_ms: int
    ) -> dict[str, Planned]:
        """A Fetch for each broker of `by_address` while the buffer has room, each sized to
        it: the starved partition's broker first, then the least recently asked."""
        subscription = self._subscription
        planned: dict[str, Planned] = {}
        starved_tp = None if self._starved is None else self._starved[0].tp
        turns = sorted(
            by_address,
            key=lambda a: (starved_tp not in by_address[a], self._last_fetch_ms.get(a, -1)),
        )
        for address in turns:
            sent = by_address[address]
            free_bytes = subscription.free_bytes()
            if free_bytes <= 0:
                break
            # What the answer can bring: each partition its share, the request fetch_max_bytes
            # (the first batch excepted, which `fits` deals with).
            partitions_bytes = len(sent) * self._config.max_partition_fetch_bytes
            bytes_max = min(self._config.fetch_max_bytes, partitions_bytes, free_bytes)
            reserved_bytes = bytes_max
            if self._starved is not None and self._starved[0].tp in sent:
                reserved_bytes = max(bytes_max, min(need_bytes, free_bytes))
                self._starved = None
            for s in sent.values():
                s.state.fetch_in_flight = True
            self._fetching_addresses.add(address)
            self._last_fetch_ms[address] = now_ms
            subscription.reserved_bytes += reserved_bytes
            planned[address] = Planned(sent, bytes_max, reserved_bytes)
        return planned

    def _drop_paused(self, need_bytes: int) -> None:
        """Frees room held by paused partitions for the partitions being read: their data
        is fetched again after `resume` (their positions do not move)."""
        subscription = self._subscription
        for state in subscription.partitions.values():
            if subscription.free_bytes() >= need_bytes:
                return
            if state.paused and state.fetches and not state.blocked_by_error:
                assert state.position is not None, "only a partition with a position fetches"
                subscription.invalidate(state)
                state.fetch_offset, state.fetch_epoch = state.position, state.position_epoch


def _fetchable(state: PartitionState, now_ms: int) -> bool:
    return not (
        state.position is None
        or state.paused
        or state.fetch_in_flight
        or state.blocked_by_error
        or now_ms < state.retry_at_ms
    )
