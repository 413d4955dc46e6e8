"""Idempotent producers on a partition, the state alone: the leader's sequence and epoch rules (a
table), duplicates among the last five batches and not beyond, and requests of several batches.
Snapshots and the state on a partition log are in test_producer_state_log.py, the model-based
test in test_producer_state_model.py."""

from __future__ import annotations

import pytest

from pykraft.broker.log import LogError
from pykraft.broker.log import producer_state as producer_state_module
from pykraft.broker.log.producer_state import SEQUENCE_MAX, Duplicate, ProducerStateManager
from pykraft.proto import common_pb2

from .idempotent import NEW, ONE_BY_ONE, RULES, Sent, header_of, state_after
from .support import NOW_MS


def check(state: ProducerStateManager, *requests: Sent) -> Duplicate | None:
    return state.check_leader_append(
        [header_of(sent) for sent in requests], base_offset=state.end_offset
    )


# --- 1. the leader's rules ---


@pytest.mark.parametrize(("history", "sent", "expected"), [c[1:] for c in RULES],
                         ids=[c[0] for c in RULES])  # fmt: skip
def test_the_leaders_rules(history: list[Sent], sent: Sent, expected: object) -> None:
    state = state_after(history)
    before = state.entries()
    if expected == NEW:
        assert check(state, sent) is None
    elif isinstance(expected, tuple):
        duplicate = check(state, sent)
        assert duplicate is not None
        assert (duplicate.first_offset, duplicate.last_offset) == expected
        assert duplicate.max_timestamp == NOW_MS
    else:
        with pytest.raises(LogError) as raised:
            check(state, sent)
        assert raised.value.error_code == expected
    assert state.entries() == before, "a check changes nothing"


def test_an_out_of_order_batch_names_the_expected_and_the_sent_sequence() -> None:
    state = state_after([(7, 2, 0, 3)])
    with pytest.raises(LogError, match=r"producer 7 \(epoch 2\) sent sequence 9, expected 3"):
        check(state, (7, 2, 9, 1))


def test_sequences_wrap_to_zero_after_the_largest() -> None:
    state = state_after([(1, 0, SEQUENCE_MAX - 1, 2)])
    entry = state.entry(1)
    assert entry is not None and entry.last_sequence == SEQUENCE_MAX
    assert check(state, (1, 0, 0, 1)) is None
    with pytest.raises(LogError) as raised:
        check(state, (1, 0, SEQUENCE_MAX, 1))
    assert raised.value.error_code == common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_batch_spanning_the_wrap_continues_after_it_and_is_recognised_again() -> None:
    state = state_after([(1, 0, SEQUENCE_MAX - 1, 4)])
    entry = state.entry(1)
    assert entry is not None
    # MAX - 1, MAX, 0, 1
    assert (entry.batches[0].first_sequence, entry.last_sequence) == (SEQUENCE_MAX - 1, 1)
    assert check(state, (1, 0, 2, 1)) is None
    duplicate = check(state, (1, 0, SEQUENCE_MAX - 1, 4))
    assert duplicate is not None and (duplicate.first_offset, duplicate.last_offset) == (0, 3)


def test_an_epoch_bump_starts_an_empty_batch_cache() -> None:
    state = state_after([(1, 0, 0, 2), (1, 0, 2, 2), (1, 1, 0, 1)])
    entry = state.entry(1)
    assert entry is not None and entry.producer_epoch == 1
    assert [(b.first_sequence, b.last_sequence) for b in entry.batches] == [(0, 0)]


def test_only_the_last_five_batches_are_kept() -> None:
    state = state_after([*ONE_BY_ONE, (1, 0, 6, 1)])
    entry = state.entry(1)
    assert entry is not None
    assert [b.first_sequence for b in entry.batches] == [2, 3, 4, 5, 6]
    assert [b.first_offset for b in entry.batches] == [2, 3, 4, 5, 6]


# --- 2. requests with several batches ---


def test_batches_of_one_request_are_checked_against_the_earlier_ones() -> None:
    state = state_after([(1, 0, 0, 2)])
    assert check(state, (1, 0, 2, 2), (1, 0, 4, 1), (2, 0, 0, 1)) is None
    with pytest.raises(LogError) as raised:
        check(state, (1, 0, 2, 2), (1, 0, 5, 1))
    assert raised.value.error_code == common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert state.entry(2) is None and state.end_offset == 2, "nothing was taken in"


def test_a_request_of_duplicates_answers_the_original_offsets() -> None:
    state = state_after([(1, 0, 0, 2), (2, 0, 0, 3), (1, 0, 2, 1)])
    duplicate = check(state, (1, 0, 0, 2), (2, 0, 0, 3), (1, 0, 2, 1))
    assert duplicate == Duplicate(first_offset=0, last_offset=5, max_timestamp=NOW_MS)


@pytest.mark.parametrize(
    "request_",
    [
        [(1, 0, 0, 2), (1, 0, 2, 1)],  # a duplicate, then the next batch
        [(1, 0, 2, 1), (1, 0, 2, 1)],  # a new batch twice: the second repeats the first
        [(1, 0, 0, 2), (-1, -1, -1, 1)],  # a duplicate and a batch without producer id
    ],
)
def test_duplicates_mixed_with_new_batches_are_refused(request_: list[Sent]) -> None:
    state = state_after([(1, 0, 0, 2)])
    with pytest.raises(LogError, match="mixes") as raised:
        check(state, *request_)
    assert raised.value.error_code == common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_past_producers_max_the_least_recent_writer_is_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(producer_state_module, "PRODUCERS_MAX", 2)
    state = state_after([(1, 0, 0, 1), (2, 0, 0, 1), (1, 0, 1, 1), (3, 0, 0, 1)])
    assert [entry.producer_id for entry in state.entries()] == [1, 3]
    with pytest.raises(LogError) as raised:
        check(state, (2, 0, 1, 1))
    assert raised.value.error_code == common_pb2.UNKNOWN_PRODUCER_ID
