"""The durable file helpers every server role writes through, on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pykraft.server_common.durable_files import (
    make_directory_durably,
    replace_durably,
    sync_filesystem,
    unlink_durably,
)


def test_a_made_directory_is_fsynced_in_every_parent_it_created(
    tmp_path: Path, fsynced_paths: list[Path]
) -> None:
    make_directory_durably(tmp_path / "a" / "b")
    assert fsynced_paths == [tmp_path, tmp_path / "a"]
    make_directory_durably(tmp_path / "a" / "b")  # present: nothing to make durable
    assert fsynced_paths == [tmp_path, tmp_path / "a"]


def test_a_replaced_file_holds_the_new_bytes_and_leaves_no_temporary(
    tmp_path: Path, fsynced_paths: list[Path]
) -> None:
    path = tmp_path / "state"
    replace_durably(path, b"old")
    replace_durably(path, b"new")
    assert path.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["state"]
    assert fsynced_paths[-2:] == [tmp_path / "state.tmp", tmp_path]


def test_unlinking_skips_missing_files_and_fsyncs_each_directory_once(
    tmp_path: Path, fsynced_paths: list[Path]
) -> None:
    (tmp_path / "a").write_bytes(b"")
    (tmp_path / "b").write_bytes(b"")
    unlink_durably([tmp_path / "a", tmp_path / "b", tmp_path / "missing"])
    assert list(tmp_path.iterdir()) == []
    assert fsynced_paths == [tmp_path]


def test_sync_filesystem_syncs_a_directory_and_raises_for_a_missing_one(tmp_path: Path) -> None:
    (tmp_path / "written").write_bytes(b"data")
    sync_filesystem(tmp_path)  # syncfs(2) answered 0
    with pytest.raises(OSError):
        sync_filesystem(tmp_path / "missing")


def test_a_replacement_without_fsync_is_atomic_and_fsyncs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "file"
    replace_durably(path, b"old")
    fsyncs: list[int] = []
    monkeypatch.setattr(os, "fsync", fsyncs.append)
    replace_durably(path, b"new", fsync=False)
    assert path.read_bytes() == b"new"
    assert fsyncs == []
