"""Preferred leader election between real processes (issue 4 §3.5).

Three controllers checking leader imbalance every second and three brokers; a topic with 3
partitions and replication factor 3, so each broker is the preferred (first) replica of one
partition. kill -9 of partition 0's leader moves its leadership away, and `pykraft leaders elect`
then answers PREFERRED_LEADER_NOT_AVAILABLE for it; once the broker is restarted and back in
the ISR, the controller hands leadership back to it by itself, after which the CLI reports
ELECTION_NOT_NEEDED for every partition. With `--no-auto-leader-rebalance-enable` leadership
stays away until `pykraft leaders elect` moves it back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pykraft.client import AdminClient, ElectionNotNeededError
from pykraft.metadata_log import PartitionRegistration

from . import cluster
from .cluster import BROKER_IDS
from .controllers import Quorum, run_cli
from .processes import BrokerProcess, wait_for

pytestmark = pytest.mark.integration

TOPIC = "preferred"
PARTITIONS = 3
CONTROLLER_ARGS = (
    "--leader-imbalance-check-interval-seconds", "1", "--broker-session-timeout-ms", "3000",
)  # fmt: skip


def _registrations(quorum: Quorum) -> dict[int, PartitionRegistration]:
    return cluster.registrations(quorum, TOPIC)


def _full_isr(quorum: Quorum) -> bool:
    return cluster.full_isr(quorum, TOPIC, PARTITIONS)


def _preferred_leaders(quorum: Quorum) -> bool:
    return all(r.leader == r.replicas[0] for r in _registrations(quorum).values())


def _elect(quorum: Quorum, *args: str) -> dict[int, str]:
    """`pykraft leaders elect --topic TOPIC ...`: partition -> result code name."""
    elected = run_cli(quorum, "leaders", "elect", "--topic", TOPIC, *args, "--output", "json")
    assert elected.returncode == 0, elected.stderr
    return {r["partition"]: r["result"] for r in json.loads(elected.stdout)}


@contextmanager
def _cluster(tmp_path: Path, *extra_args: str) -> Iterator[tuple[Quorum, dict[int, BrokerProcess]]]:
    """Controllers (with `extra_args`), three brokers and TOPIC with every ISR full; each broker
    is the preferred replica, and the leader, of one partition."""
    with cluster.running_cluster(
        tmp_path,
        topic=TOPIC,
        partitions=PARTITIONS,
        topic_args=(),
        controller_args=(*CONTROLLER_ARGS, *extra_args),
    ) as (quorum, brokers):
        registrations = _registrations(quorum)
        assert sorted(r.replicas[0] for r in registrations.values()) == list(BROKER_IDS)
        assert _preferred_leaders(quorum)
        yield quorum, brokers


def _kill_and_restart_leader(quorum: Quorum, brokers: dict[int, BrokerProcess]) -> int:
    """kill -9 of partition 0's leader; once leadership has moved, restarts it and waits until
    it is back in every ISR. Returns its id."""
    victim = _registrations(quorum)[0].leader
    brokers[victim].kill()
    wait_for(
        lambda: _registrations(quorum)[0].leader not in (victim, -1),
        timeout_s=20,
        what="partition 0 led by another broker",
    )
    assert _elect(quorum, "--partition", "0") == {0: "PREFERRED_LEADER_NOT_AVAILABLE"}
    brokers[victim].start()
    wait_for(lambda: _full_isr(quorum), timeout_s=30, what="the victim back in the ISR")
    return victim


def test_leadership_returns_to_the_preferred_replica_by_itself(tmp_path: Path) -> None:
    with _cluster(tmp_path) as (quorum, brokers):
        epoch_before = _registrations(quorum)[0].leader_epoch
        victim = _kill_and_restart_leader(quorum, brokers)
        wait_for(
            lambda: _preferred_leaders(quorum),
            timeout_s=10,
            what="leadership back with the preferred replicas",
        )
        after = _registrations(quorum)[0]
        assert after.leader == victim
        assert after.leader_epoch >= epoch_before + 2
        assert _elect(quorum) == {p: "ELECTION_NOT_NEEDED" for p in range(PARTITIONS)}


def test_leaders_elect_moves_leadership_back_when_auto_rebalance_is_off(tmp_path: Path) -> None:
    with _cluster(tmp_path, "--no-auto-leader-rebalance-enable") as (quorum, brokers):
        victim = _kill_and_restart_leader(quorum, brokers)
        # Nothing but an election moves a leader that is alive and in the ISR.
        assert _registrations(quorum)[0].leader != victim
        assert _elect(quorum) == {
            0: "NONE",
            1: "ELECTION_NOT_NEEDED",
            2: "ELECTION_NOT_NEEDED",
        }
        # The answer comes once the change is committed.
        assert _registrations(quorum)[0].leader == victim
        assert _elect(quorum, "--partition", "0") == {0: "ELECTION_NOT_NEEDED"}
        # Brokers forward the request to the active controller.
        with AdminClient(brokers[victim].address) as admin:
            (forwarded,) = admin.elect_leaders({TOPIC: [0]})
        assert isinstance(forwarded.error, ElectionNotNeededError)
