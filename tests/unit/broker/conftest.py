"""Fixtures shared by the broker's unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .replica_harness import Harness


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    """Broker 1's replica manager hosting orders (see replica_harness), closed afterwards."""
    harness = Harness(tmp_path)
    yield harness
    harness.manager.close()
