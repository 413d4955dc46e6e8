"""deploy/grafana/pykraft.json charts only what the nodes export: every metric a panel queries is
a series of the broker's or the controller's /metrics, so a renamed metric fails here instead of
leaving an empty panel."""

from __future__ import annotations

import itertools
import json
import re
import uuid
from collections.abc import Iterable
from pathlib import Path

from prometheus_client import REGISTRY
from prometheus_client.metrics_core import Metric

import pykraft.quorum.raft.pysyncobj_log
import pykraft.server_common.request_metrics
from pykraft.broker.group.config import GroupConfig
from pykraft.broker.group.coordinator import GroupCoordinator
from pykraft.broker.lifecycle import BrokerLifecycle
from pykraft.broker.metrics import BrokerCollector, GroupLagCollector
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.quorum.config import ControllerConfig
from pykraft.quorum.controller_core import ControllerCore
from pykraft.quorum.events import RaftPolled
from pykraft.quorum.metrics import ControllerCollector
from pykraft.quorum.raft import RaftStatus

from .broker.replica_harness import broker_config

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "pykraft.json"
_METRIC = re.compile(r"\b(?:kafka|pykraft)_[a-z_]+")
# A family's series names in the text format, by its type.
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def series_names(families: Iterable[Metric]) -> set[str]:
    return {f.name + suffix for f in families for suffix in _SUFFIXES.get(f.type, ("",))}


def exported(tmp_path: Path) -> set[str]:
    """Every series name a broker or a controller serves."""
    assert pykraft.server_common.request_metrics  # its counters are in the default registry
    assert pykraft.quorum.raft.pysyncobj_log.RAFT_COMMIT_LATENCY
    manager = ReplicaManager(broker_config(tmp_path / "log"), lambda now_ms: True)
    broker = BrokerCollector(manager, BrokerLifecycle(), lambda: 0, lambda: 0)
    groups = GroupLagCollector(
        GroupCoordinator(manager, GroupConfig(), clock_ms=int, wall_clock_ms=int), manager
    )
    config = ControllerConfig(
        node_id=1, voters={1: "c1:9093"}, controller_listeners={1: "c1:9092"}, data_dir=tmp_path
    )
    ids = itertools.count(1)
    core = ControllerCore(config, new_id=lambda: uuid.UUID(int=next(ids)))
    core.step(RaftPolled(RaftStatus(1, 1, 1, True, 0, 0, 0, ())), 0)
    try:
        return series_names(
            [
                *REGISTRY.collect(),
                *broker.collect(),
                *groups.collect(),
                *ControllerCollector(core).collect(),
            ]
        )
    finally:
        manager.close()


def test_every_metric_the_dashboard_queries_is_exported(tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    queried = {
        name
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        for name in _METRIC.findall(target["expr"])
    }
    assert len(queried) > 20
    assert queried - exported(tmp_path) == set()
