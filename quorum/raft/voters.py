"""The voter set as this node last saw it, kept in `quorum-voters.json` in the data directory.

Raft (and pysyncobj's dynamic membership) changes the voter set through log entries, one change
at a time, and every node uses the latest set in its log, committed or not. A restarted node
must start from that set, not from the `controller.quorum.voters` it was first configured
with: this file is written (atomically, with fsync) whenever the set changes, and read first
at start-up. Membership entries replayed from the journal afterwards are idempotent on it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pykraft.quorum.raft.api import RaftConfig
from pykraft.quorum.raft.errors import RaftStorageError
from pykraft.server_common.durable_files import replace_durably

VOTERS_FILE_NAME = "quorum-voters.json"


@dataclass(frozen=True)
class Voter:
    """One voter: its node id, Raft listener and the gRPC listener clients are sent to."""

    node_id: int
    address: str
    listener: str


def read_voters(data_dir: Path) -> dict[int, Voter] | None:
    """The persisted set, or None when this node never wrote one (a first start)."""
    path = data_dir / VOTERS_FILE_NAME
    try:
        raw = json.loads(path.read_bytes())
        voters = [Voter(int(v["id"]), str(v["address"]), str(v["listener"])) for v in raw]
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as error:
        raise RaftStorageError(f"{path} is damaged: {error}") from error
    return {voter.node_id: voter for voter in voters}


def write_voters(data_dir: Path, voters: Mapping[int, Voter]) -> None:
    items = [
        {"id": v.node_id, "address": v.address, "listener": v.listener}
        for v in sorted(voters.values(), key=lambda v: v.node_id)
    ]
    replace_durably(data_dir / VOTERS_FILE_NAME, json.dumps(items).encode())


def with_persisted_voters(config: RaftConfig) -> RaftConfig:
    """`config` with the voter set this node persisted, when it has one: what a start uses."""
    persisted = read_voters(config.data_dir)
    if persisted is None:
        return config
    return dataclasses.replace(
        config,
        voters={v.node_id: v.address for v in persisted.values()},
        listeners={v.node_id: v.listener for v in persisted.values()},
    )
