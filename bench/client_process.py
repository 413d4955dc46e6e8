"""One library run of bench/client.py in a process of its own, so that each run's client CPU is
its own and PYKRAFT_NO_EXTENSIONS (read once, when pykraft's codec is imported) can differ from
run to run.

`python bench/client_process.py produce|consume ADDRESS TOPIC RECORDS SETTINGS_JSON` produces
RECORDS records to TOPIC (or reads all of TOPIC back) with a Producer (Consumer) made with the
settings, and prints one JSON line: records, seconds and this process's CPU seconds over the run
(imports, connections and metadata are outside it). Anything else it prints is an error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import Run, consume_run, produce_run  # noqa: E402
from bench.source_tree import THIS_TREE, SourceTree  # noqa: E402

RUN_TIMEOUT_S = 900  # a million records run well within this even on the shared 2 cores


def run_in_process(
    kind: str,
    address: str,
    topic: str,
    records: int,
    settings: Mapping[str, Any],
    *,
    extensions: bool,
    tree: SourceTree = THIS_TREE,
) -> Run:
    """Runs one `kind` ("produce" or "consume") in a child process, with pykraft's compiled
    extensions unless `extensions` is False, and with the client of `tree`
    (bench/source_tree.py); raises with the child's stderr if it fails."""
    env = tree.env(os.environ)
    if not extensions:
        env["PYKRAFT_NO_EXTENSIONS"] = "1"
    command = [
        sys.executable, __file__, kind, address, topic, str(records), json.dumps(dict(settings))
    ]  # fmt: skip
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{kind} run failed: {done.stderr.strip()[-2000:]}")
    fields = json.loads(done.stdout.strip().splitlines()[-1])
    return Run(fields["records"], fields["seconds"], fields["cpu_s"])


def main(argv: list[str]) -> int:
    kind, address, topic, records, settings_json = argv
    settings = json.loads(settings_json)
    if kind == "produce":
        run = produce_run(address, int(records), settings, topic)
    else:
        run = consume_run(address, settings, topic)
    print(json.dumps({"records": run.records, "seconds": run.seconds, "cpu_s": run.cpu_s}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
