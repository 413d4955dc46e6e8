"""The pure arithmetic of replication: the high-water mark over the ISR, who is out of sync, who
may join, and the leader-epoch decisions of KIP-101/KIP-320 on both sides of a follower fetch.

Nothing here reads a clock or touches a log: callers pass `now_ms`, log end offsets and the
answers of `PartitionLog.end_offset_for_epoch`, so every rule is table-tested.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Final

UNDEFINED_EPOCH: Final = -1
UNDEFINED_OFFSET: Final = -1
UNDEFINED_BROKER_EPOCH: Final = -1


@dataclass(frozen=True, slots=True)
class FollowerState:
    """What the leader knows of one follower in the current leader epoch: its log end offset
    (the offset it fetched last), when it was last caught up to the leader's log end, and the
    leader's log end at its previous fetch (Kafka's rule for "caught up" between fetches)."""

    log_end_offset: int = UNDEFINED_OFFSET
    last_caught_up_ms: int = 0
    leader_end_at_last_fetch: int = UNDEFINED_OFFSET
    last_fetch_ms: int = 0
    # The broker epoch of the incarnation that sent the last fetch (KIP-903); -1: not said.
    broker_epoch: int = UNDEFINED_BROKER_EPOCH
    # The high-water mark in the last answer sent to it (Kafka's lastSentHighWatermark): a
    # higher one is news that answers its long poll (Partition.high_watermark_for).
    high_watermark_sent: int = UNDEFINED_OFFSET
    # Its log start offset, as its last fetch said (-1: not said).
    log_start_offset: int = UNDEFINED_OFFSET

    def after_fetch(
        self,
        fetch_offset: int,
        leader_end_offset: int,
        now_ms: int,
        broker_epoch: int = UNDEFINED_BROKER_EPOCH,
        *,
        log_start_offset: int = UNDEFINED_OFFSET,
    ) -> FollowerState:
        """The state after a fetch at `fetch_offset` while the leader's log ends at
        `leader_end_offset`: caught up now if it reached that end, or as of its previous fetch if
        it reached the end the leader had then (so a busy leader does not shrink a keeping-up
        follower). The log end offset is the fetch offset even if lower than before: a follower
        restarted after kill -9 may have lost records it had not flushed (as Kafka)."""
        caught_up_ms = self.last_caught_up_ms
        if fetch_offset >= leader_end_offset:
            caught_up_ms = now_ms
        elif fetch_offset >= self.leader_end_at_last_fetch >= 0:
            caught_up_ms = max(caught_up_ms, self.last_fetch_ms)
        return FollowerState(  # every field named: dataclasses.replace costs twice as much
            log_end_offset=fetch_offset,
            last_caught_up_ms=caught_up_ms,
            leader_end_at_last_fetch=leader_end_offset,
            last_fetch_ms=now_ms,
            broker_epoch=broker_epoch,
            high_watermark_sent=self.high_watermark_sent,
            log_start_offset=log_start_offset,
        )

    def caught_up_at(self, now_ms: int) -> FollowerState:
        return dataclasses.replace(self, last_caught_up_ms=now_ms)

    def after_answer(self, high_watermark: int) -> FollowerState:
        """The state once an answer carrying `high_watermark` went to the follower."""
        return dataclasses.replace(self, high_watermark_sent=high_watermark)


def high_watermark_candidate(
    *,
    leader_id: int,
    leader_end_offset: int,
    isr: Iterable[int],
    followers: Mapping[int, FollowerState],
    min_insync_replicas: int,
    joining: Iterable[int] = (),
) -> int | None:
    """The smallest log end offset over the maximal ISR (KIP-497: the ISR and the replicas
    `joining` it by an AlterPartition in flight, which may lead once it commits; the leader's
    own end for itself), or None while the ISR is smaller than min.insync.replicas (strict min
    ISR, KIP-966). The caller keeps the high-water mark from moving back."""
    members = set(isr)
    if len(members) < min_insync_replicas:
        return None
    candidate = leader_end_offset
    for replica in members | set(joining):
        if replica != leader_id:
            state = followers.get(replica)
            candidate = min(candidate, UNDEFINED_OFFSET if state is None else state.log_end_offset)
    return candidate if candidate >= 0 else None


def note_caught_up_until_append(
    followers: MutableMapping[int, FollowerState],
    old_end_offset: int,
    now_ms: int,
    last_fetch_ms: Callable[[int], int],
) -> None:
    """Followers that held the whole log (to `old_end_offset`) when an append came at `now_ms`
    were caught up as of their last fetch from this broker (`last_fetch_ms`, by broker id):
    in its fetch session (`fetch_sessions`) each such fetch polled this partition at the log
    end, though the leader did not look at it. Kafka's leader sees every poll; without this
    the first append after a quiet spell would drop them from the ISR, while a follower that
    stopped fetching long ago still leaves it at once."""
    for replica, state in followers.items():
        if state.log_end_offset != old_end_offset:
            continue
        polled_ms = min(now_ms, last_fetch_ms(replica))
        if polled_ms > state.last_caught_up_ms:
            followers[replica] = state.caught_up_at(polled_ms)


def out_of_sync_replicas(
    *,
    leader_id: int,
    isr: Iterable[int],
    followers: Mapping[int, FollowerState],
    leader_end_offset: int,
    now_ms: int,
    lag_time_max_ms: int,
) -> set[int]:
    """ISR members (never the leader) not caught up within `lag_time_max_ms`, Kafka's
    replica.lag.time.max.ms rule, except those holding the leader's whole log (Kafka's
    ReplicaState.isCaughtUp): a follower's fetch session names an idle partition only when
    its fetch changes (`fetch_sessions`), so its last caught-up time there stays old. A
    follower never seen counts from its default state (0), so the caller must seed it with the
    time it became leader."""
    lagging: set[int] = set()
    for replica in isr:
        if replica == leader_id:
            continue
        state = followers.get(replica, FollowerState())
        if state.log_end_offset == leader_end_offset:
            continue
        if now_ms - state.last_caught_up_ms > lag_time_max_ms:
            lagging.add(replica)
    return lagging


def replicas_to_add(
    *,
    isr: Iterable[int],
    replicas: Iterable[int],
    followers: Mapping[int, FollowerState],
    high_watermark: int,
    leader_epoch_start_offset: int,
    eligible: Mapping[int, int],
    now_ms: int,
    lag_time_max_ms: int,
) -> set[int]:
    """Assigned replicas outside the ISR whose log end reached the high-water mark and the start
    of the current leader epoch (so they hold this epoch's history), that were caught up within
    `lag_time_max_ms` (so a stopped follower is not taken back only to be dropped again), among
    `eligible` brokers (registered and unfenced, with their broker epochs), fetching as the
    incarnation registered now (KIP-903: a fetch from one that restarted since tells nothing of
    what the new one holds)."""
    in_sync = set(isr)
    joining: set[int] = set()
    for replica in replicas:
        state = followers.get(replica)
        if replica in in_sync or replica not in eligible or state is None:
            continue
        if state.broker_epoch not in (UNDEFINED_BROKER_EPOCH, eligible[replica]):
            continue
        recent = now_ms - state.last_caught_up_ms <= lag_time_max_ms
        if recent and state.log_end_offset >= max(high_watermark, leader_epoch_start_offset):
            joining.add(replica)
    return joining


def diverging_epoch(
    *,
    last_fetched_epoch: int,
    fetch_offset: int,
    leader_answer: tuple[int, int],
    leader_latest_epoch: int,
    leader_end_offset: int,
    leader_start_offset: int,
) -> tuple[int, int] | None:
    """The leader's side of KIP-320: given `leader_answer` = end_offset_for_epoch(
    last_fetched_epoch) on the leader, the (epoch, end offset) the follower must truncate to,
    or None when its log is a prefix of the leader's (or it holds no batch yet).

    The leader's epoch cache only names epochs that wrote batches, so an epoch above its latest
    (a deposed leader's unreplicated epoch) ends where the leader's log ends, under the leader's
    latest epoch; with no epoch at all the leader holds nothing before its log start."""
    if last_fetched_epoch < 0:
        return None
    epoch, end_offset = leader_answer
    if epoch == UNDEFINED_EPOCH:
        if leader_latest_epoch == UNDEFINED_EPOCH:
            epoch, end_offset = UNDEFINED_EPOCH, leader_start_offset
        else:
            epoch, end_offset = leader_latest_epoch, leader_end_offset
    if epoch != last_fetched_epoch or end_offset < fetch_offset:
        return epoch, end_offset
    return None


def truncation_offset(
    *, diverging: tuple[int, int], follower_answer: tuple[int, int], log_end_offset: int
) -> int:
    """The follower's side of KIP-101: where to cut its log after the leader answered
    `diverging` = (epoch, end offset) and the follower's own end_offset_for_epoch(epoch) is
    `follower_answer`. Never the stale high-water mark: the cut is where the epochs part.

    If the follower knows the leader's epoch too, the cut is the smaller of both ends. If it
    does not (its epochs are below or differ), it cuts at the end of its own largest epoch below
    the leader's, and the next fetch (with that epoch) finds the exact point. A
    leader holding no epoch at all answers UNDEFINED: the caller then starts its log afresh at
    the leader's log start (truncate_fully_and_start_at), as nothing it holds is the leader's."""
    leader_epoch, leader_end = diverging
    assert leader_epoch != UNDEFINED_EPOCH, diverging
    follower_epoch, follower_end = follower_answer
    if follower_epoch == UNDEFINED_EPOCH or follower_end < 0:
        return max(0, min(leader_end, log_end_offset))
    if follower_epoch == leader_epoch:
        return min(leader_end, follower_end, log_end_offset)
    return min(follower_end, log_end_offset)
