"""The fuzz suite covers every RPC: a method added to a .proto without a fuzzer fails here
(no cluster needed)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pykraft.proto import admin_pb2, broker_pb2, controller_pb2, group_pb2

from .harness import NODE_SERVICES, all_rpcs, node_rpcs, services
from .requests import EXAMPLE_FACTS, fuzzers


def test_every_rpc_has_a_fuzzer() -> None:
    names = {rpc.name for rpc in all_rpcs()}
    registered = set(fuzzers(EXAMPLE_FACTS))
    assert names - registered == set(), f"RPCs without a fuzzer: {sorted(names - registered)}"
    assert registered - names == set(), f"fuzzers of no RPC: {sorted(registered - names)}"


def test_every_service_is_fuzzed_on_a_node_that_serves_it() -> None:
    served = {service for kinds in NODE_SERVICES.values() for service in kinds}
    assert {service.name for service in services()} == served
    assert len(node_rpcs("controller")) == len(
        admin_pb2.DESCRIPTOR.services_by_name["AdminService"].methods
    ) + len(controller_pb2.DESCRIPTOR.services_by_name["ControllerService"].methods)
    assert len(node_rpcs("broker")) == len(
        broker_pb2.DESCRIPTOR.services_by_name["BrokerService"].methods
    ) + len(admin_pb2.DESCRIPTOR.services_by_name["AdminService"].methods)
    assert group_pb2.DESCRIPTOR.services_by_name == {}  # its RPCs live on BrokerService


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_fuzzer_draws_requests_of_its_rpc(data: st.DataObject) -> None:
    table = fuzzers(EXAMPLE_FACTS)
    for rpc in all_rpcs():
        request = data.draw(table[rpc.name].requests, label=rpc.name)
        assert request.DESCRIPTOR.full_name == rpc.request.full_name
        assert len(request.SerializeToString()) < 8 * 1024 * 1024
