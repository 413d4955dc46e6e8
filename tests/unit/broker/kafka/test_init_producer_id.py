"""InitProducerId (key 22) through kio's codec, with the broker's allocator over a fake
controller: fresh ids for idempotent producers, epoch bumps as Kafka answers them, refusals."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from pykraft.broker.kafka.apis.init_producer_id import APIS
from pykraft.broker.kafka.entities import build

from ..replica_harness import Harness
from ..test_producer_ids import FakeController
from .data_path_calls import call, services
from .kio_wire import request_types

INIT = APIS[0]


def _request(
    version: int, *, transactional_id: str | None = None, held: tuple[int, int] = (-1, -1)
) -> Any:
    return build(
        request_types(22, version).InitProducerIdRequest,
        transactional_id=transactional_id,
        transaction_timeout=datetime.timedelta(minutes=1),
        producer_id=held[0],
        producer_epoch=held[1],
    )


def _answer(response: Any) -> tuple[ErrorCode, int, int]:
    return response.error_code, response.producer_id, response.producer_epoch


@pytest.mark.parametrize("version", range(5))
def test_idempotent_producers_get_fresh_ids(harness: Harness, tmp_path: Path, version: int) -> None:
    kafka = services(harness.manager, tmp_path)
    assert _answer(call(INIT, kafka, version, _request(version))) == (ErrorCode.none, 1000, 0)
    assert _answer(call(INIT, kafka, version, _request(version))) == (ErrorCode.none, 1001, 0)


@pytest.mark.parametrize("version", [3, 4])
def test_an_epoch_bump_is_a_new_id_as_kafka_gives_idempotent_producers(
    harness: Harness, tmp_path: Path, version: int
) -> None:
    kafka = services(harness.manager, tmp_path)
    first = call(INIT, kafka, version, _request(version))
    bumped = call(INIT, kafka, version, _request(version, held=(first.producer_id, 0)))
    assert _answer(bumped) == (ErrorCode.none, 1001, 0)


@pytest.mark.parametrize(
    ("version", "arguments", "code"),
    [(0, {"transactional_id": "tx-1"}, ErrorCode.transactional_id_authorization_failed),
     (4, {"transactional_id": "tx-1"}, ErrorCode.transactional_id_authorization_failed),
     (3, {"held": (1000, -1)}, ErrorCode.invalid_request),
     (4, {"held": (-1, 0)}, ErrorCode.invalid_request)],
)  # fmt: skip
def test_refusals(
    harness: Harness, tmp_path: Path, version: int, arguments: dict[str, Any], code: ErrorCode
) -> None:
    controller = FakeController()
    kafka = services(harness.manager, tmp_path, controller=controller)
    assert _answer(call(INIT, kafka, version, _request(version, **arguments))) == (code, -1, -1)
    assert controller.requests == []  # no id was spent


@pytest.mark.parametrize(("unreachable", "may_serve"), [(True, True), (False, False)])
def test_no_id_to_give_is_retriable(
    harness: Harness, tmp_path: Path, unreachable: bool, may_serve: bool
) -> None:
    controller = FakeController()
    controller.unreachable = unreachable
    kafka = services(harness.manager, tmp_path, controller=controller, may_serve=may_serve)
    response = call(INIT, kafka, 4, _request(4))
    assert _answer(response) == (ErrorCode.coordinator_not_available, -1, -1)
    assert response.error_code.retriable
