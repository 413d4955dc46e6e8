"""The two sides of `bench/latency.py`'s measurement, each in a process of its own, so the paced
producer and the consumer do not share a GIL (in one process each one's Python work delayed the
other's: a record's receipt waited behind the next sends, an acknowledgement behind a poll).

`python bench/latency_process.py consume ADDRESS TOPIC PARTITIONS TOTAL OUT` reads TOTAL records
of TOPIC's partitions 0..PARTITIONS-1 from their current ends (`LatencyReader`: Kafka's default
consumer settings, fetch.max.wait.ms 500 and fetch.min.bytes 1), writes OUT.ready once the ends
are resolved and, when all are read, OUT: one `partition offset sent_ns received_ns` line each.

`python bench/latency_process.py produce ADDRESS TOPIC RATE SECONDS ACKS LINGER_MS OUT` sends
RATE * SECONDS stamped records at RATE/s (`send_stamped`) and writes OUT: the rate reached, then
one `partition offset acked_ns` line per acknowledged record, taken on the producer's callback
thread.

Times are `time.perf_counter_ns()`, CLOCK_MONOTONIC: one clock for every process of the machine.
Both run the pykraft that comes first on their PYTHONPATH (`bench/source_tree.py`).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import LatencyReader, send_stamped  # noqa: E402
from pykraft.client import FutureRecordMetadata, TopicPartition  # noqa: E402
from tests.integration.processes import wait_for  # noqa: E402

# A side runs its records (seconds at 10,000/s) plus its client's start well within this.
SIDE_TIMEOUT_S = 300
READY_TIMEOUT_S = 60

Key = tuple[int, int]  # (partition, offset)


class Acks:
    """Acknowledgement times ((partition, offset) -> perf_counter_ns), taken on the producer's
    callback thread."""

    def __init__(self) -> None:
        self.at_ns: dict[Key, int] = {}
        self._lock = threading.Lock()

    def on_ack(self, future: FutureRecordMetadata) -> None:
        now_ns = time.perf_counter_ns()
        if future.exception(timeout=0) is not None:
            return
        metadata = future.result(timeout=0)
        with self._lock:
            self.at_ns[metadata.partition, metadata.offset] = now_ns


class ConsumerSide:
    """The consumer process of one pass, started (and its partitions' ends resolved) by the
    constructor, so nothing sent afterwards is missed."""

    def __init__(self, address: str, topic: str, partitions: int, total: int, out: Path) -> None:
        self._out = out
        command = [str(arg) for arg in ("consume", address, topic, partitions, total, out)]
        self._process = _start(command, out)
        wait_for(self._ready, timeout_s=READY_TIMEOUT_S, what="the latency consumer ready")

    def _ready(self) -> bool:
        if self._process.poll() is not None:
            raise RuntimeError(f"latency consumer failed: {_stderr(self._process)}")
        return self._out.with_suffix(".ready").exists()

    def arrivals_ns(self) -> dict[Key, tuple[int, int]]:
        """Waits for the process to read every record; (sent_ns, received_ns) of each."""
        _finish(self._process, "latency consumer")
        arrivals: dict[Key, tuple[int, int]] = {}
        for line in self._out.read_text(encoding="utf-8").splitlines():
            partition, offset, sent_ns, received_ns = map(int, line.split())
            arrivals[partition, offset] = sent_ns, received_ns
        return arrivals


def produce_side(
    address: str, topic: str, rate: int, seconds: float, *, acks: str, linger_ms: int, out: Path
) -> tuple[dict[Key, int], float]:
    """Runs the producer process to its end; (ack time of each record, rate reached)."""
    command = [str(arg) for arg in ("produce", address, topic, rate, seconds, acks, linger_ms, out)]
    _finish(_start(command, out), "latency producer")
    first, *lines = out.read_text(encoding="utf-8").splitlines()
    acked: dict[Key, int] = {}
    for line in lines:
        partition, offset, acked_ns = map(int, line.split())
        acked[partition, offset] = acked_ns
    return acked, float(first)


def _start(arguments: list[str], out: Path) -> subprocess.Popen[bytes]:
    """The side's process, with this process's environment (so the tree `source_tree` chose),
    its stderr in OUT.err (a pipe left unread could fill and stall it)."""
    with open(out.with_suffix(".err"), "wb") as errors:
        return subprocess.Popen(
            [sys.executable, __file__, *arguments], stdout=subprocess.DEVNULL, stderr=errors
        )


def _finish(process: subprocess.Popen[bytes], what: str) -> None:
    try:
        process.wait(timeout=SIDE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        raise RuntimeError(f"{what} still running after {SIDE_TIMEOUT_S} s") from None
    if process.returncode != 0:
        raise RuntimeError(f"{what} failed: {_stderr(process)}")


def _stderr(process: subprocess.Popen[bytes]) -> str:
    """The end of what the side wrote to its OUT.err (`_start`)."""
    arguments = process.args
    assert isinstance(arguments, list)
    text = Path(arguments[-1]).with_suffix(".err").read_text(encoding="utf-8", errors="replace")
    return text.strip()[-2000:]


def _consume(address: str, topic: str, partitions: str, total: str, out: str) -> None:
    wanted = [TopicPartition(topic, p) for p in range(int(partitions))]
    reader = LatencyReader(address, wanted)  # its ends are resolved when it returns
    Path(out).with_suffix(".ready").touch()
    reader.close(int(total))
    lines = (f"{p} {o} {s} {r}\n" for (p, o), (s, r) in reader.arrivals_ns.items())
    Path(out).write_text("".join(lines), encoding="utf-8")


def _produce(*arguments: str) -> None:
    address, topic, rate, seconds, acks, linger_ms, out = arguments
    answers = Acks()
    _, reached = send_stamped(
        address,
        topic,
        int(rate),
        float(seconds),
        on_ack=answers.on_ack,
        acks=acks,
        linger_ms=int(linger_ms),
    )
    lines = (f"{p} {o} {at}\n" for (p, o), at in answers.at_ns.items())
    Path(out).write_text(f"{reached}\n" + "".join(lines), encoding="utf-8")


def main(argv: list[str]) -> int:
    kind, *arguments = argv
    if kind == "consume":
        _consume(*arguments)
    else:
        _produce(*arguments)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
