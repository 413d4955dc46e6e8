"""The compiled codec (`_codec.pyx`) against its pure-Python twins, on random inputs: the same
batch bytes from the builder, the same records (and the same refusals) from the decoder, for
every codec, with headers, nulls, large values and timestamps and offsets at int64's edges.

Both implementations run in every session, whatever PYKRAFT_NO_EXTENSIONS says (it only picks
which one `build`, `decode` and the partitioner use); `make test` runs the codec tests a second
time with it set, so the pure path passes the same suite.
"""

from __future__ import annotations

import gc
import importlib
import random
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.client.producer import partitioner
from pykraft.proto import extensions
from pykraft.proto.record_batch import (
    BatchBuilder,
    BatchError,
    Compression,
    RecordHeader,
    TimestampType,
    build,
    decode,
    decode_batch,
)

_codec = extensions.compiled("pykraft.proto.record_batch._codec")
_murmur2 = extensions.compiled("pykraft.client.producer._murmur2")
INT64_MAX = (1 << 63) - 1
_SETTINGS = settings(max_examples=150, deadline=None)

# Large values are drawn from a seed (incompressible, like real payloads): drawn byte by byte they
# exceed hypothesis' entropy limit and fail its data_too_large health check in some runs.
large_bytes = st.builds(
    lambda seed, size: random.Random(seed).randbytes(size),
    st.integers(0, 1 << 32),
    st.integers(8000, 70_000),
)
nullable_bytes = st.none() | st.binary(max_size=64) | large_bytes
headers = st.lists(
    st.builds(RecordHeader, st.text(max_size=12), st.none() | st.binary(max_size=300))
    | st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=30)),
    max_size=4,
)
rows = st.lists(
    st.tuples(
        # Any two differ by at most INT64_MAX, so every timestamp delta fits a batch.
        st.integers(-(1 << 62), (1 << 62) - 1),
        st.none() | st.binary(max_size=64),
        nullable_bytes,
        headers,
        st.integers(0, 3000),  # gap before this record's offset delta
    ),
    min_size=1,
    max_size=12,
)
batch_options = st.fixed_dictionaries(
    {
        "compression": st.sampled_from(list(Compression)),
        "base_offset": st.integers(0, INT64_MAX),
        "timestamp_type": st.sampled_from(list(TimestampType)),
    }
)

Row = tuple[int, bytes | None, bytes | None, list[RecordHeader | tuple[str, bytes | None]], int]


def _build(
    monkeypatch: pytest.MonkeyPatch,
    encoder: Callable[..., None],
    options: dict[str, int],
    records: list[Row],
) -> bytes:
    monkeypatch.setattr(build, "encode_record", encoder)
    builder = BatchBuilder(**options)  # type: ignore[arg-type]
    offset_delta = -1
    for timestamp, key, value, record_headers, gap in records:
        offset_delta += 1 + gap
        builder.append(timestamp, key, value, record_headers, offset_delta=offset_delta)
    return builder.build()


def test_the_compiled_modules_load_and_are_chosen_unless_disabled() -> None:
    """The install built every extension (setup.py only warns when it cannot), and each twin's
    module runs the compiled one unless PYKRAFT_NO_EXTENSIONS is set, its Python twin then."""
    for module, twins in extensions.COMPILED_MODULES.items():
        built = extensions.compiled(module)
        assert str(built.__file__).endswith(".so"), module
        for twin in twins:
            user = importlib.import_module(twin.module)
            if extensions.DISABLED:
                expected = getattr(user, twin.python)
            else:
                expected = getattr(built, twin.compiled)
            assert getattr(user, twin.attribute) is expected, twin


@_SETTINGS
@given(options=batch_options, records=rows)
def test_both_builders_write_the_same_bytes_and_both_decoders_read_the_same_records(
    options: dict[str, int], records: list[Row]
) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        pure = _build(monkeypatch, build.encode_record_python, options, records)
        compiled = _build(monkeypatch, _codec.encode_record, options, records)
    assert pure == compiled
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(decode, "decode_records", decode.decode_records_python)
        expected = decode_batch(pure)
        monkeypatch.setattr(decode, "decode_records", _codec.decode_records)
        decoded = decode_batch(pure)
    assert decoded == expected
    assert [type(r.offset) for r in decoded] == [int] * len(records)
    assert [r.headers for r in decoded] == [
        tuple(h if isinstance(h, RecordHeader) else RecordHeader(*h) for h in row[3])
        for row in records
    ]


def test_compiled_records_stay_out_of_the_garbage_collector() -> None:
    """The compiled decoder hands out records the collector does not walk (no cycle can pass
    through one); they stay whole through a collection."""
    builder = BatchBuilder()
    for index in range(50):
        builder.append(index, b"k", b"v" * index, [RecordHeader("h", b"x")])
    batch = builder.build()
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(decode, "decode_records", _codec.decode_records)
        records = decode_batch(batch)
    assert records and not any(gc.is_tracked(record) for record in records)
    gc.collect()
    assert [(r.offset, r.value, r.headers) for r in records] == [
        (i, b"v" * i, (RecordHeader("h", b"x"),)) for i in range(50)
    ]


def _outcome(decoder: Callable[..., object], *arguments: object) -> object:
    try:
        return decoder(*arguments)
    except BatchError as e:
        return ("BatchError", e.error_code)


@_SETTINGS
@given(
    data=st.binary(max_size=200),
    count=st.integers(0, 6),
    base=st.sampled_from([0, INT64_MAX - 3, -(1 << 63)]),
    last_delta=st.integers(0, 1 << 31),
)
def test_both_decoders_refuse_damaged_records_alike(
    data: bytes, count: int, base: int, last_delta: int
) -> None:
    """Random bytes as a batch's records: the same records, or a BatchError with the same code
    from both (a record running past the end may be blamed on a different field)."""
    arguments = (data, base, base, 7, True, last_delta, count)
    assert _outcome(_codec.decode_records, *arguments) == _outcome(
        decode.decode_records_python, *arguments
    )


@_SETTINGS
@given(
    prefix=st.binary(min_size=1, max_size=6),
    payload=st.binary(max_size=40),
    tail=st.sampled_from([b"", b"\x00", b"\x02a\x00"]),
)
def test_both_decoders_agree_on_oversized_varints(
    prefix: bytes, payload: bytes, tail: bytes
) -> None:
    """Varints of every length, terminated or not, in every field position."""
    for filler in (
        b"\xff" * 9 + b"\x01",
        b"\xff" * 4 + b"\x0f",
        b"\xff" * 4 + b"\x1f",
        b"\x80" * 11,
    ):
        data = prefix + filler + payload + tail
        arguments = (data, 0, 0, 0, False, 1 << 31, 1)
        assert _outcome(_codec.decode_records, *arguments) == _outcome(
            decode.decode_records_python, *arguments
        )


@_SETTINGS
@given(st.binary(max_size=300))
def test_both_murmur2_hash_alike(data: bytes) -> None:
    assert _murmur2.murmur2(data) == partitioner.murmur2_python(data)
