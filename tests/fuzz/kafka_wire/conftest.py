"""The Kafka fuzz suite's closing lines: its seed and the requests it sent, by kind."""

from __future__ import annotations

import pytest

from .answers import SEED, SENT


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not SENT:
        return
    terminalreporter.write_sep("-", f"kafka fuzz: seed {SEED} (replay: PYKRAFT_SEED={SEED})")
    for name, count in sorted(SENT.items()):
        terminalreporter.write_line(f"{count:6d}  {name}")
    terminalreporter.write_line(f"{sum(SENT.values()):6d}  in all, {len(SENT)} kinds")
