"""The configs shipped in deploy/ load as the servers load them, with the flags the compose file
and the Kubernetes manifests add, and say what the operator documentation says they say: a
config that would stop a node at start-up fails here, not on an operator's host."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pykraft.broker import config as broker_config
from pykraft.quorum import config as controller_config

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
HOST_IDS = (1, 2, 3)


@pytest.mark.parametrize("host_id", HOST_IDS)
def test_each_hosts_configs_load_and_advertise_its_name(host_id: int) -> None:
    host = DEPLOY / "hosts" / f"host-{host_id}"
    controller = controller_config.load_config(host / "controller.toml", {})
    assert controller.node_id == host_id
    assert controller.listener == f"pykraft-{host_id}:9091"
    assert controller.voters[host_id] == f"pykraft-{host_id}:9093"

    assert controller.metrics_listen == "0.0.0.0:9404"  # the health check's and probes' port

    broker = broker_config.load_config(host / "broker.toml", {})
    assert broker.node_id == host_id
    assert broker.metrics_listen == "0.0.0.0:9405"
    assert broker.listener == "0.0.0.0:9292"  # binds every interface ...
    assert broker.advertised_endpoints()[0][1:] == (f"pykraft-{host_id}", 9292)  # ... names one
    assert broker.topic_defaults["min.insync.replicas"] == "2"


def test_every_compose_service_mounts_a_shipped_config() -> None:
    compose: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert sorted(services) == [f"{r}-{i}" for r in ("broker", "controller") for i in HOST_IDS]
    for name, service in services.items():
        role, _, number = name.partition("-")
        mounted = [v.split(":")[0] for v in service["volumes"] if v.startswith("./")]
        assert mounted == [f"./hosts/host-{number}/{role}.toml"]
        assert (DEPLOY / mounted[0]).is_file()
        assert service["command"][:2] == [role, "run"]


def test_kubernetes_configs_load_with_the_pods_flags(tmp_path: Path) -> None:
    documents = list(yaml.safe_load_all((DEPLOY / "kubernetes" / "pykraft.yaml").read_text()))
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in documents)
    assert kinds == sorted(
        [("ConfigMap", "pykraft")]
        + [(k, f"pykraft-{r}") for r in ("controller", "broker")
           for k in ("Service", "StatefulSet", "PodDisruptionBudget")]
    )  # fmt: skip
    data = next(d for d in documents if d["kind"] == "ConfigMap")["data"]
    for name, text in data.items():
        (tmp_path / name).write_text(text)
    controller = controller_config.load_config(tmp_path / "controller.toml", {"node.id": 2})
    assert controller.listener == "pykraft-controller-1.pykraft-controller:9091"
    pod = "pykraft-broker-0.pykraft-broker"
    advertised = f"GRPC://{pod}:9292,KAFKA://{pod}:9092,DATA://{pod}:9492"  # as the pod sets them
    broker = broker_config.load_config(
        tmp_path / "broker.toml", {"node.id": 1, "advertised.listeners": advertised}
    )
    assert [e[1:] for e in broker.advertised_endpoints(9492)] == [
        (pod, 9292), (pod, 9092), (pod, 9492),
    ]  # fmt: skip
    listens = {"controller": controller.metrics_listen, "broker": broker.metrics_listen}
    for statefulset in (d for d in documents if d["kind"] == "StatefulSet"):
        container = statefulset["spec"]["template"]["spec"]["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        role = statefulset["metadata"]["name"].removeprefix("pykraft-")
        assert listens[role] == f"0.0.0.0:{ports['metrics']}"  # the probes' port serves them
        assert container["livenessProbe"]["httpGet"]["path"] == "/health"
        assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
        assert statefulset["spec"]["podManagementPolicy"] == "Parallel"
