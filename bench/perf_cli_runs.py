"""`pykraft perf produce` and `pykraft perf consume` run as a user runs them (the console script
of this interpreter's environment, a process each), their records/s read from the lines they
print, and their CPU (user + system of the whole process, start-up included) per record."""

from __future__ import annotations

import re
import resource
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PYKRAFT = Path(sys.executable).parent / "pykraft"
PERF_TIMEOUT_S = 900
# The summary line of `perf produce`: "N records sent, R records/sec (...".
_PRODUCED = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec", re.MULTILINE)
_NMSG_SEC_FIELD = 5  # nMsg.sec in `perf consume`'s data line (Kafka's column order)


@dataclass(frozen=True)
class PerfRun:
    """What one perf command printed (records, records/s) and the CPU seconds it took."""

    records: int
    rate: float
    cpu_s: float

    @property
    def cpu_us_per_record(self) -> float:
        return self.cpu_s / self.records * 1e6


def perf_produce(
    address: str, topic: str, records: int, record_bytes: int, props: Mapping[str, str]
) -> PerfRun:
    """`pykraft perf produce` as fast as it goes (--throughput -1) with `props` as
    --producer-prop key=value; the rate of its summary line."""
    command = [
        str(PYKRAFT), "perf", "produce", "--bootstrap-server", address, "--topic", topic,
        "--num-records", str(records), "--record-size", str(record_bytes), "--throughput", "-1",
        *[arg for key, value in props.items() for arg in ("--producer-prop", f"{key}={value}")],
    ]  # fmt: skip
    out, cpu_s = _run(command)
    summaries = _PRODUCED.findall(out)
    assert summaries, f"no summary line in: {out[-500:]}"
    sent, rate = summaries[-1]
    return PerfRun(int(sent), float(rate), cpu_s)


def perf_consume(address: str, topic: str, records: int) -> PerfRun:
    """`pykraft perf consume` of `records` messages; nMsg.sec of its data line."""
    command = [
        str(PYKRAFT), "perf", "consume", "--bootstrap-server", address, "--topic", topic,
        "--messages", str(records),
    ]  # fmt: skip
    out, cpu_s = _run(command)
    fields = out.strip().splitlines()[-1].split(", ")
    return PerfRun(int(fields[_NMSG_SEC_FIELD - 1]), float(fields[_NMSG_SEC_FIELD]), cpu_s)


def _run(command: list[str]) -> tuple[str, float]:
    """The command's stdout and the CPU seconds it (and anything it waited for) used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, capture_output=True, text=True, timeout=PERF_TIMEOUT_S)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:3])} failed: {done.stderr.strip()[-2000:]}")
    cpu_s = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return done.stdout, cpu_s
