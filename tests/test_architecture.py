"""The rules of DEVELOPERS.md that code review alone would let slip, checked on the source.

- Imports point one way: `metadata_log` imports nothing of ours but `pykraft.proto.extensions`
  (which of its compiled hot loops runs: a leaf with no I/O); `server_common` imports `proto`
  only; `quorum` and `broker` import `server_common`, `metadata_log` and `proto`; `client`
  imports `proto` only; `spark` and `mirror` import `client` only; `cli` imports `client`,
  `mirror` and `proto`.
- Nothing of ours imports `cli` (tests, bench and deploy may): it is the top of the tree.
- `metadata_log` is pure: no sockets, threads, files, processes or clocks.
- pysyncobj is reached through one gate only (two modules), so its gaps are closed in one place.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ALLOWED = {
    "proto": {"proto"},
    "server_common": {"server_common", "proto"},
    "metadata_log": {"metadata_log"},
    "quorum": {"quorum", "server_common", "metadata_log", "proto"},
    "broker": {"broker", "server_common", "metadata_log", "proto"},
    "client": {"client", "proto"},
    "spark": {"spark", "client"},
    "mirror": {"mirror", "client"},
    "cli": {"cli", "client", "mirror", "proto"},
}
IMPURE_MODULES = {
    "socket", "threading", "time", "os", "io", "pathlib", "subprocess", "asyncio", "datetime",
    "random", "shutil", "tempfile", "multiprocessing", "concurrent", "selectors", "mmap", "grpc",
}  # fmt: skip
# Modules a package may import beyond ALLOWED's packages.
ALLOWED_MODULES = {"metadata_log": {"pykraft.proto.extensions"}}
PYSYNCOBJ_GATE = {
    ROOT / "quorum" / "raft" / name for name in ("pysyncobj_log.py", "pysyncobj_storage.py")
}


def _python_files(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py") if "_pb2" not in p.name)


def _imported_modules(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: use absolute imports (pykraft.<folder>...)"
            modules.add(node.module or "")
    return modules


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_point_one_way(package: str) -> None:
    for path in _python_files(package):
        for module in _imported_modules(path):
            parts = module.split(".")
            if parts[0] != "pykraft" or module in ALLOWED_MODULES.get(package, ()):
                continue
            assert len(parts) > 1 and parts[1] in ALLOWED[package], (
                f"{path.relative_to(ROOT)} imports {module}: {package} may import only "
                f"{sorted(ALLOWED[package])}"
            )


def test_metadata_log_is_pure() -> None:
    for path in _python_files("metadata_log"):
        for module in _imported_modules(path):
            assert module.split(".")[0] not in IMPURE_MODULES, (
                f"{path.relative_to(ROOT)} imports {module}: "
                "metadata_log does no I/O and reads no clock"
            )


def test_pysyncobj_is_imported_in_one_place() -> None:
    for package in ALLOWED:
        for path in _python_files(package):
            if path in PYSYNCOBJ_GATE:
                continue
            imports = {m.split(".")[0] for m in _imported_modules(path)}
            assert "pysyncobj" not in imports, f"{path.relative_to(ROOT)} imports pysyncobj"


def test_every_package_folder_is_importable_as_pykraft_subpackage() -> None:
    import importlib

    for package in ALLOWED:
        module = importlib.import_module(f"pykraft.{package}")
        assert Path(module.__file__ or "").resolve().parent == ROOT / package


def test_mypy_skips_exactly_the_generated_modules() -> None:
    """Generated protobuf modules are exempt from mypy; hand-written ones in proto/ are not."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    exempt = {
        module
        for override in config["tool"]["mypy"]["overrides"]
        if override.get("ignore_errors")
        for module in override["module"]
    }
    generated = {
        f"pykraft.proto.{p.stem}" for p in (ROOT / "proto").glob("*.py") if "_pb2" in p.name
    }
    assert exempt == generated
