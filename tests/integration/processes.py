"""Real processes for integration tests: a controller or a broker as a `python -m pykraft.quorum
run` or `python -m pykraft.broker run` process, each with its own data directory under the test's
tmp_path and its output in a log file, started, signalled and stopped by a handle; and `wait_for`,
with which every wait polls a condition against a deadline (nothing sleeps blind).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TypeVar

import grpc

from pykraft.broker.metadata_image_file import ImageFile
from pykraft.broker.metadata_log_file import MetadataLogFile
from pykraft.metadata_log import MetadataImage
from pykraft.proto import broker_pb2_grpc

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


@dataclass(kw_only=True)
class NodeProcess:
    """A `python -m MODULE run ARGS` process with its data under `data_dir`, its output in
    `log_path` and its gRPC service at `address`.

    `launcher` prefixes the command (for example `ip netns exec NS` to run the node in a network
    namespace); it must exec the command so that signals reach the node itself.
    """

    MODULE: ClassVar[str]
    KIND: ClassVar[str]
    node_id: int
    data_dir: Path
    log_path: Path
    args: list[str]
    process: subprocess.Popen[bytes] | None = None
    host: str = "127.0.0.1"
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


@dataclass(kw_only=True)
class ControllerProcess(NodeProcess):
    """A `python -m pykraft.quorum run` process: gRPC on `grpc_port`, Raft on `raft_port`."""

    MODULE: ClassVar[str] = "pykraft.quorum"
    KIND: ClassVar[str] = "controller"
    grpc_port: int
    raft_port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.grpc_port}"


@dataclass(kw_only=True)
class BrokerProcess(NodeProcess):
    """A `python -m pykraft.broker run` process: gRPC on `port`."""

    MODULE: ClassVar[str] = "pykraft.broker"
    KIND: ClassVar[str] = "broker"
    port: int
    channel: grpc.Channel | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def image_path(self) -> Path:
        return self.data_dir / "__cluster_metadata" / "image"

    def stored_image(self) -> MetadataImage:
        """The metadata the broker stored: its image file and the log of batches after it."""
        directory = self.image_path.parent
        return MetadataLogFile(directory).read(ImageFile(directory).read())

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
