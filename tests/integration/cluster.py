"""Real processes for integration tests: controllers and brokers on 127.0.0.1, and a stand-in
broker.

Every controller is a `python -m pykraft.quorum run` process, every broker a `python -m
pykraft.broker run` process, each with its own data directory under the test's tmp_path and ports
picked free. Waits poll a condition against a deadline; nothing sleeps
blind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, TypeVar

import grpc

from pykraft.broker.metadata import apply_fetch_response
from pykraft.metadata_log.image import MetadataImage, PartitionRegistration
from pykraft.proto import (
    admin_pb2,
    admin_pb2_grpc,
    broker_pb2,
    broker_pb2_grpc,
    common_pb2,
    controller_pb2,
    controller_pb2_grpc,
)
from pykraft.proto.record_batch import Record, build_batch, decode_batch, iter_batches
from tests.ports import free_port

T = TypeVar("T")


def wait_for(condition: Callable[[], T | None], *, timeout_s: float, what: str) -> T:
    """Polls `condition` until it returns something truthy; fails the test at the deadline."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except (grpc.RpcError, OSError) as error:
            last_error = error
        time.sleep(0.05)
    raise AssertionError(
        f"timed out after {timeout_s}s waiting for {what} (last error: {last_error})"
    )


class NodeProcess:
    """A `python -m MODULE run ARGS` process with its output in `log_path`.

    `launcher` prefixes the command (for example `ip netns exec NS` to run the node in a network
    namespace); it must exec the command so that signals reach the node itself.
    """

    MODULE: ClassVar[str]
    KIND: ClassVar[str]
    node_id: int
    log_path: Path
    args: list[str]
    process: subprocess.Popen[bytes] | None
    launcher: tuple[str, ...] = ()

    def start(self) -> None:
        assert self.process is None or self.process.poll() is not None
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [*self.launcher, sys.executable, "-m", self.MODULE, "run", *self.args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )

    def kill(self) -> None:
        """kill -9: no shutdown code runs."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self, timeout_s: float = 15) -> int | None:
        """SIGTERM, then wait for a clean exit; the exit code (None if never started)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self._dump_stacks()
                self.process.kill()
                self.process.wait(timeout=10)
                raise AssertionError(f"{self.KIND} {self.node_id} ignored SIGTERM") from None
        return self.process.returncode

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _dump_stacks(self, timeout_s: float = 3) -> None:
        """Has a stuck node print every thread's stack into its log (SIGUSR1: faulthandler)."""
        assert self.process is not None
        size_before = self.log_path.stat().st_size
        self.process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout_s
        seen = -1
        while time.monotonic() < deadline:
            dump = self.log_path.read_bytes()[size_before:]
            if b"most recent call first" in dump and len(dump) == seen:
                return  # written, and no longer growing
            seen = len(dump)
            time.sleep(0.1)


@dataclass
class ControllerProcess(NodeProcess):
    MODULE: ClassVar[str] = "pykraft.quorum"
    KIND: ClassVar[str] = "controller"
    node_id: int
    grpc_port: int
    raft_port: int
    data_dir: Path
    log_path: Path
    args: list[str]
    process: subprocess.Popen[bytes] | None = None
    host: str = "127.0.0.1"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.grpc_port}"


@dataclass
class BrokerProcess(NodeProcess):
    """A `python -m pykraft.broker run` process: gRPC on `port`, logs under `data_dir`."""

    MODULE: ClassVar[str] = "pykraft.broker"
    KIND: ClassVar[str] = "broker"
    node_id: int
    port: int
    data_dir: Path
    log_path: Path
    args: list[str]
    process: subprocess.Popen[bytes] | None = None
    channel: grpc.Channel | None = None
    host: str = "127.0.0.1"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def image_path(self) -> Path:
        return self.data_dir / "__cluster_metadata" / "image"

    def pause(self) -> None:
        """SIGSTOP: the process stays but does nothing until `resume`."""
        assert self.process is not None and self.process.poll() is None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after `pause`."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)

    def stub(self) -> broker_pb2_grpc.BrokerServiceStub:
        if self.channel is None:
            self.channel = grpc.insecure_channel(self.address)
        return broker_pb2_grpc.BrokerServiceStub(self.channel)

    def close(self) -> None:
        self.kill()
        if self.channel is not None:
            self.channel.close()
            self.channel = None


