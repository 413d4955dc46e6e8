"""`make run`: a local cluster of 3 controllers and 3 brokers, shown working, until Ctrl-C.

Starts the cluster with `pykraft dev up` (data, logs and cluster.json under ./data/), creates
the topic `demo` (3 partitions, replication factor 3), produces a few records with
`pykraft produce` and reads them back with `pykraft consume`, then keeps a status line fresh
(quorum leader, unfenced brokers) until Ctrl-C or SIGTERM, which stop every node with
`pykraft dev down`. Each command is printed before it runs, so it can be tried by hand.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from pykraft.client import dev_cluster
from pykraft.client.dev_cli import cluster_status

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = Path("data")
PYKRAFT = str(Path(sys.executable).parent / "pykraft")
DEMO_TOPIC = "demo"
DEMO_RECORDS = [f"hello {n}" for n in range(1, 6)]
COMMAND_TIMEOUT_S = 120
STATUS_INTERVAL_S = 3.0


def pykraft(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Runs `pykraft ARGS` in the repository, echoing the command and its output."""
    print(f"\n$ pykraft {' '.join(args)}", flush=True)
    return subprocess.run(
        [PYKRAFT, *args], cwd=ROOT, input=stdin, text=True, timeout=COMMAND_TIMEOUT_S
    )


def demo(cluster: dev_cluster.DevCluster) -> bool:
    """Creates the demo topic (kept from an earlier run if there is one), produces the demo
    records and consumes as many from the beginning; whether every step worked. Topics are
    administered through the controllers, records go through the brokers."""
    controllers, brokers = cluster.bootstrap_controllers, cluster.bootstrap_servers
    listed = subprocess.run(
        [PYKRAFT, "topics", "list", "--bootstrap-controller", controllers],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
    )
    if DEMO_TOPIC in listed.stdout.split():
        print(f"\n(topic {DEMO_TOPIC} is left from an earlier run)")
    else:
        created = pykraft(
            "topics", "create", "--topic", DEMO_TOPIC, "--partitions", "3",
            "--replication-factor", "3", "--bootstrap-controller", controllers,
        )  # fmt: skip
        if created.returncode != 0:
            return False
    produced = pykraft(
        "produce", DEMO_TOPIC, "--bootstrap-server", brokers, stdin="\n".join(DEMO_RECORDS)
    )
    consumed = pykraft(
        "consume", DEMO_TOPIC, "--bootstrap-server", brokers, "--from-beginning",
        "--max-messages", str(len(DEMO_RECORDS)), "--timeout-ms", "10000",
    )  # fmt: skip
    return produced.returncode == 0 and consumed.returncode == 0


def show_status_until_interrupted() -> None:
    """Rewrites one status line every few seconds until KeyboardInterrupt."""
    print("\nThe cluster is running; `pykraft dev --help` shows how to kill, stop and start")
    print(f"nodes (with --data-dir {DATA_DIR}). Press Ctrl-C to stop it.\n")
    while True:
        status = cluster_status(dev_cluster.load(ROOT / DATA_DIR))
        line = f"{time.strftime('%H:%M:%S')} {status.summary()}"
        print(f"\r{line:<90}", end="", flush=True)
        time.sleep(STATUS_INTERVAL_S)


def main() -> int:
    # Ctrl-C and SIGTERM both stop the cluster, even when started where SIGINT was ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    up = ["dev", "up", "--controllers", "3", "--brokers", "3", "--data-dir", str(DATA_DIR)]
    try:
        if pykraft(*up).returncode != 0:
            return 1
        if not demo(dev_cluster.load(ROOT / DATA_DIR)):
            print("the demo failed; logs are under data/", file=sys.stderr)
            return 1
        show_status_until_interrupted()
    except KeyboardInterrupt:
        print()
    finally:
        # A second Ctrl-C must not cut the shutdown short (`dev down` inherits the ignore).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if dev_cluster.cluster_file(ROOT / DATA_DIR).exists():
            pykraft("dev", "down", "--data-dir", str(DATA_DIR))
    return 0


if __name__ == "__main__":
    sys.exit(main())
