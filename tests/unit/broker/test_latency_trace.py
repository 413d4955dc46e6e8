"""The latency trace: off unless its environment variable names a directory; when on, every
note becomes one line at exit, and notes beyond the bound are counted, not kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pykraft.broker import latency_trace
from pykraft.broker.latency_trace import LatencyTrace


def test_notes_become_lines_of_event_replica_topic_partition_offset_and_time(
    tmp_path: Path,
) -> None:
    trace = LatencyTrace(tmp_path / "1.trace")
    trace.note(latency_trace.Step.PRODUCE_IN, "t", 3, 11, at_ns=5)
    trace.note(latency_trace.Step.FOLLOWER_FETCH, "t", 3, 11, replica=2, at_ns=7)
    trace.write()
    lines = (tmp_path / "1.trace").read_text().splitlines()
    assert lines == ["produce_in -1 t 3 11 5", "follower_fetch 2 t 3 11 7"]


def test_notes_beyond_the_bound_are_counted_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(latency_trace, "TRACE_EVENTS_MAX", 1)
    trace = LatencyTrace(tmp_path / "1.trace")
    for offset in range(3):
        trace.note(latency_trace.Step.HIGH_WATERMARK, "t", 0, offset, at_ns=offset)
    trace.write()
    lines = (tmp_path / "1.trace").read_text().splitlines()
    assert lines == ["high_watermark -1 t 0 0 0", "# dropped 2 events beyond 1"]


def _trace_in_child(tmp_path: Path, value: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != latency_trace.ENVIRONMENT_VARIABLE}
    if value is not None:
        env[latency_trace.ENVIRONMENT_VARIABLE] = value
    code = (
        "from pykraft.broker import latency_trace as t\n"
        "print(t.TRACE is not None)\n"
        "if t.TRACE is not None: t.TRACE.note(t.Step.HIGH_WATERMARK, 'x', 0, 1, at_ns=2)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_off_by_default_and_written_at_exit_when_on(tmp_path: Path) -> None:
    assert _trace_in_child(tmp_path, None) == "False"
    assert _trace_in_child(tmp_path, "") == "False"
    assert _trace_in_child(tmp_path, str(tmp_path)) == "True"
    (written,) = tmp_path.glob("*.trace")
    assert written.read_text() == "high_watermark -1 x 0 1 2\n"
