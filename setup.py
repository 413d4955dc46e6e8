"""Maps the top-level folders to `pykraft.<folder>` (see DEVELOPERS.md).

pyproject.toml cannot express "this folder and every package under it, renamed", so the
package list is computed here; everything else lives in pyproject.toml.
"""

from setuptools import find_packages, setup

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

setup(packages=packages, package_dir=package_dir)
