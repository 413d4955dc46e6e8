"""Requests that reach a standby controller while no leader is known (an election is under way).

Answering them NOT_CONTROLLER naming nobody at once sends the client into its retry backoff
(100 ms, doubling), so after a kill -9 of the active controller the first write landed at the
client's next attempt, often hundreds of ms after the new controller was ready. A standby
instead holds such a request until a leader is known, then answers NOT_CONTROLLER naming it (the
client follows at once), or decides it itself if it became the active controller. It never
holds one past `LEADER_WAIT_MS_MAX` (a quorum without a majority elects nobody) nor past the
request's own deadline, and holds at most `requests_max`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pykraft.quorum.events import Request

# Longer than an election takes (the election timeout, 300-600 ms, and a vote), short enough
# that a client of a quorum that cannot elect anyone hears so soon.
LEADER_WAIT_MS_MAX = 1000


@dataclass(frozen=True)
class _Held:
    request: Request
    until_ms: int


class LeaderWait:
    """The held requests, in arrival order; the core decides what becomes of them."""

    def __init__(self, requests_max: int) -> None:
        assert requests_max > 0
        self._requests_max = requests_max
        self._held: list[_Held] = []

    def hold(self, request: Request, now_ms: int) -> bool:
        """Holds `request` until a leader is known; False (not held) when full."""
        if len(self._held) >= self._requests_max:
            return False
        until_ms = min(request.deadline_ms, now_ms + LEADER_WAIT_MS_MAX)
        self._held.append(_Held(request, until_ms))
        return True

    def release(self, now_ms: int, *, leader_known: bool) -> list[Request]:
        """The requests to answer now: all of them once a leader is known, else those whose
        wait is over."""
        if leader_known:
            due, self._held = self._held, []
        else:
            due = [held for held in self._held if now_ms >= held.until_ms]
            self._held = [held for held in self._held if now_ms < held.until_ms]
        return [held.request for held in due]

    def wake_at_ms(self) -> int | None:
        return min((held.until_ms for held in self._held), default=None)
