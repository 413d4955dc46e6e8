"""A test network: each node in its own network namespace, joined by veth pairs to one bridge.

Each suite names its own network (`prefix` for namespace, link and bridge names, `subnet` for
addresses), so suites never remove each other's: the chaos suite's is `pkc-` on 10.77.0.0/24,
the multi-host deployment test's `pkd-` on 10.78.0.0/24. Addresses exist only on that bridge:
the bridge (and so the test process in the root namespace) is SUBNET.1, node i is
SUBNET.(10 + i). Nothing is routed beyond the bridge. `resolve` gives every namespace its own
/etc/hosts (`ip netns exec` mounts /etc/netns/NS/hosts over it), so nodes can be configured by
host name as on real hosts.

Partitions cut node-to-node traffic with blackhole routes: in each namespace on one side, `ip
route add blackhole ADDR/32` for every address on the other side. Both directions are cut, and
the root namespace keeps reaching every node. `link_down` sets a node's link down instead: it
is cut from everyone, clients included. `heal` deletes every route it added and brings every
link back up.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

CHAOS_SUBNET = "10.77.0"
CHAOS_PREFIX = "pkc-"
NETNS_ETC = Path("/etc/netns")


def _ip(*args: str, namespace: str | None = None, check: bool = True) -> str:
    command = ["ip", *args] if namespace is None else ["ip", "netns", "exec", namespace, "ip"]
    if namespace is not None:
        command += list(args)
    done = subprocess.run(command, capture_output=True, text=True, timeout=20)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip()}")
    return done.stdout


def unavailable_reason() -> str | None:
    """Why namespaces cannot be used here (None when they can)."""
    if os.environ.get("PYKRAFT_CHAOS_NETNS", "1") == "0":
        return "PYKRAFT_CHAOS_NETNS=0"
    if os.geteuid() != 0:
        return "not running as root (network namespaces need CAP_NET_ADMIN)"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    probe = f"{CHAOS_PREFIX}probe-{os.getpid()}"
    done = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if done.returncode != 0:
        return f"`ip netns add` failed: {done.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


@dataclass
class TestNetwork:
    """Namespaces for `nodes` (names like "c1", "b2"), created by `create`, removed by `destroy`."""

    nodes: list[str]
    prefix: str = CHAOS_PREFIX
    subnet: str = CHAOS_SUBNET
    addresses: dict[str, str] = field(default_factory=dict)
    cuts: set[tuple[str, str]] = field(default_factory=set)
    links_down: set[str] = field(default_factory=set)

    @property
    def bridge(self) -> str:
        return f"{self.prefix}br0"

    def namespace(self, node: str) -> str:
        return f"{self.prefix}{node}"

    def launcher(self, node: str) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.namespace(node))

    def create(self) -> None:
        """Makes the bridge and a namespace per node; on failure removes what it made."""
        self._remove_leftovers()
        try:
            self._create()
        except BaseException:
            self.destroy()
            raise

    def _create(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for index, node in enumerate(self.nodes, start=1):
            namespace = self.namespace(node)
            address = f"{self.subnet}.{10 + index}"
            veth = f"{self.prefix}v{index}"
            _ip("netns", "add", namespace)
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", namespace)
            _ip("link", "set", veth, "master", self.bridge)
            _ip("link", "set", veth, "up")
            _ip("addr", "add", f"{address}/24", "dev", "eth0", namespace=namespace)
            _ip("link", "set", "eth0", "up", namespace=namespace)
            _ip("link", "set", "lo", "up", namespace=namespace)
            self.addresses[node] = address

    def _remove_leftovers(self) -> None:
        """Removes this suite's namespaces, veth pairs and bridge left by an earlier run. A
        namespace deleted while a process still runs in it (or that the kernel has not torn
        down yet) lives on unnamed with its veth pair, whose root end keeps our name: deleting
        that end removes the pair at once."""
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
        for line in listed.stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            if name.startswith(self.prefix):
                _ip("netns", "del", name, check=False)
                shutil.rmtree(NETNS_ETC / name, ignore_errors=True)
        links = _ip("-o", "link", "show", check=False)
        for line in links.splitlines():
            fields = line.split(":")
            name = fields[1].strip().split("@")[0] if len(fields) > 1 else ""
            if name.startswith(self.prefix) and name != self.bridge:
                _ip("link", "del", name, check=False)
        _ip("link", "del", self.bridge, check=False)

    def resolve(self, names: Mapping[str, str]) -> None:
        """Has every namespace resolve each host name of `names` to that node's address."""
        lines = ["127.0.0.1 localhost", *(f"{self.addresses[n]} {h}" for h, n in names.items())]
        for node in self.nodes:
            directory = NETNS_ETC / self.namespace(node)
            directory.mkdir(parents=True, exist_ok=True)
            (directory / "hosts").write_text("\n".join(lines) + "\n")

    def destroy(self) -> None:
        for node in self.nodes:
            _ip("netns", "del", self.namespace(node), check=False)
            shutil.rmtree(NETNS_ETC / self.namespace(node), ignore_errors=True)
        _ip("link", "del", self.bridge, check=False)
        self.addresses.clear()
        self.cuts.clear()

    def cut(self, side_a: Iterable[str], side_b: Iterable[str]) -> None:
        """Cuts every link between a node of `side_a` and a node of `side_b`, both ways."""
        b_nodes = list(side_b)
        for a in side_a:
            for b in b_nodes:
                if a == b:
                    continue
                for src, dst in ((a, b), (b, a)):
                    if (src, dst) not in self.cuts:
                        dst_address = f"{self.addresses[dst]}/32"
                        route = ("route", "add", "blackhole", dst_address)
                        _ip(*route, namespace=self.namespace(src))
                        self.cuts.add((src, dst))

    def link_down(self, node: str) -> None:
        """Takes `node`'s link down: it reaches nobody and nobody reaches it, clients included
        (a pulled cable)."""
        _ip("link", "set", "eth0", "down", namespace=self.namespace(node))
        self.links_down.add(node)

    def heal(self) -> None:
        """Deletes every cut and brings every link taken down back up."""
        for src, dst in sorted(self.cuts):
            route = ("route", "del", "blackhole", f"{self.addresses[dst]}/32")
            _ip(*route, namespace=self.namespace(src), check=False)
        self.cuts.clear()
        for node in sorted(self.links_down):
            _ip("link", "set", "eth0", "up", namespace=self.namespace(node), check=False)
        self.links_down.clear()

    def reachable(self, src: str, dst: str) -> bool:
        """Whether `src` has no blackhole route towards `dst` (as `ip route` lists them)."""
        routes = _ip("route", "show", "type", "blackhole", namespace=self.namespace(src))
        return self.addresses[dst] not in routes.split()
