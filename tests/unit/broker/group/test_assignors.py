from __future__ import annotations

import random
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.broker.group.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR,
    MemberSpec,
    Partition,
    UnsupportedAssignor,
    assign,
)

TOPICS = ("a", "b", "c", "d")
MISSING_TOPIC = "not-yet"  # subscribed to but absent from partition_counts
PARTITION_COUNT_MAX = 9

Members = dict[str, MemberSpec]
Counts = dict[str, int]
Result = dict[str, frozenset[Partition]]

member_ids = st.lists(st.text("mnxyz0123", min_size=1, max_size=4), min_size=1, max_size=8)
partition_counts = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, PARTITION_COUNT_MAX))
# Any partition, valid or not: unsubscribed topics, ids past the count, missing topics.
any_partition = st.tuples(
    st.sampled_from((*TOPICS, MISSING_TOPIC)), st.integers(0, PARTITION_COUNT_MAX + 2)
)


@st.composite
def groups(draw: st.DrawFn, *, identical: bool = False) -> tuple[Members, Counts]:
    """Members with random (or identical) subscriptions and random, possibly overlapping and
    invalid, current assignments; and the counts of the existing topics."""
    ids = draw(member_ids.map(lambda ids: sorted(set(ids))))
    topic_sets = st.frozensets(st.sampled_from((*TOPICS, MISSING_TOPIC)))
    shared = draw(topic_sets)
    members = {
        member: MemberSpec(
            subscribed_topics=shared if identical else draw(topic_sets),
            rack_id=draw(st.sampled_from(("", "rack-1"))),
            current=draw(st.frozensets(any_partition, max_size=12)),
        )
        for member in ids
    }
    return members, draw(partition_counts)


def expected_partitions(members: Mapping[str, MemberSpec], counts: Counts) -> set[Partition]:
    """Every partition of an existing topic that some member subscribes to."""
    topics = {t for spec in members.values() for t in spec.subscribed_topics if t in counts}
    return {(t, p) for t in topics for p in range(counts[t])}


def assert_complete_and_exclusive(
    members: Mapping[str, MemberSpec], counts: Counts, result: Result
) -> None:
    assert set(result) == set(members)
    owners: dict[Partition, str] = {}
    for member, partitions in result.items():
        for partition in partitions:
            assert partition not in owners, f"{partition} given to {owners[partition]} and {member}"
            assert partition[0] in members[member].subscribed_topics
            owners[partition] = member
    assert set(owners) == expected_partitions(members, counts)


def with_current(members: Mapping[str, MemberSpec], result: Result) -> Members:
    return {m: spec._replace(current=result[m]) for m, spec in members.items()}


def sizes(result: Result) -> list[int]:
    return [len(partitions) for partitions in result.values()]


@settings(max_examples=120)
@given(groups(), st.sampled_from(ASSIGNORS))
def test_each_subscribed_partition_goes_to_exactly_one_subscriber(
    group: tuple[Members, Counts], name: str
) -> None:
    members, counts = group
    assert_complete_and_exclusive(members, counts, assign(name, members, counts))


@settings(max_examples=100)
@given(groups(), st.sampled_from(ASSIGNORS), st.randoms(use_true_random=False))
def test_same_inputs_in_any_order_give_the_same_assignment(
    group: tuple[Members, Counts], name: str, rng: random.Random
) -> None:
    members, counts = group
    first = assign(name, members, counts)
    assert assign(name, members, counts) == first
    items = list(members.items())
    rng.shuffle(items)
    shuffled = {}
    for member, spec in items:
        current = list(spec.current)
        rng.shuffle(current)
        shuffled[member] = spec._replace(current=frozenset(current))
    assert assign(name, shuffled, dict(reversed(list(counts.items())))) == first


@settings(max_examples=120)
@given(groups(identical=True))
def test_uniform_with_identical_subscriptions_is_balanced_within_one(
    group: tuple[Members, Counts],
) -> None:
    members, counts = group
    result = assign("uniform", members, counts)
    assert max(sizes(result)) - min(sizes(result)) <= 1


@settings(max_examples=120)
@given(groups())
def test_uniform_owner_holds_at_most_one_more_than_any_other_subscriber(
    group: tuple[Members, Counts],
) -> None:
    """The documented guarantee for different subscriptions: no single move narrows a gap."""
    members, counts = group
    result = assign("uniform", members, counts)
    for owner, partitions in result.items():
        for topic in {t for t, _ in partitions}:
            for other, spec in members.items():
                if topic in spec.subscribed_topics:
                    assert len(result[owner]) <= len(result[other]) + 1, (owner, other, topic)


@settings(max_examples=120)
@given(groups())
def test_uniform_keeps_its_own_assignment(group: tuple[Members, Counts]) -> None:
    """Fed its own output as the current assignment, uniform changes nothing."""
    members, counts = group
    result = assign("uniform", members, counts)
    assert assign("uniform", with_current(members, result), counts) == result


def minimal_moves_after_join(kept: list[int], partitions: int) -> int:
    """The fewest partitions any balanced assignment of `partitions` over the old members plus
    one newcomer can take from the old members: the extra partitions (P % M) go to the
    largest holders, and each member loses what it holds above its quota."""
    quota, extra = divmod(partitions, len(kept) + 1)
    ranked = sorted(kept, reverse=True)
    return sum(
        max(0, held - quota - (1 if rank < extra else 0)) for rank, held in enumerate(ranked)
    )


