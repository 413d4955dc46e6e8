"""What a call to a broker is the same for on both wires, gRPC (`broker_connection.py`) and the
data plane's frames (`data_connection.py`): what every BrokerService response offers, how its
header's whole-request error becomes a KafkaError (so both raise exactly the same errors for the
same answers), and how many calls of one connection may be in flight at once."""

from __future__ import annotations

from typing import Final, Protocol, Self, TypeVar

from pykraft.client.errors import error_for
from pykraft.proto import common_pb2

# Calls of one connection in flight at once: the producer's window
# (max.in.flight.requests.per.connection, 5) and its InitProducerId, the consumer's fetch and
# offset lookups. A call beyond it waits for one to end (its timeout counts from call_async).
CALLS_IN_FLIGHT_MAX: Final = 8


class BrokerResponse(Protocol):
    """What every BrokerService response offers: the header and protobuf's parser."""

    @property
    def header(self) -> common_pb2.ResponseHeader: ...

    @classmethod
    def FromString(cls, s: bytes) -> Self: ...


ResponseT = TypeVar("ResponseT", bound=BrokerResponse)


def raise_header_error(address: str, header: common_pb2.ResponseHeader) -> None:
    """Raises the KafkaError of a response header's error code, naming `address`; returns when
    the header says NONE."""
    if header.error_code != common_pb2.NONE:
        message = header.error_message or "the whole request failed"
        raise error_for(header.error_code, f"{address}: {message}")
