"""Discovery on namespaced routers (tests only): routers with `config
discovery` on, linked by a veth with multicast on (no `peer` sections:
the routers are to find each other over mDNS), and readers for what the
daemon reports (`agentctl candidates`) and what approve writes (the
`peer` sections of the config file). Used by test_discovery.py and by
test_luci_discovery.py (the Peers page against real candidates)."""

from __future__ import annotations

import subprocess
from typing import Any, Dict, List, Optional, Sequence, Tuple

from harness.mesh import MeshRouter
from harness.poll import wait_for

#: discovery.candidate_lifetime_s of the test routers (short, so a
#: stopped router's candidate goes away within a test).
LIFETIME_S = 2


def discovery_router(mesh: Any, name: str, admission: str, interfaces: Sequence[str] = (),
                     agentd: Optional[Dict[str, Any]] = None, **disc: Any) -> MeshRouter:
    """A router of `mesh` with discovery on in `admission` mode (more
    `config agentd` options in `agentd`, `config discovery` ones in
    `disc`)."""
    r = mesh.router(name, agentd=agentd)
    opts: Dict[str, Any] = {
        "enabled": 1,
        "admission": admission,
        "candidate_lifetime_s": LIFETIME_S,
        "interface": list(interfaces),
    }
    opts.update(disc)
    r.cfg.section("discovery").options = opts
    return r


def discovery_link(mesh: Any, a: MeshRouter, b: MeshRouter) -> None:
    """A veth between a and b with multicast on (no peer sections); each
    side's discovery interface is its end of the link."""
    link = mesh.net.link(a.name, b.name)
    for r, ifname in ((a, link.a_if), (b, link.b_if)):
        subprocess.run(["ip", "-n", r.ns.netns, "link", "set", ifname, "multicast", "on"], check=True,
                       capture_output=True, stdin=subprocess.DEVNULL)
        d = r.cfg.section("discovery").options
        d["interface"] = list(d.get("interface") or []) + [ifname]


def linked_pair(mesh: Any, admission: str) -> Tuple[MeshRouter, MeshRouter]:
    """router-a and router-b with discovery on in `admission` mode, no
    peer sections, one multicast link between them, both started."""
    a = discovery_router(mesh, "router-a", admission)
    b = discovery_router(mesh, "router-b", admission)
    discovery_link(mesh, a, b)
    a.start()
    b.start()
    return a, b


def discovery_segment(mesh: Any, routers: Sequence[MeshRouter]) -> Dict[str, str]:
    """One LAN (a bridge) shared by `routers`, each announcing and
    browsing on its end; returns router name → its address there."""
    seg = mesh.net.segment([r.name for r in routers])
    for r in routers:
        d = r.cfg.section("discovery").options
        d["interface"] = list(d.get("interface") or []) + [seg[r.name][0]]
    return {name: addr for name, (_, addr) in seg.items()}


def candidate_rows(r: MeshRouter) -> List[Dict[str, Any]]:
    """Every row of `agentctl candidates --json` (several hosts may
    announce one router_id)."""
    return list(r.stack.ctl_json("candidates")["candidates"])


def candidates(r: MeshRouter) -> Dict[str, Dict[str, Any]]:
    """`agentctl candidates --json` of r, router_id → candidate."""
    v = r.stack.ctl_json("candidates")
    return {c["id"]: c for c in v["candidates"]}


def wait_candidate(r: MeshRouter, other: MeshRouter, timeout: float = 20.0) -> Dict[str, Any]:
    return wait_for(f"{r.name}: {other.name} discovered", lambda: candidates(r).get(other.name), timeout=timeout)


def peer_sections(r: MeshRouter) -> Dict[str, Dict[str, str]]:
    """`peer` sections of the router's config file (as agentd wrote it),
    router_id → options."""
    out: Dict[str, Dict[str, str]] = {}
    cur: Optional[Dict[str, str]] = None
    for line in r.cfg.path.read_text(encoding="utf-8").splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] == "config":
            cur = {} if words[1] == "peer" else None
            continue
        if cur is not None and words[0] == "option" and len(words) >= 3:
            cur[words[1]] = " ".join(words[2:]).strip("'")
            if words[1] == "router_id":
                # Options after router_id land in the same dict object.
                out[cur["router_id"]] = cur
    return out
