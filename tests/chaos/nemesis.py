"""The nemesis: a seeded schedule of faults (pure) and the code that injects and heals them.

Fault kinds:

- `kill-broker`: kill -9 of a broker, restarted after the hold;
- `pause-broker`: SIGSTOP of a broker past its session timeout, then SIGCONT;
- `rolling-restart`: SIGTERM (controlled shutdown) and restart of every broker in turn, each
  back in every ISR (or a deadline passed) before the next, under load;
- `kill-controller`: kill -9 of the active controller, restarted after the hold;
- `kill-all-controllers`: kill -9 of every controller at once, restarted after the hold;
- `partition-majority`: a random minority of two nodes cut from the other four;
- `partition-isolate-leader`: the broker leading most partitions, or the active controller,
  cut from every other node;
- `partition-bridge`: two halves cut from each other but for one node that sees both;
- `partition-link-down`: the link of the broker leading most partitions, or of the active
  controller, set down: it is cut from every node and every client (a pulled cable).

Partitions need the namespaces of netns.py; clients in the root namespace always see every node.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.integration.cluster import full_isr, registrations
from tests.integration.controllers import Quorum
from tests.integration.processes import BrokerProcess, NodeProcess, wait_for
from tests.netns import TestNetwork

PROCESS_KINDS = (
    "kill-broker",
    "pause-broker",
    "rolling-restart",
    "kill-controller",
    "kill-all-controllers",
)
PARTITION_KINDS = (
    "partition-majority",
    "partition-isolate-leader",
    "partition-bridge",
    "partition-link-down",
)
FAULT_KINDS = PROCESS_KINDS + PARTITION_KINDS
# How long each fault holds (s), and about how long it takes beyond that (restarts, waits).
HOLD_S = {
    "kill-broker": (3.0, 8.0),
    "pause-broker": (5.0, 8.0),  # the brokers' session timeout is 3 s
    "rolling-restart": (0.0, 0.0),
    "kill-controller": (2.0, 6.0),
    "kill-all-controllers": (2.0, 5.0),
    "partition-majority": (5.0, 10.0),
    "partition-isolate-leader": (5.0, 10.0),
    "partition-bridge": (5.0, 10.0),
    "partition-link-down": (5.0, 10.0),
}
OVERHEAD_S = {"rolling-restart": 25.0}
QUIET_S = (3.0, 6.0)
WARM_UP_S = (3.0, 5.0)
RECOVERY_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Fault:
    kind: str
    at_s: float  # planned start, from the start of the schedule
    hold_s: float
    choice: int  # picks the targets when the fault starts


def schedule(seed: int, kinds: tuple[str, ...], seconds: float) -> list[Fault]:
    """Faults for `seconds`: every kind of `kinds` once in a random order (even when that
    takes longer), then again in another order while time allows. The same seed gives the
    same schedule."""
    rng = random.Random(seed)
    faults: list[Fault] = []
    at_s = rng.uniform(*WARM_UP_S)
    order = list(kinds)
    rng.shuffle(order)
    first_round = len(order)
    while kinds:
        if not order:
            order = list(kinds)
            rng.shuffle(order)
        kind = order.pop(0)
        hold_s = round(rng.uniform(*HOLD_S[kind]), 2)
        if len(faults) >= first_round and at_s + hold_s + OVERHEAD_S.get(kind, 2.0) > seconds:
            break
        faults.append(Fault(kind, round(at_s, 2), hold_s, rng.randrange(1 << 30)))
        at_s += hold_s + OVERHEAD_S.get(kind, 2.0) + rng.uniform(*QUIET_S)
    return faults


@dataclass
class Cluster:
    """What the nemesis acts on; `network` is None when partitions are unavailable."""

    quorum: Quorum
    brokers: dict[int, BrokerProcess]
    topic: str
    partitions: int
    network: TestNetwork | None

    def node_name(self, node: NodeProcess) -> str:
        return f"{node.KIND[0]}{node.node_id}"

    def nodes(self) -> dict[str, NodeProcess]:
        found: dict[str, NodeProcess] = {}
        for node in [*self.quorum.controllers, *self.brokers.values()]:
            found[self.node_name(node)] = node
        return found

    def recover(self) -> list[str]:
        """Heals everything, restarts what is down, waits for a whole cluster; returns what
        did not come back before its deadline."""
        if self.network is not None:
            self.network.heal()
        for node in self.nodes().values():
            if isinstance(node, BrokerProcess):
                node.resume()
            if not node.alive:
                node.start()
        problems: list[str] = []
        checks: list[tuple[str, Callable[[], object]]] = [
            ("an active controller", self.quorum.active_id),
            ("every broker unfenced", lambda: self._unfenced() == set(self.brokers)),
            (
                "every replica in its ISR",
                lambda: full_isr(self.quorum, self.topic, self.partitions),
            ),
        ]
        for what, condition in checks:
            try:
                wait_for(condition, timeout_s=RECOVERY_TIMEOUT_S, what=what)
            except AssertionError as error:
                problems.append(str(error))
        return problems

    def epoch(self, broker_id: int) -> int:
        """The broker's epoch while it is registered and unfenced; -1 otherwise."""
        registration = self.quorum.image(timeout_s=3).cluster.broker(broker_id)
        unfenced = registration is not None and not registration.fenced
        return registration.broker_epoch if registration is not None and unfenced else -1

    def _unfenced(self) -> set[int]:
        return set(self.quorum.image(timeout_s=3).cluster.unfenced_broker_ids())