def make_broker(
    tmp_path: Path,
    quorum: Quorum,
    node_id: int,
    *,
    heartbeat_interval_ms: int = 300,
    session_timeout_ms: int = 3000,
    bootstrap: str | None = None,
    host: str = "127.0.0.1",
) -> BrokerProcess:
    """A broker of `quorum` (not started), with short heartbeats so tests stay quick;
    `bootstrap` (default: every controller) is its controller.quorum.bootstrap.servers and
    `host` the address it listens on."""
    port = free_port()
    data_dir = tmp_path / f"broker-{node_id}"
    args = [
        "--node-id", str(node_id), "--listeners", f"{host}:{port}",
        "--log-dirs", str(data_dir), "--bootstrap-controllers", bootstrap or quorum.bootstrap,
        "--cluster-id", "test-cluster", "--rack", f"rack-{node_id}",
        "--heartbeat-interval-ms", str(heartbeat_interval_ms),
        "--session-timeout-ms", str(session_timeout_ms),
    ]  # fmt: skip
    log_path = tmp_path / f"broker-{node_id}.log"
    return BrokerProcess(node_id, port, data_dir, log_path, args, host=host)


@dataclass
class Quorum:
    controllers: list[ControllerProcess]
    channels: dict[str, grpc.Channel] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return ",".join(c.address for c in self.controllers)

    def start(self) -> None:
        for controller in self.controllers:
            controller.start()

    def kill_all(self) -> None:
        for controller in self.controllers:
            controller.kill()

    def stop_all(self) -> None:
        for controller in self.controllers:
            controller.stop()

    def by_id(self, node_id: int) -> ControllerProcess:
        return next(c for c in self.controllers if c.node_id == node_id)

    def channel(self, address: str) -> grpc.Channel:
        if address not in self.channels:
            self.channels[address] = grpc.insecure_channel(address)
        return self.channels[address]

    def admin(self, address: str) -> admin_pb2_grpc.AdminServiceStub:
        return admin_pb2_grpc.AdminServiceStub(self.channel(address))

    def controller_stub(self, address: str) -> controller_pb2_grpc.ControllerServiceStub:
        return controller_pb2_grpc.ControllerServiceStub(self.channel(address))

    def active_id(self) -> int | None:
        """The id of the active controller, asking every live one; None while there is none."""
        for controller in self.controllers:
            if not controller.alive:
                continue
            try:
                response = self.admin(controller.address).DescribeQuorum(
                    admin_pb2.DescribeQuorumRequest(), timeout=2
                )
            except grpc.RpcError:
                continue
            if response.header.error_code == common_pb2.NONE:
                return controller.node_id
        return None

    def wait_active(self, timeout_s: float = 20.0) -> ControllerProcess:
        node_id = wait_for(
            lambda: self.active_id(), timeout_s=timeout_s, what="an active controller"
        )
        return self.by_id(node_id)

    def image(self, timeout_s: float = 10.0) -> MetadataImage:
        """The active controller's committed image, rebuilt from MetadataFetch from offset -1."""
        active = self.wait_active(timeout_s)
        stub = self.controller_stub(active.address)
        return fetch_image(stub)

    def images(self) -> dict[int, MetadataImage]:
        """Each live controller's own committed image (standbys included)."""
        return {
            c.node_id: fetch_image(self.controller_stub(c.address), allow_standby=True)
            for c in self.controllers
            if c.alive
        }

    def assert_controllers_agree(self, timeout_s: float = 20.0) -> MetadataImage:
        """Waits until every live controller holds the same image, offsets and epochs included.

        Standbys apply a tick behind the leader, so equality is awaited; two controllers that
        diverged never become equal, and the wait fails with their differences.
        """
        last: dict[int, MetadataImage] = {}

        def agree() -> MetadataImage | None:
            nonlocal last
            last = self.images()
            images = list(last.values())
            return images[0] if len(images) > 1 and all(i == images[0] for i in images) else None

        try:
            return wait_for(agree, timeout_s=timeout_s, what="every controller holding one image")
        except AssertionError:
            offsets = {node: image.offset for node, image in last.items()}
            raise AssertionError(f"controllers disagree; offsets {offsets}") from None

    def close(self) -> None:
        self.kill_all()
        for channel in self.channels.values():
            channel.close()


def fetch_image(
    stub: controller_pb2_grpc.ControllerServiceStub, *, allow_standby: bool = False
) -> MetadataImage:
    """Rebuilds an image from MetadataFetch as a broker does: snapshot if offered, then batches."""
    image = MetadataImage.EMPTY
    after = -1
    while True:
        request = controller_pb2.MetadataFetchRequest(
            broker_id=-1, after_offset=after, max_wait_ms=0, allow_standby=allow_standby
        )
        response = stub.MetadataFetch(request, timeout=10)
        assert response.header.error_code == common_pb2.NONE, response.header
        _, image = apply_fetch_response(image, response)
        after = image.offset
        if after >= response.high_watermark:
            return image


