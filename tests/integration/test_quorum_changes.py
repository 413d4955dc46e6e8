"""Changing the controller quorum at runtime (KIP-853): each of the three controllers is replaced
in turn, through `pykraft quorum add-controller` / `remove-controller`, while topics are created
without pause; no acknowledged creation is lost and the quorum stays available."""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from pykraft.client import AdminClient
from pykraft.client.admin_types import NewTopic
from pykraft.proto import broker_pb2, broker_pb2_grpc
from tests.ports import free_port

from .cluster import make_broker, start_brokers
from .controllers import Quorum, run_cli
from .processes import ControllerProcess, wait_for

REPLACEMENTS = ((1, 4), (2, 5), (3, 6))
# A replacement may cost an election (the leader hands over before it is removed); creations
# may pause that long, no longer.
CREATION_GAP_MAX_S = 10.0
CATCH_UP_TIMEOUT_S = 30.0
CAUGHT_UP_LAG_MAX = 20  # Raft entries: the log keeps growing under the load


@dataclass
class TopicLoad:
    """Creates topics one after another until stopped; records each acknowledged one."""

    admin: AdminClient
    acknowledged: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    acknowledged_at_s: list[float] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        serial = 0
        while not self.stopping.is_set():
            name = f"load-{serial:05d}"
            serial += 1
            try:
                self.admin.create_topics([NewTopic(name, 1, 1)])
            except Exception as error:  # an unknown outcome: not acknowledged, not counted
                self.failures.append(f"{name}: {error}")
                continue
            self.acknowledged.append(name)
            self.acknowledged_at_s.append(time.monotonic())

    def longest_gap_s(self) -> float:
        times = self.acknowledged_at_s
        return max((later - earlier for earlier, later in itertools.pairwise(times)), default=0.0)


def _controllers(tmp_path: Path) -> dict[int, ControllerProcess]:
    """Six controllers (not started); the first three make the quorum, the others join it."""
    ports = {i: (free_port(), free_port()) for i in range(1, 7)}
    controllers = {}
    for i, (raft_port, grpc_port) in ports.items():
        data_dir = tmp_path / f"controller-{i}"
        args = ["--node-id", str(i), "--data-dir", str(data_dir), "--cluster-id", "test-cluster"]
        controllers[i] = ControllerProcess(
            node_id=i,
            grpc_port=grpc_port,
            raft_port=raft_port,
            data_dir=data_dir,
            log_path=tmp_path / f"controller-{i}.log",
            args=args,
        )
    return controllers


def _start(controller: ControllerProcess, voters: list[ControllerProcess]) -> None:
    """Starts `controller` with `voters` (itself among them) as its first voter set."""
    raft = ",".join(f"{v.node_id}@{v.host}:{v.raft_port}" for v in voters)
    grpc = ",".join(f"{v.node_id}@{v.address}" for v in voters)
    controller.args += ["--voters", raft, "--listeners", grpc]
    controller.start()


def _quorum_described(quorum: Quorum) -> dict[str, object]:
    described = run_cli(quorum, "quorum", "describe", "--output", "json")
    assert described.returncode == 0, described.stderr
    parsed = json.loads(described.stdout)
    assert isinstance(parsed, dict)
    return parsed


def _voters(quorum: Quorum) -> dict[int, dict[str, object]]:
    voters = _quorum_described(quorum)["voters"]
    assert isinstance(voters, list)
    return {int(v["id"]): v for v in voters}


