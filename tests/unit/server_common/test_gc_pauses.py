"""`gc_pauses`: what a server builds at start is frozen, and a slow full collection is the last
of its size (its survivors are frozen after it). Each test runs in a child process, as freezing
is process-wide."""

from __future__ import annotations

import subprocess
import sys


def _run(script: str) -> list[str]:
    child = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    return child.stdout.split()


def test_long_lived_objects_are_built_without_full_collections_and_frozen() -> None:
    """In a child (freezing is process-wide): building 400,000 containers runs full collections
    without the block (each walks every object: about a second at 20,000 replicas) and none
    inside it; what the block built is frozen afterwards and the collector is on again."""
    script = (
        "import gc\n"
        "from pykraft.server_common.gc_pauses import long_lived_objects\n"
        "full = []\n"
        "gc.callbacks.append(lambda phase, info: phase == 'start' and info['generation'] == 2"
        " and full.append(1))\n"
        "def build():\n"
        "    return [[i] for i in range(400_000)]\n"
        "kept = build()\n"
        "outside = len(full)\n"
        "with long_lived_objects():\n"
        "    kept.append(build())\n"
        "print(outside, len(full) - outside, gc.get_freeze_count() > 400_000, gc.isenabled())\n"
    )
    outside, inside, frozen, enabled = _run(script)
    assert int(outside) > 0  # the same work outside the block did run full collections
    assert (inside, frozen, enabled) == ("0", "True", "True")


_FULL_COLLECTIONS = (
    "import gc\n"
    "from pykraft.server_common.gc_pauses import bound_full_collections\n"
    "kept = [[i] for i in range(100_000)]\n"
    "bound_full_collections(pause_ms_max={pause_ms_max})\n"
    "gc.collect()\n"
    "after_one = gc.get_freeze_count()\n"
    "kept.append([[i] for i in range(1_000)])\n"
    "gc.collect()\n"
    "print(after_one, gc.get_freeze_count() - after_one)\n"
)


def test_after_a_slow_full_collection_its_survivors_are_frozen() -> None:
    """Every full collection counts as slow at a 0 ms bound: after the first, the 100,000 lists
    kept are frozen (the next walks none of them); after the second, what was built since."""
    first, second = _run(_FULL_COLLECTIONS.format(pause_ms_max=0))
    assert int(first) > 100_000
    assert 1_000 <= int(second) < 100_000


def test_full_collections_under_the_bound_freeze_nothing() -> None:
    assert _run(_FULL_COLLECTIONS.format(pause_ms_max=10**9)) == ["0", "0"]


_BUILD = (
    "import gc\n"
    "from pykraft.server_common.gc_pauses import bound_full_collections, long_lived_build\n"
    "{install}"
    "with long_lived_build():\n"
    "    inside = gc.isenabled()\n"
    "    kept = [[i] for i in range(10_000)]\n"
    "print(inside, gc.isenabled(), gc.get_freeze_count() > 10_000)\n"
)


def test_a_long_lived_build_freezes_in_a_server_only() -> None:
    """With the servers' bound installed, a build runs with the collector off and is frozen;
    without it (a test, a tool), the collector is left as it was."""
    server = _run(_BUILD.format(install="bound_full_collections()\n"))
    assert server == ["False", "True", "True"]
    assert _run(_BUILD.format(install="")) == ["True", "True", "False"]
