"""Which broker the consumer fetches a partition from (KIP-392), as Kafka's consumer decides it
(SubscriptionState's preferred read replica, AbstractFetch.selectReadReplica): the leader, or
the replica the leader named in a Fetch answer (`preferred_read_replica`, for a consumer with a
`client_rack`; the answer has no records and the next Fetch goes to that replica at once).

A named replica is read from until the first of:

- its lease ends, `metadata_max_age_ms` after the leader named it: the next Fetch goes to the
  leader, which names it again or serves the partition itself;
- the metadata no longer has it alive, or in the partition's ISR;
- a Fetch from it fails: no answer (the broker went away), or any error for the partition
  (NOT_LEADER_OR_FOLLOWER: it left the ISR, or it lost track of the partition;
  OFFSET_OUT_OF_RANGE: it does not hold the position; a leader epoch it does not know yet...).
  The position stays, nothing reaches the application, and the partition goes back to the
  leader after `retry_backoff_ms` (the fetcher's `_retry`), so a leader that keeps naming a
  broker that cannot serve (one just killed, not yet fenced) is not asked in a tight loop.

Call with the subscription's lock held, from the fetcher thread.
"""

from __future__ import annotations

from pykraft.client.cluster_metadata import ClusterMetadata, PartitionLeader
from pykraft.client.consumer.subscription import PartitionState, ReadReplica


def fetch_address(
    state: PartitionState, leader: PartitionLeader, metadata: ClusterMetadata, now_ms: int
) -> str:
    """Where to fetch `state`'s partition now: its named replica while that still holds (see
    the module doc), else the leader (the replica forgotten; the metadata refreshed when it is
    what no longer has the replica in sync)."""
    replica = state.read_replica
    if replica is None:
        return leader.address
    address = metadata.in_sync_replica_address(state.tp, replica.broker_id)
    if address is not None and now_ms < replica.expires_at_ms:
        return address
    state.read_replica = None
    if address is None:
        metadata.request_update()
    return leader.address


def on_named(
    state: PartitionState,
    broker_id: int,
    metadata: ClusterMetadata,
    *,
    now_ms: int,
    lease_ms: int,
    retry_backoff_ms: int,
) -> None:
    """The leader named `broker_id` to read `state`'s partition from. A replica the metadata
    does not know in sync yet (it joined the ISR since the last refresh) waits for a refresh
    and `retry_backoff_ms`, rather than bouncing between leader and metadata at once."""
    state.read_replica = ReadReplica(broker_id, now_ms + lease_ms)
    if metadata.in_sync_replica_address(state.tp, broker_id) is None:
        metadata.request_update()
        state.retry_at_ms = now_ms + retry_backoff_ms