def test_each_controller_replaced_in_turn_under_load_loses_no_topic(tmp_path: Path) -> None:
    controllers = _controllers(tmp_path)
    quorum = Quorum(list(controllers.values()))  # bootstrap: all six listeners
    voters = [controllers[i] for i in (1, 2, 3)]
    # The broker is told of the first three only: it must follow the quorum to 4, 5 and 6.
    broker = make_broker(tmp_path, quorum, 1, bootstrap=",".join(c.address for c in voters))
    load = TopicLoad(AdminClient(quorum.bootstrap, request_timeout_ms=30_000))
    loader = threading.Thread(target=load.run, name="topic-load", daemon=True)
    try:
        for controller in voters:
            _start(controller, voters)
        quorum.wait_active()
        start_brokers(quorum, {1: broker})
        loader.start()
        leaders_removed = []  # the first leader stays until it is removed: it hands over then
        for old_id, new_id in REPLACEMENTS:
            old, new = controllers[old_id], controllers[new_id]
            added = run_cli(
                quorum, "quorum", "add-controller", "--controller-id", str(new_id),
                "--raft-address", f"{new.host}:{new.raft_port}", "--listener", new.address,
            )  # fmt: skip
            assert added.returncode == 0, added.stderr
            voters.append(new)
            _start(new, voters)
            wait_for(
                lambda: _caught_up(quorum, new_id),  # noqa: B023
                timeout_s=CATCH_UP_TIMEOUT_S,
                what=f"controller {new_id} caught up",
            )
            if quorum.active_id() == old_id:
                leaders_removed.append(old_id)
            removed = run_cli(
                quorum, "quorum", "remove-controller", "--controller-id", str(old_id),
                "--raft-address", f"{old.host}:{old.raft_port}",
            )  # fmt: skip
            assert removed.returncode == 0, removed.stderr
            assert old.stop() == 0
            voters.remove(old)
            acknowledged_before = len(load.acknowledged)
            wait_for(
                lambda: len(load.acknowledged) > acknowledged_before,  # noqa: B023
                timeout_s=CREATION_GAP_MAX_S,
                what=f"a topic created after controller {old_id} left",
            )
        load.stopping.set()
        loader.join(timeout=60)
        assert not loader.is_alive()

        assert set(_voters(quorum)) == {4, 5, 6}
        assert set(load.acknowledged) <= set(load.admin.list_topics())
        wait_for(
            lambda: set(load.acknowledged) <= _broker_topics(broker.stub()),
            timeout_s=30,
            what="the broker holding every acknowledged topic",
        )
        assert load.longest_gap_s() < CREATION_GAP_MAX_S, load.failures[-5:]
        assert 1 in quorum.image().cluster.unfenced_broker_ids()  # its heartbeats reach 4..6
        quorum.assert_controllers_agree()
        print(
            f"topics acknowledged {len(load.acknowledged)}, failed {len(load.failures)}, "
            f"longest pause {load.longest_gap_s():.2f} s, leaders removed {leaders_removed}; "
            f"first failures {load.failures[:3]}"
        )

        restarted = controllers[4]  # its config still names 1, 2, 3 and 4
        assert restarted.stop() == 0
        restarted.start()
        wait_for(
            lambda: _caught_up(quorum, 4),
            timeout_s=CATCH_UP_TIMEOUT_S,
            what="controller 4 back in the quorum",
        )
        assert set(_voters(quorum)) == {4, 5, 6}
    finally:
        load.stopping.set()
        load.admin.close()
        broker.close()
        quorum.close()


def _caught_up(quorum: Quorum, node_id: int) -> bool:
    """`node_id` leads, or the leader sees it connected and within CAUGHT_UP_LAG_MAX entries of
    its log. (A restarted controller may call an election before it hears from the leader, and
    win it: pysyncobj has no pre-vote.)"""
    voter = _voters(quorum).get(node_id, {})
    lag = voter.get("lag")
    reached = voter.get("status") in ("Leader", "Follower")
    return reached and isinstance(lag, int) and 0 <= lag <= CAUGHT_UP_LAG_MAX


def _broker_topics(stub: broker_pb2_grpc.BrokerServiceStub) -> set[str]:
    metadata = stub.Metadata(broker_pb2.MetadataRequest(), timeout=10)
    return {topic.name for topic in metadata.topics}
