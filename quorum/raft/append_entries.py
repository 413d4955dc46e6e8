"""Raft's AppendEntries rule for a follower's log, in front of pysyncobj's.

pysyncobj's follower deletes every entry after `prevLogIdx` whenever it holds any, even entries
that match the leader's (when it holds exactly the request's entries, it deletes them and appends
them again). A request that repeats entries the
follower holds is ordinary: a stale reset answer moves the leader's next index back and it
re-sends a batch from there, or a heartbeat leaves from behind the follower's end. Deleting then
throws away committed and applied entries (pysyncobj logs "truncating already-applied log
entries"). Raft deletes only from the first entry that conflicts with the leader's (Figure 2,
AppendEntries receiver step 3).

`plan_append` rewrites such a request, before pysyncobj sees it, into one pysyncobj handles the
Raft way:
- entries the follower holds with the same term are dropped from the front of the request, so
  pysyncobj's deletion starts at the first conflicting (or missing) entry;
- when the follower holds every entry (and perhaps more), nothing is appended or deleted: the
  request becomes a commit-only one (pysyncobj's form without `prevLogIdx`), with the leader's
  commit index capped at the request's last entry, since entries past it have not been checked
  against the leader's; the caller then answers success up to that entry, as Raft does.

On the leader's side, `is_stale_reset` tells an answer that would send the leader back over
entries the follower is known to hold: an answer to a request sent before later ones succeeded.
etcd's raft drops such stale rejections; pysyncobj moved its next index back and re-sent
everything from there.

Pure: it reads the follower's log through `term_at` and does no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Entry = tuple[bytes, int, int]  # (command, index, term), pysyncobj's shape


@dataclass(frozen=True)
class AppendPlan:
    """What to hand pysyncobj, and the index to acknowledge when the caller must answer.

    `acknowledge_index` is set only when the request became commit-only: pysyncobj sends no
    answer to those, so the caller answers success with next index `acknowledge_index + 1`.
    """

    message: dict[str, Any]
    acknowledge_index: int | None = None


def plan_append(
    message: dict[str, Any],
    entries: Sequence[Entry],
    term_at: Callable[[int], int | None],
    last_index: int,
) -> AppendPlan:
    """Plans a regular AppendEntries request (one with `prevLogIdx`) whose entries are `entries`.

    `term_at(index)` is the term of the follower's entry at `index`, or None when it does not
    hold one; `last_index` is its last entry's index. A request whose previous entry the follower
    does not hold with the same term goes to pysyncobj unchanged, which answers it with a reset.
    """
    prev_index: int = message["prevLogIdx"]
    if term_at(prev_index) != message["prevLogTerm"]:
        return AppendPlan(message)
    held = _held_prefix(entries, term_at)
    end_index = entries[-1][1] if entries else prev_index
    if held == len(entries):
        if not entries and last_index <= end_index:
            return AppendPlan(message)  # a heartbeat at the follower's end: nothing to delete
        return AppendPlan(_commit_only(message, end_index), acknowledge_index=end_index)
    if held == 0:
        return AppendPlan(message)
    last_held = entries[held - 1]
    rest = list(entries[held:])
    return AppendPlan(
        {**message, "prevLogIdx": last_held[1], "prevLogTerm": last_held[2], "entries": rest}
    )


def _held_prefix(entries: Sequence[Entry], term_at: Callable[[int], int | None]) -> int:
    """How many of `entries`, from the first, the follower holds with the same term."""
    for position, (_, index, term) in enumerate(entries):
        if term_at(index) != term:
            return position
    return len(entries)


def _commit_only(message: dict[str, Any], end_index: int) -> dict[str, Any]:
    return {
        "type": message["type"],
        "term": message["term"],
        "commit_index": min(message["commit_index"], end_index),
    }


def is_stale_reset(message: dict[str, Any], match_index: Callable[[], int | None]) -> bool:
    """Whether a leader's `next_node_idx` answer asks it to go back to an index at or below
    `match_index()`, the last entry the follower already acknowledged holding (None: not a
    follower of this leader); looked up only for a reset answer."""
    if message.get("type") != "next_node_idx" or not message.get("reset"):
        return False
    matched = match_index()
    return matched is not None and message["next_node_idx"] <= matched
