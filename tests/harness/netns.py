"""A network namespace joined to the test's own namespace by a veth pair,
with addresses from 192.0.2.0/24 (TEST-NET-1). Used for agents that refuse
loopback addresses (nexilume): the agent runs inside the namespace on
`ns_addr`, the gateway listens on `host_addr`. Names are unique per test
process and deleted on teardown; nothing is routed anywhere else."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
from typing import List

_counter = itertools.count()
_swept: set = set()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(pattern: str) -> None:
    """Deletes the namespaces an earlier test process of this harness made
    (names matching `pattern`, the creator's pid in group 1) when that
    process is gone — killed before its teardown ran — and nothing runs in
    them. A live creator's namespaces, or a namespace with processes, are
    left alone. Once per pattern per process."""
    if pattern in _swept:
        return
    _swept.add(pattern)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    for line in listed.stdout.splitlines():
        name = line.split(" ", 1)[0]
        m = re.fullmatch(pattern, name)
        if not m or _alive(int(m.group(1))):
            continue
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if pids.returncode == 0 and not pids.stdout.strip():
            subprocess.run(["ip", "netns", "del", name], capture_output=True, stdin=subprocess.DEVNULL)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, stdin=subprocess.DEVNULL)


class NetNs:
    def __init__(self) -> None:
        sweep_stale(r"st(\d+)n\d+")
        n = next(_counter)
        # The whole pid (interface names stay within 15 bytes): a stale
        # namespace's creator can be looked up.
        pid = os.getpid()
        self.name = f"st{pid}n{n}"
        self.host_if = f"st{pid}h{n}"
        self.ns_if = f"st{pid}a{n}"
        block = (pid + n) % 62 + 1  # /30 blocks 1..62 of 192.0.2.0/24
        self.host_addr = f"192.0.2.{4 * block + 1}"
        self.ns_addr = f"192.0.2.{4 * block + 2}"
        self._created: List[str] = []
        try:
            _ip("netns", "add", self.name)
            self._created.append("netns")
            _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
            self._created.append("link")
            _ip("link", "set", self.ns_if, "netns", self.name)
            _ip("addr", "add", f"{self.host_addr}/30", "dev", self.host_if)
            _ip("link", "set", self.host_if, "up")
            _ip("-n", self.name, "addr", "add", f"{self.ns_addr}/30", "dev", self.ns_if)
            _ip("-n", self.name, "link", "set", self.ns_if, "up")
            _ip("-n", self.name, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    def reach(self, addr: str) -> None:
        """Route `addr` (an address of the test's own namespace on another
        veth, e.g. the gateway's listener) through this namespace's veth
        peer, so two namespace hosts can talk to one listener."""
        _ip("-n", self.name, "route", "add", f"{addr}/32", "via", self.host_addr)

    def exec_argv(self, argv: List[str]) -> List[str]:
        """`argv` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def close(self) -> None:
        if "link" in self._created:
            subprocess.run(["ip", "link", "del", self.host_if], capture_output=True, stdin=subprocess.DEVNULL)
        if "netns" in self._created:
            subprocess.run(["ip", "netns", "del", self.name], capture_output=True, stdin=subprocess.DEVNULL)
        self._created.clear()
