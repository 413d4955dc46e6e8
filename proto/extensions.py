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
from typing import Final

DISABLED: Final = os.environ.get("PYKRAFT_NO_EXTENSIONS", "") not in ("", "0")

# Every compiled module; tests check each one loads where the install built them.
COMPILED_MODULES: Final = (
    "pykraft.proto.record_batch._codec",
    "pykraft.client.producer._murmur2",
    "pykraft.client.consumer._consumer_records",
    "pykraft.proto.record_batch._columns_ext",
    "pykraft.client.producer._record_future",
)


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
