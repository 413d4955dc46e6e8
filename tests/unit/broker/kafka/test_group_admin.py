"""ListGroups, DescribeGroups and DeleteGroups over Kafka's protocol, through kio's codec, on
the real GroupHandlers and shard."""

from __future__ import annotations

import io

import pytest
from kio.schema.consumer_protocol_assignment.v0.data import ConsumerProtocolAssignment
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from pykraft.broker.kafka.apis.group_admin import APIS
from tests.unit.broker.kafka import classic_calls
from tests.unit.broker.kafka.group_harness import GroupWorld, call

LIST, DESCRIBE, DELETE = APIS


@pytest.mark.parametrize("version", range(LIST.version_min, LIST.version_max + 1))
def test_list_groups_at_every_version(version: int) -> None:
    world = GroupWorld()
    world.join_consumer_member("a", "m1")
    answer = call(LIST, version, world.services(), states_filter=())
    assert answer.error_code == ErrorCode.none
    assert [(g.group_id, g.protocol_type) for g in answer.groups] == [("a", "consumer")]
    if version >= 4:
        assert answer.groups[0].group_state in ("Assigning", "Reconciling", "Stable")
        assert call(LIST, version, world.services(), states_filter=("Empty",)).groups == ()


def test_list_groups_of_a_fenced_broker() -> None:
    answer = call(LIST, 4, GroupWorld(serving=False).services(), states_filter=())
    assert answer.error_code == ErrorCode.coordinator_not_available


@pytest.mark.parametrize("version", range(DESCRIBE.version_min, DESCRIBE.version_max + 1))
def test_describe_groups_at_every_version(version: int) -> None:
    world = GroupWorld()
    world.join_consumer_member("a", "m1")
    answer = call(
        DESCRIBE,
        version,
        world.services(),
        groups=("a", "nope"),
        include_authorized_operations=False,
    )
    described, missing = answer.groups
    assert (described.error_code, described.protocol_type) == (ErrorCode.none, "consumer")
    assert [m.member_id for m in described.members] == ["m1"]
    data = described.members[0].member_assignment
    assert data[:2] == b"\x00\x00"
    assignment, _ = entity_reader(ConsumerProtocolAssignment)(io.BytesIO(data[2:]).read(), 0)
    assert {(t.topic, p) for t in assignment.assigned_partitions for p in t.partitions} == {
        ("orders", 0),
        ("orders", 1),
        ("orders", 2),
    }
    assert (missing.error_code, missing.group_state, missing.members) == (
        ErrorCode.none,
        "Dead",
        (),
    )


@pytest.mark.parametrize("version", range(DELETE.version_min, DELETE.version_max + 1))
def test_delete_groups_at_every_version(version: int) -> None:
    world = GroupWorld()
    world.join_consumer_member("busy", "m1")
    answer = call(DELETE, version, world.services(), groups_names=("busy", "nope"))
    assert [(r.group_id, r.error_code) for r in answer.results] == [
        ("busy", ErrorCode.non_empty_group),
        ("nope", ErrorCode.group_id_not_found),
    ]


@pytest.mark.parametrize("version", range(DESCRIBE.version_min, DESCRIBE.version_max + 1))
def test_describe_groups_shows_a_classic_group_as_kafka_does(version: int) -> None:
    """Its state by Kafka's name, protocol type, and every member with its client and
    assignment; the protocol and each member's metadata once the group is Stable."""
    services = GroupWorld().services()
    a = classic_calls.join(services, 5, instance_id="host-1").member_id
    joining = classic_calls.describe(services, version)
    assert (joining.error_code, joining.group_state) == (ErrorCode.none, "CompletingRebalance")
    assert (joining.protocol_type, joining.protocol_data) == ("consumer", "")
    assert [(m.member_id, m.member_metadata) for m in joining.members] == [(a, b"")]
    classic_calls.sync(services, 3, a, 1, {a: b"A"}, "host-1")
    stable = classic_calls.describe(services, version)
    assert (stable.group_id, stable.group_state) == ("g", "Stable")
    assert (stable.protocol_type, stable.protocol_data) == ("consumer", "range")
    (member,) = stable.members
    assert (member.member_id, member.client_id, member.client_host) == (
        a,
        "test-client",
        "/127.0.0.1",
    )
    if version >= 4:
        assert member.group_instance_id == "host-1"
    assert (member.member_metadata, member.member_assignment) == (b"sub-range", b"A")
    listed = call(LIST, 4, services, states_filter=("Stable",))
    assert [(g.group_id, g.protocol_type, g.group_state) for g in listed.groups] == [
        ("g", "consumer", "Stable")
    ]
