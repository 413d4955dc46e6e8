"""`pykraft mirror` between two real clusters (issue 15 §2): records produced to the source
while the mirror is killed with SIGKILL and started again all arrive once, in order per
partition, with keys, values, headers and timestamps unchanged; a group that consumed part of a
topic on the source resumes on the target at the translated offset; a topic created on the
source later appears on the target (partitions and configs followed); `pykraft mirror status`
shows each partition caught up.

Both clusters are one controller and one broker (`mirror_clusters`), shared by the module's
tests; each test runs its own mirror with its own source alias and topics.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from pykraft.client import (
    AdminClient,
    ConfigSource,
    ConfigValue,
    Consumer,
    NewTopic,
    Producer,
    TopicPartition,
)

from .controllers import PYKRAFT
from .mirror_clusters import (
    MirrorProcess,
    SmallCluster,
    end_offsets,
    read_records,
    running_mirror,
    small_cluster,
)
from .processes import wait_for

pytestmark = pytest.mark.integration

Clusters = tuple[SmallCluster, SmallCluster]
COPY_TIMEOUT_S = 90
# The restart count of the kill test, and the records the target must gain between kills.
KILLS = 3
RECORDS_BETWEEN_KILLS = 1500


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    base = tmp_path_factory.mktemp("mirror")
    with ExitStack() as stack:
        source = stack.enter_context(small_cluster(base / "source"))
        target = stack.enter_context(small_cluster(base / "target"))
        yield source, target


class PacedProducer(threading.Thread):
    """Sends records to `topic` at about `rate` a second until `stop`, keyed, with headers and
    explicit timestamps, so each one is told apart from every other; `sent` counts them."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.rate = bootstrap, topic, rate
        self.sent = 0
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with Producer(bootstrap_servers=self.bootstrap, linger_ms=5) as producer:
                base_ms = int(time.time() * 1000)
                started = time.monotonic()
                while not self.stop.is_set():
                    i = self.sent
                    ahead_s = started + i / self.rate - time.monotonic()
                    if ahead_s > 0:
                        time.sleep(ahead_s)
                    producer.send(
                        self.topic,
                        b"value-%07d" % i,
                        key=b"key-%d" % (i % 97),
                        headers=[("seq", b"%d" % i), ("empty", None)],
                        timestamp_ms=base_ms + i,
                    )
                    self.sent += 1
                producer.flush(timeout=60)
        except BaseException as e:
            self.error = e

    def finish(self) -> int:
        """Stops sending; how many records were sent (every one acknowledged)."""
        self.stop.set()
        self.join(timeout=120)
        assert self.error is None and not self.is_alive(), self.error
        return self.sent


def _mirror(
    clusters: Clusters, directory: Path, topics: str, properties: dict[str, str]
) -> MirrorProcess:
    source, target = clusters
    return MirrorProcess(
        directory, source.bootstrap, target.bootstrap, topics=topics, properties=properties
    )


def _total(bootstrap: str, topic: str) -> int:
    return sum(end_offsets(bootstrap, topic).values())


def _caught_up(clusters: Clusters, topic: str, remote: str) -> bool:
    source, target = clusters
    wanted = end_offsets(source.bootstrap, topic)
    return bool(wanted) and end_offsets(target.bootstrap, remote) == wanted


def _wait_for_more(bootstrap: str, topic: str, count: int) -> None:
    floor = _total(bootstrap, topic) + count
    wait_for(
        lambda: _total(bootstrap, topic) >= floor,
        timeout_s=COPY_TIMEOUT_S,
        what=f"{floor} records in {topic}",
    )


def _wait_caught_up(clusters: Clusters, topic: str, remote: str) -> None:
    wait_for(
        lambda: _caught_up(clusters, topic, remote),
        timeout_s=COPY_TIMEOUT_S,
        what=f"{remote} caught up with {topic}",
    )


def _checked_tails(log: str) -> list[int]:
    """The target records each partition's restart checked against the source."""
    return [int(n) for n in re.findall(r", (\d+) records on the target to check first", log)]


