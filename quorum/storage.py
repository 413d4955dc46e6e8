"""The data directory's identity file, as Kafka's `meta.properties`: a directory formatted for one
node of one cluster refuses to start as another, so logs of different clusters never mix."""

from __future__ import annotations

import os
from pathlib import Path


class StorageError(ValueError):
    pass


def check_meta_properties(data_dir: Path, *, node_id: int, cluster_id: str) -> None:
    """Creates `data_dir/meta.properties` on first start; afterwards it must match."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "meta.properties"
    wanted = {"version": "1", "node.id": str(node_id), "cluster.id": cluster_id}
    if path.exists():
        found = dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
        for key in ("node.id", "cluster.id"):
            if found.get(key) != wanted[key]:
                raise StorageError(
                    f"{path} belongs to {key}={found.get(key)}, not {wanted[key]}; "
                    "use another data directory"
                )
        return
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(f"{k}={v}\n" for k, v in wanted.items()))
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    tmp.rename(path)
