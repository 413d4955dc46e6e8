"""A broker told to stop answers its open acks=all waits before its listener closes (issue 12
§2.3): the producer learns NOT_LEADER_OR_FOLLOWER and retries on the new leader, instead of a
cancelled call whose outcome it cannot know."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import grpc
import pytest

from pykraft.proto import broker_pb2, common_pb2
from pykraft.proto.record_batch import build_batch
from tests.integration.cluster import BROKER_IDS, registrations, running_cluster
from tests.integration.processes import wait_for

pytestmark = pytest.mark.integration

TOPIC = "shutdown"


def _signal_all(pids: list[int], signum: signal.Signals) -> None:
    for pid in pids:
        os.kill(pid, signum)


def test_an_open_acks_all_wait_ends_not_leader_when_the_broker_stops(tmp_path: Path) -> None:
    """The followers are paused, so the append cannot be replicated, and the controllers are
    paused, so the controlled shutdown cannot finish: the broker stops with the wait open."""
    with running_cluster(tmp_path, topic=TOPIC, partitions=1) as (quorum, brokers):
        leader_id = registrations(quorum, TOPIC)[0].leader
        leader = brokers[leader_id]
        paused = [brokers[b].process.pid for b in BROKER_IDS if b != leader_id]  # type: ignore[union-attr]
        paused += [c.process.pid for c in quorum.controllers]  # type: ignore[union-attr]
        request = broker_pb2.ProduceRequest(
            acks=-1,
            timeout_ms=120_000,
            topics=[
                broker_pb2.ProduceTopic(
                    topic=TOPIC,
                    partitions=[
                        broker_pb2.ProducePartition(
                            partition=0, records=build_batch([(0, None, b"x")])
                        )
                    ],
                )
            ],
        )
        answers: list[broker_pb2.ProduceResponse | grpc.RpcError] = []

        def produce() -> None:
            try:
                answers.append(leader.stub().Produce(request, timeout=120))
            except grpc.RpcError as error:
                answers.append(error)

        segment = leader.data_dir / f"{TOPIC}-0" / f"{0:020d}.log"
        _signal_all(paused, signal.SIGSTOP)
        try:
            producer = threading.Thread(target=produce)
            producer.start()
            wait_for(lambda: segment.stat().st_size > 0, timeout_s=10, what="the append")
            assert producer.is_alive(), answers  # waiting for the paused followers
            assert leader.stop(timeout_s=60) == 0
            producer.join(timeout=10)
        finally:
            _signal_all(paused, signal.SIGCONT)
        (answer,) = answers
        assert isinstance(answer, broker_pb2.ProduceResponse), answer
        result = answer.topics[0].partitions[0]
        assert result.error_code == common_pb2.NOT_LEADER_OR_FOLLOWER, result
