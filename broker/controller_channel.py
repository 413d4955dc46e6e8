"""The broker's link to the controller quorum: a redirect-following caller, registration, and
the heartbeat loop that decides whether this broker may serve.

`ControllerCaller.call` sends to the controller it last heard was active, tries the bootstrap
addresses in turn when that fails, and follows a `NOT_CONTROLLER` answer's `controller_address`.
`ControllerChannel` registers once per start (a fresh incarnation id), heartbeats every
`broker.heartbeat.interval.ms` with the metadata offset applied so far, moves the lifecycle
(STARTING -> RECOVERY when caught up, RECOVERY <-> RUNNING as the controller unfences or fences),
and answers `may_serve(now_ms)`: false while fenced and whenever no heartbeat succeeded within
`broker.session.timeout.ms` (the controller has fenced us by then, so our metadata is stale).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final, TypeVar

import grpc
from google.protobuf.message import Message

from pykraft.broker.config import BrokerConfig
from pykraft.broker.lifecycle import BrokerLifecycle, BrokerState
from pykraft.proto import common_pb2, controller_pb2, controller_pb2_grpc
from pykraft.server_common.grpc_server import open_peer_channel

log = logging.getLogger(__name__)

REDIRECTS_MAX: Final = 8
# Errors after which the broker registers again (the controller lost or replaced its record).
_REREGISTER: Final = frozenset({common_pb2.STALE_BROKER_EPOCH, common_pb2.BROKER_ID_NOT_REGISTERED})

_R = TypeVar("_R", bound=Message)


class ControllerUnavailableError(Exception):
    """No controller answered as the active one within the redirect limit."""


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ControllerCaller:
    """Calls ControllerService methods on the active controller; thread-safe."""

    def __init__(self, bootstrap_servers: Sequence[str]) -> None:
        assert bootstrap_servers, "at least one controller address is needed"
        self._bootstrap = list(bootstrap_servers)
        self._channels: dict[str, grpc.Channel] = {}
        self._active: str | None = None
        self._next_bootstrap = 0
        self._lock = threading.Lock()

    def _stub(self, address: str, stub_class: type[Any]) -> Any:
        with self._lock:
            channel = self._channels.get(address)
            if channel is None:
                channel = open_peer_channel(address)
                self._channels[address] = channel
        return stub_class(channel)

    def _target(self) -> str:
        with self._lock:
            if self._active is not None:
                return self._active
            address = self._bootstrap[self._next_bootstrap % len(self._bootstrap)]
            self._next_bootstrap += 1
            return address

    def learn_controllers(self, addresses: Sequence[str]) -> None:
        """Looks for the active controller among `addresses` (the quorum's current voters, as
        a heartbeat names them) from now on, instead of the configured bootstrap servers: a
        controller added at runtime is found, a removed one is no longer tried."""
        if addresses:
            with self._lock:
                self._bootstrap = list(addresses)

    def redirect(self, address: str | None) -> None:
        """Sends the next calls to `address` (None: try the bootstrap addresses in turn)."""
        with self._lock:
            self._active = address or None

    def call(
        self,
        method: str,
        request: Message,
        response_type: type[_R],
        timeout_s: float,
        *,
        stub_class: type[Any] = controller_pb2_grpc.ControllerServiceStub,
    ) -> _R:
        """The active controller's answer (its header may carry an error other than
        NOT_CONTROLLER); ControllerUnavailableError after REDIRECTS_MAX attempts. `stub_class`
        picks the controller's service (ControllerService, or AdminService for forwarding)."""

        def send(rpc: Callable[..., Any]) -> tuple[Any, None]:
            return rpc(request, timeout=timeout_s), None

        _, response, _ = self._redirected(method, response_type, stub_class, send)
        return response

    def call_stream(
        self, method: str, request: Message, response_type: type[_R], timeout_s: float
    ) -> Iterator[_R]:
        """The active controller's stream of answers to the server-streaming `method`, each
        within `timeout_s` of asking for it (the whole stream may take longer: its reader's
        time between answers is its own), redirected as `call` is until the first answer is
        not NOT_CONTROLLER; ControllerUnavailableError when no attempt got that far, or when
        the stream breaks or falls silent after it (the caller must not take what it read for
        a whole answer). Leaving the iterator early cancels the call."""

        def send(rpc: Callable[..., Any]) -> tuple[Any, Any]:
            answers = _AnswersWithin(rpc(request), timeout_s)
            first = answers.next()
            if first is None:  # a stream always opens with an answer, if only a refusal
                raise ControllerUnavailableError(f"{method}: the stream ended without an answer")
            return first, answers

        stub_class = controller_pb2_grpc.ControllerServiceStub
        address, first, answers = self._redirected(method, response_type, stub_class, send)
        return _rest_of_stream(address, first, answers)

    def _redirected(
        self,
        method: str,
        response_type: type[_R],
        stub_class: type[Any],
        send: Callable[[Callable[..., Any]], tuple[Any, Any]],
    ) -> tuple[str, _R, Any]:
        """`send(rpc)`'s (first answer, stream or None) from the controller that answers as the
        active one, following redirects; with that controller's address."""
        last_problem = "no attempt"
        for _ in range(REDIRECTS_MAX):
            address = self._target()
            try:
                response, stream = send(getattr(self._stub(address, stub_class), method))
            except grpc.RpcError as error:
                last_problem = f"{address}: {error.code()}"
                self.redirect(None)
                continue
            assert isinstance(response, response_type)
            header = response.header  # type: ignore[attr-defined]
            if header.error_code != common_pb2.NOT_CONTROLLER:
                return address, response, stream
            if stream is not None:
                stream.cancel()
            last_problem = f"{address}: NOT_CONTROLLER"
            self.redirect(header.controller_address)
        raise ControllerUnavailableError(f"no active controller answered {method}: {last_problem}")

    def open_stream(
        self,
        method: str,
        request: Message,
        *,
        stub_class: type[Any] = controller_pb2_grpc.ControllerServiceStub,
    ) -> tuple[str, Any]:
        """Starts the server-streaming `method` (no deadline) at the controller calls now go
        to: (its address, the call, an iterator of responses that can be cancelled). Redirects
        are the caller's to follow (`redirect`)."""
        address = self._target()
        return address, getattr(self._stub(address, stub_class), method)(request)

    def close(self) -> None:
        with self._lock:
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()


