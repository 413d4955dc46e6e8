"""Benchmark of fetch from follower (KIP-392): end-to-end latency read from the leader and from a
follower, in the same run.

Three controllers and three broker processes on 127.0.0.1, in racks rack-1, rack-2 and rack-3,
with Kafka's RackAwareReplicaSelector; a topic of one partition with replication factor 3
(min.insync.replicas=2). One producer sends records of 100 bytes with acks=all and linger_ms=0
at a fixed rate; two consumers in the same process read every record as it arrives: one with no
rack (the leader serves it) and one whose `client_rack` is a follower's rack (the leader names
that follower, which serves it up to the high-water mark it learns from the leader). Each value
starts with its send time; each consumer takes the difference on receipt.

Prints p50, p99 and max latency of each, the rate reached, and the consumer bytes each broker
sent (its counters), which shows the second consumer was served by the follower.

Run (it starts a cluster): `flock /tmp/pykraft-cluster.lock .venv/bin/python
bench/follower_fetch_latency.py [--rate 10000] [--seconds 10]`. Figures depend on the machine;
compare the two lines of one run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import LatencyReader, percentile, send_stamped  # noqa: E402
from pykraft.client import TopicPartition  # noqa: E402
from tests.integration.cluster import registrations, running_cluster  # noqa: E402
from tests.integration.test_fetch_from_follower import RACK_AWARE, consumer_bytes  # noqa: E402

TOPIC = "latency"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        running_cluster(Path(tmp), topic=TOPIC, partitions=1, broker_args=RACK_AWARE) as cluster,
    ):
        quorum, brokers = cluster
        address = ",".join(broker.address for broker in brokers.values())
        leader = registrations(quorum, TOPIC)[0].leader
        follower = min(i for i in brokers if i != leader)
        partitions = [TopicPartition(TOPIC, 0)]
        readers = {
            f"from the leader (broker {leader}, no rack)": LatencyReader(address, partitions),
            f"from a follower (broker {follower}, client_rack=rack-{follower})": LatencyReader(
                address, partitions, client_rack=f"rack-{follower}"
            ),
        }
        total, reached = send_stamped(address, TOPIC, args.rate, args.seconds)
        print(
            f"end-to-end latency at {args.rate} records/s (reached {reached:.0f}/s) for "
            f"{args.seconds:g} s, acks=all, {total} records:"
        )
        for name, reader in readers.items():
            latencies = reader.close(total)
            print(
                f"  {name}: p50 {percentile(latencies, 0.5):.1f} ms, "
                f"p99 {percentile(latencies, 0.99):.1f} ms, max {max(latencies):.1f} ms"
            )
        served = consumer_bytes(brokers, TOPIC)
        print(
            "consumer bytes sent, by broker: " + ", ".join(f"{i}: {n}" for i, n in served.items())
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
