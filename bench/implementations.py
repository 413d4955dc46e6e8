"""Switching the client's hot loops between their compiled and pure-Python implementations
inside one process, so a benchmark can alternate the two in one run (the machine's noise then
hits both alike). PYKRAFT_NO_EXTENSIONS picks one per process; this swaps the module attributes
that choice set (every twin of `extensions.COMPILED_MODULES`), which callers read at each call
(the producer's OpenBatches when an accumulator is made)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from pykraft.proto.extensions import COMPILED_MODULES, compiled

# (module, attribute, compiled, pure)
_SWITCHES: list[tuple[ModuleType, str, object, object]] = []
for _name, _twins in COMPILED_MODULES.items():
    for _twin in _twins:
        _module = importlib.import_module(_twin.module)
        _SWITCHES.append(
            (
                _module,
                _twin.attribute,
                getattr(compiled(_name), _twin.compiled),
                getattr(_module, _twin.python),
            )
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
