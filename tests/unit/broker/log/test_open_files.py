"""The bounded cache of segment descriptors (`open_files`), alone and under many partition logs:
descriptors follow use, not the number of segments, and no read or write notices the evictions."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pykraft.broker.log import PartitionLog
from pykraft.broker.log.files import READ_CHUNK_BYTES, read_at, read_whole, write_all
from pykraft.broker.log.open_files import OPEN_FILES, CachedFile, OpenFileCache

from .support import fill, open_log, read_all


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_idle_files_are_closed_least_recently_used_first(tmp_path: Path) -> None:
    cache = OpenFileCache(files_max=2)
    files = [CachedFile.create(tmp_path / f"{n}.log", cache) for n in range(4)]
    assert cache.open_count == 2 and [file.fd >= 0 for file in files] == [False, False, True, True]
    with files[0].borrow() as fd:
        write_all(fd, b"zero")
    assert [file.fd >= 0 for file in files] == [True, False, False, True]
    with files[0].borrow() as fd:
        assert read_at(fd, 4, 0) == b"zero"


def test_a_borrowed_file_stays_open_until_returned(tmp_path: Path) -> None:
    cache = OpenFileCache(files_max=1)
    first = CachedFile.create(tmp_path / "first.log", cache)
    with first.borrow() as fd:
        second = CachedFile.create(tmp_path / "second.log", cache)
        with second.borrow():
            assert cache.open_count == 2  # over the limit while both are in use
        assert first.fd == fd and second.fd < 0  # the idle one went, not the borrowed one
        write_all(fd, b"still open")
    assert cache.open_count == 1
    assert (tmp_path / "first.log").read_bytes() == b"still open"


def test_a_reopened_file_is_never_created_again_and_a_closed_one_refuses(tmp_path: Path) -> None:
    cache = OpenFileCache(files_max=1)
    gone = CachedFile.create(tmp_path / "gone.log", cache)
    CachedFile.create(tmp_path / "other.log", cache)  # evicts `gone`
    (tmp_path / "gone.log").unlink()
    with pytest.raises(FileNotFoundError), gone.borrow():
        pass
    assert not (tmp_path / "gone.log").exists()
    gone.close()
    with pytest.raises(ValueError, match="closed file"), gone.borrow():
        pass


@pytest.fixture
def few_open_files() -> Iterator[int]:
    files_max = OPEN_FILES.files_max
    OPEN_FILES.set_files_max(8)
    yield 8
    OPEN_FILES.set_files_max(files_max)


def test_many_partition_logs_hold_descriptors_only_up_to_the_limit(
    tmp_path: Path, few_open_files: int
) -> None:
    """Sixty logs of several segments each: before, three descriptors per segment stayed open
    (a segment's `.log`, `.index` and `.timeindex`); now at most the limit, and every log still
    reads back whole, also after a clean reopen."""
    before = _open_descriptors()
    logs = [open_log(tmp_path / f"t-{n}") for n in range(60)]
    for log in logs:
        fill(log, 20)
    assert all(len(log.segments()) > 1 for log in logs)
    assert _open_descriptors() - before <= few_open_files
    expected = read_all(logs[0])
    for log in logs:
        assert read_all(log) == expected
        log.close()
    reopened: list[PartitionLog] = [open_log(tmp_path / f"t-{n}") for n in range(60)]
    assert _open_descriptors() - before <= few_open_files
    for log in reopened:
        assert log.had_clean_shutdown and read_all(log) == expected
        log.close()
    assert _open_descriptors() <= before  # other tests' idle files may have been evicted too


def test_read_whole_reads_a_file_of_several_chunks_and_an_empty_one(tmp_path: Path) -> None:
    content = bytes(range(256)) * (READ_CHUNK_BYTES // 128 + 1)
    (tmp_path / "big").write_bytes(content)
    (tmp_path / "empty").write_bytes(b"")
    assert len(content) > 2 * READ_CHUNK_BYTES
    assert read_whole(tmp_path / "big") == content and read_whole(tmp_path / "empty") == b""
    with pytest.raises(FileNotFoundError):
        read_whole(tmp_path / "missing")
