"""The admin API on brokers: every AdminService call is forwarded to the active controller.

So every admin command works with `--bootstrap-server` (any broker) as well as with
`--bootstrap-controller`, as Kafka's brokers forward admin requests to the controller (KIP-590).
The answer is the controller's own, errors included; when no controller can be reached the
broker answers NOT_CONTROLLER with no address, which clients treat as "retry elsewhere".
"""

from __future__ import annotations

from collections.abc import Callable

import grpc
from google.protobuf.message import Message

from pykraft.broker.controller_channel import ControllerCaller, ControllerUnavailableError
from pykraft.proto import admin_pb2, admin_pb2_grpc, common_pb2

# AdminService method -> its response type; a method missing here is not served by brokers.
FORWARDED: dict[str, type[Message]] = {
    "CreateTopics": admin_pb2.CreateTopicsResponse,
    "DeleteTopics": admin_pb2.DeleteTopicsResponse,
    "CreatePartitions": admin_pb2.CreatePartitionsResponse,
    "DescribeTopics": admin_pb2.DescribeTopicsResponse,
    "DescribeConfigs": admin_pb2.DescribeConfigsResponse,
    "IncrementalAlterConfigs": admin_pb2.AlterConfigsResponse,
    "DescribeCluster": admin_pb2.DescribeClusterResponse,
    "DescribeQuorum": admin_pb2.DescribeQuorumResponse,
    "ElectLeaders": admin_pb2.ElectLeadersResponse,
    "AddRaftVoter": admin_pb2.AddRaftVoterResponse,
    "RemoveRaftVoter": admin_pb2.RemoveRaftVoterResponse,
    "AlterPartitionReassignments": admin_pb2.AlterPartitionReassignmentsResponse,
    "ListPartitionReassignments": admin_pb2.ListPartitionReassignmentsResponse,
    "UnregisterBroker": admin_pb2.UnregisterBrokerResponse,
}


class AdminForwarder(admin_pb2_grpc.AdminServiceServicer):
    """Forwards each AdminService call through the broker's redirect-following caller."""

    def __init__(self, caller: ControllerCaller, *, timeout_ms: int) -> None:
        self._caller = caller
        self._timeout_s = timeout_ms / 1000

    def forward(self, method: str, request: Message) -> Message:
        response_type = FORWARDED[method]
        try:
            return self._caller.call(
                method,
                request,
                response_type,
                self._timeout_s,
                stub_class=admin_pb2_grpc.AdminServiceStub,
            )
        except ControllerUnavailableError as error:
            response = response_type()
            header = response.header  # type: ignore[attr-defined]
            header.error_code = common_pb2.NOT_CONTROLLER
            header.error_message = f"the broker reaches no active controller: {error}"
            header.controller_id = -1
            return response


def _forwarding(method: str) -> Callable[[AdminForwarder, Message, grpc.ServicerContext], Message]:
    def handler(self: AdminForwarder, request: Message, context: grpc.ServicerContext) -> Message:
        return self.forward(method, request)

    handler.__name__ = method
    return handler


for _method in FORWARDED:
    setattr(AdminForwarder, _method, _forwarding(_method))
