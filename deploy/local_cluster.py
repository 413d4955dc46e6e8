"""`make run`: a local cluster of 3 controllers and 3 brokers, shown working, until Ctrl-C.

Starts the cluster with `pykraft dev up` (data, logs and cluster.json under ./data/), creates
the topic `demo` (3 partitions, replication factor 3), produces a few records with
`pykraft produce` and reads them back with `pykraft consume`, then keeps a status line fresh
(quorum leader, unfenced brokers) until Ctrl-C or SIGTERM, which stop every node with
`pykraft dev down`. Each command is printed before it runs, so it can be tried by hand.

`--spark-example` (`make run SPARK_EXAMPLE=1`) also runs examples/windowed_counts.py against
the cluster: it feeds the topic `clicks` with a few records a second under a handful of keys,
runs the Spark pipeline that counts them per key per 10-second window into `click-counts`
(its output in data/spark-example.log), and prints each count as it arrives. Ctrl-C stops
the feed and the pipeline before the cluster.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from pykraft.cli.dev import cluster as dev_cluster
from pykraft.cli.dev.commands import cluster_status
from pykraft.client import Consumer, KafkaError, Producer, TopicPartition

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = Path("data")
PYKRAFT = str(Path(sys.executable).parent / "pykraft")
DEMO_TOPIC = "demo"
DEMO_RECORDS = [f"hello {n}" for n in range(1, 6)]
COMMAND_TIMEOUT_S = 120
STATUS_INTERVAL_S = 3.0
# --spark-example
EXAMPLE = ROOT / "examples" / "windowed_counts.py"
EXAMPLE_INPUT, EXAMPLE_OUTPUT = "clicks", "click-counts"
EXAMPLE_CHECKPOINT = DATA_DIR / "spark-example-checkpoint"  # kept with the cluster's data
EXAMPLE_LOG = DATA_DIR / "spark-example.log"
EXAMPLE_STOP_TIMEOUT_S = 60
FEED_KEYS = [f"user-{n}" for n in range(1, 6)]
FEED_RECORDS_PER_S = 5
FEED_CLOSE_TIMEOUT_S = 10


def pykraft(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Runs `pykraft ARGS` in the repository, echoing the command and its output."""
    print(f"\n$ pykraft {' '.join(args)}", flush=True)
    return subprocess.run(
        [PYKRAFT, *args], cwd=ROOT, input=stdin, text=True, timeout=COMMAND_TIMEOUT_S
    )


def demo(cluster: dev_cluster.DevCluster) -> bool:
    """Creates the demo topic (kept from an earlier run if there is one), produces the demo
    records and consumes as many from the beginning; whether every step worked. Topics are
    administered through the controllers, records go through the brokers."""
    controllers, brokers = cluster.bootstrap_controllers, cluster.bootstrap_servers
    if not create_topic(DEMO_TOPIC, controllers):
        return False
    produced = pykraft(
        "produce", "--topic", DEMO_TOPIC, "--bootstrap-server", brokers,
        stdin="\n".join(DEMO_RECORDS),
    )  # fmt: skip
    consumed = pykraft(
        "consume", "--topic", DEMO_TOPIC, "--bootstrap-server", brokers, "--from-beginning",
        "--max-messages", str(len(DEMO_RECORDS)), "--timeout-ms", "10000",
    )  # fmt: skip
    return produced.returncode == 0 and consumed.returncode == 0


def create_topic(topic: str, controllers: str) -> bool:
    """Creates `topic` (3 partitions, replication factor 3) unless an earlier run left it;
    whether it is there now."""
    listed = subprocess.run(
        [PYKRAFT, "topics", "list", "--bootstrap-controller", controllers],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
    )
    if topic in listed.stdout.split():
        print(f"\n(topic {topic} is left from an earlier run)")
        return True
    created = pykraft(
        "topics", "create", "--topic", topic, "--partitions", "3",
        "--replication-factor", "3", "--bootstrap-controller", controllers,
    )  # fmt: skip
    return created.returncode == 0


def show_kafka_bootstrap(cluster: dev_cluster.DevCluster) -> None:
    """Where unchanged Kafka clients connect, with a kcat line to try."""
    servers = cluster.kafka_bootstrap_servers
    print(f"\nKafka clients connect to {servers}; try: kcat -b {servers} -L")


def show_status_until_interrupted(example: SparkExample | None = None) -> None:
    """Rewrites one status line every few seconds until KeyboardInterrupt; with `example`,
    prints above it each windowed count the Spark example writes."""
    print("\nThe cluster is running; `pykraft dev --help` shows how to kill, stop and start")
    print(f"nodes (with --data-dir {DATA_DIR}). Press Ctrl-C to stop it.\n")
    while True:
        status = cluster_status(dev_cluster.load(ROOT / DATA_DIR))
        line = f"{time.strftime('%H:%M:%S')} {status.summary()}"
        for news in example.news() if example is not None else ():
            print(f"\r{news:<90}")
        print(f"\r{line:<90}", end="", flush=True)
        time.sleep(STATUS_INTERVAL_S)


