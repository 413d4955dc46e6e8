"""The timeline picture of a run: operations per second and send latency over time, with each
fault's window shaded and named, as Jepsen's reports draw them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from tests.chaos.history import Op

COLORS = {
    "kill-broker": "tab:red",
    "pause-broker": "tab:orange",
    "rolling-restart": "tab:olive",
    "kill-controller": "tab:purple",
    "kill-all-controllers": "tab:pink",
    "partition-majority": "tab:blue",
    "partition-isolate-leader": "tab:cyan",
    "partition-bridge": "tab:green",
}


def draw(ops: list[Op], windows: list[dict[str, Any]], began: float, path: Path) -> None:
    """Writes a PNG: top, sends acknowledged / unknown / failed and records polled per second;
    bottom, each acknowledged send's latency at its invocation time (log scale)."""
    invoked: dict[str, float] = {}
    per_second: dict[str, Counter[int]] = {
        name: Counter() for name in ("send ok", "send info", "send fail", "polled records")
    }
    latency_x: list[float] = []
    latency_y: list[float] = []
    for op in ops:
        t = float(op["time"]) - began
        if op["f"] == "send":
            if op["type"] == "invoke":
                invoked[op["value"]] = t
                continue
            per_second[f"send {op['type']}"][int(t)] += 1
            if op["type"] == "ok" and op["value"] in invoked:
                latency_x.append(invoked[op["value"]])
                latency_y.append(max(t - invoked[op["value"]], 1e-4))
        elif op["f"] == "poll" and op["type"] == "ok" and not op.get("final"):
            per_second["polled records"][int(t)] += len(op["records"])
    end = max([int(float(op["time"]) - began) + 1 for op in ops] or [1])
    figure = Figure(figsize=(12, 7))
    rates, latency = figure.subplots(2, 1, sharex=True)
    seconds = list(range(end))
    for name, counts in per_second.items():
        if counts:
            rates.plot(seconds, [counts.get(s, 0) for s in seconds], label=name, linewidth=1)
    rates.set_ylabel("operations / s")
    rates.legend(loc="upper right", fontsize="small")
    latency.scatter(latency_x, latency_y, s=2, color="tab:gray")
    latency.set_yscale("log")
    latency.set_ylabel("send latency (s)")
    latency.set_xlabel("seconds since the workload started")
    labelled: set[str] = set()
    for window in windows:
        color = COLORS.get(window["kind"], "tab:gray")
        start, stop = window["start"] - began, max(window["end"] - began, window["start"] - began)
        for axes in (rates, latency):
            axes.axvspan(start, stop + 0.2, color=color, alpha=0.2, linewidth=0)
        rates.text(start, 1.0, window["kind"], transform=rates.get_xaxis_transform(),
                   rotation=90, va="top", fontsize=7, color=color)  # fmt: skip
        labelled.add(window["kind"])
    rates.set_title(
        f"{path.parent.name}: {len(ops)} operations, {len(windows)} faults of "
        f"{len(labelled)} kinds (shaded, named at their start)"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
