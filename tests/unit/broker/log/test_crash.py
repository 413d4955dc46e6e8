"""Crash recovery. (a) A crash keeps some prefix of the appended bytes: the log files are cut at
random byte positions (seeded; the seed is printed, and PYKRAFT_LOG_CRASH_SEED replays it) and
reopened: exactly the batches wholly before the cut remain. Bytes flipped in a batch, and
missing or damaged indexes, are found too. (b) A writer process appending in a loop is killed
with SIGKILL at a random moment, three times: every append it reported is there, the log ends at
a batch boundary, and appends go on at the right offset."""

from __future__ import annotations

import os
import random
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from pykraft.broker.log import LogConfig
from pykraft.broker.log.checkpoints import RECOVERY_POINT_FILE
from pykraft.broker.log.dir_checkpoints import CLEAN_SHUTDOWN_FILE
from pykraft.proto.record_batch import decode_batch, iter_batches

from .support import NOW_MS, batch, open_log, read_all

CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=100)
SEED = int(os.environ.get("PYKRAFT_LOG_CRASH_SEED", random.randrange(1 << 32)))


@dataclass(frozen=True)
class StoredBatch:
    file_name: str
    start: int  # position in the whole byte stream (all segment files, in order)
    end: int
    records: tuple[tuple[int, bytes | None], ...]


def _write_unflushed_log(directory: Path) -> list[StoredBatch]:
    """A log of many small segments, left as a crash leaves it when nothing was fsynced: no
    clean-shutdown marker, no recovery point. Returns its batches in stream order."""
    rng = random.Random(7)
    log = open_log(directory, CONFIG)
    for number in range(60):
        values = [b"r%d-%d-" % (number, i) + b"x" * rng.randrange(30) for i in range(1, 4)]
        log.append_as_leader(batch(values[: rng.randrange(1, 4)]), leader_epoch=0, now_ms=NOW_MS)
    log.close()
    (directory / CLEAN_SHUTDOWN_FILE).unlink()
    (directory / RECOVERY_POINT_FILE).unlink()
    stored = []
    stream_position = 0
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        for position, header in iter_batches(data):
            found = tuple((r.offset, r.value) for r in decode_batch(data, position))
            start = stream_position + position
            stored.append(StoredBatch(path.name, start, start + header.size_bytes, found))
        stream_position += len(data)
    return stored


def _cut_stream(directory: Path, position: int, *, keep_later_files: bool) -> None:
    """Truncates the segment file holding stream byte `position` there."""
    for path in sorted(directory.glob("*.log")):
        size = path.stat().st_size
        if position < size or (position == size and not keep_later_files):
            os.truncate(path, max(position, 0))
            if not keep_later_files:
                for later in sorted(directory.glob("*.log")):
                    if later.name > path.name:
                        later.unlink()
            return
        position -= size


def _expected(stored: list[StoredBatch], position: int) -> list[tuple[int, bytes | None]]:
    return [record for b in stored if b.end <= position for record in b.records]


def test_cutting_the_files_anywhere_keeps_exactly_the_whole_batches_before(
    tmp_path: Path,
) -> None:
    print(f"PYKRAFT_LOG_CRASH_SEED={SEED}")
    rng = random.Random(SEED)
    original = tmp_path / "original" / "events-0"
    stored = _write_unflushed_log(original)
    assert len({b.file_name for b in stored}) > 5
    total = stored[-1].end
    boundaries = {b.start for b in stored} | {total}
    for trial in range(40):
        directory = tmp_path / f"trial-{trial}" / "events-0"
        shutil.copytree(original, directory)
        position = rng.randrange(total + 1)
        # A cut inside a batch must make recovery drop the later files itself.
        keep_later_files = position not in boundaries and rng.random() < 0.5
        _cut_stream(directory, position, keep_later_files=keep_later_files)
        log = open_log(directory, CONFIG)
        expected = _expected(stored, position)
        assert read_all(log) == expected, f"trial {trial}: cut at {position}"
        end = expected[-1][0] + 1 if expected else 0
        assert log.log_end_offset == end and not log.had_clean_shutdown
        info = log.append_as_leader(batch([b"after"]), leader_epoch=1, now_ms=NOW_MS)
        assert info.first_offset == end
        log.close()
        reopened = open_log(directory, CONFIG)
        assert read_all(reopened)[-1] == (end, b"after")
        reopened.close()


