"""Apache Kafka's own Java client (`kafka-clients` from Maven Central) against a real 3-broker
cluster's Kafka listeners (issue 14 §4 item 5).

`tests/java/KafkaClientDriver.java` creates a topic with the Admin client, produces with acks=all
and idempotence, consumes with assign and in a group with commits, describes and deletes the
topic, one printed line per step; this test runs it and checks each line. Maven fetches the client
once into build/java-deps (re-fetched only when tests/java/pom.xml changes). Skipped, with the
reason, where `java` or `mvn` is missing.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from .kafka_cluster import running_kafka_cluster

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
JAVA_DIR = ROOT / "tests" / "java"
DEPS_DIR = ROOT / "build" / "java-deps"
RECORDS = 200
TOPIC = "java-orders"


def _java_deps() -> Path:
    """build/java-deps holding kafka-clients and its runtime jars, fetched by Maven when the pom
    changed since the last fetch (its hash is kept beside the jars)."""
    pom = JAVA_DIR / "pom.xml"
    stamp = DEPS_DIR / ".pom-sha256"
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest:
        return DEPS_DIR
    shutil.rmtree(DEPS_DIR, ignore_errors=True)
    fetched = subprocess.run(
        ["mvn", "-q", "-f", str(pom), "dependency:copy-dependencies",
         f"-DoutputDirectory={DEPS_DIR}", "-DincludeScope=runtime"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    stamp.write_text(digest)
    return DEPS_DIR


@pytest.fixture(scope="module")
def classpath() -> str:
    """The driver's class path; skips where Java 11+ or Maven is missing (`java --version`
    is Java 11's, unknown to Java 8)."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"the Java client test needs {' and '.join(missing)} on PATH")
    if subprocess.run(["java", "--version"], capture_output=True).returncode != 0:
        pytest.skip("the Java client test needs Java 11+ (it runs a single source file)")
    return f"{_java_deps()}/*"


def _run_driver(classpath: str, bootstrap: str) -> dict[str, dict[str, str]]:
    """Runs the driver; its lines as step -> {key: value}."""
    driver = JAVA_DIR / "KafkaClientDriver.java"
    ran = subprocess.run(
        ["java", "-cp", classpath, str(driver), bootstrap, TOPIC, str(RECORDS)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr[-4000:]
    steps: dict[str, dict[str, str]] = {}
    for line in ran.stdout.splitlines():
        step, *pairs = line.split()
        steps[step] = dict(pair.split("=", 1) for pair in pairs)
    return steps


def test_the_java_client_produces_consumes_and_administers(classpath: str, tmp_path: Path) -> None:
    with running_kafka_cluster(tmp_path) as cluster:
        steps = _run_driver(classpath, cluster.bootstrap)
    records = str(RECORDS)
    assert steps["created"] == {"topic": TOPIC}
    assert steps["produced"] == {"records": records}
    assert steps["assigned"] == {"records": records, "exact": "true"}
    assert steps["group"] == {"records": records, "exact": "true", "assigned": "3"}
    assert steps["committed"] == {"group": f"{TOPIC}-group", "total": records}
    assert steps["described"] == {"topic": TOPIC, "partitions": "3", "replicas": "3"}
    assert steps["deleted"] == {"topic": TOPIC, "listed": "false"}