@settings(max_examples=120)
@given(groups(identical=True), st.text("pq", min_size=5, max_size=5))
def test_uniform_join_moves_exactly_the_minimum(group: tuple[Members, Counts], joiner: str) -> None:
    members, counts = group
    before = assign("uniform", members, counts)
    spec = next(iter(members.values()))
    joined = with_current(members, before) | {joiner: spec._replace(current=frozenset())}
    after = assign("uniform", joined, counts)
    assert_complete_and_exclusive(joined, counts, after)
    moved = sum(len(before[m] - after[m]) for m in members)
    assert moved == minimal_moves_after_join(
        sizes(before), len(expected_partitions(members, counts))
    )
    assert moved == len(after[joiner])  # old members never gain each other's partitions
    assert max(sizes(after)) - min(sizes(after)) <= 1


@settings(max_examples=120)
@given(groups(identical=True), st.data())
def test_uniform_leave_moves_only_the_leavers_partitions(
    group: tuple[Members, Counts], data: st.DataObject
) -> None:
    members, counts = group
    before = assign("uniform", members, counts)
    leaver = data.draw(st.sampled_from(sorted(members)))
    stayed = {m: spec for m, spec in with_current(members, before).items() if m != leaver}
    after = assign("uniform", stayed, counts)
    assert_complete_and_exclusive(stayed, counts, after)
    for member in stayed:
        assert before[member] <= after[member]
    if stayed:
        assert max(sizes(after)) - min(sizes(after)) <= 1


def spec(topics: str, current: frozenset[Partition] = frozenset()) -> MemberSpec:
    return MemberSpec(frozenset(topics.split()), "", current)


def test_uniform_keeps_partitions_within_quota_and_tops_up_the_others() -> None:
    members = {
        "m1": spec("a", frozenset({("a", 0), ("a", 1), ("a", 2), ("a", 3)})),
        "m2": spec("a", frozenset({("a", 4)})),
        "m3": spec("a"),
    }
    result = assign("uniform", members, {"a": 6})
    assert result == {
        "m1": frozenset({("a", 0), ("a", 1)}),
        "m2": frozenset({("a", 4), ("a", 2)}),
        "m3": frozenset({("a", 3), ("a", 5)}),
    }


def test_a_partition_in_two_current_assignments_ends_up_with_one() -> None:
    doubled = frozenset({("a", 0), ("a", 1)})
    members = {"m1": spec("a", doubled), "m2": spec("a", doubled)}
    result = assign("uniform", members, {"a": 2})
    assert sorted(sizes(result)) == [1, 1]
    assert result["m1"] | result["m2"] == doubled


def test_uniform_with_different_subscriptions_moves_only_what_balance_needs() -> None:
    # m1 held all of a and b alone; m2 now joins subscribed to b only.
    everything = frozenset({("a", 0), ("a", 1), ("b", 0), ("b", 1), ("b", 2), ("b", 3)})
    members = {"m1": spec("a b", everything), "m2": spec("b")}
    result = assign("uniform", members, {"a": 2, "b": 4})
    assert result == {
        "m1": frozenset({("a", 0), ("a", 1), ("b", 0)}),
        "m2": frozenset({("b", 1), ("b", 2), ("b", 3)}),
    }


def test_uniform_balances_again_topics_an_earlier_move_unbalanced() -> None:
    # Balancing b (y -> z) leaves y light enough that x must then give it a partition of a.
    x_holds = frozenset(("a", p) for p in range(6))
    y_holds = frozenset(("b", p) for p in range(6))
    members = {"x": spec("a", x_holds), "y": spec("a b", y_holds), "z": spec("b")}
    result = assign("uniform", members, {"a": 6, "b": 6})
    assert result == {
        "x": x_holds - {("a", 5)},
        "y": frozenset({("b", 0), ("b", 1), ("b", 2), ("a", 5)}),
        "z": frozenset({("b", 3), ("b", 4), ("b", 5)}),
    }


def test_range_gives_contiguous_ranges_in_member_id_order() -> None:
    members = {
        "c": spec("t0 t1"),
        "a": spec("t0 t1 t2"),
        "b": spec(f"t0 {MISSING_TOPIC}"),
        "d": spec("t2"),
        "e": spec(""),
    }
    result = assign("range", members, {"t0": 7, "t1": 3, "t2": 1})
    assert result == {
        "a": frozenset({("t0", 0), ("t0", 1), ("t0", 2), ("t1", 0), ("t1", 1), ("t2", 0)}),
        "b": frozenset({("t0", 3), ("t0", 4)}),
        "c": frozenset({("t0", 5), ("t0", 6), ("t1", 2)}),
        "d": frozenset(),
        "e": frozenset(),
    }


def test_unknown_assignor_is_refused() -> None:
    with pytest.raises(UnsupportedAssignor, match="sticky"):
        assign("sticky", {"m1": spec("a")}, {"a": 1})
    assert issubclass(UnsupportedAssignor, ValueError)


def test_default_is_uniform_and_no_members_get_nothing() -> None:
    assert DEFAULT_ASSIGNOR == "uniform" and DEFAULT_ASSIGNOR in ASSIGNORS
    for name in ASSIGNORS:
        assert assign(name, {}, {"a": 3}) == {}
