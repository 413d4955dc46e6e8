"""Chunked files: fields and chunks round trip, each chunk is checked as it is drawn, and a file
damaged anywhere is refused, never half trusted (how little memory they take is measured with
the snapshot that uses them, in tests/unit/quorum/raft/test_snapshot_file.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pykraft.server_common.chunked_files import ChunkedFileError, ChunkedFileFormat

FORMAT = ChunkedFileFormat(magic=b"PKTEST\x00\x01", fields_format="qi")
CHUNKS = [b"first", b"", b"x" * 300, b"last"]


def _read_all(path: Path) -> tuple[tuple[object, ...], list[bytes]]:
    with FORMAT.reading(path) as (fields, chunks):
        return fields, list(chunks)


def test_fields_and_chunks_round_trip_and_replace_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "file"
    assert FORMAT.write(path, (7, -1), [b"old"]) == 1
    assert FORMAT.write(path, (2**40, 3), iter(CHUNKS)) == len(CHUNKS)
    assert _read_all(path) == ((2**40, 3), CHUNKS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_a_failing_writer_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "file"
    FORMAT.write(path, (1, 1), [b"kept"])

    def failing() -> Iterator[bytes]:
        yield b"new"
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        FORMAT.write(path, (2, 2), failing())
    assert _read_all(path) == ((1, 1), [b"kept"])


def _damaged(data: bytes) -> Iterator[tuple[str, bytes]]:
    """Every way the tests damage a file: each byte flipped, each cut, bytes added."""
    for position in range(len(data)):
        yield (
            f"byte {position} flipped",
            data[:position] + bytes([data[position] ^ 1]) + data[position + 1 :],
        )
    for length in range(len(data)):
        yield f"cut to {length} bytes", data[:length]
    yield "a byte added", data + b"\x00"


def test_a_file_damaged_anywhere_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "file"
    FORMAT.write(path, (5, 6), [b"abc", b"defgh"])
    data = path.read_bytes()
    for how, damaged in _damaged(data):
        path.write_bytes(damaged)
        with pytest.raises(ChunkedFileError):
            _read_all(path)
            pytest.fail(f"{how}: read without an error")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: data[:10], "cut short in the header"),
        (lambda data: b"PKOTHER!" + data[8:], "not a file of this kind"),
        (lambda data: data[:-1] + bytes([data[-1] ^ 1]), "chunk 1 fails its checksum"),
        (lambda data: data[:-2], "cut short in chunk 1"),
        (lambda data: data + b"\x00", "bytes follow the last of its 2 chunks"),
    ],
)
def test_the_error_says_what_is_wrong(tmp_path: Path, damage: object, message: str) -> None:
    path = tmp_path / "file"
    FORMAT.write(path, (5, 6), [b"abc", b"defgh"])
    assert callable(damage)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(ChunkedFileError, match=message):
        _read_all(path)


def test_a_damaged_chunk_is_found_only_once_the_chunks_before_it_were_handed_out(
    tmp_path: Path,
) -> None:
    """Why a reader must not act on what it drew until the last chunk is checked."""
    path = tmp_path / "file"
    FORMAT.write(path, (5, 6), [b"abc", b"defgh"])
    path.write_bytes(path.read_bytes()[:-1] + b"!")
    drawn: list[bytes] = []
    with pytest.raises(ChunkedFileError, match="chunk 1"), FORMAT.reading(path) as (_, chunks):
        drawn.extend(chunks)
    assert drawn == [b"abc"]
