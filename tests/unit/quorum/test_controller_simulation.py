"""Three `ControllerCore`s over a simulated Raft log with leader changes, lost, delayed and
zombie appends and restarts (see `controller_simulation.py` for what is checked after every
step). Each run prints its seed; `PYKRAFT_SEED=N` replays one (default: the fixed seeds below).
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from google.protobuf.message import Message

from pykraft.proto import common_pb2
from pykraft.quorum.config import ControllerConfig
from pykraft.quorum.controller_core import ControllerCore
from pykraft.quorum.events import Answer, Event, IdSource, Output

from .controller_simulation import Simulation, SimulationFailure

SEEDS = [int(os.environ["PYKRAFT_SEED"])] if "PYKRAFT_SEED" in os.environ else [1, 2, 3, 4]
STEPS = 3000


@pytest.mark.parametrize("seed", SEEDS)
def test_controllers_keep_their_promises_under_faults(seed: int) -> None:
    print(f"controller simulation seed {seed} (replay: PYKRAFT_SEED={seed})")
    stats = Simulation(seed).run(STEPS)
    print(dict(stats))
    # Each kind of event the checks are about happened, so they checked something.
    kinds = ("answered_after_commit", "not_controller", "elections", "restarts")
    for kind in (*kinds, "entries_of_several_writes"):
        assert stats[kind] > 0, f"seed {seed}: no {kind} in {dict(stats)}"


def test_a_seed_replays_the_same_run() -> None:
    assert Simulation(7).run(STEPS) == Simulation(7).run(STEPS)


def test_the_fixed_seeds_exercise_deposed_batches() -> None:
    stats: Counter[str] = Counter()
    for seed in (1, 2, 3, 4):
        stats += Simulation(seed).run(STEPS)
    assert stats["deposed_batches_rejected"] > 0, dict(stats)


class AnswersBeforeCommit(ControllerCore):
    """Broken on purpose: answers each write as soon as it appends, as if committed."""

    def __init__(self, config: ControllerConfig, new_id: IdSource) -> None:
        super().__init__(config, new_id)
        self._answered_early: set[int] = set()

    def step(self, event: Event, now_ms: int) -> Output:
        out = self.step_correctly(event, now_ms)
        out.answers = [a for a in out.answers if a.request_id not in self._answered_early]
        for append in out.appends:
            for request_id in append.request_ids:
                self._answered_early.add(request_id)
                out.answers.append(Answer(request_id, self._ok(request_id)))
        return out

    def step_correctly(self, event: Event, now_ms: int) -> Output:
        return super().step(event, now_ms)

    def _ok(self, request_id: int) -> Message:
        return common_pb2.ResponseHeader()


def test_the_checker_catches_an_answer_before_commit() -> None:
    with pytest.raises(SimulationFailure, match="answered before its records committed"):
        Simulation(1, core_factory=AnswersBeforeCommit).run(STEPS)
