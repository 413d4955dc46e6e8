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

Each choice looks only at the least-loaded brokers (`load_levels.py`): a partition costs
O(RF x log brokers), times the racks when there are several, so placing 9,000 partitions takes
as long over 300 brokers as over 3 (about 30 ms). It scanned every usable broker for each
replica: 115 ms over 30 brokers, 1 s over 300, on the controller thread that must also keep
Raft's heartbeats going (`bench/create_decision.py` measures the whole turn).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pykraft.metadata_log.image import MetadataImage
from pykraft.quorum.controller.load_levels import LoadLevels


@dataclass(frozen=True, slots=True)
class UsableBroker:
    broker_id: int
    rack: str | None


class PlacementError(ValueError):
    """The replication factor cannot be met by the usable brokers; the message names both."""


class ReplicaPlacer:
    """Places partitions for one decision; keeps the loads it has added so far.

    Not shared between decisions: build a fresh one from the image for each. Brokers are
    known by their position in id order inside it.
    """

    def __init__(
        self,
        brokers: Sequence[UsableBroker],
        leader_counts: Mapping[int, int],
        replica_counts: Mapping[int, int],
    ) -> None:
        ordered = sorted(brokers, key=lambda broker: broker.broker_id)
        self._ids = [b.broker_id for b in ordered]
        assert len(set(self._ids)) == len(self._ids)
        self._racks = [b.rack for b in ordered]
        self._leaders = [leader_counts.get(broker_id, 0) for broker_id in self._ids]
        self._replicas = [replica_counts.get(broker_id, 0) for broker_id in self._ids]
        self._slots = len(ordered)
        positions = range(self._slots)
        # Leader order: fewest leaders, then fewest replicas, then lowest id (one int per broker).
        self._by_leaders = LoadLevels(
            (self._leaders[p], self._replicas[p] * self._slots + p) for p in positions
        )
        self._by_replicas = LoadLevels((self._replicas[p], p) for p in positions)
        on_rack: dict[str | None, list[int]] = {}
        for p in positions:
            on_rack.setdefault(self._racks[p], []).append(p)
        self._by_rack: dict[str | None, LoadLevels] = {}
        if len(on_rack) > 1:  # one rack, or none: every follower comes from `_by_replicas`
            for rack, rack_positions in on_rack.items():
                self._by_rack[rack] = LoadLevels((self._replicas[p], p) for p in rack_positions)

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
        return self._slots

    def place(self, partition_count: int, replication_factor: int) -> list[tuple[int, ...]]:
        """Replica lists for `partition_count` new partitions, each of `replication_factor`.

        Raises `PlacementError` when there are fewer usable brokers than the factor.
        """
        assert partition_count >= 0 and replication_factor >= 1
        if replication_factor > self._slots:
            raise PlacementError(
                f"The replication factor of {replication_factor} cannot be reached: only "
                f"{self._slots} broker(s) are unfenced."
            )
        return [self._place_one(replication_factor) for _ in range(partition_count)]

    def _place_one(self, replication_factor: int) -> tuple[int, ...]:
        leader = self._by_leaders.lowest() % self._slots
        chosen = [leader]
        while len(chosen) < replication_factor:
            # Each follower: on a rack the partition does not use while one is left, the broker
            # with the fewest replicas, the first after the leader (in id order, going round)
            # among equals. Without racks (or with one) that is one look at `_by_replicas`.
            if self._by_rack:
                chosen.append(self._follower_on_racks(leader, chosen))
            else:
                candidate = self._by_replicas.nearest(leader, chosen)
                assert candidate is not None  # `place` checked the factor against the brokers
                chosen.append(candidate[1])
        for position in chosen:
            self._count(position, leads=position == leader)
        return tuple(self._ids[position] for position in chosen)

    def _follower_on_racks(self, leader: int, chosen: list[int]) -> int:
        """The follower of `_place_one` among brokers on two racks or more: the best of each
        rack not used yet, or of all brokers once every rack is used."""
        racks = {self._racks[position] for position in chosen}
        unused = [levels for rack, levels in self._by_rack.items() if rack not in racks]
        candidates = []
        for levels in unused or [self._by_replicas]:
            candidate = levels.nearest(leader, chosen)
            # A rack not used holds no chosen broker, and `place` checked that there are as
            # many brokers as the factor: there is always one.
            assert candidate is not None
            load, position = candidate
            candidates.append((load, (position - leader) % self._slots, position))
        return min(candidates)[2]

    def _count(self, position: int, *, leads: bool) -> None:
        """Adds one replica (and one leader when `leads`) to the broker at `position`."""
        leaders = self._leaders[position]
        replicas = self._replicas[position]
        key = replicas * self._slots + position
        self._by_leaders.move(key, leaders, to_item=key + self._slots, to_load=leaders + leads)
        self._by_replicas.move(position, replicas, to_item=position, to_load=replicas + 1)
        if self._by_rack:
            by_rack = self._by_rack[self._racks[position]]
            by_rack.move(position, replicas, to_item=position, to_load=replicas + 1)
        self._leaders[position] = leaders + leads
        self._replicas[position] = replicas + 1
