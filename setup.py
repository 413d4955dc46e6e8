"""Maps the top-level folders to `pykraft.<folder>` (see DEVELOPERS.md) and builds the compiled
hot loops.

pyproject.toml cannot express "this folder and every package under it, renamed", so the
package list is computed here; everything else lives in pyproject.toml.

`EXTENSIONS` are Cython modules that each replace a pure-Python loop kept beside it
(`pykraft.proto.extensions` picks one at import; PYKRAFT_NO_EXTENSIONS=1 forces the Python).
Adding one is one line. A build that fails (no compiler, no Python headers, no Cython) warns
and installs the package without them, so the Python implementations run.
"""

import sys
import warnings

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOTS = (
    "proto",
    "server_common",
    "quorum",
    "broker",
    "metadata_log",
    "client",
    "spark",
    "mirror",
    "cli",
)

# (module, source): each source folder is also on Cython's include path, for shared .pxi files.
EXTENSIONS = (
    ("pykraft.proto.record_batch._codec", "proto/record_batch/_codec.pyx"),
    ("pykraft.client.producer._murmur2", "client/producer/_murmur2.pyx"),
    ("pykraft.client.consumer._consumer_records", "client/consumer/_consumer_records.pyx"),
    ("pykraft.proto.record_batch._columns_ext", "proto/record_batch/_columns_ext.pyx"),
    ("pykraft.client.producer._open_batches", "client/producer/_open_batches.pyx"),
    ("pykraft.metadata_log._partition_records", "metadata_log/_partition_records.pyx"),
)
INCLUDE_PATH = ["proto/record_batch"]


class OptionalBuildExt(build_ext):
    """build_ext that warns instead of failing: the extensions only make things faster."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:  # any build failure means "no extensions"
            _warn(f"the compiled extensions were not built ({error})")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as error:
            _warn(f"{ext.name} was not built ({error})")


def _warn(message: str) -> None:
    text = f"pykraft: {message}; the pure-Python implementation will run instead"
    warnings.warn(text, stacklevel=2)
    print(f"WARNING: {text}", file=sys.stderr)


def _extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize
    except ImportError as error:
        _warn(f"Cython is missing ({error})")
        return []
    modules = [Extension(name, [source]) for name, source in EXTENSIONS]
    try:
        return list(cythonize(modules, include_path=INCLUDE_PATH, quiet=True))
    except Exception as error:  # a Cython error too
        _warn(f"Cython could not translate the extensions ({error})")
        return []


packages: list[str] = []
package_dir: dict[str, str] = {}
for root in ROOTS:
    packages.append(f"pykraft.{root}")
    package_dir[f"pykraft.{root}"] = root
    packages.extend(f"pykraft.{root}.{sub}" for sub in find_packages(root))

setup(
    packages=packages,
    package_dir=package_dir,
    ext_modules=_extensions(),
    cmdclass={"build_ext": OptionalBuildExt},
)
