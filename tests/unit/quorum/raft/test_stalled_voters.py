"""A voter whose thread stalls (the controller thread deciding a large request, the collector,
a loaded machine) must read what its peers sent meanwhile before it judges them silent.

pysyncobj's tick checks the election deadline first and reads the network last, so a follower
stalled past its election timeout started an election on its next poll although the leader's
heartbeats sat unread in its socket: the leader was deposed and every write in flight was
answered NOT_CONTROLLER (a CLI that created many topics got TOPIC_ALREADY_EXISTS on its retry,
test_quorum_snapshots.py 2 runs in 30 on a loaded machine)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pykraft.quorum.raft.pysyncobj_log import CONNECTION_TIMEOUT_MS_MIN
from tests.unit.quorum.raft.harness import (
    TIMING,
    VoterThread,
    free_voters,
    leader_of,
    start_voters,
    stop_voters,
)

STALL_S = 2 * TIMING["election_timeout_max_ms"] / 1000  # well past any election timeout
QUIET_S = 2 * CONNECTION_TIMEOUT_MS_MIN / 1000  # well past pysyncobj's connection timeout
assert TIMING["leader_fallback_timeout_ms"] / 1000 > STALL_S  # the leader keeps leading


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[list[VoterThread]]:
    nodes = start_voters(free_voters(3), tmp_path)
    try:
        yield nodes
    finally:
        stop_voters(nodes)


def test_a_stalled_follower_reads_the_leaders_heartbeats_before_it_calls_an_election(
    cluster: list[VoterThread],
) -> None:
    leader = leader_of(cluster)
    term = leader.status().term
    follower = next(node for node in cluster if node is not leader)

    follower.run(lambda log: time.sleep(STALL_S))  # its thread polls nothing meanwhile
    follower.run(lambda log: None)  # one poll after the stall, at least

    assert (follower.status().term, follower.status().leader_id) == (term, leader.config.node_id)
    assert leader_of(cluster) is leader and leader.status().term == term


def test_followers_elect_at_once_when_the_leaders_connection_closes(tmp_path: Path) -> None:
    """A killed leader's connections close at once (its kernel resets them), so the followers
    need not wait out their election timeout, which only a silent leader must cost (as the
    controller fences a broker whose session stream ends). Node 1 times out fast and leads;
    the others' timeouts are far above the wait here, so only the closed connection can make
    them elect."""
    voters = free_voters(3)
    leader = start_voters(voters, tmp_path, [1])[0]
    slow = {"election_timeout_min_ms": 60_000, "election_timeout_max_ms": 120_000}
    followers = start_voters(voters, tmp_path, [2, 3], **slow, leader_fallback_timeout_ms=180_000)
    try:
        assert leader_of([leader, *followers]) is leader
        leader.stop()  # closes its sockets, as a killed process's kernel does
        new_leader = leader_of(followers)  # within the harness's deadline, far below 60 s
        assert new_leader.status().term > 1
    finally:
        stop_voters(followers)


def test_a_lost_leader_election_reaches_a_follower_after_a_quiet_spell(tmp_path: Path) -> None:
    """Followers have nothing to say to each other while a leader lives, and pysyncobj drops a
    connection that read nothing for its connection timeout (3.5 s) when it next sends on it:
    the first candidate's vote request was lost on that link, the other follower stood in the
    same term, and the vote split until the election timeout (every first failover of a bench
    run, about 600 ms). Links are kept alive, so the request arrives: one election, term 2.
    (Election timeouts above 3.5 s would raise the connection timeout with them.)"""
    voters = free_voters(3)
    leader = start_voters(voters, tmp_path, [1], connection_retry_ms=500)[0]
    quiet_links = {"election_timeout_min_ms": 2_000, "election_timeout_max_ms": 3_000}
    followers = start_voters(voters, tmp_path, [2, 3], **quiet_links, connection_retry_ms=500)
    try:
        assert leader_of([leader, *followers]) is leader
        time.sleep(QUIET_S)  # nothing to wait for but time: the followers' link stays quiet
        leader.stop()
        assert leader_of(followers).status().term == 2  # one election, no split vote
    finally:
        stop_voters(followers)
