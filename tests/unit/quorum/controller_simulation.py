"""A seeded, deterministic simulation of three controllers (Kafka's RaftEventSimulationTest and
TigerBeetle's VOPR, in small): each node is a real `ControllerCore` driven by the real
`ControllerLoop` over a `SimRaftLog`; time, leader changes, commits, lost and zombie appends and
restarts are drawn from one `random.Random(seed)`.

The `Checker` raises `SimulationFailure` (naming the seed) when, after any step:
- a request is answered twice, or by a node that never had it or has since crashed;
- a write is answered (anything but NOT_CONTROLLER) before its records applied on its node;
- a deposed controller's batch (committed after a newer LEADER_CHANGE) is applied;
- two nodes hold different images at the same committed offset;
and, once the run settles (no more faults), when a request is left unanswered.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path

from pykraft.metadata_log.image import MetadataImage
from pykraft.proto import common_pb2
from pykraft.quorum.config import ControllerConfig
from pykraft.quorum.controller_core import ControllerCore
from pykraft.quorum.events import Answer, IdSource, Output, Request
from pykraft.quorum.metadata_fetch import FetchPlan
from pykraft.quorum.quorum_controller import ControllerLoop
from pykraft.quorum.replies import header_of
from pykraft.quorum.state_machine import Applied, MetadataStateMachine, Rejected

from .sim_raft import CommittedEntry, SimRaft, SimRaftLog
from .sim_workload import Workload

NODE_IDS = [1, 2, 3]
SETTLE_ROUNDS_MAX = 400
CoreFactory = Callable[[ControllerConfig, IdSource], ControllerCore]


class SimulationFailure(AssertionError):
    pass


def node_config(node_id: int) -> ControllerConfig:
    return ControllerConfig(
        node_id=node_id,
        voters={i: f"sim-{i}:9093" for i in NODE_IDS},
        controller_listeners={i: f"sim-{i}:9092" for i in NODE_IDS},
        data_dir=Path("unused"),  # the core touches no files
        broker_session_timeout_ms=2000,
        metadata_tail_records_max=40,  # small, so fetches from far behind get snapshots
        leader_imbalance_check_interval_seconds=1,
    )


class Checker:
    """The invariants, checked as things happen; see the module docstring."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.stats: Counter[str] = Counter()
        self._images: dict[int, MetadataImage] = {}
        self._holders: dict[int, tuple[int, int]] = {}  # request id -> (node, incarnation)
        self._answered: set[int] = set()
        self._crashed: set[int] = set()
        self._entries: dict[int, int] = {}  # request id -> key of its write's entry

    def fail(self, message: str) -> None:
        raise SimulationFailure(f"seed {self.seed}: {message} (replay: PYKRAFT_SEED={self.seed})")

    def sent(self, request_id: int, node_id: int, incarnation: int) -> None:
        self._holders[request_id] = (node_id, incarnation)

    def crashed(self, node_id: int, incarnation: int) -> None:
        for request_id, holder in self._holders.items():
            if holder == (node_id, incarnation) and request_id not in self._answered:
                self._crashed.add(request_id)

    def unanswered(self) -> list[int]:
        return sorted(set(self._holders) - self._answered - self._crashed)

    def appended(self, request_id: int, entry_key: int) -> None:
        self._entries[request_id] = entry_key

    def answered(self, node: SimNode, answer: Answer) -> None:
        request_id = answer.request_id
        if request_id in self._answered:
            self.fail(f"request {request_id} answered twice")
        if self._holders.get(request_id) != (node.node_id, node.incarnation):
            self.fail(f"request {request_id} answered by node {node.node_id}, which lacks it")
        self._answered.add(request_id)
        if answer.response is None:
            self.stats["expired"] += 1
            return
        if isinstance(answer.response, FetchPlan):  # a fetch answered, not refused
            code = common_pb2.NONE
        else:
            code = header_of(answer.response).error_code
        self.stats["not_controller" if code == common_pb2.NOT_CONTROLLER else "answered"] += 1
        key = self._entries.get(request_id)
        if key is not None and code != common_pb2.NOT_CONTROLLER:
            if not isinstance(node.log.results.get(key), Applied):
                self.fail(f"request {request_id} answered before its records committed")
            self.stats["answered_after_commit"] += 1

    def applied(
        self, node_id: int, committed: CommittedEntry, result: object, state: MetadataStateMachine
    ) -> None:
        if committed.stale:
            if not isinstance(result, Rejected):
                self.fail(f"node {node_id} applied a deposed controller's batch: {result}")
            self.stats["deposed_batches_rejected"] += 1
        image = state.image
        seen = self._images.setdefault(image.offset, image)
        if seen != image:
            self.fail(f"node {node_id} holds another image at offset {image.offset}")


