"""Fixtures shared by the unit tests of every package."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.unit.client.fake_controller import FakeNode, serving


@pytest.fixture
def fsynced_paths(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The paths (files and directories) fsynced during the test, in order, whoever called
    `os.fsync`: tests of durability assert on what reached the disk, not on which helper ran."""
    fsynced: list[Path] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        fsynced.append(Path(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    return fsynced


@pytest.fixture
def start_node() -> Iterator[Callable[[int], FakeNode]]:
    """Starts an in-process AdminService (`fake_controller.FakeNode`) with the id given, on its
    own port; every node started stops when the test ends."""
    with serving() as start:
        yield start
