"""Apache Kafka 4.x itself, for benchmarks that compare pykraft with it on the same machine.

`kafka_jars()` fetches Kafka's server jars from Maven Central once (bench/kafka/pom.xml, copied
into build/kafka-jars/) and reuses them afterwards. `kafka_cluster()` runs three KRaft nodes with
combined broker and controller roles on 127.0.0.1 (512 MiB heap each: the machine is small),
formats their storage with one cluster id, and yields the bootstrap address of their PLAINTEXT
listeners once the three are answering; the JVMs are stopped on exit. Each node's output goes to
`node-N/node.log` under the cluster's directory, which a failure message names.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.ports import free_port  # noqa: E402

POM = ROOT / "bench" / "kafka" / "pom.xml"
JARS_DIR = ROOT / "build" / "kafka-jars"
NODE_IDS = (1, 2, 3)
HEAP = "-Xmx512m"
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 30


def kafka_jars() -> Path:
    """The directory of Kafka's jars, downloaded with Maven on first use; raises
    CalledProcessError (Maven's output on stderr) when they cannot be fetched."""
    if not any(JARS_DIR.glob("kafka_2.13-*.jar")):
        subprocess.run(
            ["mvn", "-B", "-q", "-f", str(POM), "dependency:copy-dependencies",
             f"-DoutputDirectory={JARS_DIR}"],
            check=True,
        )  # fmt: skip
    return JARS_DIR


def kafka_version(jars: Path) -> str:
    """The version in the name of the kafka_2.13 jar, e.g. "4.1.0"."""
    (jar,) = jars.glob("kafka_2.13-*.jar")
    return jar.stem.removeprefix("kafka_2.13-")


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes in URL-safe base64 without padding, as
    `kafka-storage.sh random-uuid` prints."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _properties(node_id: int, port: int, voters: str, controller_port: int, data: Path) -> str:
    """server.properties of a combined node; internal topics replicated 3 ways like the
    benchmark topic, no initial rebalance delay."""
    return "\n".join([
        "process.roles=broker,controller",
        f"node.id={node_id}",
        f"controller.quorum.voters={voters}",
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        f"log.dirs={data}",
        "offsets.topic.replication.factor=3",
        "transaction.state.log.replication.factor=3",
        "transaction.state.log.min.isr=2",
        "group.initial.rebalance.delay.ms=0",
        "",
    ])  # fmt: skip


def _java(jars: Path, *args: str) -> list[str]:
    return ["java", HEAP, "-cp", f"{jars}/*", *args]


def _start_node(
    jars: Path, node_dir: Path, cluster_id: str, properties: str
) -> subprocess.Popen[bytes]:
    """Formats the node's storage and starts its JVM (output to node_dir/node.log)."""
    config = node_dir / "server.properties"
    config.write_text(properties)
    subprocess.run(
        _java(jars, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)),
        check=True,
        capture_output=True,
    )
    with (node_dir / "node.log").open("wb") as log:
        return subprocess.Popen(
            _java(jars, "kafka.Kafka", str(config)), stdout=log, stderr=subprocess.STDOUT
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (Kafka's controlled shutdown), SIGKILL if it takes longer than STOP_TIMEOUT_S."""
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _wait_brokers(bootstrap: str, processes: dict[int, subprocess.Popen[bytes]], tmp: Path) -> None:
    """Until the metadata lists all three brokers; RuntimeError naming the log of a node that
    exited or of the whole cluster after START_TIMEOUT_S."""
    # librdkafka logs each refused connection; the JVMs take a while to listen.
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        for node_id, process in processes.items():
            if process.poll() is not None:
                log = tmp / f"node-{node_id}" / "node.log"
                raise RuntimeError(f"Kafka node {node_id} exited ({process.returncode}): see {log}")
        try:
            if len(admin.list_topics(timeout=5).brokers) == len(processes):
                return
        except KafkaException:  # not answering yet
            pass
        time.sleep(0.5)
    raise RuntimeError(
        f"Kafka brokers not all up in {START_TIMEOUT_S} s: see {tmp}/node-*/node.log"
    )


@contextmanager
def kafka_cluster(tmp: Path) -> Iterator[str]:
    """Three combined KRaft nodes under `tmp`; yields their bootstrap address."""
    if shutil.which("java") is None:
        raise RuntimeError("java is not on PATH")
    jars = kafka_jars()
    ports = {i: (free_port(), free_port()) for i in NODE_IDS}
    voters = ",".join(f"{i}@127.0.0.1:{controller}" for i, (_, controller) in ports.items())
    cluster_id = _cluster_id()
    with ExitStack() as stack:
        processes: dict[int, subprocess.Popen[bytes]] = {}
        for i, (port, controller) in ports.items():
            node_dir = tmp / f"node-{i}"
            node_dir.mkdir(parents=True)
            properties = _properties(i, port, voters, controller, node_dir / "data")
            processes[i] = _start_node(jars, node_dir, cluster_id, properties)
            stack.callback(_stop, processes[i])
        bootstrap = ",".join(f"127.0.0.1:{port}" for port, _ in ports.values())
        _wait_brokers(bootstrap, processes, tmp)
        yield bootstrap
