"""The server every role starts (`start_server`): bytes that are no request answer
INVALID_ARGUMENT with a sentence and the handler never runs (`RefuseUnparsableRequests`);
well-formed requests pass through, larger than gRPC's default 4 MiB both ways."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from pykraft.proto import admin_pb2, admin_pb2_grpc, controller_pb2, controller_pb2_grpc
from pykraft.server_common.grpc_server import open_peer_channel, start_server
from pykraft.server_common.self_serialized import SelfSerialized, SelfSerializedAnswers
from tests.ports import free_port

PATH = "/pykraft.AdminService/DescribeTopics"


class Topics(admin_pb2_grpc.AdminServiceServicer):
    def __init__(self) -> None:
        self.calls = 0

    def DescribeTopics(
        self, request: admin_pb2.DescribeTopicsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.DescribeTopicsResponse:
        self.calls += 1
        return admin_pb2.DescribeTopicsResponse(
            topics=[admin_pb2.TopicDescription(name=name) for name in request.names]
        )


@pytest.fixture
def served() -> Iterator[tuple[grpc.Channel, Topics]]:
    servicer = Topics()
    address = f"127.0.0.1:{free_port()}"
    server = start_server(
        address, 2, [(admin_pb2_grpc.add_AdminServiceServicer_to_server, servicer)]
    )
    channel = open_peer_channel(address)
    try:
        yield channel, servicer
    finally:
        channel.close()
        server.stop(grace=None)


def _raw(channel: grpc.Channel, payload: bytes) -> bytes:
    call = channel.unary_unary(PATH, request_serializer=None, response_deserializer=None)
    answer = call(payload, timeout=5)
    assert isinstance(answer, bytes)
    return answer


@pytest.mark.parametrize("payload", [b"\x00", b"\x0a\x05ab", b"\x0a\x02\xff\xfe", b"\xff" * 11])
def test_bytes_that_do_not_parse_are_invalid_argument(
    served: tuple[grpc.Channel, Topics], payload: bytes
) -> None:
    channel, servicer = served
    with pytest.raises(grpc.RpcError) as raised:
        _raw(channel, payload)
    error = raised.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = str(error.details())
    assert "DescribeTopics" in details
    assert "not a valid protobuf message" in details
    assert servicer.calls == 0


def test_well_formed_requests_reach_the_handler(served: tuple[grpc.Channel, Topics]) -> None:
    channel, servicer = served
    request = admin_pb2.DescribeTopicsRequest(names=["a", "b"])
    for _ in range(2):  # the second call takes the cached wrapper
        answer = admin_pb2.DescribeTopicsResponse.FromString(
            _raw(channel, request.SerializeToString())
        )
        assert [t.name for t in answer.topics] == ["a", "b"]
    assert servicer.calls == 2


def test_messages_larger_than_grpc_default_pass_both_ways(
    served: tuple[grpc.Channel, Topics],
) -> None:
    channel, _ = served
    names = [f"{index:08d}" + "x" * 1000 for index in range(6000)]  # about 6 MiB
    request = admin_pb2.DescribeTopicsRequest(names=names)
    answer = admin_pb2.DescribeTopicsResponse.FromString(_raw(channel, request.SerializeToString()))
    assert [t.name for t in answer.topics] == names


class Sessions(controller_pb2_grpc.ControllerServiceServicer):
    """A server-streaming method: the interceptors wrap it too."""

    def __init__(self) -> None:
        self.calls = 0

    def BrokerSession(
        self, request: controller_pb2.BrokerSessionRequest, context: grpc.ServicerContext
    ) -> Iterator[controller_pb2.BrokerSessionResponse]:
        self.calls += 1
        yield controller_pb2.BrokerSessionResponse()


def test_a_stream_refuses_bytes_that_do_not_parse_and_serves_good_ones() -> None:
    servicer = Sessions()
    address = f"127.0.0.1:{free_port()}"
    add = controller_pb2_grpc.add_ControllerServiceServicer_to_server
    server = start_server(address, 2, [(add, servicer)])
    channel = open_peer_channel(address)
    try:
        method = channel.unary_stream(
            "/pykraft.ControllerService/BrokerSession",
            request_serializer=None,
            response_deserializer=None,
        )
        with pytest.raises(grpc.RpcError) as raised:
            list(method(b"\xff" * 11, timeout=5))
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "BrokerSession" in str(raised.value.details())
        assert servicer.calls == 0
        good = controller_pb2.BrokerSessionRequest(broker_id=1).SerializeToString()
        assert len(list(method(good, timeout=5))) == 1
        assert servicer.calls == 1
    finally:
        channel.close()
        server.stop(grace=None)


def test_an_answer_may_serialize_itself() -> None:
    """SelfSerializedAnswers: gRPC sends a SelfSerialized answer's own bytes, and serializes
    any other answer as the method's serializer does."""

    class Own(SelfSerialized):
        def serialize(self) -> bytes:
            return b"own bytes"

    handler = grpc.unary_unary_rpc_method_handler(
        lambda request, context: None,
        request_deserializer=bytes,
        response_serializer=lambda answer: b"serialized " + answer,
    )
    wrapped = SelfSerializedAnswers().wrap("/pykraft.Test/Method", handler)
    serializer = wrapped.response_serializer
    assert serializer is not None
    assert serializer(Own()) == b"own bytes"
    assert serializer(b"answer") == b"serialized answer"
