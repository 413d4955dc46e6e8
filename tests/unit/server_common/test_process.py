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
