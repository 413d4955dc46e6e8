"""Switching the client's hot loops between their compiled and pure-Python implementations
inside one process, so a benchmark can alternate the two in one run (the machine's noise then
hits both alike). PYKRAFT_NO_EXTENSIONS picks one per process; this swaps the module attributes
that choice set, which is what every caller reads at each call."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pykraft.client.consumer import fetch_buffer
from pykraft.client.producer import accumulator, partitioner
from pykraft.client.producer.future import FutureRecordMetadata
from pykraft.proto.extensions import compiled
from pykraft.proto.record_batch import build, decode

_codec = compiled("pykraft.proto.record_batch._codec")
_murmur2 = compiled("pykraft.client.producer._murmur2")
_consumer_records = compiled("pykraft.client.consumer._consumer_records")
_record_future = compiled("pykraft.client.producer._record_future")

# (module, attribute, compiled, pure)
_SWITCHES = (
    (build, "encode_record", _codec.encode_record, build.encode_record_python),
    (decode, "decode_records", _codec.decode_records, decode.decode_records_python),
    (partitioner, "murmur2", _murmur2.murmur2, partitioner.murmur2_python),
    (accumulator, "record_future", _record_future.record_future, FutureRecordMetadata),
    (
        fetch_buffer,
        "consumer_records",
        _consumer_records.consumer_records,
        fetch_buffer.consumer_records_python,
    ),
)
NAMES = {True: "compiled", False: "python"}


@contextmanager
def implementation(native: bool) -> Iterator[None]:
    """Runs the block on the compiled loops (True) or on the pure-Python ones (False)."""
    saved = [getattr(module, name) for module, name, _, _ in _SWITCHES]
    for module, name, compiled_loop, pure in _SWITCHES:
        setattr(module, name, compiled_loop if native else pure)
    try:
        yield
    finally:
        for (module, name, _, _), value in zip(_SWITCHES, saved, strict=True):
            setattr(module, name, value)
