"""One broker process's parts, started and stopped in order.

Start: open the metadata image kept on disk and the logs it names, serve gRPC and, if configured,
the Kafka protocol (fenced, so every partition answers NOT_LEADER_OR_FOLLOWER), register, then
heartbeat and fetch metadata; the heartbeats move the broker to RECOVERY once caught up and to
RUNNING once unfenced. Stop: a controlled shutdown first (leaderships move away while the broker
still serves, and the controller lets it go once every live broker's metadata has the moves),
bounded by CONTROLLED_SHUTDOWN_TIMEOUT_MS; then acks=all waits still open end
NOT_LEADER_OR_FOLLOWER while the listeners still answer, and the servers, the threads and the
logs close.
"""

from __future__ import annotations

import logging
import time
from typing import Final

import grpc
from prometheus_client import CollectorRegistry

from pykraft.broker.admin_forwarding import AdminForwarder
from pykraft.broker.alter_partition import IsrUpdater
from pykraft.broker.config import BrokerConfig
from pykraft.broker.controller_channel import ControllerCaller, ControllerChannel, monotonic_ms
from pykraft.broker.controller_session import SessionStream
from pykraft.broker.data_listener import DataHandlers, DataListener
from pykraft.broker.group.coordinator import GroupCoordinator
from pykraft.broker.group.handlers import GroupHandlers
from pykraft.broker.kafka.api import KafkaServices
from pykraft.broker.kafka.apis import ALL_APIS
from pykraft.broker.kafka.dispatch import Dispatcher
from pykraft.broker.kafka.server import WORKERS_MAX, KafkaListener
from pykraft.broker.lifecycle import BrokerLifecycle, BrokerState
from pykraft.broker.log.open_files import OPEN_FILES
from pykraft.broker.metadata import MetadataFollower
from pykraft.broker.metadata_image_file import ImageFile
from pykraft.broker.metadata_log_file import MetadataLogFile
from pykraft.broker.metrics import BrokerCollector, GroupLagCollector
from pykraft.broker.producer_ids import ProducerIdAllocator
from pykraft.broker.replica_fetcher import ReplicaFetcherManager
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.broker.service import BrokerService, ProduceResponseDropper, serve
from pykraft.metadata_log import MetadataDelta, MetadataImage
from pykraft.server_common.gc_pauses import long_lived_objects
from pykraft.server_common.node_http import NodeHttpServer

log = logging.getLogger(__name__)

# A forwarded admin call waits this long for the active controller (the client has its own).
ADMIN_FORWARD_TIMEOUT_MS = 30_000