@dataclass
class Nemesis:
    """Runs a schedule against a cluster on its own thread; `windows` records each fault."""

    cluster: Cluster
    faults: list[Fault]
    windows: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._thread.start()

    def join(self, timeout_s: float) -> None:
        assert self._thread is not None
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join(60)

    def _run(self) -> None:
        began = time.monotonic()
        for fault in self.faults:
            # Pauses between faults are the schedule itself, not a synchronisation.
            if self._stop.wait(max(0.0, began + fault.at_s - time.monotonic())):
                return
            start = time.time()
            try:
                targets = self._inject(fault)
            except Exception as error:  # recorded; the run goes on and is checked
                targets = [f"error: {type(error).__name__}: {error}"]
                self.problems.append(f"{fault.kind}: {error}")
            self.windows.append(
                {"kind": fault.kind, "start": start, "end": time.time(), "targets": targets}
            )
            print(f"nemesis: {fault.kind} on {targets} for {time.time() - start:.1f} s", flush=True)

    def _hold(self, fault: Fault) -> None:
        self._stop.wait(fault.hold_s)

    def _inject(self, fault: Fault) -> list[str]:
        rng = random.Random(fault.choice)
        cluster = self.cluster
        if fault.kind in PARTITION_KINDS:
            return self._partition(fault, rng)
        if fault.kind == "rolling-restart":
            return self._rolling_restart(rng)
        victims: list[NodeProcess]
        if fault.kind in ("kill-broker", "pause-broker"):
            victims = [cluster.brokers[rng.choice(sorted(cluster.brokers))]]
        elif fault.kind == "kill-controller":
            active = cluster.quorum.active_id() or rng.choice([1, 2, 3])
            victims = [cluster.quorum.by_id(active)]
        else:
            victims = list(cluster.quorum.controllers)
        for victim in victims:
            if fault.kind == "pause-broker":
                assert isinstance(victim, BrokerProcess)
                victim.pause()
            else:
                victim.kill()
        self._hold(fault)
        for victim in victims:
            if isinstance(victim, BrokerProcess) and fault.kind == "pause-broker":
                victim.resume()
            else:
                victim.start()
        return [cluster.node_name(v) for v in victims]

    def _rolling_restart(self, rng: random.Random) -> list[str]:
        order = sorted(self.cluster.brokers)
        rng.shuffle(order)
        for broker_id in order:
            if self._stop.is_set():
                break
            self._restart(broker_id)
        return [f"b{i}" for i in order]

    def _restart(self, broker_id: int) -> None:
        """SIGTERM, start, then wait for the new incarnation to be registered and unfenced and
        for every ISR to be whole again (Kafka's rule for the next step of a rolling restart)."""
        cluster = self.cluster
        broker = cluster.brokers[broker_id]
        before = cluster.epoch(broker_id)
        try:
            broker.stop(timeout_s=30)
        except AssertionError as error:  # it ignored SIGTERM and was killed
            self.problems.append(f"rolling-restart: {error}")
        broker.start()
        try:
            wait_for(
                lambda: (
                    cluster.epoch(broker_id) > before
                    and full_isr(cluster.quorum, cluster.topic, cluster.partitions)
                ),
                timeout_s=RECOVERY_TIMEOUT_S,
                what=f"broker {broker_id} back, unfenced and in every ISR",
            )
        except AssertionError as error:
            self.problems.append(f"rolling-restart: {error}")

    def _partition(self, fault: Fault, rng: random.Random) -> list[str]:
        cluster = self.cluster
        network = cluster.network
        assert network is not None, "partition faults need the test network"
        names = sorted(cluster.nodes())
        rng.shuffle(names)
        if fault.kind == "partition-link-down":
            node = self._leader(rng)
            network.link_down(node)
            self._hold(fault)
            network.heal()
            return [f"{node} link down"]
        if fault.kind == "partition-majority":
            side_a, side_b = names[:2], names[2:]
        elif fault.kind == "partition-bridge":
            side_a, side_b = names[:2], names[3:]  # names[2] is the bridge, in both halves
        else:
            side_a = [self._leader(rng)]
            side_b = [n for n in names if n not in side_a]
        network.cut(side_a, side_b)
        self._hold(fault)
        network.heal()
        return [f"{'+'.join(sorted(side_a))} | {'+'.join(sorted(side_b))}"]

    def _leader(self, rng: random.Random) -> str:
        """The broker leading most partitions, or the active controller (chosen by rng)."""
        cluster = self.cluster
        if rng.random() < 0.5:
            active = cluster.quorum.active_id()
            if active is not None:
                return f"c{active}"
        leaders = Counter(r.leader for r in registrations(cluster.quorum, cluster.topic).values())
        ranked = sorted((n for n in leaders if n in cluster.brokers), key=leaders.__getitem__)
        return f"b{ranked[-1] if ranked else rng.choice(sorted(cluster.brokers))}"