class Feeder(threading.Thread):
    """Produces FEED_RECORDS_PER_S records a second to the example's input topic, keyed by
    one of FEED_KEYS at random, until `stop()`. A failed send is retried on the next tick."""

    def __init__(self, brokers: str) -> None:
        super().__init__(name="feeder", daemon=True)
        self._brokers = brokers
        self._stopped = threading.Event()

    def run(self) -> None:
        choose = random.Random().choice
        producer = Producer(bootstrap_servers=self._brokers, linger_ms=5)
        try:
            n = 0
            while not self._stopped.wait(1 / FEED_RECORDS_PER_S):
                try:
                    producer.send(EXAMPLE_INPUT, b"click %d" % n, key=choose(FEED_KEYS).encode())
                    n += 1
                except KafkaError:
                    pass  # the cluster is busy (a node restarting): the next tick tries again
        finally:
            producer.close(timeout=FEED_CLOSE_TIMEOUT_S)

    def stop(self) -> None:
        self._stopped.set()
        self.join(FEED_CLOSE_TIMEOUT_S)


class SparkExample:
    """examples/windowed_counts.py as a subprocess, fed by a `Feeder`, with a consumer of its
    output for `news()`. The subprocess runs in its own session, so Ctrl-C reaches it only
    through `stop()`, after the launcher has stopped the feed."""

    def __init__(self, brokers: str) -> None:
        command = [
            sys.executable, str(EXAMPLE), "--bootstrap-server", brokers,
            "--input", EXAMPLE_INPUT, "--output", EXAMPLE_OUTPUT,
            "--checkpoint", str(EXAMPLE_CHECKPOINT),
        ]  # fmt: skip
        shown = " ".join(command[1:]).replace(str(ROOT) + os.sep, "")
        print(f"\n$ python {shown} > {EXAMPLE_LOG} 2>&1", flush=True)
        print(f"(feeding {EXAMPLE_INPUT} with {FEED_RECORDS_PER_S} records a second; the first")
        print(f"counts arrive in {EXAMPLE_OUTPUT} once Spark has started and a window has closed)")
        self._exit_reported = False
        self.feeder = Feeder(brokers)
        self.feeder.start()
        self.results = Consumer(bootstrap_servers=brokers, auto_offset_reset="latest")
        self.results.assign(
            TopicPartition(EXAMPLE_OUTPUT, p) for p in self.results.partitions_for(EXAMPLE_OUTPUT)
        )
        # Last, so that nothing can fail between starting the process and handing it back.
        with (ROOT / EXAMPLE_LOG).open("ab") as log:
            self.process = subprocess.Popen(
                command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def news(self) -> list[str]:
        """The counts written since the last call, and the pipeline's exit once it exits."""
        lines = [
            f"{EXAMPLE_OUTPUT}: {r.value.decode(errors='replace')}"
            for r in self.results.poll(timeout_ms=0)
            if r.value is not None
        ]
        code = self.process.poll()
        if code is not None and not self._exit_reported:
            self._exit_reported = True
            lines.append(f"the Spark example exited with code {code}; see {EXAMPLE_LOG}")
        return lines

    def stop(self) -> None:
        """Stops the feed, then the pipeline (SIGINT, SIGKILL after EXAMPLE_STOP_TIMEOUT_S)."""
        print("stopping the Spark example", flush=True)
        self.feeder.stop()
        self.results.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(EXAMPLE_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_spark_example(cluster: dev_cluster.DevCluster) -> SparkExample | None:
    """Creates the example's topics and starts it; None if a topic could not be created."""
    for topic in (EXAMPLE_INPUT, EXAMPLE_OUTPUT):
        if not create_topic(topic, cluster.bootstrap_controllers):
            return None
    return SparkExample(cluster.bootstrap_servers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--spark-example",
        action="store_true",
        help="also run examples/windowed_counts.py (Spark) against the cluster",
    )
    args = parser.parse_args(argv)
    # Ctrl-C and SIGTERM both stop the cluster, even when started where SIGINT was ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    up = ["dev", "up", "--controllers", "3", "--brokers", "3", "--data-dir", str(DATA_DIR)]
    example: SparkExample | None = None
    try:
        if pykraft(*up).returncode != 0:
            return 1
        cluster = dev_cluster.load(ROOT / DATA_DIR)
        if not demo(cluster):
            print("the demo failed; logs are under data/", file=sys.stderr)
            return 1
        if args.spark_example:
            example = start_spark_example(cluster)
            if example is None:
                print("could not create the Spark example's topics", file=sys.stderr)
                return 1
        show_kafka_bootstrap(cluster)
        show_status_until_interrupted(example)
    except KeyboardInterrupt:
        print()
    finally:
        # A second Ctrl-C must not cut the shutdown short (`dev down` inherits the ignore).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if example is not None:
            example.stop()
        if dev_cluster.cluster_file(ROOT / DATA_DIR).exists():
            pykraft("dev", "down", "--data-dir", str(DATA_DIR))
    return 0


if __name__ == "__main__":
    sys.exit(main())
