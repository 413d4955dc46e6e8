"""kill -9 of all three controllers at once, at random moments during a stream of topic creations,
several rounds over the same data directories: every creation that was answered as successful is
present after the restart. Seeded; the seed is printed so a failing run can be replayed with
PYKRAFT_CRASH_SEED=<seed>."""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path

import grpc
import pytest

from pykraft.proto import admin_pb2, common_pb2

from .controllers import Quorum, StandInBroker, make_quorum

pytestmark = pytest.mark.integration

ROUNDS = 8


def _create_until_stopped(
    quorum: Quorum, prefix: str, acked: list[str], stop: threading.Event
) -> None:
    """Creates topics one after another, retrying through any controller; records the acked ones."""
    index = 0
    addresses = [c.address for c in quorum.controllers]
    while not stop.is_set():
        name = f"{prefix}-{index}"
        request = admin_pb2.CreateTopicsRequest(
            topics=[admin_pb2.CreatableTopic(name=name, num_partitions=1, replication_factor=1)]
        )
        for address in addresses:
            try:
                response = quorum.admin(address).CreateTopics(request, timeout=1)
            except grpc.RpcError:
                continue
            if response.header.error_code != common_pb2.NONE:
                continue
            if response.topics[0].error_code == common_pb2.NONE:
                acked.append(name)
                break
        index += 1


def test_kill_all_controllers_during_writes_loses_no_acknowledged_creation(tmp_path: Path) -> None:
    seed = int(os.environ.get("PYKRAFT_CRASH_SEED", random.randrange(1 << 30)))
    print(f"crash test seed: {seed} (replay with PYKRAFT_CRASH_SEED={seed})")
    rng = random.Random(seed)
    # One broker to place replicas on; its session outlives the test, so it stays unfenced
    # across the restarts without heartbeating.
    quorum = make_quorum(tmp_path, extra_args=("--broker-session-timeout-ms", "600000"))
    acked: list[str] = []
    try:
        for round_index in range(ROUNDS):
            quorum.start()
            quorum.wait_active(timeout_s=30)
            if round_index == 0:
                broker = StandInBroker(quorum, 1)
                broker.start()
                broker.pause()
            stop = threading.Event()
            writer = threading.Thread(
                target=_create_until_stopped, args=(quorum, f"r{round_index}", acked, stop)
            )
            writer.start()
            threading.Event().wait(rng.uniform(0.3, 1.5))  # the random moment of the crash
            quorum.kill_all()
            stop.set()
            writer.join(timeout=30)
            assert not writer.is_alive()
        quorum.start()
        image = quorum.image(timeout_s=30)
        assert acked, "no creation was acknowledged at all"
        missing = [name for name in acked if image.topics.get_by_name(name) is None]
        assert not missing, f"acknowledged but lost after kill -9 (seed {seed}): {missing}"
        assert quorum.assert_controllers_agree(timeout_s=30).write() == image.write()
        print(f"{len(acked)} creations acknowledged over {ROUNDS} crashes; all present")
    finally:
        quorum.close()
