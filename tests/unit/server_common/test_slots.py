"""`Slots`: at most `slots_max` held at once, taken without blocking."""

from __future__ import annotations

import pytest

from pykraft.server_common.slots import Slots


def test_slots_are_taken_up_to_the_limit_and_free_again_once_given_back() -> None:
    slots = Slots(2)
    assert slots.take() and slots.take()
    assert not slots.take()  # every slot held: nothing taken
    assert slots.held == 2
    slots.give_back()
    assert slots.take()
    assert slots.held == 2


def test_giving_back_a_slot_never_taken_is_refused() -> None:
    with pytest.raises(AssertionError):
        Slots(1).give_back()
