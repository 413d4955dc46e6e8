"""Where `LogDirs` places new partitions: the online directory holding the fewest, counted once
per directory and then kept in step, so creating many partitions costs no listing per partition
(it listed every directory for each one: quadratic in the partitions a broker creates)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.broker.log_dirs import LogDirs


def _place(dirs: LogDirs, name: str) -> Path:
    chosen = dirs.dir_for(name)
    (chosen / name).mkdir()
    return chosen


def test_new_partitions_go_to_the_directory_holding_the_fewest(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "old-0").mkdir()
    dirs = LogDirs([a, b], on_failure=lambda log_dir, reason: None)
    assert [_place(dirs, f"t-{n}").name for n in range(4)] == ["b", "a", "b", "a"]
    assert dirs.dir_for("old-0") == a  # an existing partition stays where it is
    dirs.removed(b)
    dirs.removed(b)
    assert _place(dirs, "t-4") == b


def test_the_directorys_checkpoint_files_are_not_counted_as_partitions(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (b / "t-0").mkdir()
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        (a / name).write_text("0\n0\n")
    dirs = LogDirs([a, b], on_failure=lambda log_dir, reason: None)
    assert _place(dirs, "t-1") == a


def test_directories_are_listed_once_however_many_partitions_are_placed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed: list[Path] = []
    real_iterdir = Path.iterdir

    def counting_iterdir(self: Path):  # type: ignore[no-untyped-def]
        listed.append(self)
        return real_iterdir(self)

    monkeypatch.setattr(Path, "iterdir", counting_iterdir)
    dirs = LogDirs([tmp_path / "a", tmp_path / "b"], on_failure=lambda log_dir, reason: None)
    for log_dir in (tmp_path / "a", tmp_path / "b"):
        log_dir.mkdir()
    for n in range(50):
        _place(dirs, f"t-{n}")
    assert sorted(listed) == [tmp_path / "a", tmp_path / "b"]


def test_a_directory_replaced_behind_the_brokers_back_is_failed_when_chosen(tmp_path: Path) -> None:
    """Counting in memory lists no directory again, so a directory that stopped being one is
    noticed when placement picks it: it goes offline and the partition goes elsewhere."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    for name in ("old-0", "old-1"):
        (a / name).mkdir()
    failed: list[Path] = []
    dirs = LogDirs([a, b], on_failure=lambda log_dir, reason: failed.append(log_dir))
    assert _place(dirs, "t-0") == b
    b.rename(tmp_path / "b.gone")
    b.write_text("not a directory any more\n")
    assert dirs.dir_for("t-1") == a
    assert failed == [b]
    assert dirs.offline_reason(b) is not None
