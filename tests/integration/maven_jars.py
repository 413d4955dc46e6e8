"""Jars from Maven Central for the tests that run Java: Apache Kafka's client driver and Spark's
Kafka connector. Maven copies a pom's dependencies into a folder under build/ on the first run
and again only when the pom changes (its hash is kept beside the jars), so a fresh clone gets them
through the project's own poms and later runs need no network.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Spark's Kafka connector (spark-sql-kafka-0-10): its pom and where its jars are fetched.
SPARK_KAFKA_POM = ROOT / "tests" / "java" / "spark-kafka" / "pom.xml"
SPARK_KAFKA_JARS_DIR = ROOT / "build" / "spark-kafka-jars"


def missing_java_tools() -> list[str]:
    """Which of `java` and `mvn` are not on PATH (what running these jars needs)."""
    return [tool for tool in ("java", "mvn") if shutil.which(tool) is None]


def skip_without_java_and_maven(what: str) -> None:
    """Skips the calling test or fixture, naming what is missing, where `java` or `mvn` is not on
    PATH (the only machines where these tests may not run)."""
    if missing := missing_java_tools():
        pytest.skip(f"{what} needs {' and '.join(missing)} on PATH")


def maven_jars(pom: Path, into: Path, *, transitive: bool = True) -> list[Path]:
    """The jars of `pom`'s runtime dependencies in `into`, fetched by Maven when the pom changed
    since the last fetch. Without `transitive`, only the pom's own dependencies: for a library
    whose host (pyspark) ships the rest, where a second copy of a jar would be a conflict."""
    stamp = into / ".pom-sha256"
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()
    if not (stamp.exists() and stamp.read_text() == digest):
        shutil.rmtree(into, ignore_errors=True)
        fetched = subprocess.run(
            ["mvn", "-q", "-f", str(pom), "dependency:copy-dependencies",
             f"-DoutputDirectory={into}", "-DincludeScope=runtime",
             f"-DexcludeTransitive={str(not transitive).lower()}"],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert fetched.returncode == 0, fetched.stdout + fetched.stderr
        stamp.write_text(digest)
    return sorted(into.glob("*.jar"))


def spark_kafka_jars() -> list[Path]:
    """The Spark Kafka connector's own jars (pyspark ships the rest, and a second copy of a jar
    would be a conflict)."""
    return maven_jars(SPARK_KAFKA_POM, SPARK_KAFKA_JARS_DIR, transitive=False)
