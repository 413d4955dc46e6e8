"""The server-side partition assignors of the group coordinator (KIP-848): given the members'
subscriptions and current target assignments and the partition counts of the existing topics,
decide every member's new target assignment.

Pure and deterministic: the same inputs give the same output, whatever the iteration order of the
mappings and sets passed in (member ids and partitions are sorted before any decision). Callers may
rely on these, for both assignors:

- every partition of an existing topic that some member subscribes to goes to exactly one member
  subscribed to its topic, and nothing else is assigned (topics missing from `partition_counts`
  are ignored: they do not exist yet);
- every member id of `members` is a key of the result, possibly with an empty set;
- a partition listed in the current assignment of two members (which should not happen) still
  ends up with one.

`rack_id` is accepted and ignored (no rack-aware placement yet).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Final, NamedTuple

Partition = tuple[str, int]  # (topic, partition)

ASSIGNORS: Final = ("uniform", "range")
DEFAULT_ASSIGNOR: Final = "uniform"


class MemberSpec(NamedTuple):
    """What an assignor knows of one member."""

    subscribed_topics: frozenset[str]  # resolved names (the caller expands regexes)
    rack_id: str  # "" when unknown; ignored for now
    current: frozenset[Partition]  # the member's current TARGET assignment (for stickiness)


class UnsupportedAssignor(ValueError):
    """No server-side assignor of that name; the coordinator answers UNSUPPORTED_ASSIGNOR."""


Assignment = dict[str, frozenset[Partition]]
_Assignor = Callable[[Mapping[str, MemberSpec], Mapping[str, int]], Assignment]


def assign(
    name: str, members: Mapping[str, MemberSpec], partition_counts: Mapping[str, int]
) -> Assignment:
    """The new target assignment of every member by the assignor `name` (one of `ASSIGNORS`).

    Raises UnsupportedAssignor for any other name. Every member id of `members` is a key of the
    result (possibly with an empty set)."""
    assignor = _BY_NAME.get(name)
    if assignor is None:
        raise UnsupportedAssignor(f"unsupported assignor {name!r}; use one of {ASSIGNORS}")
    return assignor(members, partition_counts)


def uniform(members: Mapping[str, MemberSpec], partition_counts: Mapping[str, int]) -> Assignment:
    """Kafka's UniformAssignor: balanced and sticky.

    Identical subscriptions (after dropping topics that do not exist): partition counts of any two
    members differ by at most one, and a member keeps as many of its current partitions as its
    quota allows (quota P // M, plus one for the P % M members currently holding most). So a
    partition moves only when it must: when a member joins, exactly the sum over members of
    max(0, kept - quota) partitions move; when one leaves a group this assignor balanced, only
    its partitions move.

    Different subscriptions: members first keep every current partition of a topic they still
    subscribe to, the rest go to the least loaded subscriber (most constrained topics first),
    then partitions move one at a time from a member to a less loaded one until, for every
    partition, its owner holds at most one more partition than any other member subscribed to
    its topic. That is the guarantee (no single move can narrow the gap); a partition moves only
    to restore it. A globally optimal balance, which may need chains of moves across topics, is
    not promised.
    """
    member_ids = sorted(members)
    topics_of = {
        m: _existing_topics(members[m].subscribed_topics, partition_counts) for m in member_ids
    }
    kept = _valid_current(member_ids, members, topics_of, partition_counts)
    if len({topics_of[m] for m in member_ids}) <= 1:
        topics = topics_of[member_ids[0]] if member_ids else frozenset()
        lists = _uniform_identical(member_ids, _partitions(topics, partition_counts), kept)
    else:
        lists = _uniform_different(member_ids, topics_of, kept, partition_counts)
    return {m: frozenset(lists[m]) for m in member_ids}


def range_(members: Mapping[str, MemberSpec], partition_counts: Mapping[str, int]) -> Assignment:
    """Kafka's RangeAssignor: per topic, its subscribers sorted by member id get contiguous ranges
    of partitions in that order, the first (partitions % subscribers) one partition more than the
    others. Not sticky; deterministic."""
    result: dict[str, set[Partition]] = {m: set() for m in members}
    subscribers = _subscribers(sorted(members), members, partition_counts)
    for topic, topic_members in subscribers.items():
        base, extra = divmod(partition_counts[topic], len(topic_members))
        start = 0
        for index, member in enumerate(topic_members):
            length = base + (1 if index < extra else 0)
            result[member].update((topic, p) for p in range(start, start + length))
            start += length
    return {m: frozenset(result[m]) for m in sorted(result)}


def _existing_topics(
    subscribed: Iterable[str], partition_counts: Mapping[str, int]
) -> frozenset[str]:
    """The subscribed topics that exist and have partitions."""
    return frozenset(t for t in subscribed if partition_counts.get(t, 0) > 0)


def _partitions(topics: Iterable[str], partition_counts: Mapping[str, int]) -> list[Partition]:
    """All partitions of `topics`, sorted."""
    return [(t, p) for t in sorted(topics) for p in range(partition_counts[t])]


def _subscribers(
    member_ids: list[str], members: Mapping[str, MemberSpec], partition_counts: Mapping[str, int]
) -> dict[str, list[str]]:
    """Existing topic -> its subscribers in the order of `member_ids`; only subscribed topics."""
    subscribers: dict[str, list[str]] = {}
    for member in member_ids:
        for topic in sorted(_existing_topics(members[member].subscribed_topics, partition_counts)):
            subscribers.setdefault(topic, []).append(member)
    return dict(sorted(subscribers.items()))


def _valid_current(
    member_ids: list[str],
    members: Mapping[str, MemberSpec],
    topics_of: Mapping[str, frozenset[str]],
    partition_counts: Mapping[str, int],
) -> dict[str, list[Partition]]:
    """Per member, the sorted current partitions it may keep: of a topic it still subscribes to,
    still existing, and not already claimed by a member with a smaller id (a partition in two
    current assignments goes to the first)."""
    claimed: set[Partition] = set()
    kept: dict[str, list[Partition]] = {}
    for member in member_ids:
        own: list[Partition] = []
        for partition in sorted(members[member].current):
            topic, index = partition
            valid = topic in topics_of[member] and 0 <= index < partition_counts[topic]
            if valid and partition not in claimed:
                claimed.add(partition)
                own.append(partition)
        kept[member] = own
    return kept


def _uniform_identical(
    member_ids: list[str], partitions: list[Partition], kept: Mapping[str, list[Partition]]
) -> dict[str, list[Partition]]:
    """Quotas P // M, one more for the P % M members holding most (ties: smaller id); each member
    keeps its first `quota` valid partitions and is topped up from the free ones in order."""
    if not member_ids:
        return {}
    quota, extra = divmod(len(partitions), len(member_ids))
    by_holding = sorted(member_ids, key=lambda m: (-len(kept[m]), m))
    quotas = {m: quota + (1 if rank < extra else 0) for rank, m in enumerate(by_holding)}
    result = {m: kept[m][: quotas[m]] for m in member_ids}
    taken = {p for owned in result.values() for p in owned}
    free = (p for p in partitions if p not in taken)
    for member in member_ids:
        result[member].extend(itertools.islice(free, quotas[member] - len(result[member])))
    return result


def _uniform_different(
    member_ids: list[str],
    topics_of: Mapping[str, frozenset[str]],
    kept: Mapping[str, list[Partition]],
    partition_counts: Mapping[str, int],
) -> dict[str, list[Partition]]:
    """Keep, fill, then balance (see `uniform`)."""
    subscribers: dict[str, list[str]] = {}
    for member in member_ids:
        for topic in sorted(topics_of[member]):
            subscribers.setdefault(topic, []).append(member)  # in member id order
    # Topics with fewer subscribers first: their partitions have fewer places to go.
    topics = sorted(subscribers, key=lambda t: (len(subscribers[t]), t))
    owner = {p: m for m in member_ids for p in kept[m]}
    load = {m: len(kept[m]) for m in member_ids}
    for topic in topics:
        _fill_topic(topic, partition_counts[topic], subscribers[topic], owner, load)
    # Each move lowers the sum of squared loads by at least 2, so the passes end.
    moved = True
    while moved:
        moved = False
        for topic in topics:
            moves = _balance_topic(topic, partition_counts[topic], subscribers[topic], owner, load)
            moved = moved or moves > 0
    result: dict[str, list[Partition]] = {m: [] for m in member_ids}
    for partition, member in owner.items():
        result[member].append(partition)
    return result


def _fill_topic(
    topic: str,
    count: int,
    subscribers: list[str],
    owner: dict[Partition, str],
    load: dict[str, int],
) -> None:
    """Give each unowned partition of `topic` to its least loaded subscriber (ties: smaller id)."""
    unowned = [(topic, p) for p in range(count) if (topic, p) not in owner]
    if not unowned:
        return
    # Only this topic's subscribers change load here, and each has exactly one heap entry.
    heap = [(load[m], m) for m in subscribers]
    heapq.heapify(heap)
    for partition in unowned:
        _, member = heapq.heappop(heap)
        owner[partition] = member
        load[member] += 1
        heapq.heappush(heap, (load[member], member))


def _balance_topic(
    topic: str,
    count: int,
    subscribers: list[str],
    owner: dict[Partition, str],
    load: dict[str, int],
) -> int:
    """Move partitions of `topic` from its most loaded owner to its least loaded subscriber while
    they differ by two or more; returns the number moved. Heap entries whose load is no longer
    the member's are stale and skipped."""
    holdings: dict[str, list[int]] = {}
    for index in range(count):
        holdings.setdefault(owner[(topic, index)], []).append(index)
    givers = [(-load[m], m) for m in holdings]
    takers = [(load[m], m) for m in subscribers]
    heapq.heapify(givers)
    heapq.heapify(takers)
    moves = 0
    while givers:
        giver_load, giver = -givers[0][0], givers[0][1]
        if giver_load != load[giver] or not holdings[giver]:
            heapq.heappop(givers)
            continue
        while takers[0][0] != load[takers[0][1]]:
            heapq.heappop(takers)
        taker = takers[0][1]
        if giver_load - load[taker] < 2:
            break
        index = holdings[giver].pop()  # the giver's highest partition of this topic
        holdings.setdefault(taker, []).append(index)
        owner[(topic, index)] = taker
        load[giver] -= 1
        load[taker] += 1
        moves += 1
        for member in (giver, taker):
            heapq.heappush(givers, (-load[member], member))
            heapq.heappush(takers, (load[member], member))
    return moves


_BY_NAME: Final[Mapping[str, _Assignor]] = {"uniform": uniform, "range": range_}
