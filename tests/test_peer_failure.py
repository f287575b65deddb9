"""Failures on the peer data plane (issue 8 items 5, 7; DESIGN §7): the
transit router killed while a call is in flight gives the caller a typed
outcome and never a second execution; calls work again once it is back;
a call whose first candidate's next hop is down moves to the next
candidate (a diamond: two paths to the same route)."""

from __future__ import annotations

import threading

from harness.http import envelope
from harness.peers import build_chain, wait_callable
from harness.poll import wait_for


class InFlight:
    """One sync call in a thread (bounded by its own timeout)."""

    def __init__(self, router, env, headers=None, timeout: float = 40.0) -> None:
        self.resp = None
        self.error = None

        def run() -> None:
            try:
                self.resp = router.stack.http.post("/agent/v1/invoke", env, headers=headers, timeout=timeout)
            except Exception as e:  # noqa: BLE001 - reported by the test
                self.error = e

        self._t = threading.Thread(target=run, daemon=True)
        self._t.start()

    def result(self, timeout: float = 45.0):
        self._t.join(timeout)
        assert not self._t.is_alive(), "the call did not end"
        assert self.error is None, f"the call raised {self.error!r}"
        return self.resp


def _outcome(r):
    try:
        return r.json()["error"].get("outcome")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def test_transit_router_killed_mid_call(mesh):
    """Proves DESIGN §7's outcomes when B dies under a call from C to A: a
    slow non-idempotent call is in flight on A's handler when B's agent-gw
    is killed (SIGKILL by PID); the caller at C gets a typed error with
    outcome `unknown` (sent, no answer), the handler ran once and its
    connection is closed (the cancel reached A); while B's gateway is down
    (its ARPX session still up) a new call gets a typed `not_delivered`
    without reaching the handler; with B's gateway back calls succeed.
    Then B's whole stack is killed mid-call: again `unknown` and one
    execution; new calls are refused typed (`no_route` once C saw the
    session end, or `not_delivered`); B restarted → calls succeed again."""
    ch = build_chain(mesh)
    backend = ch.a.lan_backend()
    try:
        rid = ch.a.serve(backend, "chain.echo")
        ch.a.serve(backend, "fail.slow", name="slow")
        wait_callable(ch.c, "chain.echo", {"warm": 1}, headers=ch.auth)
        ch.c.stack.wait_routable(envelope("fail.slow", {}), headers=ch.auth)

        for phase, kill in (("gateway", lambda: ch.b.stack.gw.kill9()),
                            ("stack", lambda: (ch.b.stack.gw.kill9(), ch.b.stack.agentd.kill9()))):
            calls_before = len(backend.calls("fail.slow"))
            closed_before = len(backend.peer_closed)
            call = InFlight(ch.c, envelope("fail.slow", {"max_s": 30, "phase": phase}), headers=ch.auth)
            wait_for(f"{phase}: the slow call to reach A's handler",
                     lambda: len(backend.calls("fail.slow")) == calls_before + 1, timeout=10)
            kill()
            r = call.result()
            assert r.status >= 500 and r.error_code(), (phase, r.describe())
            assert _outcome(r) == "unknown", (phase, r.describe())
            wait_for(f"{phase}: A's handler connection to be closed",
                     lambda: len(backend.peer_closed) == closed_before + 1, timeout=15)
            assert len(backend.calls("fail.slow")) == calls_before + 1, f"{phase}: the call ran twice"

            n = len(backend.calls("chain.echo"))
            r = ch.c.stack.http.post("/agent/v1/invoke", envelope("chain.echo", {"down": phase}), headers=ch.auth)
            assert r.status in (404, 502, 503), (phase, r.describe())
            if phase == "gateway":
                assert _outcome(r) == "not_delivered", r.describe()
            else:
                assert r.error_code() in ("no_route", "not_delivered"), r.describe()
                assert _outcome(r) in ("not_delivered", "rejected"), r.describe()
            assert len(backend.calls("chain.echo")) == n, f"{phase}: a refused call reached the handler"

            if phase == "gateway":
                ch.b.stack.start_gw()
            else:
                ch.b.stack.start()
                ch.b.wait_established("router-a", timeout=30)
                ch.b.wait_established("router-c", timeout=30)
            ok = wait_callable(ch.c, "chain.echo", {"back": phase}, headers=ch.auth)
            assert ok.header("x-agentd-route-id") == f"{rid}@router-b", ok.headers
    finally:
        backend.release()
        backend.close()


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


def test_call_moves_to_the_next_candidate_when_the_first_next_hop_is_down(mesh):
    """Proves failover across routers: D holds two paths to A's route (via
    B and via C); the agent-gw of D's preferred next hop is killed (its ARPX
    session stays up, so the path stays D's first candidate); a
    non-idempotent call at D is never delivered there and moves to the
    other path: 200 with the handler's answer, the route id naming the
    other next hop, the handler run exactly once."""
    a, b, c, d = diamond(mesh)
    backend = a.lan_backend()
    try:
        rid = a.serve(backend, "dia.echo")

        def both():
            held = d.remote_set()
            return held if {f"{rid}@router-b", f"{rid}@router-c"} <= set(held) else None

        wait_for("D to hold both paths", both, timeout=20)
        wait_callable(d, "dia.echo", {"warm": 1})
        first = d.stack.ctl_json("lookup", "dia.echo", "--tenant", "lab")["winner"]
        hop = first.split("@", 1)[1]
        other = "router-c" if hop == "router-b" else "router-b"
        mesh.routers[hop].stack.gw.kill9()
        assert d.stack.ctl_json("lookup", "dia.echo", "--tenant", "lab")["winner"] == first

        n = len(backend.calls("dia.echo"))
        r = d.stack.http.post("/agent/v1/invoke", envelope("dia.echo", {"failover": 1}))
        assert r.status == 200, r.describe()
        assert r.json()["echo"] == {"failover": 1}, r.describe()
        assert r.header("x-agentd-route-id") == f"{rid}@{other}", r.headers
        assert len(backend.calls("dia.echo")) == n + 1
    finally:
        backend.close()
