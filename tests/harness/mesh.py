"""Router meshes in network namespaces: one namespace per router, each with
a management veth to the test's own namespace (203.0.113.0/24, TEST-NET-3:
the test talks to the router's SDK API and agentctl there) and one veth per
router-to-router link (198.51.100.0/24, TEST-NET-2: ARPX runs only there).
Names are unique per test process; everything is deleted on close.

A `MeshRouter` is an agentd + agent-gw stack started inside its namespace
(`ip netns exec`, which execs the daemon, so the PID is the daemon's and
stopping by PID stays exact)."""

from __future__ import annotations

import base64
import fcntl
import hashlib
import itertools
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from .backend import Backend, registration
from .netns import sweep_stale
from .config import Section, base_config
from .poll import wait_for
from .procs import Binaries, Stack

_ns_counter = itertools.count()
_link_counter = itertools.count()

ARPX_PORT = 7444
# Each router has its namespace to itself: the default SDK port.
SDK_PORT = 7446
# The peer data plane (h2 over mTLS), on every address of the router: its
# peers dial the link address, a test's rogue client the management one.
PEER_PORT = 7447


def _ip(*args: str) -> None:
    p = subprocess.run(["ip", *args], capture_output=True, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {p.stderr.decode(errors='replace').strip()}")


def _block(counter: "itertools.count[int]") -> int:
    """A /30 block number 1..62 (of a /24), spread by PID so two test
    processes rarely pick the same one."""
    return (os.getpid() + next(counter)) % 62 + 1


# Management addresses live in the test host's own namespace, shared by
# every test process on the machine (several run at once): a block two
# processes both took would route one router's SDK traffic to the other's
# veth. The block is picked among those no interface holds, under a lock
# file held until the address is on the interface.
_MGMT_LOCK = Path("/tmp/agentd-systest-mgmt.lock")


def _mgmt_blocks_in_use() -> set:
    p = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, stdin=subprocess.DEVNULL, text=True)
    used = set()
    for word in p.stdout.split():
        if word.startswith("203.0.113."):
            used.add(int(word.split("/")[0].rsplit(".", 1)[1]) // 4)
    return used


def _free_mgmt_block(preferred: int) -> int:
    used = _mgmt_blocks_in_use()
    for i in range(62):
        block = (preferred - 1 + i) % 62 + 1
        if block not in used:
            return block
    raise RuntimeError("no free 203.0.113.0/30 block for a router's management veth")


@dataclass
class RouterNs:
    name: str
    netns: str
    mgmt_if: str
    mgmt_host_addr: str  # the test's side
    mgmt_addr: str  # the router's side: its SDK listener

    def exec_argv(self, argv: List[str]) -> List[str]:
        return ["ip", "netns", "exec", self.netns, *argv]


@dataclass
class Link:
    a: str
    b: str
    a_if: str
    b_if: str
    a_addr: str
    b_addr: str

    def addr_of(self, router: str) -> str:
        return self.a_addr if router == self.a else self.b_addr


class MeshNet:
    def __init__(self) -> None:
        sweep_stale(r"m(\d+)r\d+")
        # The whole pid (names stay within 15 bytes): a namespace left by a
        # killed test process is recognised and removed by the next one.
        self.tag = f"m{os.getpid()}"
        self.routers: Dict[str, RouterNs] = {}
        self.links: List[Link] = []
        self._links_made: List[Tuple[str, str]] = []  # (netns, ifname) to delete
        self._netns_made: List[str] = []

    def add_router(self, name: str) -> RouterNs:
        n = next(_ns_counter)
        netns = f"{self.tag}r{n}"
        host_if, ns_if = f"{self.tag}h{n}", f"{self.tag}g{n}"
        _ip("netns", "add", netns)
        self._netns_made.append(netns)
        _ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        self._links_made.append(("", host_if))
        with open(_MGMT_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            block = _free_mgmt_block(_block(_ns_counter))
            r = RouterNs(name, netns, host_if, f"203.0.113.{4 * block + 1}", f"203.0.113.{4 * block + 2}")
            self.routers[name] = r
            _ip("addr", "add", f"{r.mgmt_host_addr}/30", "dev", host_if)
        _ip("link", "set", ns_if, "netns", netns)
        _ip("link", "set", host_if, "up")
        _ip("-n", netns, "addr", "add", f"{r.mgmt_addr}/30", "dev", ns_if)
        _ip("-n", netns, "link", "set", ns_if, "up")
        _ip("-n", netns, "link", "set", "lo", "up")
        return r

    def link(self, a: str, b: str) -> Link:
        n = next(_link_counter)
        block = _block(_link_counter)
        a_if, b_if = f"{self.tag}l{n}a", f"{self.tag}l{n}b"
        ra, rb = self.routers[a], self.routers[b]
        _ip("link", "add", a_if, "netns", ra.netns, "type", "veth", "peer", "name", b_if, "netns", rb.netns)
        self._links_made.append((ra.netns, a_if))
        link = Link(a, b, a_if, b_if, f"198.51.100.{4 * block + 1}", f"198.51.100.{4 * block + 2}")
        _ip("-n", ra.netns, "addr", "add", f"{link.a_addr}/30", "dev", a_if)
        _ip("-n", rb.netns, "addr", "add", f"{link.b_addr}/30", "dev", b_if)
        _ip("-n", ra.netns, "link", "set", a_if, "up")
        _ip("-n", rb.netns, "link", "set", b_if, "up")
        self.links.append(link)
        return link

    def segment(self, names: Sequence[str]) -> Dict[str, Tuple[str, str]]:
        """One broadcast domain for several routers (a LAN they share:
        mDNS sees every announcement on it, as on a real switch): a bridge
        in a namespace of its own and a veth from each router to it, with
        an address of 192.0.2.0/24 (TEST-NET-1) each. Returns name →
        (interface, address) inside each router's namespace."""
        n = next(_ns_counter)
        switch = f"{self.tag}r{n}"
        _ip("netns", "add", switch)
        self._netns_made.append(switch)
        _ip("-n", switch, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
        _ip("-n", switch, "link", "set", "br0", "up")
        out: Dict[str, Tuple[str, str]] = {}
        for i, name in enumerate(names):
            r = self.routers[name]
            k = next(_link_counter)
            r_if, s_if = f"{self.tag}s{k}r", f"{self.tag}s{k}s"
            _ip("link", "add", r_if, "netns", r.netns, "type", "veth", "peer", "name", s_if, "netns", switch)
            self._links_made.append((r.netns, r_if))
            addr = f"192.0.2.{10 + i}"
            _ip("-n", switch, "link", "set", s_if, "master", "br0")
            _ip("-n", switch, "link", "set", s_if, "up")
            _ip("-n", r.netns, "addr", "add", f"{addr}/24", "dev", r_if)
            _ip("-n", r.netns, "link", "set", r_if, "multicast", "on")
            _ip("-n", r.netns, "link", "set", r_if, "up")
            out[name] = (r_if, addr)
        return out

    def find_link(self, a: str, b: str) -> Link:
        for link in self.links:
            if {link.a, link.b} == {a, b}:
                return link
        raise KeyError(f"no link {a}-{b}")

    def set_link(self, a: str, b: str, up: bool) -> None:
        """Cut (or restore) the link: both ends down, so TCP sees nothing
        more and the session ends by its hold timer, as on a real cut."""
        link = self.find_link(a, b)
        state = "up" if up else "down"
        _ip("-n", self.routers[link.a].netns, "link", "set", link.a_if, state)
        _ip("-n", self.routers[link.b].netns, "link", "set", link.b_if, state)

    def close(self) -> None:
        for netns, ifname in reversed(self._links_made):
            argv = ["ip", *(["-n", netns] if netns else []), "link", "del", ifname]
            subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL)
        for netns in self._netns_made:
            subprocess.run(["ip", "netns", "del", netns], capture_output=True, stdin=subprocess.DEVNULL)
        self._links_made.clear()
        self._netns_made.clear()
        self.routers.clear()


# ---- identities ------------------------------------------------------------


@dataclass
class RouterKey:
    """A router identity key made in Python (independently of router-pki):
    PKCS#8 PEM on disk, the fingerprint peers pin."""

    private: Ed25519PrivateKey

    @classmethod
    def generate(cls) -> "RouterKey":
        return cls(Ed25519PrivateKey.generate())

    @property
    def public_raw(self) -> bytes:
        return self.private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)

    @property
    def fingerprint(self) -> str:
        return "sha256:" + hashlib.sha256(self.public_raw).hexdigest()

    @property
    def pubkey_uci(self) -> str:
        return "ed25519:" + base64.b64encode(self.public_raw).decode("ascii")

    def write(self, path: Path) -> Path:
        pem = self.private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        return path


# ---- routers ---------------------------------------------------------------


@dataclass
class PeerSpec:
    router_id: str
    address: str
    options: Dict[str, Any] = field(default_factory=dict)


class MeshRouter:
    """One router of a mesh: its namespace, identity, config and stack."""

    def __init__(self, bins: Binaries, net: MeshNet, ns: RouterNs, dir: Path, *, reflector: bool = False,
                 arpx: Optional[Dict[str, Any]] = None, agentd: Optional[Dict[str, Any]] = None,
                 key: Optional[RouterKey] = None, gateway: Optional[Dict[str, Any]] = None,
                 tenants: Sequence[Tuple[str, Mapping[str, Any]]] = ()) -> None:
        self.name = ns.name
        self.ns = ns
        self.net = net
        self.dir = dir
        self.key = key or RouterKey.generate()
        self.key.write(dir / "identity.key")
        main = {"router_id": self.name, "identity": str(dir / "identity.key")}
        main.update(agentd or {})
        gw: Dict[str, Any] = {"peer_listen": f"0.0.0.0:{PEER_PORT}"}
        gw.update(gateway or {})
        self.cfg = base_config(dir, sdk_host=ns.mgmt_addr, sdk_port=SDK_PORT, agentd=main, gateway=gw,
                               tenants=tenants)
        arpx_opts: Dict[str, Any] = {"listen": f"0.0.0.0:{ARPX_PORT}", "reflector": int(reflector)}
        arpx_opts.update(arpx or {})
        self.cfg.section("arpx").options = arpx_opts
        self.peers: List[PeerSpec] = []
        self.stack = Stack(bins, self.cfg)
        self.stack.agentd.argv = ns.exec_argv(self.stack.agentd.argv)
        self.stack.gw.argv = ns.exec_argv(self.stack.gw.argv)

    def peer_with(self, other: "MeshRouter", *, pin: bool = True, **options: Any) -> None:
        """A `peer` section for `other` at its address on our shared link."""
        link = self.net.find_link(self.name, other.name)
        opts: Dict[str, Any] = {"router_id": other.name, "address": link.addr_of(other.name), "port": ARPX_PORT}
        if pin:
            opts["key_fingerprint"] = other.key.fingerprint
        opts.update(options)
        self.peers = [p for p in self.peers if p.router_id != other.name]
        self.peers.append(PeerSpec(other.name, opts["address"], opts))
        self._write_peers()

    def unpeer(self, other: str) -> None:
        self.peers = [p for p in self.peers if p.router_id != other]
        self._write_peers()

    def _write_peers(self) -> None:
        self.cfg.sections = [s for s in self.cfg.sections if s.type != "peer"]
        for p in self.peers:
            self.cfg.sections.append(Section("peer", p.router_id.replace("-", "_"), dict(p.options)))
        self.cfg.write()

    def start(self) -> "MeshRouter":
        self.cfg.write()
        self.stack.start()
        return self

    def stop(self) -> None:
        self.stack.stop()

    def reload(self) -> None:
        self.cfg.write()
        p = self.stack.ctl("reload")
        if p.returncode != 0:
            raise AssertionError(f"{self.name}: agentctl reload: {p.stderr.decode(errors='replace')}")

    # ---- observations ------------------------------------------------------
    def peers_status(self) -> List[Dict[str, Any]]:
        value = self.stack.ctl_json("peers")
        if isinstance(value, dict):
            value = value.get("peers", [])
        return value

    def peer(self, router_id: str) -> Optional[Dict[str, Any]]:
        for p in self.peers_status():
            if p.get("router_id") == router_id:
                return p
        return None

    def wait_established(self, router_id: str, timeout: float = 15.0) -> Dict[str, Any]:
        def check() -> Optional[Dict[str, Any]]:
            p = self.peer(router_id)
            return p if p and p.get("state") == "established" else None

        return wait_for(f"{self.name}: session with {router_id} established", check, timeout=timeout)

    def peer_routes(self) -> List[Dict[str, Any]]:
        return [r for r in self.stack.routes() if r.get("source") == "peer"]

    def remote_set(self, eligible_only: bool = True) -> Dict[str, List[str]]:
        """route_id → path of each peer path held (eligible ones only by
        default)."""
        out: Dict[str, List[str]] = {}
        for r in self.peer_routes():
            if eligible_only and not r.get("eligible", True):
                continue
            out[str(r["route_id"]) + "@" + str(r.get("next_hop"))] = list(r.get("path") or [])
        return out

    def register(self, route_id: str, capability: str = "demo.echo", tenant: str = "lab",
                 lease: int = 30, **extra: Any) -> Dict[str, Any]:
        """A LAN registration at this router (the endpoint is the test
        host's management address: nothing calls it in control-plane
        tests)."""
        body: Dict[str, Any] = {
            "route_id": route_id,
            "intent": capability,
            "version": 1,
            "origin": f"agent://{tenant}/{route_id}",
            "endpoint": f"http://{self.ns.mgmt_host_addr}:9/invoke",
            "tenant": tenant,
            "lease_seconds": lease,
        }
        body.update(extra)
        return self.stack.register(body)

    # ---- the data plane ----------------------------------------------------
    @property
    def sdk_url(self) -> str:
        """The SDK API as a caller on this router's LAN reaches it."""
        return self.stack.http.base_url

    def lan_backend(self, **kw: Any) -> Backend:
        """A handler endpoint on this router's LAN (the test host's side of
        the management veth: only this router's namespace reaches it). The
        caller closes it."""
        return Backend(host=self.ns.mgmt_host_addr, **kw)

    def serve(self, backend: Backend, capability: str, *, tenant: str = "lab", name: str = "echo",
              lease: int = 60, **extra: Any) -> str:
        """Registers `capability` at this router with `backend` as its
        handler; returns the route id."""
        body = registration(capability, backend.endpoint, tenant=tenant, name=name, lease_seconds=lease, **extra)
        return str(self.stack.register(body)["route_id"])

    def gateway_stats(self, after: Optional[float] = None, timeout: float = 15.0) -> Dict[str, Any]:
        """The gateway part of `agentctl stats --json`. With `after` (a
        `time.monotonic()` value), waits for a report the gateway made
        after that moment (its `age_ms` says how old the report is)."""

        def check() -> Optional[Dict[str, Any]]:
            gw = self.stack.ctl_json("stats").get("gateway")
            if not isinstance(gw, dict):
                return None
            if after is not None:
                made = time.monotonic() - float(gw.get("age_ms", 0)) / 1000.0
                if made < after:
                    return None
            return gw

        return wait_for(f"{self.name}: a gateway stats report", check, timeout=timeout, interval=0.1)

    def unregister(self, route_id: str) -> None:
        r = self.stack.http.post("/agent/v1/unregister", {"route_id": route_id})
        if r.status not in (200, 204):
            raise AssertionError(f"unregister {route_id}: {r.describe()}")
