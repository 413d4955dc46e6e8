"""Which implementation of the client's and codec's hot loops runs: compiled or pure Python.

The compiled modules (Cython, built by setup.py's EXTENSIONS during the install) each replace a
pure-Python function kept beside them, with identical results (property tests compare the two).
`load` returns the compiled module, or None when PYKRAFT_NO_EXTENSIONS is set to anything but
"" or "0", or when the module was not built (setup.py warned then): callers fall back to their
Python function. The choice is made once, at import.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Final, NamedTuple

DISABLED: Final = os.environ.get("PYKRAFT_NO_EXTENSIONS", "") not in ("", "0")


class Twin(NamedTuple):
    """Where a compiled module's function or class is chosen: `module.attribute` is the
    compiled module's `compiled` unless disabled or not built, else `module.python`, its
    pure-Python twin (a test checks each pair; bench/implementations.py swaps them)."""

    module: str
    attribute: str
    python: str
    compiled: str


# Every compiled module and the twins it provides; tests check each one loads where the install
# built them and is chosen unless disabled.
COMPILED_MODULES: Final[dict[str, tuple[Twin, ...]]] = {
    "pykraft.proto.record_batch._codec": (
        Twin("pykraft.proto.record_batch.build", "encode_record", "encode_record_python",
             "encode_record"),
        Twin("pykraft.proto.record_batch.decode", "decode_records", "decode_records_python",
             "decode_records"),
    ),
    "pykraft.client.producer._murmur2": (
        Twin("pykraft.client.producer.partitioner", "murmur2", "murmur2_python", "murmur2"),
    ),
    "pykraft.client.consumer._consumer_records": (
        Twin("pykraft.client.consumer.fetch_buffer", "consumer_records",
             "consumer_records_python", "consumer_records"),
    ),
    "pykraft.proto.record_batch._columns_ext": (
        Twin("pykraft.proto.record_batch.columns", "_decode", "decode_records_python",
             "decode_records"),
    ),
    "pykraft.client.producer._open_batches": (
        Twin("pykraft.client.producer.accumulator", "OpenBatches", "open_batches_python",
             "OpenBatches"),
        Twin("pykraft.client.producer.producer", "SendPath", "send_path_python", "SendPath"),
    ),
    "pykraft.metadata_log._partition_records": (
        Twin("pykraft.metadata_log.image_loader", "read_partition_run",
             "read_partition_run_python", "read_partition_run"),
        Twin("pykraft.metadata_log.codec", "encode_partition_body",
             "encode_partition_body_python", "encode_partition_body"),
        Twin("pykraft.metadata_log.image", "partition_record", "partition_record_python",
             "partition_record"),
    ),
}  # fmt: skip


def load(module: str) -> ModuleType | None:
    """The compiled module, or None when disabled or not built."""
    if DISABLED:
        return None
    try:
        return compiled(module)
    except ImportError:
        return None


def compiled(module: str) -> ModuleType:
    """The compiled module whatever PYKRAFT_NO_EXTENSIONS says (tests and benchmarks compare it
    with its Python twin); ImportError when it was not built. Untyped: callers annotate what
    they take from it, as the Python twin's signature says."""
    assert module in COMPILED_MODULES, module
    return importlib.import_module(module)
