"""What one large CreateTopics costs the controllers' threads, in process, by broker count.

A `ControllerCore` (the active controller, its Raft log played by this bench as the unit tests
play it) holds an image of `--partitions` partitions over `--brokers` registered brokers (each
count in turn) and is fed CreateTopics of `--topics-per-request` topics of 100 partitions (RF 3),
the requests `bench/metadata_scale.py` sends. For each it prints the CPU time (process time, the
collector's long-lived objects frozen first, as the servers do) of:
- the turn that decides it: placement, records, their encoding and the pending image's replay;
- its commit on the active controller (the state machine applies the batch it remembers);
- its apply on a follower (decode and replay, in a second state machine).
Raft must run between turns: the followers' election timeout is 300 ms, so none of these may
come near it on a loaded machine.

`--code DIR` (bench/source_tree.py; repeatable) measures each tree in a child process, the
trees alternating by round. Run:
`.venv/bin/python bench/create_decision.py --brokers 3,30,300 --code /tmp/main-tree --code .`
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.source_tree import SourceTree, add_code_argument, in_round_order, trees_of
from pykraft.metadata_log.records import Endpoint, RegisterBrokerRecord
from pykraft.proto import admin_pb2, common_pb2
from pykraft.quorum.config import ControllerConfig
from pykraft.quorum.controller import topics
from pykraft.quorum.controller.result import ControllerResult
from pykraft.quorum.controller_core import ControllerCore
from pykraft.quorum.events import AppendDone, Event, RaftPolled, WriteRequest
from pykraft.quorum.raft import RaftStatus
from pykraft.quorum.state_machine import MetadataStateMachine

PARTITIONS_PER_TOPIC = 100
STEPS = ("decide turn", "commit, active", "apply, follower")


class _Quorum:
    """An active controller with `broker_count` registered brokers, and a follower's state
    machine applying what it commits."""

    def __init__(self, broker_count: int) -> None:
        config = ControllerConfig(
            node_id=1, voters={1: "-"}, controller_listeners={1: "-"}, data_dir=Path("-")
        )
        ids = itertools.count(1)
        self.core = ControllerCore(config, new_id=lambda: uuid.UUID(int=next(ids)))
        self.follower = MetadataStateMachine(tail_records_max=config.metadata_tail_records_max)
        self.commit(RaftPolled(RaftStatus(1, 1, 1, True, 0, 0, 0, ())))
        registrations = tuple(
            RegisterBrokerRecord(
                b,
                uuid.UUID(int=b + 1),
                100 + b,
                (Endpoint("PLAINTEXT", f"b{b}", 9092),),
                fenced=False,
            )
            for b in range(broker_count)
        )
        result = ControllerResult(registrations, common_pb2.ResponseHeader())
        self.commit(WriteRequest(0, common_pb2.ResponseHeader, 10**9, lambda ctx: result))

    def commit(self, event: Event) -> tuple[float, ...]:
        """Steps `event`, commits its one append and applies it on the follower: the seconds
        of each of STEPS."""
        started = time.process_time()
        (append,) = self.core.step(event, 0).appends
        decided = time.process_time()
        result = self.core.state.apply(append.payload)
        self.core.step(AppendDone(append.append_id, result, None), 0)
        committed = time.process_time()
        self.follower.apply(append.payload)
        return (decided - started, committed - decided, time.process_time() - committed)


def _create(number: int, per_request: int) -> WriteRequest:
    """The `number`th CreateTopics of `per_request` new topics."""
    request = admin_pb2.CreateTopicsRequest(
        topics=[
            admin_pb2.CreatableTopic(
                name=f"t{number}-{k}", num_partitions=PARTITIONS_PER_TOPIC, replication_factor=3
            )
            for k in range(per_request)
        ]
    )
    return WriteRequest(
        number,
        admin_pb2.CreateTopicsResponse,
        10**9,
        lambda ctx: topics.create_topics(ctx.image, request, new_topic_id=ctx.new_topic_id),
    )


def _measure(
    partition_count: int, broker_count: int, per_request: int, rounds: int
) -> dict[str, list[float]]:
    """Milliseconds of each of STEPS for `rounds` CreateTopics after an image of
    `partition_count` partitions, in this process."""
    quorum = _Quorum(broker_count)
    gc.disable()  # the image is built as the servers build theirs: collector off, then frozen
    for number in range(1, 1 + partition_count // (per_request * PARTITIONS_PER_TOPIC)):
        quorum.commit(_create(number, per_request))
    gc.freeze()
    gc.enable()
    times: dict[str, list[float]] = {step: [] for step in STEPS}
    for number in range(-rounds, 0):
        for step, seconds in zip(STEPS, quorum.commit(_create(number, per_request)), strict=True):
            times[step].append(seconds * 1000)
    return times


def _run_child(
    tree: SourceTree, args: argparse.Namespace, broker_count: int
) -> dict[str, list[float]]:
    command = [
        sys.executable,
        __file__,
        "--child",
        "--partitions",
        str(args.partitions),
        "--brokers",
        str(broker_count),
        "--topics-per-request",
        str(args.topics_per_request),
        "--rounds",
        str(args.rounds),
    ]
    child = subprocess.run(
        command, env=tree.env(os.environ), capture_output=True, text=True, check=True
    )
    measured: dict[str, list[float]] = json.loads(child.stdout)
    return measured


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000, help="the image's size first")
    parser.add_argument("--brokers", default="3,30,300", help="comma-separated broker counts")
    parser.add_argument("--topics-per-request", type=int, default=90)
    parser.add_argument("--rounds", type=int, default=10, help="CreateTopics measured per run")
    parser.add_argument("--runs", type=int, default=2, help="child processes per tree and count")
    add_code_argument(parser)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(
            json.dumps(
                _measure(args.partitions, int(args.brokers), args.topics_per_request, args.rounds)
            )
        )
        return 0
    trees = trees_of(args)
    for broker_count in (int(count) for count in args.brokers.split(",")):
        results: dict[str, dict[str, list[float]]] = {
            t.label: {s: [] for s in STEPS} for t in trees
        }
        for number in range(args.runs):
            for tree in in_round_order(trees, number):
                for step, values in _run_child(tree, args, broker_count).items():
                    results[tree.label][step].extend(values)
        partitions = args.topics_per_request * PARTITIONS_PER_TOPIC
        for label, steps in results.items():
            figures = ", ".join(
                f"{step} {statistics.median(values):.0f} ms (max {max(values):.0f})"
                for step, values in steps.items()
            )
            print(
                f"{label}: {broker_count} brokers, image of {args.partitions} partitions, "
                f"CreateTopics of {partitions} partitions, medians of "
                f"{len(steps[STEPS[0]])}: {figures}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
