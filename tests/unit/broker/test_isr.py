"""The pure rules of replication: high-water mark over the ISR (strict min ISR), ISR shrink and
expansion, when a follower is caught up, and the leader-epoch decisions of both sides."""

from __future__ import annotations

import pytest

from pykraft.broker.isr import (
    FollowerState,
    diverging_epoch,
    high_watermark_candidate,
    out_of_sync_replicas,
    replicas_to_add,
    truncation_offset,
)


def _at(log_end_offset: int, caught_up_ms: int = 0) -> FollowerState:
    return FollowerState(log_end_offset=log_end_offset, last_caught_up_ms=caught_up_ms)


@pytest.mark.parametrize(
    ("leader_end", "isr", "followers", "min_isr", "expected"),
    [
        (10, (1,), {}, 1, 10),  # the leader alone: its log end
        (10, (1, 2, 3), {2: _at(7), 3: _at(9)}, 2, 7),  # the slowest in-sync follower
        (10, (1, 2), {2: _at(7), 3: _at(1)}, 2, 7),  # out-of-sync replicas do not count
        (10, (1, 2, 3), {2: _at(12), 3: _at(12)}, 2, 10),  # never above the leader's end
        (10, (1,), {}, 2, None),  # strict min ISR: no advance with ISR < min.insync.replicas
        (10, (1, 2), {}, 2, None),  # a follower never heard of holds it back
        (0, (1, 2), {2: _at(0)}, 2, 0),
    ],
)
def test_high_watermark_candidate(
    leader_end: int,
    isr: tuple[int, ...],
    followers: dict[int, FollowerState],
    min_isr: int,
    expected: int | None,
) -> None:
    assert (
        high_watermark_candidate(
            leader_id=1,
            leader_end_offset=leader_end,
            isr=isr,
            followers=followers,
            min_insync_replicas=min_isr,
        )
        == expected
    )


def test_follower_caught_up_now_or_as_of_its_previous_fetch() -> None:
    state = FollowerState(last_caught_up_ms=0)
    state = state.after_fetch(5, leader_end_offset=5, now_ms=100)  # reached the end
    assert (state.log_end_offset, state.last_caught_up_ms) == (5, 100)
    state = state.after_fetch(5, leader_end_offset=8, now_ms=200)  # behind, not since last
    assert state.last_caught_up_ms == 100
    state = state.after_fetch(8, leader_end_offset=12, now_ms=300)  # reached the end of 200
    assert (state.log_end_offset, state.last_caught_up_ms) == (8, 200)
    state = state.after_fetch(9, leader_end_offset=20, now_ms=400)  # fell behind
    assert state.last_caught_up_ms == 200


def test_follower_log_end_is_its_fetch_offset_even_after_losing_records() -> None:
    state = _at(9).after_fetch(4, leader_end_offset=10, now_ms=1)
    assert state.log_end_offset == 4


@pytest.mark.parametrize(
    ("caught_up", "now_ms", "expected"),
    [
        ({2: 900, 3: 900}, 1000, set()),
        ({2: 900, 3: 0}, 1000, {3}),  # 1000 ms behind with a 500 ms limit
        ({2: 500, 3: 499}, 1000, {3}),  # exactly the limit is still in sync
        ({2: 0, 3: 0}, 1000, {2, 3}),
    ],
)
def test_out_of_sync_replicas(caught_up: dict[int, int], now_ms: int, expected: set[int]) -> None:
    followers = {r: _at(0, ms) for r, ms in caught_up.items()}
    lagging = out_of_sync_replicas(
        leader_id=1,
        isr=(1, 2, 3),
        followers=followers,
        leader_end_offset=10,
        now_ms=now_ms,
        lag_time_max_ms=500,
    )
    assert lagging == expected


def test_a_follower_at_the_leader_log_end_is_in_sync_however_long_ago_it_fetched() -> None:
    """Kafka's ReplicaState.isCaughtUp: a follower holding the whole log lags nothing. A fetch
    session (KIP-227) does not name an idle partition, so its last caught-up time stays old."""
    followers = {2: _at(10, 0), 3: _at(9, 0)}
    lagging = out_of_sync_replicas(
        leader_id=1,
        isr=(1, 2, 3),
        followers=followers,
        leader_end_offset=10,
        now_ms=100_000,
        lag_time_max_ms=500,
    )
    assert lagging == {3}


