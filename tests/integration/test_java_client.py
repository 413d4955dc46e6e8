"""Apache Kafka's own Java client (`kafka-clients` from Maven Central) against a real 3-broker
cluster's Kafka listeners (issue 14 §4 item 5).

`tests/java/KafkaClientDriver.java` creates a topic with the Admin client, produces with acks=all
and idempotence, consumes with assign and in a group with commits, describes and deletes the
topic, one printed line per step; this test runs it and checks each line. Maven fetches the client
once into build/java-deps (re-fetched only when tests/java/pom.xml changes). Skipped, with the
reason, where `java` or `mvn` is missing.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from .kafka_cluster import running_kafka_cluster
from .maven_jars import ROOT, maven_jars, skip_without_java_and_maven

pytestmark = pytest.mark.integration

JAVA_DIR = ROOT / "tests" / "java"
DEPS_DIR = ROOT / "build" / "java-deps"
RECORDS = 200
TOPIC = "java-orders"


@pytest.fixture(scope="module")
def classpath() -> str:
    """The driver's class path; skips where Java 11+ or Maven is missing (`java --version`
    is Java 11's, unknown to Java 8)."""
    skip_without_java_and_maven("the Java client test")
    if subprocess.run(["java", "--version"], capture_output=True).returncode != 0:
        pytest.skip("the Java client test needs Java 11+ (it runs a single source file)")
    return os.pathsep.join(str(jar) for jar in maven_jars(JAVA_DIR / "pom.xml", DEPS_DIR))


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
