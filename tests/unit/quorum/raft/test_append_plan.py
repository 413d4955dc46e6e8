"""`plan_append` against Raft's AppendEntries receiver rule, over random logs.

A model of what pysyncobj does with the planned request (delete everything after `prevLogIdx`
when it holds more, then append) must end with the log Raft's rule gives, and the follower must
never acknowledge past the request's last entry nor commit past it.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykraft.quorum.raft.append_entries import Entry, is_stale_reset, plan_append


def _log(terms: list[int]) -> list[Entry]:
    return [(b"c%d" % index, index, term) for index, term in enumerate(terms, start=1)]


@st.composite
def _cases(draw: st.DrawFn) -> tuple[list[Entry], list[Entry], int, int]:
    """A leader's log, a follower's that shares a prefix with it and may diverge after, and the
    request's previous index and entry count."""
    leader_terms = sorted(draw(st.lists(st.integers(1, 4), min_size=1, max_size=12)))
    shared = draw(st.integers(0, len(leader_terms)))
    tail = sorted(draw(st.lists(st.integers(1, 3), max_size=8)))
    floor = leader_terms[shared - 1] if shared else 0
    follower_terms = leader_terms[:shared] + [term for term in tail if term >= floor]
    prev_index = draw(st.integers(1, len(leader_terms)))
    count = draw(st.integers(0, len(leader_terms) - prev_index))
    return _log(leader_terms), _log(follower_terms), prev_index, count


def _raft(follower: list[Entry], prev: Entry, entries: list[Entry]) -> list[Entry]:
    """Raft's Figure 2: refuse on a missing or different previous entry; delete from the first
    conflicting entry and append what is not held."""
    if len(follower) < prev[1] or follower[prev[1] - 1][2] != prev[2]:
        return follower
    log = list(follower)
    for entry in entries:
        index = entry[1]
        if index <= len(log) and log[index - 1][2] == entry[2]:
            continue
        del log[index - 1 :]
        log.append(entry)
    return log


def _pysyncobj(follower: list[Entry], message: dict[str, object]) -> list[Entry]:
    if "prevLogIdx" not in message:
        return follower  # commit-only
    prev_index = message["prevLogIdx"]
    assert isinstance(prev_index, int)
    if len(follower) < prev_index or follower[prev_index - 1][2] != message["prevLogTerm"]:
        return follower  # answered with a reset
    entries = message["entries"]
    assert isinstance(entries, list)
    return follower[:prev_index] + entries


@given(_cases(), st.integers(0, 20))
def test_the_plan_gives_raft_log_and_acknowledges_no_further(
    case: tuple[list[Entry], list[Entry], int, int], leader_commit: int
) -> None:
    leader, follower, prev_index, count = case
    prev = leader[prev_index - 1]
    entries = leader[prev_index : prev_index + count]
    message = {
        "type": "append_entries",
        "term": 5,
        "commit_index": leader_commit,
        "prevLogIdx": prev[1],
        "prevLogTerm": prev[2],
        "entries": entries,
    }

    def term_at(index: int) -> int | None:
        return follower[index - 1][2] if 1 <= index <= len(follower) else None

    plan = plan_append(message, entries, term_at, len(follower))

    assert _pysyncobj(follower, plan.message) == _raft(follower, prev, entries)
    end_index = prev_index + count
    if plan.acknowledge_index is not None:
        assert plan.acknowledge_index == end_index
        assert plan.message["commit_index"] <= end_index
    else:
        assert plan.message.get("entries", entries)[-1:] == entries[-1:]


@pytest.mark.parametrize(
    ("reset", "next_index", "match_index", "stale"),
    [
        (True, 5, 4, False),  # the next entry after what it holds: a real answer
        (True, 4, 4, True),
        (True, 2, None, False),  # not a follower this leader tracks
        (False, 2, 4, False),  # not a reset
    ],
)
def test_a_reset_is_stale_only_at_or_below_the_match_index(
    reset: bool, next_index: int, match_index: int | None, stale: bool
) -> None:
    message = {"type": "next_node_idx", "next_node_idx": next_index, "reset": reset}
    assert is_stale_reset(message, lambda: match_index) is stale