class _AnswersWithin:
    """A streaming call's answers, each awaited at most `timeout_s`: a timer cancels the call
    when the wait for one runs out (gRPC's own deadline covers the whole call instead)."""

    def __init__(self, call: Any, timeout_s: float) -> None:
        self._call = call
        self.timeout_s = timeout_s
        self.timed_out = False

    def _give_up(self) -> None:
        self.timed_out = True
        self._call.cancel()

    def next(self) -> Any:
        """The next answer, or None at the stream's end; grpc.RpcError if it broke."""
        timer = threading.Timer(self.timeout_s, self._give_up)
        timer.daemon = True
        timer.start()
        try:
            return next(self._call, None)
        finally:
            timer.cancel()

    def cancel(self) -> None:
        self._call.cancel()


def _rest_of_stream(address: str, first: _R, answers: _AnswersWithin) -> Iterator[_R]:
    try:
        yield first
        while (answer := answers.next()) is not None:
            yield answer
    except grpc.RpcError as error:
        if answers.timed_out:
            problem = f"no answer within {answers.timeout_s} s"
        else:
            problem = f"stream broke: {error.code()}"
        raise ControllerUnavailableError(f"{address}: {problem}") from error
    finally:
        answers.cancel()  # a reader that left early: the controller stops sending


class ControllerChannel:
    """Registration and heartbeats of one broker incarnation."""

    def __init__(
        self,
        config: BrokerConfig,
        caller: ControllerCaller,
        lifecycle: BrokerLifecycle,
        applied_offset: Callable[[], int],
        clock_ms: Callable[[], int] = monotonic_ms,
        offline_replicas: Callable[[], Mapping[uuid.UUID, Sequence[int]]] = dict,
        on_registered: Callable[[], None] = lambda: None,
    ) -> None:
        self._config = config
        self._caller = caller
        self._lifecycle = lifecycle
        self._applied_offset = applied_offset
        self._offline_replicas = offline_replicas
        self._on_registered = on_registered  # the broker epoch changed (the session stream)
        self._clock_ms = clock_ms
        self.incarnation_id = str(uuid.uuid4())
        self.broker_epoch = -1
        # The data plane listener's bound port, registered with the other endpoints (0: none);
        # set before `register`.
        self.data_port = 0
        self._fenced = True
        self._last_heartbeat_ok_ms: int | None = None
        self._want_shut_down = False
        self._may_shut_down = threading.Event()
        self._stop = threading.Event()
        self._registration_cancelled = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def _timeout_s(self) -> float:
        return self._config.request_timeout_ms / 1000

    def register(self) -> bool:
        """Registers this incarnation, retrying until the controller accepts (True) or `stop()`
        (False); raises RuntimeError for errors no retry can fix (another cluster id)."""
        request = controller_pb2.BrokerRegistrationRequest(
            broker_id=self._config.node_id,
            cluster_id=self._config.cluster_id,
            incarnation_id=self.incarnation_id,
            listeners=[
                controller_pb2.Listener(name=name, host=host, port=port)
                for name, host, port in self._config.advertised_endpoints(self.data_port)
            ],
            rack=self._config.rack,
            previous_broker_epoch=self.broker_epoch,
        )
        while not self._registration_cancelled.is_set():
            try:
                response = self._caller.call(
                    "RegisterBroker",
                    request,
                    controller_pb2.BrokerRegistrationResponse,
                    self._timeout_s,
                )
            except ControllerUnavailableError as error:
                log.warning("registration failed, retrying: %s", error)
            else:
                code = response.header.error_code
                if code == common_pb2.NONE:
                    self.broker_epoch = response.broker_epoch
                    self._last_heartbeat_ok_ms = self._clock_ms()
                    log.info("registered with broker epoch %d", self.broker_epoch)
                    self._on_registered()
                    return True
                if code in (common_pb2.INCONSISTENT_CLUSTER_ID, common_pb2.INVALID_REQUEST):
                    raise RuntimeError(f"registration refused: {response.header.error_message}")
                log.warning("registration refused, retrying: %s", response.header.error_message)
            self._registration_cancelled.wait(self._config.heartbeat_interval_ms / 1000)
        return False

    def cancel(self) -> None:
        """Makes a `register` in progress give up (the broker is told to stop while starting)."""
        self._registration_cancelled.set()

    def start(self) -> None:
        """Starts the heartbeat thread (after `register`)."""
        self._thread = threading.Thread(target=self._loop, name="heartbeat", daemon=True)
        self._thread.start()

    def may_serve(self, now_ms: int) -> bool:
        """Whether this broker may act as leader now: unfenced by the controller, and heard by
        it within the session timeout."""
        last = self._last_heartbeat_ok_ms
        if self._fenced or last is None:
            return False
        return now_ms - last < self._config.session_timeout_ms

    def _loop(self) -> None:
        interval_s = self._config.heartbeat_interval_ms / 1000
        while not self._stop.is_set():
            try:
                self.heartbeat()
            except ControllerUnavailableError as error:
                log.warning("heartbeat failed: %s", error)
            self._wake.wait(interval_s)
            self._wake.clear()

    def heartbeat(self) -> None:
        """One heartbeat; moves the lifecycle by what the controller says."""
        request = controller_pb2.BrokerHeartbeatRequest(
            broker_id=self._config.node_id,
            broker_epoch=self.broker_epoch,
            current_metadata_offset=self._applied_offset(),
            want_shut_down=self._want_shut_down,
            offline_replicas=[
                controller_pb2.OfflineReplicas(topic_id=str(topic_id), partitions=partitions)
                for topic_id, partitions in self._offline_replicas().items()
            ],
        )
        sent_ms = self._clock_ms()
        response = self._caller.call(
            "BrokerHeartbeat", request, controller_pb2.BrokerHeartbeatResponse, self._timeout_s
        )
        code = response.header.error_code
        if code in _REREGISTER:
            log.warning("controller does not know epoch %d; registering again", self.broker_epoch)
            self._fenced = True
            self.register()
            return
        if code != common_pb2.NONE:
            log.warning("heartbeat refused: %s", response.header.error_message)
            return
        self._last_heartbeat_ok_ms = sent_ms
        self._caller.learn_controllers(response.controller_listeners)
        self._fenced = response.is_fenced
        self._follow_lifecycle(response)

    def _follow_lifecycle(self, response: controller_pb2.BrokerHeartbeatResponse) -> None:
        lifecycle = self._lifecycle
        if response.should_shut_down:
            self._may_shut_down.set()
            return
        if response.is_caught_up:
            lifecycle.transition_if(BrokerState.STARTING, BrokerState.RECOVERY)
        if not response.is_fenced:
            if lifecycle.transition_if(BrokerState.RECOVERY, BrokerState.RUNNING):
                log.info("unfenced: RUNNING")
        elif lifecycle.transition_if(BrokerState.RUNNING, BrokerState.RECOVERY):
            log.warning("fenced by the controller: RECOVERY")

    def controlled_shutdown(self, timeout_ms: int) -> bool:
        """Asks the controller to move leaderships away (heartbeats with want_shut_down) and
        waits until it lets this broker go; False if `timeout_ms` ran out first."""
        self._want_shut_down = True
        deadline_ms = self._clock_ms() + timeout_ms
        while not self._may_shut_down.is_set():
            left_ms = deadline_ms - self._clock_ms()
            if left_ms <= 0 or self._thread is None or not self._thread.is_alive():
                return False
            self._wake.set()
            self._may_shut_down.wait(min(left_ms, self._config.heartbeat_interval_ms) / 1000)
        return True

    def stop(self) -> None:
        self._stop.set()
        self._registration_cancelled.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self._timeout_s + 1)
