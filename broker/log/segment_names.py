"""Kafka's names for a segment's files: the base offset zero-padded to 20 digits, then the
suffix (`00000000000000000000.log`, `.index`, `.timeindex`), so Kafka's tools find them."""

from __future__ import annotations

from pathlib import Path
from typing import Final

LOG_SUFFIX: Final = ".log"
INDEX_SUFFIX: Final = ".index"
TIME_INDEX_SUFFIX: Final = ".timeindex"
SEGMENT_SUFFIXES: Final = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)


def file_name(base_offset: int, suffix: str) -> str:
    """Kafka's segment file name: the base offset zero-padded to 20 digits, then `suffix`."""
    assert base_offset >= 0
    return f"{base_offset:020d}{suffix}"


def base_offset_of(path: Path) -> int | None:
    """The base offset a segment file name starts with, or None if it is not such a name."""
    digits = path.name.split(".", 1)[0]
    return int(digits) if len(digits) == 20 and digits.isdigit() else None
