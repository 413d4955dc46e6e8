"""Every API key and version the Kafka listener advertises, fuzzed through the dispatch layer
with a broker's real services in one process (issue 14): each request, drawn from kio's classes
(`requests.py`), is decoded as the listener decodes it (to the request sent) and answered on a
worker thread; the answer must come within HANG_S and be acceptable (`answers.py`), never an
exception. The lenient reader's copy of each body (what the codec reads when kio refuses a
frame) must be the body kio wrote, with the unknown tags left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import pytest
from hypothesis import given

from pykraft.broker.kafka.lenient_read import readable_copy

from .answers import SENT, answer_problems, api_name, fuzzing
from .requests import KafkaRequest, requests
from .unit_world import ADVERTISED, VOCABULARY, UnitWorld, unit_world

EXAMPLES: Final = 20  # per API version; `make test` runs 118 versions
PRODUCE_KEY: Final = 0

# A failing example's repr may be large (a 32 KiB name): hypothesis warns, which is no failure.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UnitWorld]:
    with unit_world(tmp_path_factory.mktemp("kafka-dispatch")) as world:
        yield world


@pytest.mark.parametrize(
    ("key", "version"), ADVERTISED, ids=[api_name(key, v) for key, v in ADVERTISED]
)
def test_every_request_gets_a_well_formed_answer(world: UnitWorld, key: int, version: int) -> None:
    @fuzzing(EXAMPLES)
    @given(request=requests(key, version, VOCABULARY))
    def send(request: KafkaRequest) -> None:
        SENT[f"{api_name(key, version)} @dispatch"] += 1
        plain = request.body_bytes()
        for sent in (plain, request.body_bytes(tagged=True)):
            assert readable_copy(type(request.body), sent, 0) == (plain, len(sent))
        payload = world.answer(request)
        if payload is None:
            assert key == PRODUCE_KEY and request.body.acks == 0, "no answer"
            return
        found = answer_problems(request.api, request.correlation_id, payload)
        assert not found, found

    send()
