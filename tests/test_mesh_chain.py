"""A–B–C chain (A and C not adjacent), real binaries and real TLS in three
namespaces: reflection at B decides whether C learns A's routes (path
[A, B]); withdraws propagate; B's restart with a new boot epoch after A's
routes changed leaves C with exactly the new set; a withdrawn route never
reappears; tenants travel unchanged and a peer's export_tenant filter holds."""

from __future__ import annotations

import threading
import time
from typing import Dict, List, Set

from harness.poll import wait_for


def base_ids(router) -> Set[str]:
    """Base route ids of the eligible peer paths `router` holds."""
    return {k.split("@", 1)[0] for k in router.remote_set()}


def wait_remote(router, want: Set[str], timeout: float = 15.0) -> Dict[str, List[str]]:
    def check():
        got = router.remote_set()
        return (got,) if {k.split("@", 1)[0] for k in got} == want else None

    return wait_for(f"{router.name} to hold exactly {sorted(want)}", check, timeout=timeout)[0]


class NeverSeen:
    """Watches a router's peer paths in the background and records any id
    of `forbidden` it ever sees (bounded: stops by itself)."""

    def __init__(self, router, forbidden: Set[str], max_seconds: float = 60.0) -> None:
        self.router = router
        self.forbidden = set(forbidden)
        self.seen: Set[str] = set()
        self._stop = threading.Event()
        self._deadline = time.monotonic() + max_seconds
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set() and time.monotonic() < self._deadline:
            try:
                self.seen |= {r["route_id"] for r in self.router.peer_routes()} & self.forbidden
            except Exception:  # noqa: BLE001 - B restarting: nothing to see
                pass
            self._stop.wait(0.05)

    def __enter__(self) -> "NeverSeen":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join(timeout=5)


def chain(mesh, reflector: bool):
    a = mesh.router("router-a")
    b = mesh.router("router-b", reflector=reflector)
    c = mesh.router("router-c")
    mesh.link("router-a", "router-b")
    mesh.link("router-b", "router-c")
    for r in (a, b, c):
        r.start()
    b.wait_established("router-a")
    b.wait_established("router-c")
    return a, b, c


def test_reflection_off_then_on_at_b(mesh):
    a, b, c = chain(mesh, reflector=False)
    ids = {a.register(f"r{i}")["route_id"] for i in range(4)}
    wait_remote(b, ids)
    assert all(path == ["router-a"] for path in b.remote_set().values())
    # B holds A's routes and has C's session up: C holding nothing of A's
    # is a decision (no transit), not a slow convergence. B's own route
    # proves the B→C direction works.
    own = b.register("b-own")["route_id"]
    wait_remote(c, {own})
    assert base_ids(c) == {own}

    # Reflection on at B (SIGHUP): now C learns A's routes through B.
    b.cfg.section("arpx").options["reflector"] = 1
    b.reload()
    held = wait_remote(c, ids | {own}, timeout=20)
    for key, path in held.items():
        want = ["router-b"] if key.startswith(own + "@") else ["router-a", "router-b"]
        assert path == want, held


def test_reflection_withdraw_restart_and_exact_convergence(mesh):
    a, b, c = chain(mesh, reflector=True)
    first = [a.register(f"r{i}")["route_id"] for i in range(6)]
    held = wait_remote(c, set(first))
    assert all(path == ["router-a", "router-b"] for path in held.values()), held
    assert all(k.endswith("@router-b") for k in held), "C's next hop for A's routes is B"

    # Withdraw half at A: gone at C (and they must never come back).
    gone, kept = first[:3], first[3:]
    for rid in gone:
        a.unregister(rid)
    wait_remote(c, set(kept))

    with NeverSeen(c, set(gone)) as watch:
        # B down; A replaces its remaining routes meanwhile.
        b.stop()
        wait_remote(c, set(), timeout=20)  # C's session to B is lost: nothing eligible
        for rid in kept:
            a.unregister(rid)
        new = {a.register(f"n{i}")["route_id"] for i in range(5)}
        # B back with a new boot epoch: C converges to exactly the new set.
        b.stack.start()
        wait_remote(c, new, timeout=30)
        assert base_ids(c) == new
    assert watch.seen == set(), f"withdrawn routes reappeared at C: {watch.seen}"
    # Nothing of the old set lingers as an ineligible leftover either.
    leftovers = {r["route_id"] for r in c.peer_routes()} - new
    assert leftovers == set(), leftovers


def test_tenants_travel_unchanged_and_export_tenant_filters(mesh):
    a = mesh.router("router-a")
    b = mesh.router("router-b", reflector=True)
    c = mesh.router("router-c")
    d = mesh.router("router-d")
    mesh.link("router-a", "router-b")
    mesh.link("router-b", "router-c")
    # B exports only tenant lab to D.
    mesh.link("router-b", "router-d", a_opts={"export_tenant": ["lab"]})
    for r in (a, b, c, d):
        r.start()
    for peer in ("router-a", "router-c", "router-d"):
        b.wait_established(peer)
    lab = a.register("lab-svc", tenant="lab")["route_id"]
    ops = a.register("ops-svc", capability="ops.secret", tenant="ops")["route_id"]
    held = wait_remote(c, {lab, ops})
    by_id = {r["route_id"]: r for r in c.peer_routes()}
    assert by_id[ops]["tenant"] == "ops" and by_id[lab]["tenant"] == "lab", held
    wait_remote(d, {lab})
    assert ops not in base_ids(d)

    # At C, a caller of tenant lab does not reach the ops route; one of
    # tenant ops does, through B.
    refused = c.stack.ctl_json("lookup", "ops.secret", "--tenant", "lab")
    assert refused["winner"] is None and refused["refusal"] == "tenant_access", refused
    ok = c.stack.ctl_json("lookup", "ops.secret", "--tenant", "ops")
    assert ok["winner"] == f"{ops}@router-b", ok
