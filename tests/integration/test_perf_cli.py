"""`pykraft perf produce` and `pykraft perf consume` against a real broker: the producer's last
line is Kafka's exact summary, and the consumer reads every record it sent and says so in
Kafka's header and data line.

Three controllers and one broker, replication factor 1.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .cluster import make_broker
from .controllers import one_broker_unfenced, pykraft, run_cli, running_quorum
from .processes import wait_for

pytestmark = pytest.mark.integration

TOPIC = "perf"
RECORDS = 5000
SUMMARY = re.compile(
    rf"^{RECORDS} records sent, \d+\.\d{{6}} records/sec \(\d+\.\d{{2}} MB/sec\), "
    r"\d+\.\d{2} ms avg latency, \d+\.\d{2} ms max latency, "
    r"\d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$"
)
HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)


def test_perf_produce_then_consume_report_in_kafkas_format(tmp_path: Path) -> None:
    with running_quorum(tmp_path) as quorum:
        broker = make_broker(tmp_path, quorum, 1)
        broker.start()
        try:
            wait_for(lambda: one_broker_unfenced(quorum), timeout_s=30, what="the broker unfenced")
            created = run_cli(
                quorum, "topics", "create", "--topic", TOPIC,
                "--partitions", "2", "--replication-factor", "1",
            )  # fmt: skip
            assert created.returncode == 0, created.stderr
            server = ("--bootstrap-server", broker.address)
            produced = pykraft(
                "perf", "produce", "--topic", TOPIC, "--num-records", str(RECORDS),
                "--record-size", "100", "--throughput", "-1", "--acks", "all",
                "--producer-prop", "linger.ms=5", *server,
            )  # fmt: skip
            assert produced.returncode == 0, produced.stderr
            assert SUMMARY.match(produced.stdout.splitlines()[-1]), produced.stdout

            consumed = pykraft(
                "perf", "consume", "--topic", TOPIC, "--messages", str(RECORDS), *server
            )
            assert consumed.returncode == 0, consumed.stderr
            header, data = consumed.stdout.splitlines()
            assert header == HEADER
            fields = data.split(", ")
            assert len(fields) == 10
            assert fields[4] == str(RECORDS)  # data.consumed.in.nMsg
            assert float(fields[2]) == pytest.approx(RECORDS * 100 / 1024 / 1024, abs=1e-4)

            starved = pykraft(
                "perf", "consume", "--topic", TOPIC, "--messages", str(RECORDS + 1),
                "--timeout-ms", "1000", *server,
            )  # fmt: skip
            assert starved.returncode == 1
            assert "Error: REQUEST_TIMED_OUT" in starved.stderr
            assert f"only {RECORDS} of {RECORDS + 1}" in starved.stderr
        finally:
            broker.stop()
