"""The data directory's identity file, as Kafka's `meta.properties`: a directory formatted for one
node of one cluster refuses to start as another, so logs of different clusters never mix."""

from __future__ import annotations

from pathlib import Path

from pykraft.server_common.durable_files import make_directory_durably, replace_durably


class StorageError(ValueError):
    pass


def check_meta_properties(data_dir: Path, *, node_id: int, cluster_id: str) -> None:
    """Creates `data_dir/meta.properties` (and `data_dir`) durably on first start; afterwards it
    must match."""
    make_directory_durably(data_dir)
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
    replace_durably(path, "".join(f"{k}={v}\n" for k, v in wanted.items()).encode())
