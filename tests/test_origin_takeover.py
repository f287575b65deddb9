"""Origins are owned mesh-wide (issue 20, item 1; docs/trust-model.md).

Chain A–B–C in namespaces, B a reflector, A and C with `auth jwt` and
trusted-LAN bootstrap for their own LAN host. A's LAN agent (a real
backend) registers `agent://lab/echo` `demo.echo` through bootstrap. Once
C has learned it, every unproven claim of that origin at C is refused with
403 `forbidden`, reason `origin_owned_elsewhere`, naming router-a: a
bootstrap token (a), a registration with C on `auth none` (b), a static
route on reload (c). Throughout, callers on A's LAN invoking with
`target_agent agent://lab/echo` are all answered by A's agent (e) and the
A–B and B–C sessions stay established (f). A tenant-signed token for the
origin does add a replica at C (d) — and, proven, it wins over A's
bootstrap claim until it is withdrawn. After A's agent unregisters, the
agent that moved registers at C (g)."""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List, Optional

from harness.attack import Sampler
from harness.config import Section
from harness.http import envelope
from harness.jwt import TenantKey, bearer
from harness.poll import wait_for

ORIGIN = "agent://lab/echo"
REASON = "origin_owned_elsewhere"


def auth_jwt(r, lab: TenantKey) -> None:
    """`auth jwt` with tenant `lab`'s key, bootstrap for the router's LAN
    host (the test host's side of its management veth)."""
    gw = r.cfg.section("gateway").options
    gw["auth"] = "jwt"
    gw["bootstrap_networks"] = [f"{r.ns.mgmt_host_addr}/32"]
    gw["bootstrap_tenant"] = ["lab"]
    r.cfg.sections = [s for s in r.cfg.sections if s.type != "tenant"]
    r.cfg.sections.append(Section("tenant", "lab", {"name": "lab", "jwt_key": [lab.uci_value]}))


def restart_gateway(r, auth: str) -> None:
    r.cfg.section("gateway").options["auth"] = auth
    r.cfg.write()
    r.stack.gw.stop()
    r.stack.start_gw()


def audience(r) -> str:
    return r.stack.http.get("/agent/v1/authentication").json()["authentication"]["audience"]


def bootstrap(r) -> Any:
    return r.stack.http.post("/agent/v1/bootstrap", {"tenant": "lab", "origin": ORIGIN})


def body(backend_endpoint: str, lease: int = 120) -> Dict[str, Any]:
    return {"intent": "demo.echo", "origin": ORIGIN, "endpoint": backend_endpoint, "tenant": "lab",
            "version": 1, "lease_seconds": lease}


def refused_elsewhere(resp, router: str = "router-a") -> None:
    err = resp.json().get("error", {})
    assert (resp.status, err.get("code"), err.get("reason")) == (403, "forbidden", REASON), resp.describe()
    assert router in err.get("message", ""), resp.describe()


def route_of(r, route_id: str) -> Optional[Dict[str, Any]]:
    return next((x for x in r.stack.routes() if x["route_id"] == route_id), None)


class Callers:
    """Callers on A's LAN invoking `demo.echo` with `target_agent` in a
    thread, bounded in count and time: each answer must come from A's
    agent (its route id, echoed by the backend)."""

    def __init__(self, a, token: str, want_route: str, max_calls: int = 1500, max_s: float = 90.0) -> None:
        self.a = a
        self.headers = bearer(token)
        self.want_route = want_route
        self.max_calls, self.deadline = max_calls, time.monotonic() + max_s
        self.attempts = 0
        self.by_a = 0
        self.others: List[str] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set() and self.attempts < self.max_calls and time.monotonic() < self.deadline:
            env = envelope("demo.echo", {"n": self.attempts}, target_agent=ORIGIN)
            self.attempts += 1
            try:
                resp = self.a.stack.http.post("/agent/v1/invoke", env, headers=self.headers)
                served = resp.json().get("route_id") if resp.status == 200 else None
                if served == self.want_route:
                    self.by_a += 1
                else:
                    self.others.append(f"{resp.status} {served}")
            except Exception as e:  # noqa: BLE001 - counted as a failure
                self.others.append(repr(e))
            self._stop.wait(0.05)

    def __enter__(self) -> "Callers":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join(timeout=30)

    def summary(self) -> str:
        return f"A's callers: {self.by_a}/{self.attempts} answered by A's agent (others: {self.others[:5]})"


