"""A machine that cannot build the extensions still installs pykraft: setup.py's build_ext
warns and goes on, and the pure-Python implementations run (`pykraft.proto.extensions`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pykraft.proto import extensions

ROOT = Path(__file__).resolve().parents[3]


def _build_ext(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext",
         "--build-lib", str(tmp_path / "lib"), "--build-temp", str(tmp_path / "temp")],
        cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip


def test_a_failed_compile_warns_and_builds_nothing(tmp_path: Path) -> None:
    result = _build_ext(tmp_path, {"CC": "false", "LDSHARED": "false"})
    assert result.returncode == 0, result.stderr
    for module in extensions.COMPILED_MODULES:
        assert f"WARNING: pykraft: {module} was not built" in result.stderr, result.stderr
    assert not list((tmp_path / "lib").rglob("*.so"))


def test_a_missing_cython_warns_and_builds_nothing(tmp_path: Path) -> None:
    """A Cython that cannot be imported (here a package of that name that refuses to load)."""
    shadow = tmp_path / "shadow" / "Cython"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no Cython here')\n")
    result = _build_ext(tmp_path, {"PYTHONPATH": str(shadow.parent)})
    assert result.returncode == 0, result.stderr
    assert "WARNING: pykraft: Cython is missing (no Cython here)" in result.stderr, result.stderr
    assert not list((tmp_path / "lib").rglob("*.so"))
