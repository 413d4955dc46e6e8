"""Client CPU per record, compiled hot loops against their pure-Python twins (issue 17 §2).

Three controllers and three brokers on 127.0.0.1 (tests/integration's cluster, topic of 6
partitions, RF 3); this process is the client. Each round produces `--records` values of 100
bytes with acks=1 and then reads the whole topic back, once on the compiled loops and once on
the Python ones (bench/implementations.py), alternating, and prints this process's CPU
microseconds per record for each (user + system: the cluster runs in other processes), the
best round of each, and the ratios. The goal is <= 1.5 us a record produced and <= 0.7 us a
record consumed.

Run (it starts a cluster): `flock /tmp/pykraft-cluster.lock .venv/bin/python bench/client_cpu.py
[--records 200000] [--rounds 2]`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import consume_run, produce_run  # noqa: E402
from bench.implementations import NAMES, implementation  # noqa: E402
from tests.integration.test_cluster_e2e import bootstrap, three_broker_cluster  # noqa: E402

# acks=1 keeps the brokers' replication out of what the client waits for.
ACKS_ONE = {"acks": "1", "linger_ms": 5, "batch_size": 65536}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    best = {(kind, compiled): float("inf") for kind in ("produce", "consume") for compiled in NAMES}
    with tempfile.TemporaryDirectory() as tmp, three_broker_cluster(Path(tmp)) as (_, brokers):
        address = bootstrap(brokers)
        for round_number in range(args.rounds):
            for compiled in (True, False):
                with implementation(compiled):
                    produced = produce_run(address, args.records, ACKS_ONE)
                    consumed = consume_run(address)
                print(
                    f"round {round_number} {NAMES[compiled]:<8}: produce "
                    f"{produced.cpu_us_per_record:.2f} us/record ({produced.rate:,.0f}/s), "
                    f"consume {consumed.cpu_us_per_record:.2f} us/record "
                    f"({consumed.records} records, {consumed.rate:,.0f}/s)",
                    flush=True,
                )
                for kind, run in (("produce", produced), ("consume", consumed)):
                    key = (kind, compiled)
                    best[key] = min(best[key], run.cpu_us_per_record)
    for kind in ("produce", "consume"):
        print(
            f"client CPU per record, {kind}: compiled {best[kind, True]:.2f} us, python "
            f"{best[kind, False]:.2f} us, ratio {best[kind, False] / best[kind, True]:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
