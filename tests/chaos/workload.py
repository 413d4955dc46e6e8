"""The workload of a chaos run, one OS process per client, each writing its own history file.

    python -m tests.chaos.workload producer --name p0 --acks all --idempotent 1 ...
    python -m tests.chaos.workload consumer --name c0 --group chaos ...
    python -m tests.chaos.workload reader --name r0 ...
    python -m tests.chaos.workload monitor --name m0 --group chaos ...

SIGTERM ends a process cleanly: it stops its loop, closes its client (a producer waits for what
is in flight) and exits 0. Values are unique: `<name>-<n>`.
"""

from __future__ import annotations

import argparse
import random
import signal
import threading
import time
from pathlib import Path
from types import FrameType

from pykraft.client import (
    AdminClient,
    Consumer,
    ConsumerRebalanceListener,
    KafkaError,
    OffsetAndMetadata,
    Producer,
    TopicPartition,
)
from pykraft.client.producer.future import FutureRecordMetadata, RecordCallback
from tests.chaos.history import HistoryWriter

STOP = threading.Event()


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    STOP.set()


def _error(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:300]


def run_producer(args: argparse.Namespace, history: HistoryWriter) -> None:
    idempotent = bool(args.idempotent)
    history.write("ok", "config", acks=args.acks, idempotent=idempotent)
    producer = Producer(
        bootstrap_servers=args.bootstrap,
        acks=args.acks,
        enable_idempotence=idempotent,
        linger_ms=5,
        request_timeout_ms=5000,
        delivery_timeout_ms=20000,
        max_block_ms=5000,
        client_id=args.name,
    )
    rng = random.Random(args.seed)
    interval_s = 1.0 / args.rate
    next_send = time.monotonic()
    n = 0
    try:
        while not STOP.is_set():
            value = f"{args.name}-{n}"
            partition = rng.randrange(args.partitions)
            n += 1
            history.write("invoke", "send", value=value, partition=partition)
            try:
                future = producer.send(args.topic, value.encode(), partition=partition)
            except (KafkaError, TimeoutError) as error:  # refused before it was queued
                history.write("fail", "send", value=value, error=_error(error))
            else:
                future.add_done_callback(_reporter(history, value))
            next_send += interval_s
            STOP.wait(max(0.0, next_send - time.monotonic()))
            next_send = max(next_send, time.monotonic() - 1.0)  # no burst after a stall
    finally:
        producer.close(timeout=25)


def _reporter(history: HistoryWriter, value: str) -> RecordCallback:
    def report(future: FutureRecordMetadata) -> None:
        error = future.exception()
        if error is None:
            metadata = future.result()
            history.write(
                "ok", "send", value=value, partition=metadata.partition, offset=metadata.offset
            )
        else:  # a queued record's failure is ambiguous: it may be on the leader's log
            history.write("info", "send", value=value, error=_error(error))

    return report


def _poll(consumer: Consumer, history: HistoryWriter) -> list[tuple[int, int, str]]:
    """One poll, written to the history as (partition, offset, value) records; an error is an
    `info` poll and no records."""
    try:
        polled = consumer.poll(timeout_ms=300)
    except KafkaError as error:
        history.write("info", "poll", error=_error(error))
        return []
    records = [(r.partition, r.offset, (r.value or b"").decode()) for r in polled]
    if records:
        history.write("ok", "poll", records=records)
    return records


class _Listener(ConsumerRebalanceListener):
    def __init__(self, history: HistoryWriter) -> None:
        self.history = history

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.history.write("ok", "assign", partitions=sorted(tp.partition for tp in assigned))

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.history.write("ok", "revoke", partitions=sorted(tp.partition for tp in revoked))


def run_consumer(args: argparse.Namespace, history: HistoryWriter) -> None:
    """A group member that commits, synchronously, after each poll it processed."""
    consumer = Consumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        client_id=args.name,
        request_timeout_ms=5000,
        default_api_timeout_ms=10000,
        fetch_max_wait_ms=200,
    )
    try:
        consumer.subscribe([args.topic], listener=_Listener(history))
        while not STOP.is_set():
            records = _poll(consumer, history)
            if not records:
                continue
            offsets: dict[int, int] = {}
            for partition, offset, _ in records:
                offsets[partition] = max(offsets.get(partition, 0), offset + 1)
            _commit(consumer, args.topic, offsets, history)
    finally:
        consumer.close(timeout_ms=5000)


def _commit(
    consumer: Consumer, topic: str, offsets: dict[int, int], history: HistoryWriter
) -> None:
    shown = {str(p): o for p, o in sorted(offsets.items())}
    history.write("invoke", "commit", offsets=shown)
    try:
        consumer.commit(
            {TopicPartition(topic, p): OffsetAndMetadata(o) for p, o in offsets.items()}
        )
    except KafkaError as error:
        outcome = "info" if error.retriable else "fail"
        history.write(outcome, "commit", offsets=shown, error=_error(error))
    else:
        history.write("ok", "commit", offsets=shown)


def run_reader(args: argparse.Namespace, history: HistoryWriter) -> None:
    """Assign mode: every partition from the beginning, polled until stopped."""
    consumer = Consumer(
        bootstrap_servers=args.bootstrap,
        auto_offset_reset="earliest",
        client_id=args.name,
        request_timeout_ms=5000,
        fetch_max_wait_ms=200,
    )
    try:
        consumer.assign([TopicPartition(args.topic, p) for p in range(args.partitions)])
        history.write("ok", "assign", partitions=list(range(args.partitions)))
        while not STOP.is_set():
            _poll(consumer, history)
    finally:
        consumer.close(timeout_ms=5000)


def run_monitor(args: argparse.Namespace, history: HistoryWriter) -> None:
    """Reads the group's committed offsets about once a second (committed-backwards)."""
    with AdminClient(args.controllers, request_timeout_ms=5000) as admin:
        while not STOP.wait(1.0):
            try:
                found = admin.list_consumer_group_offsets(args.group)
            except KafkaError as error:
                history.write("info", "committed", error=_error(error))
                continue
            offsets = {str(tp.partition): meta.offset for tp, meta in sorted(found.items())}
            history.write("ok", "committed", offsets=offsets)


ROLES = {
    "producer": run_producer,
    "consumer": run_consumer,
    "reader": run_reader,
    "monitor": run_monitor,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("role", choices=sorted(ROLES))
    parser.add_argument("--name", required=True)
    parser.add_argument("--history", type=Path, required=True)
    parser.add_argument("--bootstrap", default="")
    parser.add_argument("--controllers", default="")
    parser.add_argument("--topic", default="chaos")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--group", default="chaos")
    parser.add_argument("--acks", choices=["all", "1"], default="all")
    parser.add_argument("--idempotent", type=int, default=1)
    parser.add_argument("--rate", type=float, default=20.0, help="sends per second")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    history = HistoryWriter(args.history, args.name)
    try:
        ROLES[args.role](args, history)
    finally:
        history.close()


if __name__ == "__main__":
    main()