@pytest.mark.parametrize(
    ("follower_end", "high_watermark", "epoch_start", "eligible", "caught_up_ms", "expected"),
    [
        (10, 10, 0, (1, 2, 3), 900, {3}),  # reached the high-water mark
        (9, 10, 0, (1, 2, 3), 900, set()),  # not yet
        (10, 10, 12, (1, 2, 3), 900, set()),  # not yet in the current leader epoch
        (12, 10, 12, (1, 2, 3), 900, {3}),
        (10, 10, 0, (1, 2), 900, set()),  # fenced brokers stay out
        (10, 10, 0, (1, 2, 3), 400, set()),  # stopped fetching: it would be dropped at once
    ],
)
def test_replicas_to_add(
    follower_end: int,
    high_watermark: int,
    epoch_start: int,
    eligible: tuple[int, ...],
    caught_up_ms: int,
    expected: set[int],
) -> None:
    joining = replicas_to_add(
        isr=(1, 2),
        replicas=(1, 2, 3),
        followers={2: _at(10), 3: _at(follower_end, caught_up_ms)},
        high_watermark=high_watermark,
        leader_epoch_start_offset=epoch_start,
        eligible={b: b for b in eligible},
        now_ms=1000,
        lag_time_max_ms=500,
    )
    assert joining == expected


@pytest.mark.parametrize(
    ("last_fetched_epoch", "fetch_offset", "leader_answer", "expected"),
    [
        (-1, 0, (-1, -1), None),  # an empty follower log: nothing to check
        (3, 50, (3, 80), None),  # same epoch, the leader holds more: a prefix
        (3, 80, (3, 80), None),
        (3, 90, (3, 80), (3, 80)),  # the follower holds more of epoch 3 than the leader
        (4, 90, (3, 80), (3, 80)),  # the leader never wrote epoch 4: back to where 3 ended
        (7, 95, (-1, -1), (5, 100)),  # above the leader's latest epoch: ends at its log end
    ],
)
def test_diverging_epoch(
    last_fetched_epoch: int,
    fetch_offset: int,
    leader_answer: tuple[int, int],
    expected: tuple[int, int] | None,
) -> None:
    decided = diverging_epoch(
        last_fetched_epoch=last_fetched_epoch,
        fetch_offset=fetch_offset,
        leader_answer=leader_answer,
        leader_latest_epoch=5,
        leader_end_offset=100,
        leader_start_offset=0,
    )
    assert decided == expected


def test_diverging_epoch_of_a_leader_without_epochs_is_its_log_start() -> None:
    decided = diverging_epoch(
        last_fetched_epoch=2,
        fetch_offset=30,
        leader_answer=(-1, -1),
        leader_latest_epoch=-1,
        leader_end_offset=20,
        leader_start_offset=20,
    )
    assert decided == (-1, 20)


@pytest.mark.parametrize(
    ("diverging", "follower_answer", "log_end", "expected"),
    [
        ((3, 80), (3, 90), 90, 80),  # same epoch: the smaller end
        ((3, 80), (3, 70), 90, 70),
        ((3, 80), (2, 60), 90, 60),  # the follower never had epoch 3: end of its epoch 2
        ((3, 80), (-1, -1), 50, 50),  # knows no epoch so high: keep up to the leader's end
        ((3, 80), (3, 120), 100, 80),
    ],
)
def test_truncation_offset(
    diverging: tuple[int, int], follower_answer: tuple[int, int], log_end: int, expected: int
) -> None:
    cut = truncation_offset(
        diverging=diverging, follower_answer=follower_answer, log_end_offset=log_end
    )
    assert cut == expected


def test_truncation_ignores_a_stale_high_watermark() -> None:
    """KIP-101 scenario 1: the follower holds m2 (offset 1) of epoch 0 past its stale HW of 1;
    the leader has it too, so nothing is cut."""
    cut = truncation_offset(diverging=(0, 2), follower_answer=(0, 2), log_end_offset=2)
    assert cut == 2
