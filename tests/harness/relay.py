"""Set-ups of the relay tests (test_relay.py, DESIGN §7 "Relay (NAT)"):
router B behind a NAT router (nftables masquerade and a stateful
forward chain, as a carrier's NAT or a hotel network behaves: outbound
connections pass, nothing gets in), relays A (and A2) reachable from it,
and a caller's router C peered with the relays.

```
   C ── A ──┐
   └── A2 ──┤ (the NAT's WAN side: one link per relay)
           NAT ── B (relay client; its LAN serves the agent)
```
"""

from __future__ import annotations

import ipaddress
import subprocess
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .config import Section
from .jwt import TenantKey
from .mesh import ARPX_PORT, PEER_PORT, Link, MeshRouter, RouterNs


def _run(*argv: str, input: Optional[str] = None) -> None:
    p = subprocess.run(list(argv), capture_output=True, text=True, input=input,
                       stdin=None if input is not None else subprocess.DEVNULL, timeout=20)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {p.stderr.strip()}")


@dataclass
class NatTopology:
    b: MeshRouter
    #: Further client routers behind the same NAT (router-b2, ...).
    more: List[MeshRouter]
    c: MeshRouter
    relays: List[MeshRouter]
    nat: RouterNs
    #: B's side of its link to the NAT.
    inside: Link
    #: Per relay: the NAT–relay link (the relay's address is its ARPX host).
    wan: List[Link]
    lab: TenantKey
    token: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def b_addr(self) -> str:
        return self.inside.addr_of(self.b.name)

    def relay_addr(self, i: int) -> str:
        return self.wan[i].addr_of(self.relays[i].name)


def connect_from(ns: str, host: str, port: int, timeout: float = 2.0) -> Optional[str]:
    """Tries a TCP connection from namespace `ns`; None if it opened,
    else why not."""
    code = ("import socket,sys\n"
            "s=socket.socket(); s.settimeout(float(sys.argv[3]))\n"
            "try:\n s.connect((sys.argv[1], int(sys.argv[2]))); print('open')\n"
            "except Exception as e:\n print(type(e).__name__)\n")
    p = subprocess.run(["ip", "netns", "exec", ns, "python3", "-c", code, host, str(port), str(timeout)],
                       capture_output=True, text=True, timeout=timeout + 10, stdin=subprocess.DEVNULL)
    out = p.stdout.strip()
    return None if out == "open" else (out or p.stderr.strip())


def nat_box(nat: RouterNs, inside: List[Tuple[RouterNs, Link]], wan: List[Tuple[RouterNs, Link]]) -> None:
    """Makes namespace `nat` the NAT router of the `inside` routers (each
    with its link to the NAT): their default route is the NAT, which
    masquerades what leaves on the `wan` links and forwards nothing that
    arrives from outside unless it belongs to a connection made from
    inside. The `wan` routers get a route to each inside network through
    the NAT (as if they could reach it), so only the NAT stands in the
    way."""
    for ns, l in inside:
        _run("ip", "-n", ns.netns, "route", "add", "default", "via", l.addr_of(nat.name))
        net = str(ipaddress.ip_interface(f"{l.addr_of(ns.name)}/30").network)
        for r, w in wan:
            _run("ip", "-n", r.netns, "route", "add", net, "via", w.addr_of(nat.name))
    _run("ip", "netns", "exec", nat.netns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
    nat_side = lambda l: l.a_if if l.a == nat.name else l.b_if  # noqa: E731
    inside_ifs = ", ".join(f'"{nat_side(l)}"' for _, l in inside)
    wan_ifs = ", ".join(f'"{nat_side(l)}"' for _, l in wan)
    rules = f"""
table ip natbox {{
  chain postrouting {{
    type nat hook postrouting priority srcnat; policy accept;
    oifname {{ {wan_ifs} }} masquerade
  }}
  chain forward {{
    type filter hook forward priority filter; policy drop;
    ct state established,related accept
    iifname {{ {inside_ifs} }} accept
  }}
}}
"""
    _run("ip", "netns", "exec", nat.netns, "nft", "-f", "-", input=rules)


def build_nat(mesh: Any, *, relays: int = 1, clients: int = 1, gateway: Optional[Dict[str, Any]] = None,
              tenant: Optional[Dict[str, Any]] = None, c_gateway: Optional[Dict[str, Any]] = None,
              pins: bool = True,
              b_relay: Optional[Dict[str, Any]] = None, a_relay: Optional[Dict[str, Any]] = None) -> NatTopology:
    """The topology above with `relays` relays (router-a, router-a2), each
    peered with C; B's relay section lists them in order, pinned by key
    (no domain CA: the relays admit B by `client_key_fingerprint`), or
    with `pins=False` not pinned (the caller gives every router a domain
    certificate). Not started."""
    lab = TenantKey.generate()
    gw = dict(gateway or {})
    c = mesh.router("router-c", gateway={"auth": "jwt", **gw, **(c_gateway or {})},
                    tenants=[("lab", {"name": "lab", "jwt_key": [lab.uci_value], **(tenant or {})})])
    names = ["router-a", "router-a2"][:relays]
    rs = [mesh.router(n, gateway=gw) for n in names]
    b = mesh.router("router-b", gateway=gw)
    more = [mesh.router(f"router-b{i}", gateway=gw) for i in range(2, clients + 1)]
    nat = mesh.net.add_router("nat")
    inside = mesh.net.link("router-b", "nat")
    inside_more = [mesh.net.link(m.name, "nat") for m in more]
    wan = [mesh.net.link("nat", r.name) for r in rs]
    for r in rs:
        mesh.link(r.name, "router-c")
    nat_box(nat, [(x.ns, l) for x, l in ((b, inside), *zip(more, inside_more))], [(r.ns, l) for r, l in zip(rs, wan)])
    for r in rs:
        r.cfg.sections.append(Section("relay", "relay", {
            "mode": "server",
            **({"client_key_fingerprint": [x.key.fingerprint for x in (b, *more)]} if pins else {}),
            **(a_relay or {}),
        }))
    for client in (b, *more):
        client.cfg.sections.append(Section("relay", "relay", {
            "mode": "client",
            "server": [f"{l.addr_of(r.name)}:{ARPX_PORT}" for r, l in zip(rs, wan)],
            **({"server_key_fingerprint": [r.key.fingerprint for r in rs]} if pins else {}),
            "data_port": PEER_PORT,
            **(b_relay or {}),
        }))
    return NatTopology(b=b, more=more, c=c, relays=rs, nat=nat, inside=inside, wan=wan, lab=lab)


def start(t: NatTopology) -> NatTopology:
    """Starts every router and waits for B's session with its first relay
    and the relays' with C; mints C's caller token."""
    for r in (*t.relays, t.c, t.b, *t.more):
        r.start()
    for r in t.relays:
        r.wait_established("router-c", timeout=30)
    t.relays[0].wait_established("router-b", timeout=30)
    disc = t.c.stack.http.get("/agent/v1/authentication")
    assert disc.status == 200, disc.describe()
    aud = disc.json()["authentication"]["audience"]
    t.token = t.lab.mint(tenant="lab", sub="agent://lab/caller", scopes=("agent.invoke", "agent.route"), aud=aud)
    return t

