"""ListGroups, DescribeGroups and DeleteGroups over Kafka's protocol, through kio's codec, on
the real GroupHandlers and shard."""

from __future__ import annotations

import io

import pytest
from kio.schema.consumer_protocol_assignment.v0.data import ConsumerProtocolAssignment
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from pykraft.broker.kafka.apis.group_admin import APIS
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
