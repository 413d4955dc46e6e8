"""Fixtures shared by the partition log tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pykraft.broker.log import PartitionLog

from .support import open_log


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "orders-0"


@pytest.fixture
def log(directory: Path) -> Iterator[PartitionLog]:
    opened = open_log(directory)
    yield opened
    opened.close()
