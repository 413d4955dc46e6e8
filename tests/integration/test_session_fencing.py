"""Fencing on connection end (issue 17 §6): a broker killed with -9 is fenced as soon as its
BrokerSession stream to the active controller ends, not one session timeout later; a paused
broker keeps its connection and is fenced by the session timeout alone; a controller failover
fences nobody, and the new active controller fences on connection end too.

The session timeouts are long (60 s) where fencing must come from the stream's end, so the
tests wait on conditions with deadlines far below them instead of timing anything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.metadata_log.codec import decode_records
from pykraft.metadata_log.records import BrokerRegistrationChangeRecord, Record
from pykraft.proto import common_pb2, controller_pb2

from .cluster import (
    BROKER_IDS,
    batch_records,
    fetch_raw,
    make_broker,
    produce_raw,
    registrations,
    running_cluster,
    start_brokers,
)
from .controllers import Quorum, running_quorum
from .processes import BrokerProcess, wait_for

pytestmark = pytest.mark.integration

TOPIC = "sessions"
LONG_SESSION_MS = 60_000
# Far below LONG_SESSION_MS: fencing within this cannot be the session timeout's doing.
STREAM_FENCE_WAIT_S = 20
SHORT_SESSION_MS = 15_000
LONG_SESSION_ARGS = ("--broker-session-timeout-ms", str(LONG_SESSION_MS))


def _fenced(quorum: Quorum, broker_id: int) -> bool:
    registration = quorum.image().cluster.broker(broker_id)
    assert registration is not None
    return registration.fenced


def _records_after(quorum: Quorum, offset: int) -> list[Record]:
    """The committed metadata records after `offset`, from the active controller's log."""
    stub = quorum.controller_stub(quorum.wait_active().address)
    request = controller_pb2.MetadataFetchRequest(broker_id=-1, after_offset=offset, max_wait_ms=0)
    responses = list(stub.MetadataFetch(request, timeout=10))
    assert all(r.header.error_code == common_pb2.NONE for r in responses), responses[0].header
    assert not responses[0].HasField("snapshot"), "the log was compacted past the offset"
    batches = [batch for response in responses for batch in response.batches]
    return [record for batch in batches for record in decode_records(batch.records)]


def _stream_opened_since(broker: BrokerProcess, address: str, log_offset: int) -> bool:
    """Whether `broker` logged a session stream opening to `address` past `log_offset`."""
    with open(broker.log_path, "rb") as log:
        log.seek(log_offset)
        return f"session stream open to {address}".encode() in log.read()


def _session_brokers(tmp_path: Path, quorum: Quorum) -> dict[int, BrokerProcess]:
    brokers = {i: make_broker(tmp_path, quorum, i) for i in BROKER_IDS}
    for broker in brokers.values():
        broker.args += ["--session-timeout-ms", str(LONG_SESSION_MS)]
    return brokers


def test_killed_leader_is_fenced_on_connection_end_and_writes_go_on(tmp_path: Path) -> None:
    with running_cluster(
        tmp_path,
        topic=TOPIC,
        partitions=1,
        controller_args=LONG_SESSION_ARGS,
        broker_args=("--session-timeout-ms", str(LONG_SESSION_MS)),
    ) as (quorum, brokers):
        victim = registrations(quorum, TOPIC)[0].leader
        before = produce_raw(brokers[victim], TOPIC, 0, [b"a0", b"a1"], acks=-1)
        assert before.error_code == common_pb2.NONE, before.error_message
        brokers[victim].kill()
        wait_for(
            lambda: _fenced(quorum, victim) and registrations(quorum, TOPIC)[0].leader != victim,
            timeout_s=STREAM_FENCE_WAIT_S,
            what=f"broker {victim} fenced and partition 0 led elsewhere",
        )
        leader = brokers[registrations(quorum, TOPIC)[0].leader]

        def written() -> bool:
            result = produce_raw(leader, TOPIC, 0, [b"b0"], acks=-1)
            return result.error_code == common_pb2.NONE

        wait_for(written, timeout_s=STREAM_FENCE_WAIT_S, what="an acknowledged write after it")
        values = [r.value for r in batch_records(fetch_raw(leader, TOPIC, 0, 0).records)]
        assert values[:2] == [b"a0", b"a1"] and b"b0" in values[2:]


def test_paused_broker_is_fenced_by_the_session_timeout_only(tmp_path: Path) -> None:
    session_args = ("--broker-session-timeout-ms", str(SHORT_SESSION_MS))
    with running_quorum(tmp_path, extra_args=session_args) as quorum:
        brokers = {i: make_broker(tmp_path, quorum, i) for i in BROKER_IDS}
        try:
            start_brokers(quorum, brokers)
            brokers[1].pause()
            brokers[2].kill()
            wait_for(
                lambda: _fenced(quorum, 2), timeout_s=STREAM_FENCE_WAIT_S, what="killed 2 fenced"
            )
            # Paused before 2 was killed, 1 is still unfenced: its connection did not end.
            assert not _fenced(quorum, 1)
            wait_for(
                lambda: _fenced(quorum, 1),
                timeout_s=SHORT_SESSION_MS / 1000 + STREAM_FENCE_WAIT_S,
                what="paused 1 fenced by its session timeout",
            )
            brokers[1].resume()
            wait_for(lambda: not _fenced(quorum, 1), timeout_s=30, what="resumed 1 unfenced again")
        finally:
            for broker in brokers.values():
                broker.resume()
                broker.close()


def test_controller_failover_fences_nobody_and_the_new_one_fences_on_end(tmp_path: Path) -> None:
    with running_quorum(tmp_path, extra_args=LONG_SESSION_ARGS) as quorum:
        brokers = _session_brokers(tmp_path, quorum)
        try:
            start_brokers(quorum, brokers)
            offset = quorum.image().offset
            log_sizes = {i: b.log_path.stat().st_size for i, b in brokers.items()}
            first = quorum.wait_active()
            assert first.stop() == 0  # graceful: its server ends every stream
            first.start()
            second = quorum.wait_active()
            second.kill()  # abrupt
            third = quorum.wait_active()
            wait_for(
                lambda: all(
                    _stream_opened_since(b, third.address, log_sizes[i]) for i, b in brokers.items()
                ),
                timeout_s=30,
                what=f"every broker holding a stream to {third.address}",
            )
            fences = [
                record
                for record in _records_after(quorum, offset)
                if isinstance(record, BrokerRegistrationChangeRecord) and record.fenced
            ]
            assert fences == []
            brokers[3].kill()
            wait_for(
                lambda: _fenced(quorum, 3),
                timeout_s=STREAM_FENCE_WAIT_S,
                what="killed 3 fenced by the new active controller",
            )
        finally:
            for broker in brokers.values():
                broker.close()
