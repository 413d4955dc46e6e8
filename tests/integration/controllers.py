"""The controller quorum of integration tests: controllers on 127.0.0.1 with ports picked free,
started and waited on as one (`make_quorum`, `running_quorum`), the images they hold, a stand-in
broker that registers and heartbeats as a broker would, and the `pykraft` console against them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import grpc

from pykraft.broker.metadata import read_fetch_stream
from pykraft.metadata_log.image import MetadataImage
from pykraft.proto import (
    admin_pb2,
    admin_pb2_grpc,
    common_pb2,
    controller_pb2,
    controller_pb2_grpc,
)
from pykraft.server_common.grpc_server import GRPC_MESSAGE_BYTES_MAX
from tests.ports import free_port

from .processes import ControllerProcess, wait_for

PYKRAFT = str(Path(sys.executable).parent / "pykraft")  # the console script
CLI_TIMEOUT_S = 60


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
            # A whole image fetched at a million partitions is one 32 MiB message.
            options = [("grpc.max_receive_message_length", GRPC_MESSAGE_BYTES_MAX)]
            self.channels[address] = grpc.insecure_channel(address, options=options)
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
    stub: controller_pb2_grpc.ControllerServiceStub,
    *,
    allow_standby: bool = False,
    timeout_s: float = 10.0,
) -> MetadataImage:
    """Rebuilds an image from MetadataFetch as a broker does: snapshot if offered, then batches;
    each fetch stream may take up to `timeout_s`."""
    image = MetadataImage.EMPTY
    after = -1
    while True:
        request = controller_pb2.MetadataFetchRequest(
            broker_id=-1, after_offset=after, max_wait_ms=0, allow_standby=allow_standby
        )
        fetched = read_fetch_stream(image, stub.MetadataFetch(request, timeout=timeout_s))
        image = fetched.image
        after = image.offset
        if after >= fetched.high_watermark:
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
                node_id=i,
                grpc_port=grpc_ports[i],
                raft_port=raft_ports[i],
                data_dir=data_dir,
                log_path=tmp_path / f"controller-{i}.log",
                args=args,
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

    def open_session(self) -> grpc.Call:
        """Opens a `BrokerSession` stream to the active controller, as a running broker holds
        one; cancelling the returned call is a kill -9's closed socket (the controller fences
        the broker at once instead of after the session timeout)."""
        active = self.quorum.wait_active(timeout_s=20)
        request = controller_pb2.BrokerSessionRequest(
            broker_id=self.broker_id, broker_epoch=self.broker_epoch
        )
        call = self.quorum.controller_stub(active.address).BrokerSession(request)
        opened = next(call)
        assert opened.header.error_code == common_pb2.NONE, opened.header
        return cast(grpc.Call, call)


def pykraft(
    *args: str, stdin: str | None = None, timeout_s: float = CLI_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Runs this environment's `pykraft` console script as a user would, with `stdin` as its
    input; its exit code, output and errors are the caller's to check."""
    return subprocess.run(
        [PYKRAFT, *args], input=stdin, capture_output=True, text=True, timeout=timeout_s
    )


def run_cli(
    quorum: Quorum, *args: str, timeout_s: float = CLI_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Runs the `pykraft` console script against the quorum."""
    return pykraft(*args, "--bootstrap-controller", quorum.bootstrap, timeout_s=timeout_s)


def one_broker_unfenced(quorum: Quorum) -> bool:
    """Whether `pykraft cluster describe` lists exactly one broker, and it unfenced."""
    described = run_cli(quorum, "cluster", "describe", "--output", "json")
    brokers = json.loads(described.stdout)["brokers"] if described.returncode == 0 else []
    return [b["state"] for b in brokers] == ["unfenced"]
