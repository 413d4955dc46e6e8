"""Every wire error code maps to its named class, with Kafka's retriable flag."""

from __future__ import annotations

import pickle
import re

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


def _error_classes() -> list[type[KafkaError]]:
    """Every error class defined in pykraft.client.errors."""
    return [
        value
        for value in vars(errors).values()
        if isinstance(value, type)
        and issubclass(value, KafkaError)
        and value.__module__ == errors.__name__
    ]


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda cls: cls.__name__)
def test_every_error_class_says_what_it_means_and_what_to_do(cls: type[KafkaError]) -> None:
    doc = cls.__dict__.get("__doc__") or ""
    assert len(doc.split()) >= 6, f"{cls.__name__} needs its own docstring"
    assert doc.rstrip().endswith((".", ")")), f"{cls.__name__}'s docstring is a sentence"


# A line of the module docstring's tree: box-drawing indent, a class name, maybe its code.
TREE_LINE = re.compile(r"^    (?P<indent>[│├└─ ]*)(?P<name>[A-Z]\w*Error)\b\s*(?P<code>-?\d+)?")


def _tree() -> list[tuple[str, str | None, int | None]]:
    """(class, parent, code) for each class the module docstring's tree draws."""
    assert errors.__doc__ is not None
    drawn: list[tuple[str, str | None, int | None]] = []
    parents: list[str] = []
    for line in errors.__doc__.splitlines():
        match = TREE_LINE.match(line)
        if match is None:
            continue
        depth = len(match["indent"]) // 4
        del parents[depth:]
        code = None if match["code"] is None else int(match["code"])
        drawn.append((match["name"], parents[-1] if parents else None, code))
        parents.append(match["name"])
    return drawn


def test_the_drawn_tree_is_the_class_tree() -> None:
    drawn = _tree()
    assert drawn[0] == ("KafkaError", None, None)
    for name, parent, code in drawn[1:]:
        cls = getattr(pykraft.client, name)
        assert [base.__name__ for base in cls.__bases__] == [parent], name
        if code is not None:
            assert cls.code == code, name


def test_the_tree_draws_every_error_class() -> None:
    drawn = {name for name, _, _ in _tree()}
    assert sorted(cls.__name__ for cls in _error_classes() if cls.__name__ not in drawn) == []
