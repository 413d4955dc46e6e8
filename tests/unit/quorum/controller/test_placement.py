from __future__ import annotations

from collections import Counter
from uuid import UUID

from hypothesis import given
from hypothesis import strategies as st

from pykraft.quorum.controller import ReplicaPlacer, UsableBroker
from tests.unit.quorum.controller.conftest import brokers, image_with, topic


@st.composite
def clusters(draw: st.DrawFn) -> list[UsableBroker]:
    """1-12 brokers with arbitrary ids, each on one of up to 4 racks or none."""
    ids = draw(st.lists(st.integers(0, 1000), min_size=1, max_size=12, unique=True))
    racks = st.one_of(st.none(), st.sampled_from(["a", "b", "c", "d"]))
    return [UsableBroker(broker_id, draw(racks)) for broker_id in ids]


@given(clusters(), st.integers(1, 60), st.data())
def test_replicas_are_distinct_usable_brokers(
    cluster: list[UsableBroker], partitions: int, data: st.DataObject
) -> None:
    replication_factor = data.draw(st.integers(1, len(cluster)))
    placed = ReplicaPlacer(cluster, {}, {}).place(partitions, replication_factor)
    ids = {b.broker_id for b in cluster}
    assert len(placed) == partitions
    for replicas in placed:
        assert len(replicas) == replication_factor == len(set(replicas))
        assert set(replicas) <= ids


@given(clusters(), st.lists(st.integers(1, 20), min_size=1, max_size=4), st.data())
def test_leader_counts_of_a_fresh_cluster_differ_by_at_most_one(
    cluster: list[UsableBroker], topic_sizes: list[int], data: st.DataObject
) -> None:
    placer = ReplicaPlacer(cluster, {}, {})
    leaders: Counter[int] = Counter({b.broker_id: 0 for b in cluster})
    for size in topic_sizes:  # several topics in one decision
        replication_factor = data.draw(st.integers(1, len(cluster)))
        leaders.update(replicas[0] for replicas in placer.place(size, replication_factor))
    assert max(leaders.values()) - min(leaders.values()) <= 1


@given(clusters(), st.integers(1, 30), st.data())
def test_partitions_span_as_many_racks_as_they_can(
    cluster: list[UsableBroker], partitions: int, data: st.DataObject
) -> None:
    replication_factor = data.draw(st.integers(1, len(cluster)))
    racks = {b.broker_id: b.rack for b in cluster}
    rack_count = len(set(racks.values()))
    for replicas in ReplicaPlacer(cluster, {}, {}).place(partitions, replication_factor):
        assert len({racks[r] for r in replicas}) == min(rack_count, replication_factor)


def test_placement_is_deterministic_and_counts_leaders_already_in_the_image() -> None:
    image = image_with(*brokers(1, 2, 3), *topic("t", UUID(int=1), [(1, 2), (1, 3), (2, 3)]))
    first = ReplicaPlacer.from_image(image).place(3, 2)
    assert first == ReplicaPlacer.from_image(image).place(3, 2)
    assert first[0][0] == 3  # the only broker leading nothing
    leaders = Counter([1, 1, 2] + [replicas[0] for replicas in first])
    assert max(leaders.values()) - min(leaders.values()) <= 1


def test_followers_stripe_across_racks() -> None:
    racked = [UsableBroker(i, "ab"[i % 2]) for i in range(4)]
    placed = ReplicaPlacer(racked, {}, {}).place(4, 2)
    assert all(len({r % 2 for r in replicas}) == 2 for replicas in placed)
    assert Counter(r for replicas in placed for r in replicas) == Counter({0: 2, 1: 2, 2: 2, 3: 2})
