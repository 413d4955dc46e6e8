"""Replication policies: remote topic names, cycles and the mirror's own topics (MM2's
DefaultReplicationPolicy and IdentityReplicationPolicy)."""

from __future__ import annotations

from pykraft.mirror.policy import ReplicationPolicy


def test_default_policy_prefixes_the_source_alias() -> None:
    policy = ReplicationPolicy("east")
    assert policy.remote_topic("orders") == "east.orders"
    assert policy.topic_source("east.orders") == "east"
    assert policy.topic_source("orders") is None
    assert policy.offset_syncs_topic() == "mm2-offset-syncs.east.internal"
    assert policy.checkpoints_topic() == "east.checkpoints.internal"


def test_a_topic_is_never_mirrored_back_to_a_cluster_it_came_from() -> None:
    policy = ReplicationPolicy("east")
    assert policy.is_cycle("west.orders", "west")
    assert policy.is_cycle("north.west.orders", "west")  # two hops away
    assert not policy.is_cycle("north.orders", "west")
    assert not policy.is_cycle("orders", "west")


def test_the_separator_is_configurable() -> None:
    policy = ReplicationPolicy("east", "_")
    assert policy.remote_topic("a.b") == "east_a.b"
    assert policy.topic_source("west_a.b") == "west"
    assert policy.checkpoints_topic() == "east_checkpoints_internal"


def test_identity_policy_keeps_names_and_sees_no_cycles() -> None:
    policy = ReplicationPolicy("east", identity=True)
    assert policy.remote_topic("orders") == "orders"
    assert policy.topic_source("west.orders") is None
    assert not policy.is_cycle("west.orders", "west")
    assert policy.offset_syncs_topic() == "mm2-offset-syncs.east.internal"
