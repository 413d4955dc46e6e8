"""The message strategies keep a request small enough for the transport (no cluster needed)."""

from __future__ import annotations

from .messages import REPEATED_BYTES_MAX, repeated


def test_a_repeated_list_of_big_items_stays_within_the_byte_budget() -> None:
    items = ["y" * 40_000] * 3
    drawn = repeated(items, 400)
    assert len(drawn) >= len(items)
    assert sum(len(item) for item in drawn) <= REPEATED_BYTES_MAX


def test_a_repeated_list_of_small_items_is_repeated_as_drawn() -> None:
    assert repeated(["a", "b"], 400) == ["a", "b"] * 400
    assert repeated([], 400) == []
