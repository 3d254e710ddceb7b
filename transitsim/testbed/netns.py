"""A real network on this machine: host namespaces on one bridge (or two sites' bridges joined by
a shaped WAN veth pair), every link shaped by tbf.

Layout of one testbed (run id `tsb-<pid>-<tag>`, the tag 8 random hex digits):

    <run>-sw   the switch namespace (site 0): bridge `br0`, one port `p<i>` per host of the site
    <run>-sw1  with sites=2 only: site 1's switch namespace, its own `br0` and ports
    <run>-h<i> host i: `eth0` (veth peer of `p<i>`), address 10.77.0.<i+1>/24, and `lo`

With two sites, hosts 0..N/2-1 are site 0 and the rest site 1; the WAN is one veth pair, `wan`
in `<run>-sw` and `wan` in `<run>-sw1`, each a port of its site's bridge (one L2 segment, one
/24: nothing is routed anywhere). Both of its directions are shaped with tbf at the WAN rate.

Both directions of every host link are shaped with `tc tbf` to the same rate: the host's
`eth0` egress (host -> switch) and the switch port's `p<i>` egress (switch -> host). Nothing
is created in, routed to or addressed from the root namespace: every device is made inside the
switch namespace and its peer moved straight into the host's. What a run creates and starts is
recorded in its ledger (ledger.py) before it exists; teardown and `cleanup_leftovers` remove
only what a ledger records, never anything found by its name.
Every command has a timeout; every loop is bounded by the (small) number of hosts.
"""

import os
import re
import secrets
import shutil
from dataclasses import dataclass, field

from transitsim.testbed import ledger
from transitsim.testbed.shell import TestbedError
from transitsim.testbed.shell import run as _run

PREFIX = "tsb-"
SUBNET = "10.77.0"
MAX_HOSTS = 16

__all__ = ["Shaping", "Testbed", "TestbedError", "cleanup_leftovers", "list_namespaces"]


@dataclass(frozen=True)
class Shaping:
    """tc tbf on each direction of each host link: rate, bucket size, queue bound."""

    rate_bps: float
    burst_bytes: int  # token bucket depth: bytes that may leave back to back after idle
    queue_latency_s: float = 0.05  # tbf `latency`: how long a packet may wait (queue bound)

    @staticmethod
    def for_rate(rate_bps: float) -> "Shaping":
        """The smallest bucket tbf keeps up with: two full frames, or 250 us of the rate."""
        return Shaping(rate_bps, max(2 * 1514, int(rate_bps * 250e-6 / 8)))

    def tc_args(self) -> list[str]:
        return [
            "tbf",
            "rate",
            f"{int(self.rate_bps)}bit",
            "burst",
            str(self.burst_bytes),
            "latency",
            f"{int(self.queue_latency_s * 1e3)}ms",
        ]


def preflight() -> None:
    """One-line TestbedError unless this process can build a testbed: root, ip, tc."""
    if os.geteuid() != 0:
        raise TestbedError("testbed: needs root (network namespaces and tc)")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise TestbedError(f"testbed: `{tool}` not found (install iproute2)")


def list_namespaces() -> list[str]:
    """Names of every network namespace `ip netns` knows."""
    done = _run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in done.stdout.splitlines() if line.strip()]


def cleanup_leftovers(everything: bool = False) -> list[str]:
    """Delete the namespaces recorded by runs whose process is gone (by every other run too if
    `everything`), killing only the processes those runs started. Returns what was deleted."""
    return ledger.cleanup(everything)


