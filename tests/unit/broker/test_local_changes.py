from __future__ import annotations

from pykraft.broker.local_changes import local_changes
from pykraft.metadata_log import MetadataImage
from pykraft.metadata_log.records import PartitionChangeRecord, RemoveTopicRecord

from .images import EVENTS_ID, ORDERS_ID, advance, cluster_image, topic_records

ORDERS = topic_records("orders", ORDERS_ID, [(1, 2), (2, 1), (2, 3)])


def _names(partitions: tuple[object, ...]) -> list[str]:
    return [p.directory_name for p in partitions]  # type: ignore[attr-defined]


def test_a_new_topic_gives_leaders_and_followers_of_this_broker_only() -> None:
    base = cluster_image()
    delta, image = advance(base, ORDERS)
    changes = local_changes(base, image, 1, delta)
    assert _names(changes.leaders) == ["orders-0"]
    assert _names(changes.followers) == ["orders-1"]
    assert changes.deletes == ()
    other = local_changes(base, image, 3, delta)
    assert (_names(other.leaders), _names(other.followers)) == ([], ["orders-2"])


def test_only_changed_partitions_are_listed() -> None:
    base = cluster_image(ORDERS)
    delta, image = advance(base, [PartitionChangeRecord(ORDERS_ID, 1, leader=1)])
    changes = local_changes(base, image, 1, delta)
    assert _names(changes.leaders) == ["orders-1"]
    assert changes.leaders[0].registration.leader_epoch == 1
    assert changes.followers == () and changes.deletes == ()
    assert local_changes(base, image, 3, delta).empty


def test_a_removed_topic_is_deleted_where_hosted() -> None:
    base = cluster_image(ORDERS, topic_records("events", EVENTS_ID, [(3,)]))
    delta, image = advance(base, [RemoveTopicRecord(ORDERS_ID)])
    changes = local_changes(base, image, 1, delta)
    assert changes.deletes == (("orders", 0), ("orders", 1))
    assert changes.leaders == () and changes.followers == ()
    assert local_changes(base, image, 3, delta).deletes == (("orders", 2),)


def test_a_replica_moved_away_is_deleted() -> None:
    base = cluster_image(ORDERS)
    delta, image = advance(base, [PartitionChangeRecord(ORDERS_ID, 0, replicas=(2, 3), leader=2)])
    assert local_changes(base, image, 1, delta).deletes == (("orders", 0),)
    assert _names(local_changes(base, image, 3, delta).followers) == ["orders-0"]


def test_without_a_delta_whole_images_are_compared() -> None:
    image = cluster_image(ORDERS)
    changes = local_changes(MetadataImage.EMPTY, image, 2, None)
    assert _names(changes.leaders) == ["orders-1", "orders-2"]
    assert _names(changes.followers) == ["orders-0"]
    assert local_changes(image, image, 2, None).empty
    gone = local_changes(image, cluster_image(), 2, None)
    assert gone.deletes == (("orders", 0), ("orders", 1), ("orders", 2))


def test_the_summary_counts_every_change_and_names_only_the_first_few() -> None:
    many = topic_records("many", EVENTS_ID, [(1, 2)] * 5 + [(2, 1)])
    base = cluster_image(ORDERS)
    delta, image = advance(base, [*many, RemoveTopicRecord(ORDERS_ID)])
    assert local_changes(base, image, 1, delta).summary() == (
        "lead 5 (many-0, many-1, many-2 and 2 more); follow 1 (many-5); "
        "delete 2 (orders-0, orders-1)"
    )
    assert local_changes(image, image, 1, None).summary() == ""