def test_records_arrive_once_in_order_across_kill_minus_9(
    clusters: Clusters, tmp_path: Path
) -> None:
    source, target = clusters
    topic, remote = "orders", "east.orders"
    with AdminClient(source.bootstrap) as admin:
        admin.create_topic(topic, 3, 1)
    # Offset syncs only for each partition's first record: every restart must then find, and
    # recognise, all that the previous runs wrote after it.
    mirror = _mirror(
        clusters,
        tmp_path,
        topic,
        {
            "source.cluster.alias": "east",
            "offset.lag.max": "100000000",
            "offset.flush.interval.ms": "600000",
        },
    )
    producer = PacedProducer(source.bootstrap, topic, rate=1500)
    producer.start()
    with running_mirror(mirror):
        for _ in range(KILLS):
            _wait_for_more(target.bootstrap, remote, RECORDS_BETWEEN_KILLS)
            mirror.kill()
            mirror.start()
        _wait_for_more(target.bootstrap, remote, RECORDS_BETWEEN_KILLS)
        sent = producer.finish()
        _wait_caught_up(clusters, topic, remote)
        assert mirror.stop() == 0, mirror.log()
    copied = read_records(target.bootstrap, remote)
    assert copied == read_records(source.bootstrap, topic)
    assert sum(len(records) for records in copied.values()) == sent
    checked = _checked_tails(mirror.log())
    assert len(checked) == 3 * (KILLS + 1), mirror.log()  # three partitions per start
    assert sum(checked) >= KILLS * RECORDS_BETWEEN_KILLS, checked


def test_a_group_resumes_on_the_target_at_the_translated_offset(
    clusters: Clusters, tmp_path: Path
) -> None:
    source, target = clusters
    topic, remote, group = "payments", "west.payments", "billing"
    with AdminClient(source.bootstrap) as admin:
        admin.create_topic(topic, 2, 1)
    with Producer(bootstrap_servers=source.bootstrap) as producer:
        for i in range(400):
            producer.send(topic, b"payment-%d" % i, key=b"k%d" % (i % 13))
    processed = _consume(source.bootstrap, topic, group, at_least=150)
    with AdminClient(source.bootstrap) as admin:
        committed = admin.list_consumer_group_offsets(group)
    assert sum(o.offset for o in committed.values()) == len(processed) < 400
    mirror = _mirror(
        clusters,
        tmp_path,
        topic,
        {"source.cluster.alias": "west", "sync.group.offsets.enabled": "true"},
    )
    with running_mirror(mirror), AdminClient(target.bootstrap) as target_admin:
        translated = {TopicPartition(remote, tp.partition): o for tp, o in committed.items()}

        def synced() -> bool:
            found = target_admin.list_consumer_group_offsets(group)
            return {tp: o.offset for tp, o in found.items()} == {
                tp: o.offset for tp, o in translated.items()
            }

        wait_for(synced, timeout_s=COPY_TIMEOUT_S, what="the group's offsets on the target")
        resumed = _consume(
            target.bootstrap, remote, group, at_least=400 - len(processed), quiet_ms=1000
        )
        assert mirror.stop() == 0, mirror.log()
    # Exactly the records the group had not processed on the source: none again, none lost.
    source_values = {
        r[1] or b"" for rs in read_records(source.bootstrap, topic).values() for r in rs
    }
    assert sorted(resumed) == sorted(source_values - set(processed))


def _consume(
    bootstrap: str, topic: str, group: str, *, at_least: int, quiet_ms: int = 0
) -> list[bytes]:
    """A member of `group` reads `topic` until it has `at_least` records (then, with
    `quiet_ms`, whatever else comes within that long), commits what it read and leaves."""
    values: list[bytes] = []

    def enough() -> bool:
        values.extend(r.value or b"" for r in consumer.poll(200))
        return len(values) >= at_least

    with Consumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=50,
    ) as consumer:
        consumer.subscribe([topic])
        wait_for(enough, timeout_s=60, what=f"{at_least} records read by {group} from {topic}")
        if quiet_ms:
            values.extend(r.value or b"" for r in consumer.poll(quiet_ms))
        consumer.commit()
    return values