@dataclass
class Testbed:
    """N host namespaces on one bridge; `up()` builds it, `down()` removes every piece."""

    __test__ = False  # not a pytest test class despite the name

    hosts: int
    shaping: Shaping
    sites: int = 1  # 2: two switches joined by one shaped WAN veth pair, hosts split evenly
    wan_shaping: Shaping | None = None  # the WAN's tbf (sites=2 only)
    run_id: str = field(default_factory=lambda: f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}")
    created: list[str] = field(default_factory=list)
    record: ledger.Ledger | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.hosts <= MAX_HOSTS:
            raise TestbedError(f"testbed: hosts must be 1..{MAX_HOSTS}, got {self.hosts}")
        if self.sites not in (1, 2):
            raise TestbedError(f"testbed: sites must be 1 or 2, got {self.sites}")
        if self.sites == 2 and (self.hosts % 2 or self.wan_shaping is None):
            raise TestbedError("testbed: two sites need an even number of hosts and a WAN rate")

    @property
    def switch(self) -> str:
        return f"{self.run_id}-sw"

    def site_switch(self, site: int) -> str:
        """Site 0's switch is `<run>-sw` (as with one site), site 1's `<run>-sw1`."""
        return self.switch if site == 0 else f"{self.run_id}-sw{site}"

    def site_of(self, i: int) -> int:
        """Host i's site: the first half of the hosts is site 0."""
        return 0 if self.sites == 1 else int(i >= self.hosts // 2)

    def host(self, i: int) -> str:
        return f"{self.run_id}-h{i}"

    @staticmethod
    def address(i: int) -> str:
        return f"{SUBNET}.{i + 1}"

    def _add_namespace(self, name: str) -> None:
        assert self.record is not None
        if ledger.identity(name) is not None:
            raise TestbedError(f"testbed: a namespace named {name} exists already: not ours")
        self.record.intend(name)
        done = _run(["ip", "netns", "add", name], check=False)
        if done.returncode != 0:
            self.record.forget(name)  # whatever holds the name now is not this run's
            detail = done.stderr.strip().splitlines()
            raise TestbedError(
                f"testbed: cannot create network namespace {name}: "
                f"{detail[-1] if detail else 'refused'}"
            )
        self.record.created(name)
        self.created.append(name)
        _run(["ip", "-n", name, "link", "set", "lo", "up"])
        # IPv6 autoconfiguration only adds chatter to the measured links.
        _run(["ip", "netns", "exec", name, "sh", "-c",
              "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6"], check=False)  # fmt: skip

    def up(self) -> "Testbed":
        """Build the namespaces, bridge, veths, addresses and shaping; on failure, undo it."""
        preflight()
        self.record = ledger.Ledger.begin(self.run_id)
        try:
            for site in range(self.sites):
                self._add_namespace(self.site_switch(site))
                sw = ["ip", "-n", self.site_switch(site)]
                _run([*sw, "link", "add", "br0", "type", "bridge"])
                _run([*sw, "link", "set", "br0", "up"])
            if self.sites == 2:
                far = self.site_switch(1)
                sw = ["ip", "-n", self.switch]
                _run([*sw, "link", "add", "wan", "type", "veth", "peer", "name", "wan",
                      "netns", far])  # fmt: skip
                for ns in (self.switch, far):
                    _run(["ip", "-n", ns, "link", "set", "wan", "master", "br0"])
                    _run(["ip", "-n", ns, "link", "set", "wan", "up"])
            for i in range(self.hosts):
                host = self.host(i)
                self._add_namespace(host)
                port = f"p{i}"
                sw = ["ip", "-n", self.site_switch(self.site_of(i))]
                _run([*sw, "link", "add", port, "type", "veth", "peer", "name", "eth0",
                      "netns", host])  # fmt: skip
                _run([*sw, "link", "set", port, "master", "br0"])
                _run([*sw, "link", "set", port, "up"])
                _run(["ip", "-n", host, "addr", "add", f"{self.address(i)}/24", "dev", "eth0"])
                _run(["ip", "-n", host, "link", "set", "eth0", "up"])
            self.shape(self.shaping)
        except BaseException:
            self.down()
            raise
        return self

    def shape(self, shaping: Shaping) -> None:
        """(Re)shape both directions of every host link."""
        self.shaping = shaping
        for i in range(self.hosts):
            for ns, dev in ((self.host(i), "eth0"), (self.site_switch(self.site_of(i)), f"p{i}")):
                _run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", *shaping.tc_args()])
        if self.sites == 2:
            self.shape_wan(self.wan_shaping)

    def shape_wan(self, shaping: Shaping | None) -> None:
        """(Re)shape both directions of the WAN veth pair (two sites only)."""
        if self.sites != 2 or shaping is None:
            return
        self.wan_shaping = shaping
        for site in (0, 1):
            _run(["tc", "-n", self.site_switch(site), "qdisc", "replace", "dev", "wan", "root",
                  *shaping.tc_args()])  # fmt: skip

    def unshape(self) -> None:
        """Remove the tbf from both directions of every host link: the veths at whatever the
        kernel and the CPUs move (the compute runs of `testbed ttl`), and with two sites from
        the WAN's too; `shape` puts both back (the WAN's as it was)."""
        for i in range(self.hosts):
            for ns, dev in ((self.host(i), "eth0"), (self.site_switch(self.site_of(i)), f"p{i}")):
                _run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], check=False)
        if self.sites == 2:
            for site in (0, 1):
                _run(["tc", "-n", self.site_switch(site), "qdisc", "del", "dev", "wan", "root"],
                     check=False)  # fmt: skip

    def qdisc_bytes(self) -> dict[str, tuple[int, int]]:
        """(bytes, packets) each host's egress tbf has sent so far, by host namespace."""
        counts = {}
        for i in range(self.hosts):
            done = _run(["tc", "-s", "-n", self.host(i), "qdisc", "show", "dev", "eth0"])
            match = re.search(r"Sent (\d+) bytes (\d+) pkt", done.stdout)
            counts[self.host(i)] = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
        return counts

    def rank_host(self, rank: int, workers: int) -> int:
        """The host rank `rank` of `workers` runs on: in order with one site; with two, the
        first half of the ranks on site 0's first hosts, the rest on site 1's."""
        if self.sites == 1:
            return rank
        half = workers // 2
        return rank if rank < half else self.hosts // 2 + rank - half

    def exec_argv(self, i: int, argv: list[str]) -> list[str]:
        """argv run inside host i's namespace."""
        return ["ip", "netns", "exec", self.host(i), *argv]

    def started(self, pid: int) -> None:
        """Record a process started inside this testbed (its teardown may kill it)."""
        if self.record is not None:
            self.record.started(pid)

    def down(self) -> None:
        """Kill what this testbed started and delete what it created (idempotent)."""
        if self.record is not None:
            self.record.teardown()
            self.record = None
        self.created.clear()

    def __enter__(self) -> "Testbed":
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()
