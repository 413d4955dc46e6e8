"""Bad input never hurts (issue 12 §4): every RPC of every service, on real nodes, gets
hypothesis-made malformed requests and random bytes. Each answer is an error code with a
sentence or a clear gRPC status (never UNKNOWN or INTERNAL, never a hang), the nodes keep
serving, and after each RPC's batch the metadata image, the log offsets, the groups and the
committed offsets are what they were.

`PYKRAFT_FUZZ_EXAMPLES` (default 60) sets the examples per RPC and test; runs are
derandomized unless `PYKRAFT_FUZZ_SEED` is set. The requests sent per RPC are printed at the
end of the session.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from google.protobuf.message import Message
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from pykraft.proto import common_pb2, controller_pb2

from .cluster_state import FuzzCluster, fuzz_cluster
from .conftest import SEED_VARIABLE
from .harness import NODE_SERVICES, Rpc, accepted_items, call_raw, node_rpcs, problems
from .requests import fuzzers

pytestmark = pytest.mark.integration

EXAMPLES = int(os.environ.get("PYKRAFT_FUZZ_EXAMPLES", "60"))
SEED = os.environ.get(SEED_VARIABLE)
BROKER_IDS = st.sampled_from((1, 2, 3))
CASES = [(kind, rpc) for kind in NODE_SERVICES for rpc in node_rpcs(kind)]
IDS = [f"{rpc.name}@{kind}" for kind, rpc in CASES]

F = TypeVar("F", bound=Callable[..., Any])


def fuzzing(test: F) -> F:
    """Bounded and reproducible: a fixed number of examples, no per-example deadline."""
    configured = settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=SEED is None,
        database=None,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
    )(test)
    return seed(int(SEED))(configured) if SEED is not None else configured


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzCluster]:
    with fuzz_cluster(Path(tmp_path_factory.mktemp("fuzz"))) as running:
        yield running


@pytest.mark.parametrize(("node", "rpc"), CASES, ids=IDS)
def test_malformed_requests_are_refused_and_change_nothing(
    cluster: FuzzCluster, node: str, rpc: Rpc
) -> None:
    fuzz = fuzzers(cluster.facts)[rpc.name]

    @fuzzing
    @given(request=fuzz.requests, broker_id=BROKER_IDS)
    def send(request: Message, broker_id: int) -> None:
        channel = cluster.channel(node, rpc, request, broker_id)
        outcome = call_raw(channel, rpc, request.SerializeToString(), node)
        found = problems(outcome)
        assert not found, f"{rpc.name} on {node}: {found}"
        if fuzz.refused(request):
            taken = accepted_items(outcome)
            assert not taken, f"{rpc.name} on {node} took an invalid request: {taken}"

    send()
    cluster.assert_healthy()
    cluster.assert_unchanged()


@st.composite
def _mangled(draw: st.DrawFn, requests: st.SearchStrategy[Message]) -> bytes:
    """A request's bytes truncated, bit-flipped or extended with garbage."""
    data = bytearray(draw(requests).SerializeToString())
    how = draw(st.sampled_from(("truncate", "flip", "extend")))
    if how == "truncate" and data:
        return bytes(data[: draw(st.integers(0, len(data) - 1))])
    if how == "flip" and data:
        position = draw(st.integers(0, len(data) - 1))
        data[position] ^= draw(st.integers(1, 255))
        return bytes(data)
    return bytes(data) + draw(st.binary(min_size=1, max_size=16))


@pytest.mark.parametrize(("node", "rpc"), CASES, ids=IDS)
def test_random_bytes_get_a_clear_answer(cluster: FuzzCluster, node: str, rpc: Rpc) -> None:
    requests = fuzzers(cluster.facts)[rpc.name].requests
    payloads = st.one_of(st.binary(max_size=256), _mangled(requests))

    @fuzzing
    @given(payload=payloads, broker_id=BROKER_IDS)
    def send(payload: bytes, broker_id: int) -> None:
        channel = cluster.channel(node, rpc, None, broker_id)
        outcome = call_raw(channel, rpc, payload, node)
        found = problems(outcome)
        assert not found, f"{rpc.name} on {node} given {payload!r}: {found}"

    send()
    cluster.assert_healthy()
    cluster.assert_unchanged()


# ---- what the fuzzing found, pinned down ----


def test_metadata_fetch_past_the_log_end_without_a_wait_answers_at_once(
    cluster: FuzzCluster,
) -> None:
    """max_wait_ms 0 asks for no long poll; the controller parked such a fetch for its whole
    request timeout (30 s) whenever after_offset was at or past its log end."""
    stub = cluster.quorum.controller_stub(cluster.quorum.wait_active().address)
    ask = controller_pb2.MetadataFetchRequest(broker_id=-1, after_offset=-1, max_wait_ms=0)
    high_watermark = list(stub.MetadataFetch(ask, timeout=10))[-1].high_watermark
    for after_offset in (high_watermark, high_watermark + 42, 2**62):
        ask = controller_pb2.MetadataFetchRequest(
            broker_id=-1, after_offset=after_offset, max_wait_ms=0
        )
        started = time.monotonic()
        (answer,) = stub.MetadataFetch(ask, timeout=10)
        assert time.monotonic() - started < 2, f"after_offset {after_offset} waited"
        assert answer.header.error_code == common_pb2.NONE, answer.header
        assert not answer.batches
        assert answer.high_watermark >= high_watermark
