#!/usr/bin/env python3
"""Discovery figures for issue 24's closing note, from real routers in
network namespaces (run as root; debug binaries of this tree unless
DISCOVERY_FIGURES_BIN_DIR names others), printed as one JSON object:

1. `mdns_announcement_to_candidate_ms` — router B runs with discovery
   off; a reload turns it on. Measured from the moment B's reload is
   answered to the first `agentctl candidates` of A that lists B
   (polled every 10 ms). B's own mDNS probing (RFC 6762 §8.1: three
   probes 250 ms apart after a random 0–250 ms wait) is inside this
   figure, so it is "from the decision to announce"; mdns-sd sends the
   announcement right after the probes.
2. `end_of_announcements_to_refused_calls_ms` — A admits B by allowlist
   (an in-memory peer while its candidate lives), B serves `demo.echo`,
   A's gateway forwards calls to it. B's discovery is turned off by a
   reload (goodbye packets: the announcement ends). Measured from the
   moment that reload is answered to the first call at A's gateway
   refused with `no_route` (polled every 10 ms); calls that failed
   otherwise on the way (in flight when the session closed) are listed
   by error code. Expected: about
   `discovery.candidate_lifetime_s` (default 5 s) — the candidate lives
   that long after its announcement ends, then the admission, the peer
   session and its routes go.

Each figure is taken DISCOVERY_FIGURES_RUNS (3) times; min, median and
max are printed. Every loop is bounded; everything runs in namespaces
this script creates (TEST-NET addresses) and is stopped by PID.
"""

from __future__ import annotations

import json
import subprocess
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from harness.http import envelope  # noqa: E402
from harness.mesh import MeshNet, MeshRouter  # noqa: E402
from harness.poll import wait_for  # noqa: E402
from harness.procs import Binaries  # noqa: E402

RUNS = int(os.environ.get("DISCOVERY_FIGURES_RUNS", "3"))
POLL_S = 0.01
#: Error codes of calls that failed otherwise than no_route on the way.
OTHER_FAILURES: List[str] = []


def binaries() -> Binaries:
    d = Path(os.environ.get("DISCOVERY_FIGURES_BIN_DIR", REPO / "target" / "debug"))
    return Binaries(d / "agentd", d / "agentctl", d / "agent-gw")


def until(what: str, check: Callable[[], bool], limit_s: float) -> float:
    """Polls `check` every POLL_S until true; the monotonic time it was."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        time.sleep(POLL_S)
    raise RuntimeError(f"{what}: not within {limit_s} s")


def summary(values: List[float]) -> Dict[str, Any]:
    return {"runs": len(values), "min": round(min(values), 1), "median": round(statistics.median(values), 1),
            "max": round(max(values), 1), "values": [round(v, 1) for v in values]}


def pair(bins: Binaries, dir: Path, admission: str) -> tuple:
    net = MeshNet()
    a = MeshRouter(bins, net, net.add_router("router-a"), dir / "router-a")
    b = MeshRouter(bins, net, net.add_router("router-b"), dir / "router-b")
    link = net.link("router-a", "router-b")
    for r, ifname in ((a, link.a_if), (b, link.b_if)):
        subprocess.run(["ip", "-n", r.ns.netns, "link", "set", ifname, "multicast", "on"], check=True)
        r.cfg.section("discovery").options = {"enabled": 1, "admission": admission, "interface": [ifname],
                                              "nexus_alias": 0}
    return net, a, b


def candidates(r: MeshRouter) -> Dict[str, Any]:
    return {c["id"]: c for c in r.stack.ctl_json("candidates")["candidates"]}


def announcement_to_candidate(bins: Binaries, dir: Path) -> float:
    net, a, b = pair(bins, dir, "off")
    try:
        b.cfg.section("discovery").options["enabled"] = 0
        a.start()
        b.start()
        b.cfg.section("discovery").options["enabled"] = 1
        b.reload()
        t0 = time.monotonic()
        t1 = until("A lists B", lambda: "router-b" in candidates(a), 30)
        return (t1 - t0) * 1000
    finally:
        a.stop()
        b.stop()
        net.close()


def end_to_refusal(bins: Binaries, dir: Path) -> float:
    net, a, b = pair(bins, dir, "allowlist")
    backend = None
    try:
        a.cfg.section("discovery").options["allow_fingerprint"] = [b.key.fingerprint]
        b.cfg.section("discovery").options["allow_fingerprint"] = [a.key.fingerprint]
        a.start()
        b.start()
        a.wait_established("router-b", timeout=30)
        backend = b.lan_backend()
        b.serve(backend, "demo.echo")
        call = envelope("demo.echo", {"x": 1})
        wait_for("A routes demo.echo to B", lambda: a.stack.http.post("/agent/v1/invoke", call).status == 200,
                 timeout=30, interval=0.05)
        b.cfg.section("discovery").options["enabled"] = 0
        b.reload()
        t0 = time.monotonic()
        others: List[str] = []

        def refused() -> bool:
            resp = a.stack.http.post("/agent/v1/invoke", call)
            if resp.status == 200:
                return False
            code = (resp.json().get("error") or {}).get("code")
            if code == "no_route":
                return True
            # A call in flight when the peer session closes fails with its
            # own typed outcome; counted, not the figure.
            others.append(code)
            return False

        t1 = until("A refuses demo.echo", refused, 60)
        OTHER_FAILURES.extend(others)
        return (t1 - t0) * 1000
    finally:
        if backend is not None:
            backend.close()
        a.stop()
        b.stop()
        net.close()


def main() -> None:
    bins = binaries()
    out: Dict[str, Any] = {"bin_dir": str(bins.agentd.parent), "candidate_lifetime_s": 5}
    with tempfile.TemporaryDirectory(prefix="disc-figures-") as tmp:
        base = Path(tmp)
        first = [announcement_to_candidate(bins, base / f"a{i}") for i in range(RUNS)]
        second = [end_to_refusal(bins, base / f"e{i}") for i in range(RUNS)]
    out["mdns_announcement_to_candidate_ms"] = summary(first)
    out["end_of_announcements_to_refused_calls_ms"] = summary(second)
    out["end_of_announcements_other_failures"] = OTHER_FAILURES
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
