"""Waiting on a condition with a deadline, for unit tests (integration tests have
`tests/integration/processes.wait_for`, which also returns what the condition found)."""

from __future__ import annotations

import time
from collections.abc import Callable

DEADLINE_S = 15.0
POLL_S = 0.005


def wait_until(condition: Callable[[], object], what: str, timeout_s: float = DEADLINE_S) -> None:
    """Polls `condition` until it holds; fails the test after `timeout_s`, naming `what`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting until {what}"
        time.sleep(POLL_S)
