"""The broker's session stream to the active controller (`BrokerSession`), held open while the
broker lives, so that its end tells the controller at once that the broker is gone: a broker
killed with -9 has its sockets closed by the kernel, and the controller fences it without
waiting for `broker.session.timeout.ms` (heartbeats still renew the session; a broker that is
paused or cut off is fenced by that timeout alone).

`SessionStream` opens the stream with the broker epoch it registered, follows NOT_CONTROLLER
redirects, and opens it again when it ends (controller failover, a transient error): at once
after a redirect or a stream that lasted `broker.heartbeat.interval.ms` or more, else after that
interval (so a controller that keeps refusing is not hammered). Registering again (a new broker
epoch) ends the current stream so the next one carries the new epoch.
"""

from __future__ import annotations

import logging
import threading
import time
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
        self._cancelled_here = False  # the open stream ends by `reopen` or `stop`
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="controller-session", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def reopen(self) -> None:
        """Ends the current stream (if any); the next one, opened at once, carries the broker
        epoch of now."""
        with self._lock:
            if self._call is not None:
                self._cancelled_here = True
                self._call.cancel()

    def stop(self) -> None:
        """Ends the stream for good: the controller fences this broker if it is still unfenced."""
        self._stop.set()
        self.reopen()
        if self._thread.is_alive():
            self._thread.join(timeout=STOP_WAIT_S)

    def _loop(self) -> None:
        at_once = 0  # attempts in a row made without waiting
        while not self._stop.is_set():
            if self._hold_one() and at_once < REDIRECTS_MAX:
                at_once += 1
            else:
                at_once = 0
                self._stop.wait(self._retry_ms / 1000)

    def _hold_one(self) -> bool:
        """Opens a stream and holds it until it ends; True when worth opening again at once:
        refused NOT_CONTROLLER with the active controller's address, or held `retry_ms` or
        more before it ended."""
        opened_ms = time.monotonic() * 1000
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
            log.info("session stream to %s ended by the controller", address)
        except (grpc.RpcError, StopIteration) as error:
            if self._cancelled_here:
                return True
            log.info("session stream to %s ended: %s", address, error)
            self._caller.redirect(None)
        finally:
            with self._lock:
                self._call = None
                self._cancelled_here = False
        return time.monotonic() * 1000 - opened_ms >= self._retry_ms
