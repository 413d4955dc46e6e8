"""`raise_open_files_limit`: a server starts with its soft open-file limit at the hard one."""

from __future__ import annotations

import resource
import subprocess
import sys


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 512))


def test_the_soft_limit_is_raised_to_the_hard_one() -> None:
    """In a child whose limits are 256 (soft) and 512 (hard), so the test process keeps its own."""
    script = (
        "import resource\n"
        "from pykraft.server_common.process import raise_open_files_limit\n"
        "print(raise_open_files_limit(), *resource.getrlimit(resource.RLIMIT_NOFILE))\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", script],
        preexec_fn=_limited,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert child.stdout.split() == ["512", "512", "512"]


def test_long_lived_objects_are_built_without_full_collections_and_frozen() -> None:
    """In a child (freezing is process-wide): building 400,000 containers runs full collections
    without the block (each walks every object: about a second at 20,000 replicas) and none
    inside it; what the block built is frozen afterwards and the collector is on again."""
    script = (
        "import gc\n"
        "from pykraft.server_common.process import long_lived_objects\n"
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
    child = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    outside, inside, frozen, enabled = child.stdout.split()
    assert int(outside) > 0  # the same work outside the block did run full collections
    assert (inside, frozen, enabled) == ("0", "True", "True")