def test_a_topic_created_later_appears_on_the_target_with_its_configs(
    clusters: Clusters, tmp_path: Path
) -> None:
    source, target = clusters
    mirror = _mirror(clusters, tmp_path, "later.*", {"source.cluster.alias": "north"})
    with running_mirror(mirror), AdminClient(source.bootstrap) as admin:
        admin.create_topics(
            [NewTopic("later", 2, 1, {"retention.ms": "3600000", "min.insync.replicas": "1"})]
        )
        _produce_each_partition(source.bootstrap, "later", 2)
        _wait_caught_up(clusters, "later", "north.later")
        configs = _configs(target.bootstrap, "north.later")
        assert configs["retention.ms"].value == "3600000"
        # config.properties.exclude names it: the target keeps its own.
        assert configs["min.insync.replicas"].source is not ConfigSource.DYNAMIC_TOPIC_CONFIG
        admin.create_partitions({"later": 3})
        admin.alter_configs("topic", "later", set={"retention.ms": "7200000"})
        _produce_each_partition(source.bootstrap, "later", 3)
        wait_for(
            lambda: (
                _caught_up(clusters, "later", "north.later")
                and _configs(target.bootstrap, "north.later")["retention.ms"].value == "7200000"
            ),
            timeout_s=COPY_TIMEOUT_S,
            what="the third partition and the new retention.ms on the target",
        )
        statuses = _status(clusters, mirror)
        assert mirror.stop() == 0, mirror.log()
    assert read_records(target.bootstrap, "north.later") == read_records(source.bootstrap, "later")
    assert [(s["topic"], s["partition"], s["lag"]) for s in statuses] == [
        ("later", p, 0) for p in range(3)
    ]
    assert all(s["mirrored_offset"] == s["source_end_offset"] > 0 for s in statuses)
    assert all(s["records_per_second"] > 0 for s in statuses)


def test_a_deleted_source_topic_is_dropped_and_the_others_go_on(
    clusters: Clusters, tmp_path: Path
) -> None:
    source, target = clusters
    mirror = _mirror(clusters, tmp_path, "gone-.*", {"source.cluster.alias": "south"})
    with AdminClient(source.bootstrap) as admin:
        admin.create_topics([NewTopic("gone-a", 1, 1), NewTopic("gone-b", 1, 1)])
    with running_mirror(mirror), AdminClient(source.bootstrap) as admin:
        for topic in ("gone-a", "gone-b"):
            _produce_each_partition(source.bootstrap, topic, 1)
            _wait_caught_up(clusters, topic, f"south.{topic}")
        admin.delete_topics("gone-a")
        _produce_each_partition(source.bootstrap, "gone-b", 1)
        wait_for(
            lambda: _total(target.bootstrap, "south.gone-b") == 40,
            timeout_s=COPY_TIMEOUT_S,
            what="gone-b still mirrored after gone-a was deleted",
        )
        assert mirror.stop() == 0, mirror.log()
    assert _total(target.bootstrap, "south.gone-a") == 20  # the remote topic stays, as in MM2


def _produce_each_partition(bootstrap: str, topic: str, partitions: int) -> None:
    with Producer(bootstrap_servers=bootstrap) as producer:
        for p in range(partitions):
            for i in range(20):
                producer.send(topic, b"%d-%d" % (p, i), partition=p)


def _configs(bootstrap: str, topic: str) -> dict[str, ConfigValue]:
    with AdminClient(bootstrap) as admin:
        return admin.describe_configs("topic", topic)


def _status(clusters: Clusters, mirror: MirrorProcess) -> list[dict[str, Any]]:
    """`pykraft mirror status --output json`, once every partition shows lag 0 (its offset
    syncs trail the copying by up to offset.flush.interval.ms)."""
    source, target = clusters
    command = [
        PYKRAFT, "mirror", "status",
        "--source-bootstrap", source.bootstrap, "--target-bootstrap", target.bootstrap,
        "--config", str(mirror.config_path), "--output", "json",
    ]  # fmt: skip

    def caught_up() -> list[dict[str, Any]] | None:
        shown = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0, shown.stderr
        statuses: list[dict[str, Any]] = json.loads(shown.stdout)
        return statuses if statuses and all(s["lag"] == 0 for s in statuses) else None

    return wait_for(caught_up, timeout_s=COPY_TIMEOUT_S, what="mirror status showing no lag")
