"""Every wire error code maps to its named class, with Kafka's retriable flag."""

from __future__ import annotations

import pickle

import pytest

import pykraft.client
from pykraft.client import errors
from pykraft.client.errors import (
    KafkaConnectionError,
    KafkaError,
    NetworkError,
    NotControllerError,
    TopicAlreadyExistsError,
    error_for,
    raise_for,
)
from pykraft.proto.common_pb2 import ErrorCode

ERROR_CODES = [(name, code) for name, code in ErrorCode.items() if code != ErrorCode.NONE]


@pytest.mark.parametrize(("name", "code"), ERROR_CODES)
def test_every_proto_code_has_a_named_class(name: str, code: int) -> None:
    error = error_for(code, "details")
    assert type(error) is not KafkaError, f"{name} falls back to the generic class"
    assert (error.code, error.name, error.message) == (code, name, "details")
    assert str(error) == f"{name}: details"
    assert type(error).__name__ in pykraft.client.__all__


RETRIABLE = {
    "NOT_CONTROLLER": True,
    "REQUEST_TIMED_OUT": True,
    "UNKNOWN_TOPIC_OR_PARTITION": True,
    "LEADER_NOT_AVAILABLE": True,
    "NOT_LEADER_OR_FOLLOWER": True,
    "FENCED_LEADER_EPOCH": True,
    "UNKNOWN_LEADER_EPOCH": True,
    "NOT_ENOUGH_REPLICAS": True,
    "CORRUPT_MESSAGE": True,
    "UNKNOWN_TOPIC_ID": True,
    "UNKNOWN_SERVER_ERROR": False,
    "BROKER_NOT_AVAILABLE": False,
    "TOPIC_ALREADY_EXISTS": False,
    "INVALID_PARTITIONS": False,
    "INVALID_REPLICATION_FACTOR": False,
    "INVALID_CONFIG": False,
    "POLICY_VIOLATION": False,
    "STALE_BROKER_EPOCH": False,
    "BROKER_ID_NOT_REGISTERED": False,
    "OFFSET_OUT_OF_RANGE": False,
}


@pytest.mark.parametrize(("name", "retriable"), sorted(RETRIABLE.items()))
def test_retriable_flags_follow_kafka(name: str, retriable: bool) -> None:
    error = error_for(ErrorCode.Value(name))
    assert error.retriable is retriable
    assert isinstance(error, errors.RetriableError) is retriable


def test_well_known_codes_give_the_documented_classes() -> None:
    assert isinstance(error_for(ErrorCode.TOPIC_ALREADY_EXISTS), TopicAlreadyExistsError)
    assert isinstance(error_for(ErrorCode.NOT_CONTROLLER), NotControllerError)
    assert isinstance(error_for(ErrorCode.UNKNOWN_SERVER_ERROR), errors.UnknownServerError)
    assert isinstance(error_for(ErrorCode.NOT_LEADER_OR_FOLLOWER), errors.InvalidMetadataError)


def test_unknown_code_gives_a_generic_non_retriable_error() -> None:
    error = error_for(9999, "from the future")
    assert type(error) is KafkaError
    assert (error.code, error.name, error.retriable) == (9999, "UNKNOWN_ERROR_CODE_9999", False)
    assert str(error) == "UNKNOWN_ERROR_CODE_9999: from the future"


def test_none_is_not_an_error() -> None:
    with pytest.raises(ValueError, match="NONE"):
        error_for(ErrorCode.NONE)
    raise_for(ErrorCode.NONE, "ignored")  # returns quietly
    with pytest.raises(NotControllerError, match="try elsewhere"):
        raise_for(ErrorCode.NOT_CONTROLLER, "try elsewhere")


def test_connection_error_is_a_retriable_network_error() -> None:
    error = KafkaConnectionError("cannot reach 127.0.0.1:1")
    assert isinstance(error, NetworkError) and error.retriable
    assert (error.code, error.name) == (ErrorCode.NETWORK_EXCEPTION, "NETWORK_EXCEPTION")
    assert type(error_for(ErrorCode.NETWORK_EXCEPTION)) is NetworkError


@pytest.mark.parametrize(
    "error",
    [TopicAlreadyExistsError("t exists"), KafkaError("odd", code=4242), KafkaConnectionError("x")],
)
def test_errors_survive_pickling(error: KafkaError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert (copy.code, copy.name, copy.message) == (error.code, error.name, error.message)
