"""The short chaos run of `make test`: three seeds of about a minute each, which between them
inject every fault kind (partitions only where network namespaces can be made; otherwise they
are skipped with the reason printed). Each run must be valid: no anomaly that its producers'
guarantees forbid (see checker.py), and the cluster recovered after every fault.

Replay a run with its seed: `PYKRAFT_SEED=<seed> python -m tests.chaos.runner --seconds 55
--kinds <kinds>`; `PYKRAFT_SEED=N` also moves this test's seeds to N, N+1, N+2.
"""

from __future__ import annotations

import os

import pytest

from tests.chaos.nemesis import FAULT_KINDS, PARTITION_KINDS
from tests.chaos.runner import RunConfig, run

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

SECONDS = 55.0
SHORT_RUNS = (
    ("kill-broker", "pause-broker", "partition-majority", "partition-bridge"),
    ("rolling-restart", "partition-isolate-leader", "kill-broker"),
    ("kill-controller", "kill-all-controllers", "partition-isolate-leader", "partition-link-down"),
)


def test_the_short_runs_cover_every_fault_kind() -> None:
    assert {kind for kinds in SHORT_RUNS for kind in kinds} == set(FAULT_KINDS)


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("index", "kinds"), list(enumerate(SHORT_RUNS)), ids=[f"run-{i}" for i in range(3)]
)
def test_short_chaos_run(index: int, kinds: tuple[str, ...]) -> None:
    seed = int(os.environ.get("PYKRAFT_SEED", "1")) + index
    summary = run(RunConfig(seed=seed, seconds=SECONDS, kinds=kinds))
    injected = {window["kind"] for window in summary["faults"]}
    expected = set(summary["kinds"])
    if summary["skipped_partitions"] is None:
        assert expected == set(kinds)
    else:
        assert expected == set(kinds) - set(PARTITION_KINDS)
    assert injected == expected, f"seed {seed}: faults injected {injected}, expected {expected}"
    stats = summary["check"]["stats"]
    assert stats["acknowledged_all_checked"] > 100, f"seed {seed}: too few acks=all: {stats}"
    assert summary["problems"] == [], f"seed {seed}: {summary['problems']}"
    failures = {name: found["count"] for name, found in summary["check"]["failures"].items()}
    assert summary["valid"], f"seed {seed}: anomalies {failures}; see build/chaos/seed-{seed}/"
