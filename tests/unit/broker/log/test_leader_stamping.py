"""The leader stamps offsets, epochs and LogAppendTime on copies of the batch headers only: the
records are written from the request's own bytes (one writev of headers and views), and what
reaches the segment is byte for byte what patching a copy of the whole request gave (issue 17
§4: the produce path no longer copies every record byte into a bytearray first)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pykraft.broker.log import LogConfig
from pykraft.broker.log import files as log_files
from pykraft.broker.log.validation import assign_offsets, split_batches
from pykraft.proto.record_batch import (
    HEADER_SIZE,
    Compression,
    TimestampType,
    iter_batches,
    rewrite_offsets,
)

from .support import NOW_MS, batch, open_log

APPEND_TIME = LogConfig(message_timestamp_type=TimestampType.LOG_APPEND_TIME)


def _request() -> bytes:
    """Three batches back to back, as a produce request carries them."""
    return b"".join(
        [
            batch([b"a", b"bb"]),
            batch([b"c" * 300], compression=Compression.GZIP),
            batch([b"d", b"e", b"f"]),
        ]
    )


def _patched(data: bytes, *, base_offset: int, leader_epoch: int) -> bytearray:
    """The reference: the whole request copied and its offsets and epochs patched in place."""
    patched = bytearray(data)
    for position, header in split_batches(data):
        rewrite_offsets(
            patched, position, base_offset=base_offset, partition_leader_epoch=leader_epoch
        )
        base_offset += header.record_count
    return patched


def test_records_are_views_of_the_request_and_the_request_is_left_as_it_was() -> None:
    data = _request()
    stamped = assign_offsets(
        data,
        split_batches(data),
        base_offset=40,
        leader_epoch=7,
        config=LogConfig(),
        now_ms=NOW_MS,
    )
    heads, bodies = stamped.pieces[0::2], stamped.pieces[1::2]
    assert all(len(head) == HEADER_SIZE for head in heads)
    assert all(isinstance(body, memoryview) and body.obj is data for body in bodies)
    assert stamped.size_bytes == len(data) == sum(len(piece) for piece in stamped.pieces)
    assert b"".join(stamped.pieces) == _patched(data, base_offset=40, leader_epoch=7)
    assert [h.base_offset for _, h in stamped.batches] == [40, 42, 43]


def test_log_append_time_is_stamped_with_a_crc_over_header_and_records() -> None:
    data = _request()
    stamped = assign_offsets(
        data, split_batches(data), base_offset=0, leader_epoch=1, config=APPEND_TIME, now_ms=5
    )
    written = b"".join(stamped.pieces)
    headers = [header for _, header in iter_batches(written, verify=True)]  # CRCs hold
    assert [h.timestamp_type for h in headers] == [TimestampType.LOG_APPEND_TIME] * 3
    assert [h.max_timestamp for h in headers] == [5, 5, 5]


def test_the_log_holds_the_stamped_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    try:
        data = _request()
        log.append_as_leader(data, leader_epoch=3, now_ms=NOW_MS)
        on_disk = log._local.active.log_path.read_bytes()
        assert on_disk == _patched(data, base_offset=0, leader_epoch=3)
    finally:
        log.close()


def test_writev_all_writes_every_piece_in_order_through_partial_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More pieces than one writev takes, and writes that stop inside a piece."""
    pieces = [bytes([i % 251]) * (i % 7) for i in range(log_files.WRITEV_BUFFERS_MAX * 2 + 5)]
    writev = os.writev
    calls: list[int] = []

    def short_writev(fd: int, buffers: list[memoryview]) -> int:
        calls.append(len(buffers))
        assert len(buffers) <= log_files.WRITEV_BUFFERS_MAX
        return writev(fd, [memoryview(b"".join(buffers))[:5]])  # at most 5 bytes a call

    monkeypatch.setattr(os, "writev", short_writev)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        log_files.writev_all(fd, pieces)
    finally:
        os.close(fd)
    assert (tmp_path / "f").read_bytes() == b"".join(pieces)
    assert len(calls) > 1
