"""The fuzz suite's cluster (one per module) and its closing line: requests sent per RPC."""

from __future__ import annotations

import os

import pytest

from .harness import REQUEST_COUNTS

SEED_VARIABLE = "PYKRAFT_FUZZ_SEED"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not REQUEST_COUNTS:
        return
    seed = os.environ.get(SEED_VARIABLE)
    how = f"seed {seed}" if seed else f"derandomized; set {SEED_VARIABLE}=N for another run"
    terminalreporter.write_sep("-", f"fuzz: requests per RPC ({how})")
    for name, count in sorted(REQUEST_COUNTS.items()):
        terminalreporter.write_line(f"{count:6d}  {name}")
    terminalreporter.write_line(
        f"{sum(REQUEST_COUNTS.values()):6d}  in all, {len(REQUEST_COUNTS)} RPCs on their nodes"
    )
