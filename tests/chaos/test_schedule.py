"""The nemesis schedule is a pure function of the seed: a run replays from its seed."""

from __future__ import annotations

import itertools

from tests.chaos.nemesis import FAULT_KINDS, schedule


def test_the_same_seed_gives_the_same_schedule() -> None:
    assert schedule(7, FAULT_KINDS, 600) == schedule(7, FAULT_KINDS, 600)
    assert schedule(7, FAULT_KINDS, 600) != schedule(8, FAULT_KINDS, 600)


def test_every_kind_comes_once_even_when_time_is_short() -> None:
    faults = schedule(3, FAULT_KINDS, 30)
    assert sorted(f.kind for f in faults) == sorted(FAULT_KINDS)


def test_a_long_run_repeats_kinds_and_faults_do_not_overlap() -> None:
    faults = schedule(11, FAULT_KINDS, 600)
    assert len(faults) > 2 * len(FAULT_KINDS)
    for before, after in itertools.pairwise(faults):
        assert after.at_s >= before.at_s + before.hold_s
    assert faults[-1].at_s + faults[-1].hold_s <= 600
