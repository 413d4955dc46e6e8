"""`MirrorMaker`: one mirror process, source cluster to target cluster.

Two threads. The calling thread copies records (`PartitionCopier`) and nothing else, so the
admin work never stalls the data. A housekeeping thread runs the periodic work at MM2's
intervals: topic refresh (create and grow remote topics, hand the copier the partitions ready),
topic config sync, checkpoints and the group offset sync. A Kafka error in the housekeeping is
logged and tried again at the next interval; anything else stops the mirror, as does a record
the copier cannot deliver.

At start the mirror creates its topics on the target if missing, and reads back its offset
syncs (its progress, and the translation history) and checkpoints, so a restart continues where
the last run's syncs say (see `resume` for what it then checks on the target).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from pykraft.client import (
    AdminClient,
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
)
from pykraft.client.clock import monotonic_ms
from pykraft.mirror.checkpoints import Checkpointer
from pykraft.mirror.config import MirrorConfig
from pykraft.mirror.offset_syncs import OffsetSyncStore
from pykraft.mirror.partition_copier import PartitionCopier
from pykraft.mirror.topic_reader import read_checkpoints, read_offset_syncs
from pykraft.mirror.topic_sync import TopicSync

log = logging.getLogger(__name__)

# How long loading the mirror's topics at start may take.
LOAD_TIMEOUT_MS: Final = 120_000
# How long a clean stop waits for the records sent to be acknowledged.
CLOSE_TIMEOUT_S: Final = 30.0
# The housekeeping thread looks at its schedule (and for a refresh asked early) this often.
HOUSEKEEPING_TICK_MS: Final = 1000
# The producer's batch: larger than Kafka's default 16 KiB, since the mirror's batches fill.
PRODUCER_BATCH_BYTES: Final = 262_144
# The source consumer hands out up to this many records per poll.
RECORDS_PER_POLL_MAX: Final = 5000


@dataclass
class _Periodic:
    """One housekeeping task and when it is next due."""

    name: str
    interval_ms: int
    run: Callable[[], None]
    next_ms: int = 0


Bootstrap = str | Sequence[str]


class MirrorMaker:
    """Mirrors `source` to `target` (bootstrap addresses: brokers or controllers of each)."""

    def __init__(self, source: Bootstrap, target: Bootstrap, config: MirrorConfig) -> None:
        self._config = config
        self._policy = policy = config.policy()
        self._source_admin = AdminClient(source)
        self._target_admin = AdminClient(target)
        self._consumer = Consumer(
            bootstrap_servers=source,
            auto_offset_reset="earliest",
            max_poll_records=RECORDS_PER_POLL_MAX,
            client_id="mirror-source",
        )
        self._target_consumer = Consumer(
            bootstrap_servers=target, auto_offset_reset="earliest", client_id="mirror-target"
        )
        self._producer = Producer(
            bootstrap_servers=target,
            acks="all",
            enable_idempotence=True,
            batch_size=PRODUCER_BATCH_BYTES,
            client_id="mirror-target",
        )
        self._store = OffsetSyncStore()
        # Set by the copier when a source topic is gone, cleared by the refresh it brings on.
        self._refresh_asked = threading.Event()
        self._topics = TopicSync(self._source_admin, self._target_admin, config, policy)
        self._copier = PartitionCopier(
            consumer=self._consumer,
            tail_consumer=self._target_consumer,
            producer=self._producer,
            store=self._store,
            syncs_topic=policy.offset_syncs_topic(),
            offset_lag_max=config.offset_lag_max,
            flush_interval_ms=config.offset_flush_interval_ms,
            on_source_topic_gone=self._refresh_asked.set,
        )
        self._checkpointer = Checkpointer(
            source=self._source_admin,
            target=self._target_admin,
            producer=self._producer,
            store=self._store,
            checkpoints_topic=policy.checkpoints_topic(),
            groups=config.group_filter(),
        )
        # Handed from the housekeeping thread to the copier: the partitions ready to copy.
        self._lock = threading.Lock()
        self._ready: dict[TopicPartition, TopicPartition] = {}
        self._ready_changed = False
        self._failure: BaseException | None = None

    def run(self, stop: threading.Event) -> None:
        """Mirrors until `stop` is set, then delivers what was sent and writes the last
        syncs. Raises what stopped the mirror otherwise; closes every client either way."""
        housekeeping = threading.Thread(
            target=self._housekeep, args=(stop,), name="mirror-housekeeping", daemon=True
        )
        try:
            self._load()
            self._refresh_topics()
            housekeeping.start()
            self._copy_until(stop)
            self._copier.close(CLOSE_TIMEOUT_S, monotonic_ms())
        finally:
            stop.set()
            if housekeeping.is_alive():
                housekeeping.join()
            self._close_clients()

    def _load(self) -> None:
        self._topics.create_internal_topics()
        syncs = read_offset_syncs(
            self._target_consumer, self._policy.offset_syncs_topic(), LOAD_TIMEOUT_MS
        )
        self._store.add(timed.sync for timed in syncs)
        self._checkpointer.load(
            read_checkpoints(
                self._target_consumer, self._policy.checkpoints_topic(), LOAD_TIMEOUT_MS
            )
        )
        log.info("loaded %d offset syncs from the target", len(syncs))

    def _copy_until(self, stop: threading.Event) -> None:
        poll_timeout_ms = self._config.consumer_poll_timeout_ms
        while not stop.is_set():
            if self._failure is not None:
                raise self._failure
            ready = self._take_ready()
            if ready is not None:
                self._copier.assign(ready, monotonic_ms())
            if not self._copier.copying:  # a poll of nothing would not wait
                stop.wait(poll_timeout_ms / 1000)
                continue
            self._copier.copy(poll_timeout_ms, monotonic_ms())
            if self._refresh_asked.is_set():  # a source topic is gone: wait for the refresh
                stop.wait(HOUSEKEEPING_TICK_MS / 1000)

    def _take_ready(self) -> dict[TopicPartition, TopicPartition] | None:
        with self._lock:
            if not self._ready_changed:
                return None
            self._ready_changed = False
            return dict(self._ready)

    def _refresh_topics(self) -> None:
        ready = self._topics.refresh()
        with self._lock:
            if ready != self._ready:
                self._ready = ready
                self._ready_changed = True

    def _emit_checkpoints(self) -> None:
        with self._lock:
            mirrored = dict(self._ready)
        written = self._checkpointer.emit(mirrored)
        if written:
            log.info("wrote %d checkpoints", written)

    def _housekeep(self, stop: threading.Event) -> None:
        config = self._config
        refresh = _Periodic(
            "refresh topics", config.refresh_topics_interval_seconds * 1000, self._refresh_topics
        )
        tasks = [
            *([refresh] if config.refresh_topics_enabled else []),
            *(
                _Periodic(name, seconds * 1000, run)
                for name, enabled, seconds, run in (
                    ("sync topic configs", config.sync_topic_configs_enabled,
                     config.sync_topic_configs_interval_seconds, self._topics.sync_configs),
                    ("emit checkpoints", config.emit_checkpoints_enabled,
                     config.emit_checkpoints_interval_seconds, self._emit_checkpoints),
                    ("sync group offsets", config.sync_group_offsets_enabled,
                     config.sync_group_offsets_interval_seconds,
                     self._checkpointer.sync_group_offsets),
                )
                if enabled
            ),
        ]  # fmt: skip
        now_ms = monotonic_ms()
        for task in tasks:
            task.next_ms = now_ms + task.interval_ms
        while not stop.wait(HOUSEKEEPING_TICK_MS / 1000):
            if self._refresh_asked.is_set():  # a source topic is gone: now, not at the interval
                self._refresh_asked.clear()
                self._run_task(refresh)
            for task in tasks:
                if monotonic_ms() >= task.next_ms:
                    task.next_ms = monotonic_ms() + task.interval_ms
                    self._run_task(task)

    def _run_task(self, task: _Periodic) -> None:
        try:
            task.run()
        except KafkaError as e:
            log.warning(
                "%s failed, to be tried again in %d s: %s", task.name, task.interval_ms // 1000, e
            )
        except BaseException as e:
            log.exception("%s failed: the mirror stops", task.name)
            self._failure = e

    def _close_clients(self) -> None:
        self._producer.close(CLOSE_TIMEOUT_S)
        for consumer in (self._consumer, self._target_consumer):
            consumer.close()
        for admin in (self._source_admin, self._target_admin):
            admin.close()
