"""A consumer-group member as its own process, for tests that kill or stop members.

    python -m tests.integration.group_member BOOTSTRAP GROUP TOPIC OUT [--instance-id ID]
        [--process-delay-ms N]

It subscribes to TOPIC in GROUP and "processes" each record by appending a JSON line to OUT
(flushed at once), then commits after processing (at least once). Rebalances and failed
commits are written to OUT too, so a test reads what the member saw:

    {"event": "assigned" | "revoked" | "lost", "partitions": [[topic, partition], ...]}
    {"event": "record", "partition": p, "offset": o, "value": "..."}
    {"event": "committed"} | {"event": "commit_failed", "error": "..."}

SIGTERM closes the consumer (commit, leave the group) and exits 0.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from typing import IO, Any

from pykraft.client import Consumer, ConsumerRebalanceListener, KafkaError, TopicPartition

POLL_RECORDS_MAX = 50


class _Journal(ConsumerRebalanceListener):
    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def write(self, **event: Any) -> None:
        self.out.write(json.dumps(event) + "\n")
        self.out.flush()

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.write(event="assigned", partitions=sorted([tp.topic, tp.partition] for tp in assigned))

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.write(event="revoked", partitions=sorted([tp.topic, tp.partition] for tp in revoked))

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.write(event="lost", partitions=sorted([tp.topic, tp.partition] for tp in lost))


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "group", "topic", "out"):
        parser.add_argument(name)
    parser.add_argument("--instance-id", default=None)
    parser.add_argument("--process-delay-ms", type=int, default=0)
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    with open(args.out, "a", encoding="utf-8") as out:
        journal = _Journal(out)
        consumer = Consumer(
            bootstrap_servers=args.bootstrap,
            group_id=args.group,
            group_instance_id=args.instance_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            client_id=f"member-{args.instance_id or 'dynamic'}",
        )
        consumer.subscribe([args.topic], listener=journal)
        try:
            while not stop.is_set():
                records = consumer.poll(timeout_ms=200, records_max=POLL_RECORDS_MAX)
                for record in records:
                    value = (record.value or b"").decode()
                    journal.write(
                        event="record",
                        partition=record.partition,
                        offset=record.offset,
                        value=value,
                    )
                if not records:
                    continue
                time.sleep(args.process_delay_ms / 1000)
                try:
                    consumer.commit()
                    journal.write(event="committed")
                except KafkaError as error:
                    journal.write(event="commit_failed", error=str(error))
        finally:
            consumer.close()


if __name__ == "__main__":
    main()
