"""The follower replication throttle: the token bucket's rate, and which replicas it holds."""

from __future__ import annotations

from uuid import UUID

from pykraft.broker.replication_throttle import (
    BURST_MS,
    FETCH_SLICE_MS,
    FollowerThrottle,
    TokenBucket,
)
from pykraft.metadata_log import MetadataImage, replay_all
from pykraft.metadata_log.records import ConfigRecord, ConfigResourceType, Record, TopicRecord

RATE = 10_000  # bytes/s


def _image(*configs: tuple[ConfigResourceType, str, str, str]) -> MetadataImage:
    records: list[Record] = [TopicRecord("t", UUID(int=1))]
    records += (ConfigRecord(*c) for c in configs)
    return replay_all(MetadataImage.EMPTY, records).apply(offset=len(records), epoch=1)


def test_spending_as_fast_as_allowed_holds_the_rate() -> None:
    bucket = TokenBucket(RATE, now_ms=0)
    spent, now_ms = 0, 0
    while now_ms < 10_000:
        now_ms += bucket.wait_ms(now_ms)
        assert bucket.available(now_ms)
        bucket.spend(700, now_ms)  # fetches of any size: the overdraft is paid back
        spent += 700
    assert abs(spent - RATE * now_ms / 1000) <= 700, "within one fetch of the rate"


def test_it_starts_empty_and_saves_up_at_most_the_burst() -> None:
    bucket = TokenBucket(RATE, now_ms=1_000)
    assert not bucket.available(1_000) and bucket.wait_ms(1_000) == 1
    bucket.spend(RATE * BURST_MS // 1000, 60_000)  # idle a minute: only BURST_MS worth saved
    assert not bucket.available(60_000)


def test_only_listed_replicas_out_of_sync_are_throttled_at_the_broker_rate() -> None:
    broker, topic = ConfigResourceType.BROKER, ConfigResourceType.TOPIC
    key = "follower.replication.throttled.replicas"
    image = _image(
        (topic, "t", key, "0:4,1:5"),
        (broker, "", "follower.replication.throttled.rate", "999"),
        (broker, "4", "follower.replication.throttled.rate", str(RATE)),
    )
    throttle = FollowerThrottle(broker_id=4)
    assert throttle.throttled(image, "t", 0, in_sync=False)
    assert not throttle.throttled(image, "t", 0, in_sync=True)
    assert not throttle.throttled(image, "t", 1, in_sync=False)
    assert not throttle.throttled(image, "u", 0, in_sync=False)
    assert FollowerThrottle(4).throttled(_image((topic, "t", key, "*")), "t", 3, in_sync=False)
    assert throttle.fetch_bytes_max(image, 0) == 0, "the bucket starts empty"
    assert throttle.fetch_bytes_max(image, 10) == RATE * FETCH_SLICE_MS // 1000
    throttle.spend(RATE, 10)
    assert throttle.wait_ms(10) > 900
    assert throttle.fetch_bytes_max(_image(), 20) is None, "no rate set: no throttle"
