"""The test network can be made again right after a run, even while the kernel is still
tearing down the previous one's namespaces (a process inside one keeps it, and its veth pair,
alive after `ip netns del`): a run must never fail to start because of the run before it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests import netns

pytestmark = [pytest.mark.integration, pytest.mark.chaos]


def test_a_network_is_made_again_while_the_previous_one_lingers() -> None:
    reason = netns.unavailable_reason()
    if reason is not None:
        pytest.skip(f"network namespaces cannot be made here: {reason}")
    first = netns.TestNetwork(["c1", "b1"])
    first.create()
    lingering = subprocess.Popen([*first.launcher("c1"), "sleep", "60"])
    try:
        first.destroy()  # the sleeping process keeps c1's namespace and veth pair alive
        second = netns.TestNetwork(["c1", "b1"])
        second.create()
        try:
            assert second.addresses == {"c1": "10.77.0.11", "b1": "10.77.0.12"}
            bind = "import socket; socket.socket().bind(('10.77.0.11', 0))"
            bound = subprocess.run(
                [*second.launcher("c1"), sys.executable, "-c", bind], capture_output=True, text=True
            )
            assert bound.returncode == 0, bound.stderr  # c1's address is on its new link
        finally:
            second.destroy()
    finally:
        lingering.kill()
        lingering.wait(timeout=10)


def test_networks_of_different_suites_coexist_and_resolve_names() -> None:
    """Making one suite's network never removes another's (a chaos run and the multi-host test
    may overlap), and each namespace resolves the names `resolve` gives it."""
    reason = netns.unavailable_reason()
    if reason is not None:
        pytest.skip(f"network namespaces cannot be made here: {reason}")
    first = netns.TestNetwork(["a"], prefix="pkt-", subnet="10.79.0")
    first.create()
    try:
        second = netns.TestNetwork(["a", "b"], prefix="pku-", subnet="10.80.0")
        second.create()
        try:
            second.resolve({"host-b": "b"})
            looked_up = subprocess.run(
                [*second.launcher("a"), "getent", "hosts", "host-b"], capture_output=True, text=True
            )
            assert looked_up.stdout.split() == ["10.80.0.12", "host-b"]
            assert first.addresses == {"a": "10.79.0.11"}
            listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
            assert "pkt-a" in listed.stdout.split()  # the first network survived the second
        finally:
            second.destroy()
    finally:
        first.destroy()
    assert not (netns.NETNS_ETC / "pku-a").exists()
