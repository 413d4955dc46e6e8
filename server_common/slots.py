"""A count of holders bounded by a named limit, taken without blocking: what lets a server give
calls that hold a request thread for long (a broker's session stream on the controller, a fetch
waiting for records on a broker) threads of their own without letting them take every thread.

`take()` says whether a slot was free and took it; every successful `take()` is matched by one
`give_back()`. `held` is how many are taken now (a gauge reads it).
"""

from __future__ import annotations

import threading


class Slots:
    def __init__(self, slots_max: int) -> None:
        assert slots_max > 0
        self.slots_max = slots_max
        self.held = 0
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Takes a slot when one is free; False (nothing taken) when all are held."""
        with self._lock:
            if self.held >= self.slots_max:
                return False
            self.held += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            assert self.held > 0, "a slot given back that was never taken"
            self.held -= 1
