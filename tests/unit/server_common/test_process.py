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


def test_a_crash_in_native_code_leaves_every_threads_stack_in_the_log() -> None:
    """A server whose C extension crashes must say so in its log (stderr), not die silently with
    an empty log, which is all a `pykraft dev` node's log showed when one did."""
    script = (
        "import ctypes\n"
        "from pykraft.server_common.process import configure_logging\n"
        "configure_logging()\n"
        "ctypes.string_at(0)\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert child.returncode != 0
    assert "Fatal Python error: Segmentation fault" in child.stderr
    assert "Current thread" in child.stderr
