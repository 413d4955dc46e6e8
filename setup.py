"""Maps the top-level folders to `pykraft.<folder>` (see DEVELOPERS.md), and builds the
optional compiled modules.

pyproject.toml cannot express "this folder and every package under it, renamed", so the
package list is computed here; everything else lives in pyproject.toml.

Compiled modules (Cython) are optional: each has a pure-Python fallback that gives the same
results, used where the build fails (no C compiler), without Cython, or with
PYKRAFT_NO_EXTENSIONS=1 (at build time: none is built; at run time: none is imported).
"""

import os

from setuptools import Extension, find_packages, setup

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

packages: list[str] = []
package_dir: dict[str, str] = {}
for root in ROOTS:
    packages.append(f"pykraft.{root}")
    package_dir[f"pykraft.{root}"] = root
    packages.extend(f"pykraft.{root}.{sub}" for sub in find_packages(root))


def extensions() -> list[Extension]:
    if os.environ.get("PYKRAFT_NO_EXTENSIONS") == "1":
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        return []
    columns = Extension(
        "pykraft.proto.record_batch._columns_ext",
        ["proto/record_batch/_columns_ext.pyx"],
        optional=True,
    )
    return list(cythonize([columns], language_level=3, quiet=True))


setup(packages=packages, package_dir=package_dir, ext_modules=extensions())