def test_a_flipped_byte_cuts_the_log_at_its_batch(tmp_path: Path) -> None:
    print(f"PYKRAFT_LOG_CRASH_SEED={SEED}")
    rng = random.Random(SEED)
    original = tmp_path / "original" / "events-0"
    stored = _write_unflushed_log(original)
    for trial in range(15):
        directory = tmp_path / f"trial-{trial}" / "events-0"
        shutil.copytree(original, directory)
        victim = rng.choice(stored[len(stored) // 2 :])
        # From the magic byte on: the CRC covers all but BaseOffset, length and leader epoch.
        at = rng.randrange(victim.start + 16, victim.end)
        stream = 0
        for path in sorted(directory.glob("*.log")):
            data = bytearray(path.read_bytes())
            if at - stream < len(data):
                data[at - stream] ^= 1 << rng.randrange(8)
                path.write_bytes(bytes(data))
                break
            stream += len(data)
        log = open_log(directory, CONFIG)
        assert read_all(log) == _expected(stored, victim.start), f"trial {trial}: byte {at}"
        log.close()


@pytest.mark.parametrize("damage", ["delete", "garbage", "stale"])
def test_missing_or_damaged_indexes_are_rebuilt(tmp_path: Path, damage: str) -> None:
    directory = tmp_path / "events-0"
    log = open_log(directory, CONFIG)
    for number in range(40):
        log.append_as_leader(batch([b"v%d" % number] * 3), leader_epoch=0, now_ms=NOW_MS)
    expected = read_all(log)
    log.close()  # clean: the segments are trusted, only their indexes are checked
    indexes = sorted(directory.glob("*.index")) + sorted(directory.glob("*.timeindex"))
    originals = {path: path.read_bytes() for path in indexes}
    assert sum(len(content) > 0 for content in originals.values()) > 5
    for path in indexes:
        if damage == "delete":
            path.unlink()
        elif damage == "garbage":
            path.write_bytes(b"\x7f" * 13)
        elif originals[path]:  # the last entry points past the end of its log file
            path.write_bytes(originals[path][:-4] + b"\x7f\xff\xff\xff")
    reopened = open_log(directory, CONFIG)
    assert read_all(reopened) == expected
    assert all(reopened.read(o, bytes_max=1).first_offset == o - o % 3 for o in range(0, 120, 7))
    reopened.close()
    assert {path: path.read_bytes() for path in indexes} == originals


WRITER = """
import sys
from pathlib import Path
from pykraft.broker.log import LogConfig, PartitionLog
from pykraft.proto.record_batch import build_batch

directory, number = Path(sys.argv[1]), int(sys.argv[2])
config = LogConfig(segment_bytes=2048, index_interval_bytes=256)
log = PartitionLog.open(directory, config, now_ms={now_ms})
while True:
    values = [b"w%d-%d" % (number, i) for i in range(1 + number % 3)]
    data = build_batch([({now_ms}, None, value) for value in values])
    info = log.append_as_leader(data, leader_epoch=1, now_ms={now_ms})
    print(info.first_offset, number, flush=True)
    number += 1
"""


def _values(number: int) -> list[bytes]:
    return [b"w%d-%d" % (number, i) for i in range(1 + number % 3)]


def _kill_writer_after(directory: Path, first_number: int, reports_min: int) -> list[list[int]]:
    """Runs the writer until it has reported `reports_min` appends, SIGKILLs it, and returns
    every report it made: [first offset, batch number]."""
    script = WRITER.format(now_ms=NOW_MS)
    process = subprocess.Popen(
        [sys.executable, "-c", script, str(directory), str(first_number)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    output = b""
    deadline = time.monotonic() + 30
    try:
        while output.count(b"\n") < reports_min:
            remaining = deadline - time.monotonic()
            assert remaining > 0, "the writer reported too few appends in time"
            ready, _, _ = select.select([process.stdout], [], [], remaining)
            chunk = os.read(process.stdout.fileno(), 1 << 16) if ready else b""
            assert chunk or not ready, process.stderr.read().decode()
            output += chunk
    finally:
        process.send_signal(signal.SIGKILL)
        output += process.stdout.read()  # what it printed before dying was appended too
        process.wait(timeout=10)
        process.stdout.close()
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    complete_lines = output.decode().split("\n")[:-1]  # a line cut by the kill reports nothing
    reports = [[int(field) for field in line.split()] for line in complete_lines]
    assert all(len(report) == 2 for report in reports), output
    return reports


def test_appends_a_killed_writer_reported_survive(tmp_path: Path) -> None:
    print(f"PYKRAFT_LOG_CRASH_SEED={SEED}")
    rng = random.Random(SEED)
    directory = tmp_path / "events-0"
    config = LogConfig(segment_bytes=2048, index_interval_bytes=256)
    batches_written = 0
    for _ in range(3):
        reports = _kill_writer_after(directory, batches_written, rng.randrange(20, 300))
        log = open_log(directory, config)
        assert not log.had_clean_shutdown
        stored = read_all(log)
        # The log is the writer's batches 0..n in order, whole, n at least the last reported.
        expected: list[tuple[int, bytes | None]] = []
        number = 0
        while len(expected) < len(stored):
            expected += [(len(expected) + i, v) for i, v in enumerate(_values(number))]
            number += 1
        assert stored == expected, "the log does not end at a batch boundary"
        assert number - 1 >= reports[-1][1]
        for first_offset, reported in reports:
            assert stored[first_offset] == (first_offset, _values(reported)[0])
        batches_written = number
        log.close()
    log = open_log(directory, config)
    info = log.append_as_leader(batch([b"last"]), leader_epoch=1, now_ms=NOW_MS)
    assert info.first_offset == log.log_end_offset - 1 == len(expected)
    log.close()
