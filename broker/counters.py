"""What a broker counts while it runs, so tests and operators can see where requests went
(issue 16 exports these as Prometheus metrics). Names are Prometheus-style totals; Kafka's own
metric names are in the comments:

- `requests_total{request=FetchConsumer|FetchFollower}`: Fetch requests answered, through either
  listener (Kafka's RequestsPerSec with those request names).
- `consumer_bytes_out_total{topic}`: record bytes sent to consumers (Kafka's BytesOutPerSec,
  which leaves replication out).

Thread-safe; every counter starts at 0 when the broker starts and only goes up. The keys are
bounded by the request kinds and the topics the broker hosts.
"""

from __future__ import annotations

import threading
from typing import Final

from pykraft.proto import broker_pb2

REQUESTS_TOTAL: Final = "requests_total"
CONSUMER_BYTES_OUT_TOTAL: Final = "consumer_bytes_out_total"
FETCH_CONSUMER: Final = "FetchConsumer"
FETCH_FOLLOWER: Final = "FetchFollower"

# A counter: its name and its labels (name, value), sorted.
CounterKey = tuple[str, tuple[tuple[str, str], ...]]


class Counters:
    """Named counters with labels."""

    def __init__(self) -> None:
        self._values: dict[CounterKey, int] = {}
        self._lock = threading.Lock()

    def add(self, name: str, value: int = 1, **labels: str) -> None:
        """Adds `value` (>= 0) to the counter `name` with `labels`."""
        assert value >= 0, (name, value)
        key = (name, tuple(sorted(labels.items())))
        with self._lock:
            self._values[key] = self._values.get(key, 0) + value

    def snapshot(self) -> dict[CounterKey, int]:
        """Every counter's value now."""
        with self._lock:
            return dict(self._values)


def describe(counters: Counters) -> broker_pb2.DescribeCountersResponse:
    """The answer to DescribeCounters: every counter, sorted by name and labels."""
    return broker_pb2.DescribeCountersResponse(
        counters=[
            broker_pb2.Counter(name=name, labels=dict(labels), value=value)
            for (name, labels), value in sorted(counters.snapshot().items())
        ]
    )
