"""`make run`: starts the local cluster from deploy/local/*.toml and shows that it works.

Starts the three controllers, waits for the quorum to elect an active controller, prints
`pykraft quorum describe` and `pykraft cluster describe`, then keeps the cluster running until
Ctrl-C (or SIGTERM), which stops every process cleanly. Data lives under ./data/.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = sorted((ROOT / "deploy" / "local").glob("controller-*.toml"))
BOOTSTRAP = "127.0.0.1:9091,127.0.0.1:9092,127.0.0.1:9093"
PYKRAFT = str(Path(sys.executable).parent / "pykraft")
READY_TIMEOUT_S = 30


def start_controllers() -> list[subprocess.Popen[bytes]]:
    (ROOT / "data").mkdir(exist_ok=True)
    processes = []
    for config in CONFIGS:
        with open(ROOT / "data" / f"{config.stem}.log", "ab") as log:
            processes.append(
                subprocess.Popen(
                    [PYKRAFT, "controller", "run", "--config", str(config)],
                    cwd=ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        print(f"started {config.stem} (log: data/{config.stem}.log)")
    return processes


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYKRAFT, *args, "--bootstrap-controller", BOOTSTRAP],
        capture_output=True,
        text=True,
        timeout=60,
    )


def wait_ready(processes: list[subprocess.Popen[bytes]]) -> bool:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            print("a controller exited early; see data/controller-*.log", file=sys.stderr)
            return False
        if cli("quorum", "describe", "--request-timeout-ms", "2000").returncode == 0:
            return True
        time.sleep(0.2)
    print(f"no active controller within {READY_TIMEOUT_S}s", file=sys.stderr)
    return False


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        process.wait(timeout=20)


def main() -> int:
    processes = start_controllers()
    try:
        if not wait_ready(processes):
            return 1
        for command in (("quorum", "describe"), ("cluster", "describe")):
            print(f"\n$ pykraft {' '.join(command)} --bootstrap-controller {BOOTSTRAP}")
            result = cli(*command)
            print(result.stdout or result.stderr, end="")
        print(
            "\nThe cluster is running. Try: .venv/bin/pykraft topics list "
            f"--bootstrap-controller {BOOTSTRAP}\nPress Ctrl-C to stop it."
        )
        stopping = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stopping.set())
        while not stopping.wait(1.0):
            if any(p.poll() is not None for p in processes):
                print("a controller exited; see data/controller-*.log", file=sys.stderr)
                return 1
        return 0
    finally:
        stop(processes)
        print("stopped")


if __name__ == "__main__":
    sys.exit(main())
