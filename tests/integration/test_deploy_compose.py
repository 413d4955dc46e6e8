"""deploy/compose.yaml on a Docker engine (testcontainers): builds the image of deploy/Dockerfile,
starts 3 controllers and 3 brokers, and produces and consumes from inside the compose network,
where the brokers' advertised names resolve. Skipped, saying why, where no Docker engine or no
`docker compose` answers.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from testcontainers.compose import DockerCompose

from tests.integration.processes import wait_for

pytestmark = pytest.mark.integration

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CONTROLLERS = "controller-1:9091,controller-2:9091,controller-3:9091"
BROKERS = "broker-1:9292,broker-2:9292,broker-3:9292"
RECORDS = [f"record-{n}" for n in range(20)]
PROBE_TIMEOUT_S = 30
READY_TIMEOUT_S = 180


def docker_unavailable_reason() -> str | None:
    """Why the compose cluster cannot run here (None when it can)."""
    if shutil.which("docker") is None:
        return "the docker command is not installed"
    for probe in (["docker", "info"], ["docker", "compose", "version"]):
        try:
            done = subprocess.run(probe, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"`{' '.join(probe)}` did not answer within {PROBE_TIMEOUT_S}s"
        if done.returncode != 0:
            error = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return f"`{' '.join(probe)}` failed: {error}"
    return None


@pytest.fixture
def compose() -> Iterator[DockerCompose]:
    reason = docker_unavailable_reason()
    if reason is not None:
        pytest.skip(f"no Docker engine: {reason}")
    # No --wait: the image's health check needs metrics.listen, which the configs may leave off.
    cluster = DockerCompose(DEPLOY, compose_file_name="compose.yaml", build=True, wait=False)
    with cluster:
        yield cluster


def in_broker_1(compose: DockerCompose, *command: str) -> tuple[str, int]:
    """Runs `command` inside broker-1's container; its output and exit code."""
    stdout, _, code = compose.exec_in_container(list(command), "broker-1")
    return stdout, code


def pykraft(compose: DockerCompose, shell_command: str) -> str:
    """`pykraft ...` (a shell command line) inside broker-1's container; its output (the test
    fails on a non-zero exit)."""
    stdout, code = in_broker_1(compose, "sh", "-c", shell_command)
    assert code == 0, f"{shell_command} exited {code}"
    return stdout


def test_compose_cluster_produces_and_consumes(compose: DockerCompose) -> None:
    def brokers_unfenced() -> bool:
        described, code = in_broker_1(
            compose, "pykraft", "cluster", "describe", "--output", "json",
            "--bootstrap-controller", CONTROLLERS,
        )  # fmt: skip
        states = [b["state"] for b in json.loads(described)["brokers"]] if code == 0 else []
        return states == ["unfenced"] * 3

    wait_for(brokers_unfenced, timeout_s=READY_TIMEOUT_S, what="three unfenced brokers")
    pykraft(
        compose,
        f"pykraft topics create --topic demo --partitions 3 --replication-factor 3 "
        f"--bootstrap-controller {CONTROLLERS}",
    )
    records = "\\n".join(RECORDS)
    pykraft(
        compose,
        f"printf '{records}\\n' | pykraft produce --topic demo --acks all "
        f"--bootstrap-server {BROKERS}",
    )
    consumed = pykraft(
        compose,
        f"pykraft consume --topic demo --from-beginning --max-messages {len(RECORDS)} "
        f"--timeout-ms 30000 --bootstrap-server {BROKERS}",
    )
    assert sorted(consumed.splitlines()) == sorted(RECORDS)
