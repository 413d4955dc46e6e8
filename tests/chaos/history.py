"""The history of a chaos run: one JSON object a line, one file per workload process.

Each operation has `time` (seconds, wall clock), `process`, `type` (Jepsen's `invoke`, `ok`,
`fail` or `info`) and `f`, the function:

- `config`: first line of a producer, `acks` ("all" or "1") and `idempotent`;
- `send`: `value`, and on `ok` the `partition` and `offset` it landed at. `fail` means the
  record certainly was not written (the producer refused it before queueing); `info` means the
  outcome is unknown (a timeout or an error after it was queued);
- `poll`: `ok` with `records`, a list of [partition, offset, value]; `final` is true for the
  read after healing, and replicas read from disk use `f` = `replica`;
- `assign` / `revoke`: `ok` with the `partitions` a group member took on or gave up;
- `commit`: a group member's commit, `offsets` {partition: next offset};
- `committed`: a monitor's read of the group's committed `offsets`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

Op = dict[str, Any]


class HistoryWriter:
    """Appends operations to a file, one line each, flushed at once (a process killed with
    SIGKILL loses nothing it wrote). Thread-safe."""

    def __init__(self, path: Path, process: str) -> None:
        self.process = process
        self._file: TextIO = open(path, "a", encoding="utf-8")  # noqa: SIM115
        self._lock = threading.Lock()

    def write(self, op_type: str, f: str, **fields: Any) -> None:
        op = {"time": time.time(), "process": self.process, "type": op_type, "f": f, **fields}
        line = json.dumps(op, separators=(",", ":"))
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


def load(paths: Iterable[Path]) -> list[Op]:
    """Every operation of the files, ordered by time (a torn last line is skipped)."""
    ops: list[Op] = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                ops.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    ops.sort(key=lambda op: float(op["time"]))
    return ops


def write_all(path: Path, ops: Iterable[Op]) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for op in ops:
            out.write(json.dumps(op, separators=(",", ":")) + "\n")
