"""The segments' `.log` files, open only while in use: a process-wide bounded cache of
descriptors (`log.open.files.max`). Kafka opens indexes lazily (LazyIndex) but keeps every
segment's log file open, which needs a huge ulimit; the indexes here open their files only to
write them (`index`), and the log files through this cache.

Why: a broker holds thousands of replicas with a segment or more each, but only the segments
being appended to or read need a descriptor. Each segment owns a `CachedFile`; an operation
borrows its descriptor (`borrow`), which opens it on demand and marks it most recently used.
When more than `files_max` are open, the least recently used descriptors that nobody is
borrowing are closed; a borrowed one is never closed under its borrower, so more than
`files_max` may be open only while that many operations run at once.

A closed-for-good file (`close`) raises ValueError when borrowed, as a closed Python file does.
A file is created only by `CachedFile.create`; reopening after eviction never creates it, so a
file removed behind the log's back fails with FileNotFoundError (a storage error) instead of
coming back empty.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Final

LOG_OPEN_FILES_MAX_DEFAULT: Final = 1000
_FLAGS: Final = os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)


class CachedFile:
    """A file opened for reading and appending (writes land at its end) whenever borrowed."""

    def __init__(self, cache: OpenFileCache, path: Path) -> None:
        """Use `create`."""
        self.path = path  # a rename updates it; an open descriptor follows the inode anyway
        self.fd = -1
        self.borrowers = 0
        self.closed = False
        self.may_create = False
        self._cache = cache

    @classmethod
    def create(cls, path: Path, cache: OpenFileCache | None = None) -> CachedFile:
        """The file at `path`, created empty if missing, in `cache` (the process's by default)."""
        file = cls(cache or OPEN_FILES, path)
        file.may_create = True
        with file.borrow():
            file.may_create = False
        return file

    def borrow(self) -> _Borrow:
        """A context manager giving the descriptor, open until it exits."""
        return _Borrow(self)

    def close(self) -> None:
        """Closes the descriptor, and the file for good (idempotent)."""
        self._cache.close(self)


class _Borrow:
    """`with file.borrow() as fd:`; a class rather than a generator for the hot read path."""

    __slots__ = ("_file",)

    def __init__(self, file: CachedFile) -> None:
        self._file = file

    def __enter__(self) -> int:
        return self._file._cache.acquire(self._file)

    def __exit__(self, *exc: object) -> None:
        self._file._cache.release(self._file)


class OpenFileCache:
    """At most `files_max` idle descriptors open, least recently used closed first."""

    def __init__(self, files_max: int) -> None:
        self.files_max = files_max
        self._lock = threading.Lock()
        self._open: OrderedDict[CachedFile, None] = OrderedDict()

    def set_files_max(self, files_max: int) -> None:
        """The limit from now on (`log.open.files.max`, at broker start)."""
        assert files_max > 0, files_max
        with self._lock:
            self.files_max = files_max
            self._evict()

    @property
    def open_count(self) -> int:
        return len(self._open)

    def acquire(self, file: CachedFile) -> int:
        """The open descriptor of `file`, borrowed until `release`."""
        with self._lock:
            if file.closed:
                raise ValueError(f"I/O operation on closed file {file.path}")
            if file.fd < 0:
                created = os.O_CREAT if file.may_create else 0
                file.fd = os.open(file.path, _FLAGS | created, 0o644)
                self._open[file] = None
            else:
                self._open.move_to_end(file)
            file.borrowers += 1
            self._evict()
            return file.fd

    def release(self, file: CachedFile) -> None:
        with self._lock:
            file.borrowers -= 1
            assert file.borrowers >= 0, file.path
            if file.closed and not file.borrowers:
                self._close(file)
            self._evict()

    def close(self, file: CachedFile) -> None:
        """Closes `file` for good: at once, or when its last borrower returns it."""
        with self._lock:
            file.closed = True
            if not file.borrowers:
                self._close(file)

    def _evict(self) -> None:
        excess = len(self._open) - self.files_max
        if excess <= 0:
            return
        idle = []
        for file in self._open:  # oldest first; borrowed ones are few, so this stops early
            if file.borrowers == 0:
                idle.append(file)
                if len(idle) == excess:
                    break
        for file in idle:
            self._close(file)

    def _close(self, file: CachedFile) -> None:
        if file.fd >= 0:
            del self._open[file]
            fd, file.fd = file.fd, -1
            os.close(fd)


OPEN_FILES: Final = OpenFileCache(LOG_OPEN_FILES_MAX_DEFAULT)