def make_quorum(
    tmp_path: Path,
    *,
    size: int = 3,
    extra_args: tuple[str, ...] = (),
    hosts: Mapping[int, str] | None = None,
) -> Quorum:
    """`size` controllers (not started); `hosts` maps a node id to the address it listens on
    (127.0.0.1 for ids it does not name)."""
    ids = list(range(1, size + 1))
    host = {i: (hosts or {}).get(i, "127.0.0.1") for i in ids}
    raft_ports = {i: free_port() for i in ids}
    grpc_ports = {i: free_port() for i in ids}
    voters = ",".join(f"{i}@{host[i]}:{raft_ports[i]}" for i in ids)
    listeners = ",".join(f"{i}@{host[i]}:{grpc_ports[i]}" for i in ids)
    controllers = []
    for i in ids:
        data_dir = tmp_path / f"controller-{i}"
        args = [
            "--node-id", str(i), "--voters", voters, "--listeners", listeners,
            "--data-dir", str(data_dir), "--cluster-id", "test-cluster", *extra_args,
        ]  # fmt: skip
        controllers.append(
            ControllerProcess(
                i,
                grpc_ports[i],
                raft_ports[i],
                data_dir,
                tmp_path / f"controller-{i}.log",
                args,
                host=host[i],
            )
        )
    return Quorum(controllers)


@contextmanager
def running_quorum(
    tmp_path: Path, *, size: int = 3, extra_args: tuple[str, ...] = ()
) -> Iterator[Quorum]:
    quorum = make_quorum(tmp_path, size=size, extra_args=extra_args)
    quorum.start()
    try:
        quorum.wait_active()
        yield quorum
    finally:
        quorum.close()


