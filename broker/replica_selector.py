"""Which replica a consumer should read a partition from (KIP-392): the leader's choice, made
for each consumer fetch that carries the consumer's rack, by the broker's
`replica.selector.class` (Kafka's class names):

- unset, or LeaderSelector: always the leader (Kafka's default);
- RackAwareReplicaSelector: the leader when the consumer names no rack, when the leader is in
  its rack, or when no candidate is; otherwise the candidate in its rack that is most caught
  up (highest log end offset, then most recently caught up, then highest broker id), as
  Kafka's RackAwareReplicaSelector.

Candidates are the followers that can serve the fetch now, by what the leader knows: in the
ISR (a follower out of it may lag without bound, and the consumer with it), alive (registered,
unfenced, not shutting down), and holding the fetch offset (log start <= offset <= log end as
their last fetch said), as Kafka's ReplicaManager.findPreferredReadReplica. So a lagging
follower is never chosen.

Pure: callers pass what the leader knows and `now_ms`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from pykraft.broker.isr import FollowerState

LEADER_SELECTOR: Final = "org.apache.kafka.common.replica.LeaderSelector"
RACK_AWARE_SELECTOR: Final = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
# replica.selector.class's accepted values ("": unset, the leader).
REPLICA_SELECTORS: Final = ("", LEADER_SELECTOR, RACK_AWARE_SELECTOR)


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """A replica as the selector sees it (Kafka's ReplicaView)."""

    broker_id: int
    rack: str
    log_end_offset: int
    caught_up_ago_ms: int

    def rank(self) -> tuple[int, int, int]:
        """Greater is more caught up (Kafka's ReplicaView.comparator)."""
        return self.log_end_offset, -self.caught_up_ago_ms, self.broker_id


def read_candidates(
    *,
    isr: Iterable[int],
    followers: Mapping[int, FollowerState],
    racks: Mapping[int, str],
    fetch_offset: int,
    now_ms: int,
) -> list[ReplicaView]:
    """The followers that may serve a consumer fetching at `fetch_offset`: in `isr`, alive (in
    `racks`: the live brokers' racks, "" for none) and holding the offset (module doc)."""
    in_sync = set(isr)
    return [
        ReplicaView(
            broker_id, racks[broker_id], state.log_end_offset, now_ms - state.last_caught_up_ms
        )
        for broker_id, state in followers.items()
        if broker_id in in_sync
        and broker_id in racks
        and state.log_start_offset <= fetch_offset <= state.log_end_offset
    ]


def preferred_read_replica(
    selector: str, client_rack: str, leader: ReplicaView, candidates: Iterable[ReplicaView]
) -> int | None:
    """The broker the consumer in `client_rack` should read from instead of the leader, by
    `selector` (one of REPLICA_SELECTORS), or None for the leader itself."""
    assert selector in REPLICA_SELECTORS, selector
    if selector != RACK_AWARE_SELECTOR or not client_rack or leader.rack == client_rack:
        return None
    same_rack = [view for view in candidates if view.rack == client_rack]
    if not same_rack:
        return None
    return max(same_rack, key=ReplicaView.rank).broker_id
