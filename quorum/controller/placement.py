"""Where the replicas of new partitions go: deterministic, balanced, rack-aware.

In the spirit of Kafka's StripedReplicaPlacer, but load-driven rather than random, so that a
decision is a pure function of the image (every replay and every test sees the same answer):

- only usable brokers take replicas: registered, unfenced, not in controlled shutdown;
- the first replica (the preferred leader) goes to the broker that leads the fewest partitions,
  counting the whole image and the partitions placed earlier in the same decision, so leader
  counts of a fresh cluster never differ by more than one;
- each further replica goes to a broker not yet in the partition, on a rack not yet used by the
  partition while such a rack remains, then to the broker holding the fewest replicas; ties are
  broken by walking the broker list from the leader, which stripes followers across the cluster.

Brokers without a rack count as one rack of their own, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pykraft.metadata_log.image import MetadataImage


@dataclass(frozen=True, slots=True)
class UsableBroker:
    broker_id: int
    rack: str | None


class PlacementError(ValueError):
    """The replication factor cannot be met by the usable brokers; the message names both."""


class ReplicaPlacer:
    """Places partitions for one decision; keeps the loads it has added so far.

    Not shared between decisions: build a fresh one from the image for each.
    """

    def __init__(
        self,
        brokers: Sequence[UsableBroker],
        leader_counts: Mapping[int, int],
        replica_counts: Mapping[int, int],
    ) -> None:
        self._brokers = sorted(brokers, key=lambda broker: broker.broker_id)
        assert len({b.broker_id for b in self._brokers}) == len(self._brokers)
        self._positions = {b.broker_id: i for i, b in enumerate(self._brokers)}
        self._leaders = {b.broker_id: leader_counts.get(b.broker_id, 0) for b in self._brokers}
        self._replicas = {b.broker_id: replica_counts.get(b.broker_id, 0) for b in self._brokers}

    @classmethod
    def from_image(cls, image: MetadataImage) -> ReplicaPlacer:
        """A placer over the image's usable brokers, loaded with the image's current placement."""
        leaders = image.topics.leader_counts
        replicas = image.topics.replica_counts
        assert leaders is not None and replicas is not None
        usable = []
        for broker_id in image.cluster.unfenced_broker_ids():
            registration = image.cluster.broker(broker_id)
            assert registration is not None
            usable.append(UsableBroker(broker_id, registration.rack))
        return cls(usable, leaders, replicas)

    @property
    def usable_broker_count(self) -> int:
        return len(self._brokers)

    def place(self, partition_count: int, replication_factor: int) -> list[tuple[int, ...]]:
        """Replica lists for `partition_count` new partitions, each of `replication_factor`.

        Raises `PlacementError` when there are fewer usable brokers than the factor.
        """
        assert partition_count >= 0 and replication_factor >= 1
        if replication_factor > len(self._brokers):
            raise PlacementError(
                f"The replication factor of {replication_factor} cannot be reached: only "
                f"{len(self._brokers)} broker(s) are unfenced."
            )
        return [self._place_one(replication_factor) for _ in range(partition_count)]

    def _place_one(self, replication_factor: int) -> tuple[int, ...]:
        leader = min(
            self._brokers,
            key=lambda b: (self._leaders[b.broker_id], self._replicas[b.broker_id], b.broker_id),
        )
        start = self._positions[leader.broker_id]
        chosen = [leader]
        chosen_ids = {leader.broker_id}  # an id set: `in` on the list compared dataclasses
        racks = {leader.rack}
        while len(chosen) < replication_factor:
            follower = min(
                (b for b in self._brokers if b.broker_id not in chosen_ids),
                key=lambda b: (
                    b.rack in racks,
                    self._replicas[b.broker_id],
                    (self._positions[b.broker_id] - start) % len(self._brokers),
                ),
            )
            chosen.append(follower)
            chosen_ids.add(follower.broker_id)
            racks.add(follower.rack)
        self._leaders[leader.broker_id] += 1
        for broker in chosen:
            self._replicas[broker.broker_id] += 1
        return tuple(broker.broker_id for broker in chosen)
