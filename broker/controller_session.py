"""The broker's session stream to the active controller (`BrokerSession`), held open while the
broker lives, so that its end tells the controller at once that the broker is gone: a broker
killed with -9 has its sockets closed by the kernel, and the controller fences it without
waiting for `broker.session.timeout.ms` (heartbeats still renew the session; a broker that is
paused or cut off is fenced by that timeout alone).

`SessionStream` opens the stream with the broker epoch it registered, follows NOT_CONTROLLER
redirects, and opens it again when it ends (controller failover, a transient error) after
`broker.heartbeat.interval.ms`, or at once for a redirect. Registering again (a new broker
epoch) ends the current stream so the next one carries the new epoch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Final

import grpc

from pykraft.broker.controller_channel import REDIRECTS_MAX, ControllerCaller
from pykraft.proto import common_pb2, controller_pb2

log = logging.getLogger(__name__)

STOP_WAIT_S: Final = 5.0  # a cancelled stream ends at once; this bounds a stuck gRPC call


class SessionStream:
    """One thread holding the broker's `BrokerSession` stream; `start`, `reopen`, `stop`."""

    def __init__(
        self,
        caller: ControllerCaller,
        broker_id: int,
        broker_epoch: Callable[[], int],
        retry_ms: int,
    ) -> None:
        self._caller = caller
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._retry_ms = retry_ms
        self._call: Any = None  # the open stream, so another thread may cancel it
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="controller-session", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def reopen(self) -> None:
        """Ends the current stream (if any); the next one carries the broker epoch of now."""
        with self._lock:
            if self._call is not None:
                self._call.cancel()

    def stop(self) -> None:
        """Ends the stream for good: the controller fences this broker if it is still unfenced."""
        self._stop.set()
        self.reopen()
        if self._thread.is_alive():
            self._thread.join(timeout=STOP_WAIT_S)

    def _loop(self) -> None:
        redirects = 0
        while not self._stop.is_set():
            redirected = self._hold_one()
            redirects = redirects + 1 if redirected else 0
            if not redirected or redirects > REDIRECTS_MAX:
                redirects = 0
                self._stop.wait(self._retry_ms / 1000)

    def _hold_one(self) -> bool:
        """Opens a stream and holds it until it ends; True when it was refused NOT_CONTROLLER
        with the active controller's address (worth trying there at once)."""
        request = controller_pb2.BrokerSessionRequest(
            broker_id=self._broker_id, broker_epoch=self._broker_epoch()
        )
        with self._lock:
            if self._stop.is_set():
                return False
            address, self._call = self._caller.open_stream("BrokerSession", request)
            call = self._call
        try:
            opened = next(call)
            assert isinstance(opened, controller_pb2.BrokerSessionResponse)
            code = opened.header.error_code
            if code == common_pb2.NOT_CONTROLLER:
                self._caller.redirect(opened.header.controller_address)
                return bool(opened.header.controller_address)
            if code != common_pb2.NONE:
                log.warning("session stream refused by %s: %s", address, opened.header)
                return False
            log.info("session stream open to %s", address)
            for _ in call:  # the controller sends nothing more: this waits for the end
                pass
        except (grpc.RpcError, StopIteration) as error:
            if not self._stop.is_set():
                log.info("session stream to %s ended: %s", address, error)
                self._caller.redirect(None)
        finally:
            with self._lock:
                self._call = None
        return False
