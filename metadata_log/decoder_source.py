"""Straight-line decoders of record classes, written as Python source once per class and version
when the codec is imported (as `dataclasses` writes `__init__`), instead of a chain of one
closure call per field.

Why: a broker or controller replays every record of a million-partition image when it restores
a snapshot, joins, or follows a fence, and the chained decoders cost about 9 us per
PartitionRecord. The generated function reads the common cases inline: a one-byte varint, a
zig-zag int, a tuple of ints, a UUID (topic ids repeat across a topic's partitions, so decoded
UUIDs are shared through a bounded cache, which also saves the image one object per partition).
Every other field type calls the codec's own decoder for it.

What a caller may rely on: a generated decoder accepts and refuses exactly the bytes the chained
decoders do, with the same `CorruptRecordError` messages; `test_codec.py` compares the two.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Final
from uuid import UUID

from pykraft.metadata_log.errors import CorruptRecordError

Decoder = Callable[[bytes, int], tuple[Any, int]]

# Decoded UUIDs kept for reuse; emptied when full, so it holds at most this many.
UUID_CACHE_ENTRIES_MAX: Final = 1 << 16
_UUID_BYTES: Final = 16
_uuids: dict[bytes, UUID] = {}


def shared_uuid(raw: bytes) -> UUID:
    """The UUID of the 16 bytes `raw`, the same object as for earlier equal bytes while the
    cache holds them."""
    found = _uuids.get(raw)
    if found is None:
        if len(_uuids) >= UUID_CACHE_ENTRIES_MAX:
            _uuids.clear()
        found = _uuids[raw] = UUID(bytes=raw)
    return found


class _Source:
    """Lines of one decoder function being written, with fresh names for its values."""

    def __init__(self, generic: Callable[[object], Decoder]) -> None:
        self.lines: list[str] = []
        self.globals: dict[str, Any] = {}
        self._generic = generic
        self._names = 0

    def name(self, prefix: str) -> str:
        self._names += 1
        return f"{prefix}{self._names}"

    def emit(self, indent: int, *lines: str) -> None:
        self.lines.extend("    " * indent + line for line in lines)

    def uvarint(self, indent: int, target: str) -> None:
        self.emit(
            indent,
            "if pos < n and data[pos] < 0x80:",
            f"    {target} = data[pos]",
            "    pos += 1",
            "else:",
            f"    {target}, pos = read_multibyte_uvarint(data, pos)",
        )

    def value(self, indent: int, hint: object, target: str) -> None:
        """Lines that decode one value of type `hint` at `pos` into `target`."""
        if hint is int:
            raw = self.name("raw")
            self.uvarint(indent, raw)
            self.emit(indent, f"{target} = ({raw} >> 1) ^ -({raw} & 1)")
        elif hint is UUID:
            self.emit(
                indent,
                f"end = pos + {_UUID_BYTES}",
                "if end > n:",
                f"    end_of(data, pos, {_UUID_BYTES})",
                f"{target} = uuids.get(data[pos:end]) or shared_uuid(data[pos:end])",
                "pos = end",
            )
        elif tuple_item(hint) is int:
            self._ints(indent, target)
        elif optional_item(hint) is not None:
            self._optional(indent, optional_item(hint), target)
        else:
            decoder = self.name("decode")
            self.globals[decoder] = self._generic(hint)
            self.emit(indent, f"{target}, pos = {decoder}(data, pos)")

    def _ints(self, indent: int, target: str) -> None:
        count, items, item = self.name("count"), self.name("items"), self.name("item")
        self.uvarint(indent, count)
        self.emit(
            indent,
            f"if {count} > n - pos:",
            "    raise CorruptRecordError(",
            f'        f"tuple of {{{count}}} items at offset {{pos}} but only {{n - pos}} '
            'bytes left"',
            "    )",
            f"{items} = []",
            f"for _ in range({count}):",
        )
        self.value(indent + 1, int, item)
        self.emit(indent, f"    {items}.append({item})", f"{target} = tuple({items})")

    def _optional(self, indent: int, hint: object, target: str) -> None:
        present = self.name("present")
        self.emit(
            indent,
            "if pos >= n:",
            "    end_of(data, pos, 1)",
            f"{present} = data[pos]",
            "pos += 1",
            f"if {present} == 0:",
            f"    {target} = None",
            f"elif {present} != 1:",
            "    raise CorruptRecordError(",
            f'        f"bool byte {{{present}}} at offset {{pos - 1}} is neither 0 nor 1"',
            "    )",
            "else:",
        )
        self.value(indent + 1, hint, target)


def optional_item(hint: object) -> object:
    """X of a hint `X | None`, else None."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) not in (types.UnionType, typing.Union) or len(args) != 2:
        return None
    return (
        next((arg for arg in args if arg is not type(None)), None) if type(None) in args else None
    )


def tuple_item(hint: object) -> object:
    """X of a hint `tuple[X, ...]`, else None."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis:
        return args[0]
    return None


def struct_decoder(
    cls: type[Any],
    hints: list[object],
    generic: Callable[[object], Decoder],
    helpers: Mapping[str, Callable[..., Any]],
) -> Decoder:
    """A decoder of `cls` built from its first `len(hints)` fields (of those types, in order),
    the fields after them taking their defaults. `generic(hint)` is the codec's decoder of a
    type not read inline; `helpers` are its `read_multibyte_uvarint` and `end_of`."""
    source = _Source(generic)
    source.emit(0, "def decode(data, pos):", "    n = len(data)")
    names = [source.name("v") for _ in hints]
    for hint, target in zip(hints, names, strict=True):
        source.value(1, hint, target)
    source.emit(1, f"return cls({', '.join(names)}), pos")
    namespace: dict[str, Any] = {
        **source.globals,
        **helpers,
        "cls": cls,
        "uuids": _uuids,
        "shared_uuid": shared_uuid,
        "CorruptRecordError": CorruptRecordError,
    }
    exec("\n".join(source.lines), namespace)  # our own source, from type hints
    decoder: Decoder = namespace["decode"]
    return decoder
