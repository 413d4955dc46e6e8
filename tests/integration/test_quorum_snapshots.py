"""The controllers' Raft snapshots through real processes (issue 18 §2.2): an image larger than
one snapshot chunk (1 MiB, about 31,000 partitions) is compacted into snapshot files written
chunk by chunk; a controller that missed the compacted entries catches up from the leader's
snapshot, and a full stop and start restores every controller from its own file."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.quorum.raft.snapshot_file import SNAPSHOT_FILE_NAME
from pykraft.quorum.state_machine import SNAPSHOT_CHUNK_BYTES_MAX

from .controllers import StandInBroker, run_cli, running_quorum
from .processes import ControllerProcess, wait_for

pytestmark = pytest.mark.integration

TOPICS = 4000
PARTITIONS_PER_TOPIC = 10


def _snapshot_bytes(controller: ControllerProcess) -> int:
    path = controller.data_dir / "raft" / SNAPSHOT_FILE_NAME
    return path.stat().st_size if path.exists() else 0


def test_a_snapshot_of_many_chunks_reaches_a_lagging_controller_and_a_full_restart(
    tmp_path: Path,
) -> None:
    extra_args = ("--raft-compaction-min-entries", "2", "--broker-session-timeout-ms", "60000")
    with running_quorum(tmp_path, extra_args=extra_args) as quorum:
        for broker_id in (1, 2, 3):
            StandInBroker(quorum, broker_id).start()
        active = quorum.wait_active()
        lagging = next(c for c in quorum.controllers if c is not active)
        lagging.stop()
        # An election while the two left commit (their Raft heartbeats late on a loaded
        # machine) leaves a request's outcome unknown; the CLI asks again and may find the
        # topics it created, which --if-not-exists accepts (without it: TOPIC_ALREADY_EXISTS).
        created = run_cli(
            quorum, "topics", "create", "--topic", "many", "--count", str(TOPICS),
            "--partitions", str(PARTITIONS_PER_TOPIC), "--replication-factor", "3",
            "--if-not-exists", timeout_s=120,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        before = quorum.image(timeout_s=30)
        assert len(before.topics.by_name) == TOPICS

        # Every running controller compacts what it applied into a snapshot of several chunks.
        running = [c for c in quorum.controllers if c is not lagging]
        wait_for(
            lambda: all(_snapshot_bytes(c) > SNAPSHOT_CHUNK_BYTES_MAX for c in running),
            timeout_s=60,
            what="snapshots of the whole image on the running controllers",
        )
        lagging.start()
        assert quorum.assert_controllers_agree(timeout_s=60).write() == before.write()
        assert _snapshot_bytes(lagging) > SNAPSHOT_CHUNK_BYTES_MAX

        quorum.stop_all()
        quorum.start()
        assert quorum.assert_controllers_agree(timeout_s=60).write() == before.write()