def test_an_origin_living_on_a_cannot_be_claimed_at_c(mesh):
    lab = TenantKey.generate()
    a = mesh.router("router-a")
    b = mesh.router("router-b", reflector=True)
    c = mesh.router("router-c")
    mesh.link("router-a", "router-b")
    mesh.link("router-b", "router-c")
    auth_jwt(a, lab)
    auth_jwt(c, lab)
    for r in (a, b, c):
        r.start()
    b.wait_established("router-a")
    b.wait_established("router-c")

    a_agent = a.lan_backend()
    c_host = c.lan_backend()
    try:
        # A's LAN agent: trusted-LAN bootstrap, then its registration.
        tok = bootstrap(a)
        assert tok.status == 200, tok.describe()
        a_token = tok.json()["access_token"]
        reg = a.stack.http.post("/agent/v1/register", body(a_agent.endpoint), headers=bearer(a_token))
        assert reg.status == 200, reg.describe()
        rid = reg.json()["route_id"]
        assert route_of(a, rid)["proof"] == "bootstrap"

        def c_holds():
            x = next((r for r in c.peer_routes() if r["route_id"] == rid), None)
            return x if x and x.get("eligible") else None

        held = wait_for("C to learn A's route", c_holds, timeout=20)
        assert held["path"] == ["router-a", "router-b"] and held["proof"] == "bootstrap", held

        caller = lab.mint(tenant="lab", sub="agent://lab/caller", scopes=["agent.invoke", "agent.route"],
                          aud=audience(a), lifetime=600)
        sessions = Sampler([(a, "router-b"), (b, "router-a"), (b, "router-c"), (c, "router-b")])
        with Callers(a, caller, rid) as callers:
            wait_for("A's callers under way", lambda: callers.attempts >= 5, timeout=10)
            # (a) a host on C's LAN asks C for a bootstrap token for A's
            # origin. (The gateway decides on its FIB replica, a moment
            # behind agentd's table: wait for the first refusal.)
            answers: List[str] = []

            def refused_at_c():
                resp = bootstrap(c)
                answers.append(str(resp.status))
                return resp if resp.status == 403 else None

            refused_elsewhere(wait_for("C's gateway to refuse the bootstrap", refused_at_c, timeout=5))
            assert answers.count("200") == 0, answers

            # (c) a static route at C naming the origin, trust 100: the
            # reload is refused with the reason, and status says why.
            c.cfg.sections.append(Section("route", "stolen", {
                "capability": "demo.echo", "version": 1, "origin": ORIGIN,
                "endpoint": c_host.endpoint, "trust": 100,
            }))
            c.cfg.write()
            p = c.stack.ctl("reload")
            out = (p.stdout + p.stderr).decode(errors="replace")
            assert p.returncode != 0 and REASON in out and "router-a" in out and "stolen" in out, out
            status = c.stack.ctl_json("status")
            assert REASON in str(status), status
            assert REASON in c.stack.agentd.log_text(), "the refused reload is logged with its reason"
            assert route_of(c, "static:stolen") is None
            c.cfg.sections = [s for s in c.cfg.sections if s.name != "stolen"]
            c.reload()

            # (b) C on auth none: a plain registration of the origin.
            restart_gateway(c, "none")
            resp = c.stack.http.post("/agent/v1/register", body(c_host.endpoint))
            refused_elsewhere(resp)
            restart_gateway(c, "jwt")
            # Keep calling a while after the attempts, too.
            wait_for("A's callers to make 100 calls", lambda: callers.attempts >= 100, timeout=60)
        sessions.assert_always_established()
        assert callers.attempts >= 100 and callers.by_a == callers.attempts, callers.summary()
        print(callers.summary())
        # Nothing of C's attempts reached A's table or C's own.
        assert [r for r in c.stack.routes() if r["origin"] == ORIGIN and r["source"] != "peer"] == []
        # (By id: the remaining lease ticks between two reads.)
        assert [r["route_id"] for r in a.stack.routes() if r["origin"] == ORIGIN] == [rid]

        # (d) a tenant-signed token whose subject is the origin adds a
        # replica at C. Proven, it wins over A's bootstrap claim
        # everywhere: target_agent never picks an unproven claim over it.
        jwt = lab.mint(tenant="lab", sub=ORIGIN, scopes=["agent.register"], aud=audience(c))
        rep = c.stack.http.post("/agent/v1/register", body(c_host.endpoint), headers=bearer(jwt))
        assert rep.status == 200, rep.describe()
        replica = rep.json()["route_id"]
        assert route_of(c, replica)["proof"] == "jwt"
        wait_for("A's bootstrap claim to lose to the proven replica",
                 lambda: (route_of(a, rid) or {}).get("disputed") is True, timeout=20)
        look = a.stack.ctl_json("lookup", "demo.echo", "--tenant", "lab", "--explain")
        assert look["winner"] == f"{replica}@router-b", look
        assert look["candidates"][0]["proof"] == "jwt" and look["rejections"].get("origin_disputed") == 1, look
        # A's gateway selects on its FIB replica the same way.
        picked = wait_for("A's gateway to pick the proven replica", lambda: (lambda r: r.json() if r.status == 200
                          and str(r.json()["route"]["route_id"]).startswith(replica) else None)(
            a.stack.http.post("/agent/v1/route", envelope("demo.echo", {}, target_agent=ORIGIN),
                              headers=bearer(caller))), timeout=5)
        assert all(not str(x["route_id"]).startswith(rid) for x in picked["candidates"]), picked
        # A's agent learns it at its next renewal.
        renew = a.stack.http.post("/agent/v1/renew", {"route_id": rid}, headers=bearer(a_token))
        refused_elsewhere(renew, "router-c")
        # The replica withdrawn, A's route is A's again.
        gone = c.stack.http.post("/agent/v1/unregister", {"route_id": replica}, headers=bearer(jwt))
        assert gone.status in (200, 204), gone.describe()
        wait_for("A's route undisputed again", lambda: (route_of(a, rid) or {}).get("disputed") is False, timeout=20)
        served = a.stack.http.post("/agent/v1/invoke", envelope("demo.echo", {}, target_agent=ORIGIN),
                                   headers=bearer(caller))
        assert served.status == 200 and served.json()["route_id"] == rid, served.describe()

        # (g) A's agent unregisters (it moves to C's LAN): once the
        # withdraw reached C, C bootstraps and registers it.
        bye = a.stack.http.post("/agent/v1/unregister", {"route_id": rid}, headers=bearer(a_token))
        assert bye.status in (200, 204), bye.describe()
        wait_for("C to drop A's route", lambda: all(r["route_id"] != rid for r in c.peer_routes()), timeout=20)
        moved = wait_for("C to give the moved agent a token", lambda: (lambda r: r if r.status == 200 else None)(bootstrap(c)),
                         timeout=5)
        reg = c.stack.http.post("/agent/v1/register", body(c_host.endpoint),
                                headers=bearer(moved.json()["access_token"]))
        assert reg.status == 200, reg.describe()
        for r, peer in ((a, "router-b"), (b, "router-a"), (b, "router-c"), (c, "router-b")):
            assert (r.peer(peer) or {}).get("state") == "established", (r.name, peer)
    finally:
        a_agent.close()
        c_host.close()
