"""Generates the protobuf and gRPC modules of `proto/` (run by `make proto` and `make proto-check`).

The .proto files import each other as `pykraft/proto/x.proto`, so protoc must see them under a
`pykraft/proto/` path: they are copied into a temporary tree of that shape, compiled there, and
the outputs come back next to their sources. The generated imports then read
`from pykraft.proto import x_pb2`, which resolves through the installed package.

`--check` compiles into the temporary tree only and fails when any committed module differs.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

PROTO_DIR = Path(__file__).resolve().parent.parent / "proto"
SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")


def generate(out_tree: Path) -> list[Path]:
    """Compiles every proto into `out_tree/pykraft/proto/` and returns the generated files."""
    package_dir = out_tree / "pykraft" / "proto"
    package_dir.mkdir(parents=True)
    sources = sorted(PROTO_DIR.glob("*.proto"))
    for source in sources:
        shutil.copy(source, package_dir / source.name)
    args = [
        "grpc_tools.protoc",
        f"-I{out_tree}",
        f"--python_out={out_tree}",
        f"--pyi_out={out_tree}",
        f"--grpc_python_out={out_tree}",
        *(f"pykraft/proto/{source.name}" for source in sources),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return sorted(p for p in package_dir.iterdir() if p.name.endswith(SUFFIXES))


def committed_modules() -> list[Path]:
    return sorted(p for p in PROTO_DIR.iterdir() if p.name.endswith(SUFFIXES))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if committed modules are stale")
    check = parser.parse_args().check
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
        if check:
            stale = [p.name for p in fresh if not _same(p, PROTO_DIR / p.name)]
            extra = {p.name for p in committed_modules()} - {p.name for p in fresh}
            if stale or extra:
                print(
                    f"stale generated modules: {sorted(stale) + sorted(extra)}; run 'make proto'",
                    file=sys.stderr,
                )
                return 1
            print(f"proto-check: {len(fresh)} generated modules are up to date")
            return 0
        for old in committed_modules():
            old.unlink()
        for path in fresh:
            shutil.copy(path, PROTO_DIR / path.name)
        print(f"generated {len(fresh)} modules into {PROTO_DIR}")
    return 0


def _same(fresh: Path, committed: Path) -> bool:
    return committed.exists() and committed.read_bytes() == fresh.read_bytes()


if __name__ == "__main__":
    sys.exit(main())