class SimNode:
    """One controller process: a core, its log, the loop, and the driver's request queue."""

    def __init__(
        self,
        sim: Simulation,
        node_id: int,
        incarnation: int,
        snapshot: tuple[int, list[bytes]] | None = None,
    ) -> None:
        self.node_id = node_id
        self.incarnation = incarnation
        self.queue: deque[Request] = deque()
        self._sim = sim
        self.core = sim.core_factory(node_config(node_id), sim.new_id)
        self.log = SimRaftLog(
            sim.raft, node_id, self.core.state, sim.checker.applied, snapshot=snapshot
        )
        self.loop = ControllerLoop(self.core, self.log, self._on_output)

    def turn(self) -> None:
        self.loop.turn(0, lambda: self._sim.now_ms, self._next_request)

    def _next_request(self) -> Request | None:
        return self.queue.popleft() if self.queue else None

    def _on_output(self, out: Output) -> None:
        keys = self.log.take_appended_keys()
        assert len(keys) == len(out.appends)
        for append, key in zip(out.appends, keys, strict=True):
            if key is None:
                continue  # refused: its writes are answered NOT_CONTROLLER
            if len(append.request_ids) > 1:
                self._sim.checker.stats["entries_of_several_writes"] += 1
            for request_id in append.request_ids:
                self._sim.checker.appended(request_id, key)
        for answer in out.answers:
            self._sim.checker.answered(self, answer)


class Simulation:
    def __init__(self, seed: int, core_factory: CoreFactory = ControllerCore) -> None:
        self.rng = random.Random(seed)
        self.core_factory = core_factory
        self.checker = Checker(seed)
        self.now_ms = 0
        self.raft = SimRaft(self.rng, NODE_IDS)
        self.nodes = {node_id: SimNode(self, node_id, 0) for node_id in NODE_IDS}
        self.workload = Workload(self.rng, node_config(1))
        self._request_ids = 0

    def new_id(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128))

    def run(self, steps: int) -> Counter[str]:
        self.raft.elect(self.rng.choice(NODE_IDS))
        actions = (
            (40, self._submit), (30, self._turn), (15, self._commit), (8, self._advance_time),
            (2, self._elect), (3, self._commit_zombie), (1, self._restart),
        )  # fmt: skip
        weights = [weight for weight, _ in actions]
        for _ in range(steps):
            self.rng.choices([action for _, action in actions], weights)[0]()
        self._settle()
        return self.checker.stats

    def _submit(self) -> None:
        leader = self.raft.leader_id
        node_id = leader if leader is not None and self.rng.random() < 0.8 else None
        node = self.nodes[node_id if node_id is not None else self.rng.choice(NODE_IDS)]
        request = self.workload.next_request(self._request_ids, self.now_ms, self._furthest())
        self._request_ids += 1
        self.checker.sent(request.request_id, node.node_id, node.incarnation)
        node.queue.append(request)

    def _furthest(self) -> MetadataImage:
        return max((n.core.state.image for n in self.nodes.values()), key=lambda i: i.offset)

    def _turn(self) -> None:
        self.nodes[self.rng.choice(NODE_IDS)].turn()

    def _commit(self) -> None:
        self.raft.commit(self.rng.randint(1, 3))

    def _commit_zombie(self) -> None:
        self.raft.commit_zombie()

    def _advance_time(self) -> None:
        self.now_ms += self.rng.randint(1, 600)

    def _elect(self) -> None:
        self.checker.stats["elections"] += 1
        self.raft.elect(self.rng.choice(NODE_IDS))

    def _restart(self) -> None:
        """Kills a node (its queued and in-flight requests die with it) and starts it again
        from its last snapshot or from an empty state that replays the whole log."""
        self.checker.stats["restarts"] += 1
        old = self.nodes[self.rng.choice(NODE_IDS)]
        self.checker.crashed(old.node_id, old.incarnation)
        if self.raft.leader_id == old.node_id:
            self.raft.elect(self.rng.choice(NODE_IDS))
        snapshot = None
        if self.rng.random() < 0.5:
            snapshot = (old.log.applied, list(old.core.state.snapshot()))
        self.nodes[old.node_id] = SimNode(self, old.node_id, old.incarnation + 1, snapshot)

    def _settle(self) -> None:
        """No more faults: everything commits and every node turns until all are answered."""
        for _ in range(SETTLE_ROUNDS_MAX):
            self.raft.commit(len(self.raft.uncommitted))
            for _ in range(len(self.raft.zombies)):
                self.raft.commit_zombie()
            for node in self.nodes.values():
                node.turn()
            if not self.checker.unanswered():
                return
            self.now_ms += 100
        self.checker.fail(f"requests never answered: {self.checker.unanswered()[:10]}")
