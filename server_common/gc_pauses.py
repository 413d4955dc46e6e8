"""Keeping the cyclic garbage collector's pauses short in servers that hold large images.

A full collection walks every tracked object while holding the GIL. A controller or broker
holding a million partitions has some 20 million of them: one full collection takes about a
second, longer than the controller's Raft election timeout (300-600 ms), and CPython runs one
whenever the objects that survived since the last one grow by a quarter, so a growing image
brings a pause of each size on the way up (16 during the creation of 1M partitions, the last
ones 0.7-1.1 s each; the quorum held 22 elections meanwhile). The image is long-lived and
immutable, and its structures hold no reference cycles.

- `long_lived_objects`: what start-up builds for the process's life is built with the
  collector off, then frozen (`gc.freeze`), so no later collection walks it again.
- `bound_full_collections`: after any full collection that took `pause_ms_max` or more, every
  object alive is frozen, so the next full collections walk only what was allocated since.
- `long_lived_build`: for a large build at runtime (an image restored from a snapshot), what
  `long_lived_objects` does, in a process that bounds its collections (a server) only.

Frozen objects are still freed by reference counting when their last reference goes, as an old
image's replaced nodes are; what freezing gives up is collecting reference cycles among frozen
objects that become garbage later. That cost is bounded by growth, not time: a freeze happens
only after a slow full collection, and the next one is slow only once as many objects again
have survived since.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from typing import Final

# Well within the Raft election timeout (300 ms at least) even on top of a turn's work, so a full
# collection never deposes a leader; small heaps (tests, small clusters) collect in far less and
# are never frozen. While an image grows, full collections come about once per 9,000-partition
# CreateTopics (each time the survivors since the last freeze grew by a quarter), rising by a
# quarter each up to this bound: with 100 ms they took 13-222 ms on top of the ~100 ms turn
# that decided the write (a 1M-partition creation in process), followers' applies up to 180 ms;
# with 30 ms, 6-66 ms and 98 ms. Each object is still walked about five times before frozen.
FULL_COLLECTION_PAUSE_MS_MAX: Final = 30


@contextlib.contextmanager
def long_lived_objects() -> Iterator[None]:
    """For start-up work that builds what the process keeps for its life (a broker's metadata
    image and its partitions' logs): the cyclic garbage collector is off meanwhile, and every
    object is frozen afterwards (`gc.freeze`), so neither the start-up nor a later collection
    walks them again. Why: a broker opening 20,000 logs ran 8 full collections (2.9 s of an
    8 s open) and its shutdown 2 more (2 s). The collector is on again afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


class _FreezeAfterSlowFullCollections:
    """A `gc.callbacks` entry: times each full collection and freezes after a slow one."""

    def __init__(self, pause_ms_max: int, clock_s: Callable[[], float]) -> None:
        self._pause_ms_max = pause_ms_max
        self._clock_s = clock_s
        self._started_s = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started_s = self._clock_s()
        elif (self._clock_s() - self._started_s) * 1000 >= self._pause_ms_max:
            gc.freeze()  # the collection is over: its survivors move to the permanent generation


def long_lived_build() -> contextlib.AbstractContextManager[None]:
    """`long_lived_objects()` in a process that installed `bound_full_collections` (a server,
    whose collections are its own to tune), else a context that changes nothing (a test or a
    tool, whose collector is left alone). Why: restoring a million-partition image with the
    collector on ran dozens of full collections over the growing image, seconds in all."""
    if any(isinstance(callback, _FreezeAfterSlowFullCollections) for callback in gc.callbacks):
        return long_lived_objects()
    return contextlib.nullcontext()


def bound_full_collections(
    pause_ms_max: int = FULL_COLLECTION_PAUSE_MS_MAX,
    clock_s: Callable[[], float] = time.perf_counter,
) -> None:
    """Installs, for the rest of the process, the freeze after every full collection that took
    `pause_ms_max` or more (module docstring). Servers call it once at start."""
    assert pause_ms_max >= 0, pause_ms_max
    gc.callbacks.append(_FreezeAfterSlowFullCollections(pause_ms_max, clock_s))
