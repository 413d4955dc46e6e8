"""`ConsumerRebalanceListener`: what a subscribed consumer tells the application when the
partitions it owns change (Kafka's interface of the same name, with Python's method names).

When each method runs, and what callers may rely on:

- Every callback runs on the application's thread, inside `poll` (or the iteration), `close`
  or `unsubscribe`, never on the consumer's background threads; so a callback may call the
  consumer (`commit`, `seek`, `position`, `committed`, ...).
- `on_partitions_revoked(revoked)`: the group moves these partitions to other members. It runs
  before they are given up: the consumer still owns them, so a commit of their positions made
  here is the last word (with `enable_auto_commit` the consumer has already committed them just
  before the call). Not called with an empty set. Partitions the consumer keeps are not named
  and their fetching never stops (KIP-848's incremental protocol).
- `on_partitions_assigned(assigned)`: the partitions just added, after each assignment the
  consumer took on (an empty set when it only gave partitions up, as Kafka does). Their
  positions are already the group's committed offsets (or to be reset by auto_offset_reset);
  a `seek` here overrides them.
- `on_partitions_lost(lost)`: the consumer was removed from the group (fenced, its session
  expired, or it did not poll within max_poll_interval_ms), so other members may own these
  partitions already: committing them would fail. Not called with an empty set. By default it
  calls `on_partitions_revoked`, as Kafka's does.

An exception raised by a callback does not stop the change: the consumer finishes it, then
`poll` raises that exception.
"""

from __future__ import annotations

from pykraft.client.types import TopicPartition


class ConsumerRebalanceListener:
    """Subclass and override what you need; every method does nothing by default except
    `on_partitions_lost`, which calls `on_partitions_revoked`."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        """The consumer is about to give up `revoked` (it still owns them)."""

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        """The consumer now owns `assigned` as well (positions set, not yet read)."""

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        """The consumer no longer owns `lost` and could not give them up in order."""
        self.on_partitions_revoked(lost)