class StandInBroker:
    """Registers with the quorum and heartbeats over real gRPC, as a broker would; no data plane.

    It follows NOT_CONTROLLER redirects, reports the metadata offset it is told to, and can be
    paused (stop heartbeating) to be fenced.
    """

    def __init__(self, quorum: Quorum, broker_id: int, *, rack: str = "", port: int = 0) -> None:
        self.quorum = quorum
        self.broker_id = broker_id
        self.rack = rack
        self.port = port or 9000 + broker_id
        self.incarnation_id = str(uuid.uuid4())
        self.broker_epoch = -1
        self.metadata_offset = 0
        self.fenced = True
        self.heartbeat_interval_s = 0.2
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _call(self, method: str, request: object, timeout_s: float = 5) -> object:
        """Sends to the active controller, following redirects."""
        active = self.quorum.wait_active(timeout_s=20)
        stub = self.quorum.controller_stub(active.address)
        return getattr(stub, method)(request, timeout=timeout_s)

    def register(self) -> None:
        request = controller_pb2.BrokerRegistrationRequest(
            broker_id=self.broker_id,
            cluster_id="test-cluster",
            incarnation_id=self.incarnation_id,
            rack=self.rack,
            listeners=[controller_pb2.Listener(name="PLAINTEXT", host="127.0.0.1", port=self.port)],
        )
        response = self._call("RegisterBroker", request)
        assert isinstance(response, controller_pb2.BrokerRegistrationResponse)
        assert response.header.error_code == common_pb2.NONE, response.header
        self.broker_epoch = response.broker_epoch
        # A real broker catches up with the log before asking to be unfenced; the stand-in
        # simply claims the offset of its own registration, which is what unfencing needs.
        self.metadata_offset = max(self.metadata_offset, self.broker_epoch)

    def heartbeat(self) -> controller_pb2.BrokerHeartbeatResponse:
        request = controller_pb2.BrokerHeartbeatRequest(
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch,
            current_metadata_offset=self.metadata_offset,
        )
        response = self._call("BrokerHeartbeat", request)
        assert isinstance(response, controller_pb2.BrokerHeartbeatResponse)
        if response.header.error_code == common_pb2.NONE:
            self.fenced = response.is_fenced
        return response

    def start(self) -> None:
        self.register()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        wait_for(lambda: not self.fenced, timeout_s=20, what=f"broker {self.broker_id} unfenced")

    def _loop(self) -> None:
        while not self._stop.wait(self.heartbeat_interval_s):
            try:
                self.heartbeat()
            except (grpc.RpcError, AssertionError):
                continue  # the quorum may be failing over; keep trying like a broker would

    def pause(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def run_cli(quorum: Quorum, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    """Runs the `pykraft` console script against the quorum."""
    pykraft = Path(sys.executable).parent / "pykraft"
    return subprocess.run(
        [str(pykraft), *args, "--bootstrap-controller", quorum.bootstrap],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


BROKER_IDS = (1, 2, 3)


def registrations(quorum: Quorum, topic: str) -> dict[int, PartitionRegistration]:
    """`topic`'s partitions as the active controller's image has them."""
    found = quorum.image().topics.get_by_name(topic)
    assert found is not None, f"topic {topic} is not in the image"
    return dict(found.partitions)


def full_isr(quorum: Quorum, topic: str, partitions: int) -> bool:
    """Every one of the `partitions` partitions has all three brokers in its ISR."""
    found = registrations(quorum, topic)
    return len(found) == partitions and all(
        sorted(r.isr) == list(BROKER_IDS) for r in found.values()
    )


def start_brokers(
    quorum: Quorum, brokers: dict[int, BrokerProcess], *, timeout_s: float = 30
) -> None:
    """Starts `brokers` and waits until the quorum's image has every one of them unfenced."""
    for broker in brokers.values():
        broker.start()
    wait_for(
        lambda: set(brokers) <= set(quorum.image().cluster.unfenced_broker_ids()),
        timeout_s=timeout_s,
        what="every broker unfenced",
    )


def create_topic(quorum: Quorum, topic: str, partitions: int, *topic_args: str) -> None:
    """`pykraft topics create` with replication factor 3 and `topic_args`, then waits until
    every replica of `topic` is in its ISR."""
    created = run_cli(
        quorum, "topics", "create", "--topic", topic, "--partitions", str(partitions),
        "--replication-factor", "3", *topic_args,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    wait_for(
        lambda: full_isr(quorum, topic, partitions),
        timeout_s=30,
        what=f"every replica of {topic} in its ISR",
    )


@contextmanager
def running_cluster(
    tmp_path: Path,
    *,
    topic: str,
    partitions: int,
    topic_args: tuple[str, ...] = ("--config", "min.insync.replicas=2"),
    controller_args: tuple[str, ...] = (),
    broker_args: tuple[str, ...] = (),
) -> Iterator[tuple[Quorum, dict[int, BrokerProcess]]]:
    """Three controllers, three brokers and `topic` (replication factor 3, `topic_args` passed to
    `topics create`) with every replica in its ISR; the brokers are closed on exit."""
    with running_quorum(tmp_path, extra_args=controller_args) as quorum:
        brokers = {i: make_broker(tmp_path, quorum, i) for i in BROKER_IDS}
        try:
            for broker in brokers.values():
                broker.args += list(broker_args)
            start_brokers(quorum, brokers)
            create_topic(quorum, topic, partitions, *topic_args)
            yield quorum, brokers
        finally:
            for broker in brokers.values():
                broker.close()


def produce_raw(
    broker: BrokerProcess,
    topic: str,
    partition: int,
    values: list[bytes],
    *,
    acks: int,
    base_timestamp: int = 0,
) -> broker_pb2.ProducePartitionResult:
    """One batch of `values` (timestamps base_timestamp, +1, ...) through a raw Produce call."""
    batch = build_batch([(base_timestamp + i, None, value) for i, value in enumerate(values)])
    request = broker_pb2.ProduceRequest(
        acks=acks,
        timeout_ms=3000,
        topics=[
            broker_pb2.ProduceTopic(
                topic=topic,
                partitions=[broker_pb2.ProducePartition(partition=partition, records=batch)],
            )
        ],
    )
    response: broker_pb2.ProduceResponse = broker.stub().Produce(request, timeout=10)
    return response.topics[0].partitions[0]


def fetch_raw(
    broker: BrokerProcess,
    topic: str,
    partition: int,
    offset: int,
    *,
    epoch: int = -1,
    replica_id: int = -1,
    wait_ms: int = 0,
) -> broker_pb2.FetchPartitionResult:
    """A raw Fetch of one partition from `offset` (as a consumer unless `replica_id` is set)."""
    item = broker_pb2.FetchPartition(
        partition=partition,
        current_leader_epoch=epoch,
        fetch_offset=offset,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 22,
    )
    request = broker_pb2.FetchRequest(
        replica_id=replica_id,
        max_wait_ms=wait_ms,
        min_bytes=1,
        max_bytes=1 << 22,
        topics=[broker_pb2.FetchTopic(topic=topic, partitions=[item])],
    )
    response: broker_pb2.FetchResponse = broker.stub().Fetch(request, timeout=10)
    return response.topics[0].partitions[0]


def batch_records(data: bytes) -> list[Record]:
    """Every record of a concatenation of whole batches."""
    return [record for position, _ in iter_batches(data) for record in decode_batch(data, position)]