CONTROLLED_SHUTDOWN_TIMEOUT_MS: Final = 10_000
SERVER_STOP_GRACE_S: Final = 1.0


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.lifecycle = BrokerLifecycle()
        self._caller = ControllerCaller(config.controller_bootstrap_servers)
        self.replica_manager = ReplicaManager(config, self._may_serve)
        self.metadata = MetadataFollower(
            broker_id=config.node_id,
            caller=self._caller,
            image_file=ImageFile(config.metadata_dir),
            log_file=MetadataLogFile(config.metadata_dir),
            listener=self._on_metadata,
            fetch_wait_ms=config.metadata_fetch_wait_ms,
            request_timeout_ms=config.request_timeout_ms,
        )
        self.session = SessionStream(
            self._caller,
            config.node_id,
            lambda: self.channel.broker_epoch,
            retry_ms=config.heartbeat_interval_ms,
        )
        self.channel = ControllerChannel(
            config,
            self._caller,
            self.lifecycle,
            lambda: self.metadata.applied_offset,
            offline_replicas=self.replica_manager.offline_replicas,
            on_registered=self.session.reopen,
        )
        self.fetchers = ReplicaFetcherManager(
            self.replica_manager,
            broker_id=config.node_id,
            broker_epoch=lambda: self.channel.broker_epoch,
            clock_ms=monotonic_ms,
        )
        self.isr_updater = IsrUpdater(
            self.replica_manager,
            self._caller,
            broker_id=config.node_id,
            broker_epoch=lambda: self.channel.broker_epoch,
            may_serve=self._may_serve,
            lag_time_max_ms=config.replica_lag_time_max_ms,
            request_timeout_ms=config.request_timeout_ms,
            clock_ms=monotonic_ms,
        )
        self.producer_ids = ProducerIdAllocator(
            self._caller,
            broker_id=config.node_id,
            broker_epoch=lambda: self.channel.broker_epoch,
            request_timeout_ms=config.request_timeout_ms,
            clock_ms=monotonic_ms,
        )
        self.groups = GroupCoordinator(
            self.replica_manager,
            config.group,
            clock_ms=monotonic_ms,
            wall_clock_ms=_wall_clock_ms,
        )
        self._server: grpc.Server | None = None
        self._kafka_listener: KafkaListener | None = None
        self._data_listener: DataListener | None = None
        self.http: NodeHttpServer | None = None

    def _may_serve(self, now_ms: int) -> bool:
        return self.lifecycle.state in (
            BrokerState.RUNNING,
            BrokerState.PENDING_CONTROLLED_SHUTDOWN,
        ) and self.channel.may_serve(now_ms)

    def _on_metadata(self, delta: MetadataDelta | None, image: MetadataImage) -> None:
        self.replica_manager.on_metadata(delta, image, monotonic_ms())
        self.fetchers.on_metadata()
        self.groups.on_metadata()

    def start(self) -> bool:
        """False if `cancel_start` cut registration short; raises OSError if the listener cannot
        bind, RuntimeError if registration is refused."""
        self.lifecycle.transition(BrokerState.STARTING)
        OPEN_FILES.set_files_max(self.config.log_open_files_max)  # one cache per process
        with long_lived_objects():  # the image and every log it names
            self.metadata.load()
        if self.config.metrics_listen:
            self._start_http()
        groups = GroupHandlers(
            self.groups,
            self.replica_manager,
            self._caller,
            may_serve=self._may_serve,
            clock_ms=monotonic_ms,
            wall_clock_ms=_wall_clock_ms,
            request_timeout_ms=self.config.request_timeout_ms,
        )
        service = BrokerService(
            self.replica_manager,
            self.config,
            monotonic_ms,
            wall_clock_ms=_wall_clock_ms,
            producer_ids=self.producer_ids,
            may_serve=self._may_serve,
            groups=groups,
        )
        admin = AdminForwarder(self._caller, timeout_ms=ADMIN_FORWARD_TIMEOUT_MS)
        # A parked fetch holds a thread: `fetch.waits.max` of them on top of the workers.
        threads_max = self.config.grpc_workers_max + self.config.fetch_waits_max
        self._server = serve(service, admin, self.config.listener, threads_max)
        self._start_data_listener()
        if self.config.kafka_listener:
            self._start_kafka_listener(
                KafkaServices(
                    self.config,
                    self.replica_manager,
                    groups,
                    self.producer_ids,
                    admin,
                    monotonic_ms,
                    _wall_clock_ms,
                    self._may_serve,
                )
            )
        if not self.channel.register():
            return False
        self.groups.start()
        self.replica_manager.maintenance.start()
        self.channel.start()
        self.session.start()
        self.metadata.start()
        self.isr_updater.start()
        log.info("broker %d serving on %s", self.config.node_id, self.config.listener)
        return True

    def _start_http(self) -> None:
        """Serves /metrics, /health and /ready (`server_common.node_http`); OSError if it cannot
        bind. Ready means RUNNING: caught up with metadata and unfenced."""
        registry = CollectorRegistry()
        registry.register(
            BrokerCollector(
                self.replica_manager,
                self.lifecycle,
                lambda: self.metadata.applied_offset,
                lambda: self.metadata.records_fetched,
            )
        )
        registry.register(GroupLagCollector(self.groups, self.replica_manager))
        self.http = NodeHttpServer(
            self.config.metrics_listen, registry, health=self._health, ready=self._readiness
        )
        self.http.start()

    def _health(self) -> str | None:
        failure = self.failure
        return None if failure is None else f"failed: {failure}"

    def _readiness(self) -> str | None:
        state = self.lifecycle.state
        return None if state is BrokerState.RUNNING else f"broker state {state.name}"

    def _start_data_listener(self) -> None:
        """Serves Produce and Fetch on the data plane's own wire, registered as the DATA
        endpoint; OSError if it cannot bind."""
        dropper = ProduceResponseDropper(self.config.test_drop_produce_responses_every)
        handlers = DataHandlers(
            self.replica_manager, monotonic_ms, _wall_clock_ms, dropper.should_drop
        )
        listener = DataListener(*self.config.data_bind, handlers)
        listener.start()
        self._data_listener = listener
        self.channel.data_port = listener.port

    def _start_kafka_listener(self, services: KafkaServices) -> None:
        """Serves the Kafka protocol beside gRPC, with the same parts; OSError if it cannot bind."""
        listener = KafkaListener(
            self.config.kafka_host,
            self.config.kafka_port,
            Dispatcher(ALL_APIS),
            services,
            workers_max=WORKERS_MAX + self.config.fetch_waits_max,
        )
        listener.start()
        self._kafka_listener = listener

    def cancel_start(self) -> None:
        """Called from a signal handler: a `start` still registering returns False."""
        self.channel.cancel()

    @property
    def failure(self) -> BaseException | None:
        """Why the broker must stop on its own (its metadata could not be applied, or every
        log directory failed), if so."""
        return self.metadata.failure or self.replica_manager.failure

    def stop(self) -> None:
        """Controlled shutdown (bounded), then closes everything; idempotent once stopped."""
        state = self.lifecycle.state
        if state is BrokerState.NOT_RUNNING:
            return
        if state in (BrokerState.RUNNING, BrokerState.RECOVERY, BrokerState.STARTING):
            self.lifecycle.transition(BrokerState.PENDING_CONTROLLED_SHUTDOWN)
            if self.channel.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT_MS):
                log.info("controlled shutdown done")
            else:
                log.warning("controlled shutdown did not finish; stopping anyway")
        self.lifecycle.transition(BrokerState.SHUTTING_DOWN)
        self.replica_manager.stop_acknowledging()
        if self._server is not None:
            self._server.stop(grace=SERVER_STOP_GRACE_S).wait()
        if self._kafka_listener is not None:
            self._kafka_listener.stop()
        if self._data_listener is not None:
            self._data_listener.stop()
        self.metadata.stop()
        self.isr_updater.stop()
        self.fetchers.close()
        self.groups.close()
        self.channel.stop()
        self.session.stop()
        self.replica_manager.close()
        self.producer_ids.close()
        self._caller.close()
        if self.http is not None:
            self.http.stop()
        self.lifecycle.transition(BrokerState.NOT_RUNNING)


def _wall_clock_ms() -> int:
    """Wall-clock time, for what is stored and compared across restarts (offset commits, the
    log's timestamps)."""
    return time.time_ns() // 1_000_000
