"""A diamond (A–B, A–C, B–D, C–D; reflectors at B and C): D holds two paths
to each of A's routes; cutting B leaves D on the C path with no gap in
eligibility (sampled continuously while the cut happens); a withdraw at A
removes the route everywhere."""

from __future__ import annotations

import threading
import time

from harness.http import envelope
from harness.poll import wait_for


def diamond(mesh):
    a = mesh.router("router-a")
    b = mesh.router("router-b", reflector=True)
    c = mesh.router("router-c", reflector=True)
    d = mesh.router("router-d")
    mesh.link("router-a", "router-b")
    mesh.link("router-a", "router-c")
    mesh.link("router-b", "router-d")
    mesh.link("router-c", "router-d")
    for r in (a, b, c, d):
        r.start()
    for x, y in (("router-d", "router-b"), ("router-d", "router-c"), ("router-a", "router-b"), ("router-a", "router-c")):
        mesh.routers[x].wait_established(y)
    return a, b, c, d


class EligibilityProbe:
    """Asks D's gateway for the route to `capability` every 5 ms (under the
    tenant's default 200/s rate; bounded in time) and records every
    refusal."""

    def __init__(self, router, capability: str, max_seconds: float = 60.0) -> None:
        self.router = router
        self.capability = capability
        self.asked = 0
        self.refused = []
        self._stop = threading.Event()
        self._deadline = time.monotonic() + max_seconds
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        env = envelope(self.capability, {})
        while not self._stop.is_set() and time.monotonic() < self._deadline:
            r = self.router.stack.http.post("/agent/v1/route", env)
            self.asked += 1
            if r.status != 200:
                self.refused.append(r.describe())
            self._stop.wait(0.005)

    def __enter__(self) -> "EligibilityProbe":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join(timeout=5)


def test_two_paths_fast_failover_and_withdraw_everywhere(mesh):
    a, b, c, d = diamond(mesh)
    rid = a.register("svc", capability="demo.diamond")["route_id"]

    def two_paths():
        held = d.remote_set()
        return held if {f"{rid}@router-b", f"{rid}@router-c"} <= set(held) else None

    held = wait_for("D to hold both paths", two_paths, timeout=20)
    assert held[f"{rid}@router-b"] == ["router-a", "router-b"]
    assert held[f"{rid}@router-c"] == ["router-a", "router-c"]

    # D's gateway decides on its FIB copy: wait until that copy routes it
    # too before probing (the RIB holding both paths comes first).
    d.stack.wait_routable(envelope("demo.diamond", {}), timeout=20)
    with EligibilityProbe(d, "demo.diamond") as probe:
        wait_for("probe running", lambda: probe.asked >= 5, timeout=10)
        before = probe.asked
        # Cut B from the mesh abruptly (killed, not a graceful close).
        b.stack.agentd.kill9()
        wait_for("D to drop the B path", lambda: f"{rid}@router-b" not in d.remote_set(), timeout=20)
        wait_for("more lookups after the cut", lambda: probe.asked >= before + 20, timeout=10)
    assert probe.refused == [], f"lookups refused during failover: {probe.refused[:5]}"
    assert f"{rid}@router-c" in d.remote_set()

    a.unregister(rid)
    for r in (b, c, d):
        if r is b:
            continue
        wait_for(f"{r.name} to forget {rid}", lambda r=r: all(x["route_id"] != rid for x in r.peer_routes()), timeout=15)
