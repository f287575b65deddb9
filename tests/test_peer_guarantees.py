"""A call crossing routers keeps a local call's guarantees (issue 8
acceptance): the warm connection is up before the first call (which pays
no handshake), the receiving router applies its own policy, the caller's
deadline, idempotency key and trace context reach the handler. (Large
bodies and long streams: test_peer_flow.py.)"""

from __future__ import annotations

import time

from harness.config import Section
from harness.http import envelope
from harness.jwt import TenantKey, bearer
from harness.peers import InFlight, build_chain, wait_callable
from harness.poll import wait_for


def test_first_call_pays_no_handshake(mesh):
    """Proves the connections are warm before any call: once the ARPX
    sessions are up, C's gateway has dialled B (a connection, a handshake
    out) and B has dialled both of its peers, before a single call; the
    first call from C to A's handler then succeeds at once and no gateway
    on the path makes a new TLS handshake for it (`agentctl stats`, in
    reports made after the call)."""
    ch = build_chain(mesh)
    backend = ch.a.lan_backend()
    try:
        c0 = wait_for("C's warm connection to B",
                      lambda: (lambda s: s if s["peer_conns"] >= 1 and s["peer_handshakes_out"] >= 1 else None)(
                          ch.c.gateway_stats()), timeout=20)
        b0 = wait_for("B's warm connections to A and C",
                      lambda: (lambda s: s if s["peer_handshakes_out"] >= 2 else None)(ch.b.gateway_stats()),
                      timeout=20)
        a0 = ch.a.gateway_stats()
        rid = ch.a.serve(backend, "warm.echo")
        ch.b.stack.wait_routable(envelope("warm.echo", {}))
        ch.c.stack.wait_routable(envelope("warm.echo", {}), headers=ch.auth)
        assert backend.calls() == []
        r = ch.c.stack.http.post("/agent/v1/invoke", envelope("warm.echo", {"first": 1}), headers=ch.auth)
        assert r.status == 200 and r.json()["echo"] == {"first": 1}, r.describe()
        assert r.header("x-agentd-route-id") == f"{rid}@router-b", r.headers
        after = time.monotonic()
        for router, before in ((ch.c, c0), (ch.b, b0), (ch.a, a0)):
            now = router.gateway_stats(after=after)
            for k in ("peer_handshakes_out", "peer_handshakes_in"):
                assert now[k] == before[k], (router.name, k, before, now)
    finally:
        backend.close()


def test_receiving_router_applies_its_own_policy(mesh):
    """Proves that A re-checks its own policy for calls arriving from a
    peer: a deny rule at A for `guard.secret` (C has none, so C forwards
    it) makes the call at C fail with A's typed 403 `policy_denied`
    (outcome rejected, naming A's rule), the handler never sees it, while
    `guard.echo` on the same handler is served."""

    def configure(a, b, c):
        a.cfg.sections.append(Section("rule", "deny_secret", {
            "id": "10-deny-secret", "priority": 100, "action": "deny", "source": "agent://lab/caller",
            "capability": "guard.secret"}))

    ch = build_chain(mesh, configure=configure)
    backend = ch.a.lan_backend()
    try:
        ch.a.serve(backend, "guard.echo")
        ch.a.serve(backend, "guard.secret", name="secret")
        wait_callable(ch.c, "guard.echo", {"warm": 1}, headers=ch.auth)
        ch.c.stack.wait_routable(envelope("guard.secret", {}), headers=ch.auth)
        r = ch.c.stack.http.post("/agent/v1/invoke", envelope("guard.secret", {"s": 1}), headers=ch.auth)
        assert r.status == 403 and r.error_code() == "policy_denied", r.describe()
        assert r.json()["error"].get("outcome") == "rejected", r.describe()
        assert "10-deny-secret" in r.describe(), r.describe()
        assert backend.calls("guard.secret") == []
        ok = ch.c.stack.http.post("/agent/v1/invoke", envelope("guard.echo", {"e": 1}), headers=ch.auth)
        assert ok.status == 200 and ok.json()["echo"] == {"e": 1}, ok.describe()
    finally:
        backend.close()


def test_deadline_idempotency_key_and_trace_reach_the_handler(mesh):
    """Proves the end-to-end headers of a call from C to A: the handler
    receives the caller's `Idempotency-Key`, `traceparent` and
    `tracestate` unchanged and an `X-Agentd-Deadline-Ms` no larger than
    the caller's `X-Agentd-Timeout-Ms` (the budget shrinks along the path,
    never restarts)."""
    ch = build_chain(mesh)
    backend = ch.a.lan_backend()
    try:
        ch.a.serve(backend, "hdr.echo")
        wait_callable(ch.c, "hdr.echo", {"warm": 1}, headers=ch.auth)
        trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        sent = {"X-Agentd-Timeout-Ms": "20000", "Idempotency-Key": "peer-key-1", "traceparent": trace,
                "tracestate": "agentd=peer"}
        r = ch.c.stack.http.post("/agent/v1/invoke", envelope("hdr.echo", {"h": 1}), headers={**ch.auth, **sent})
        assert r.status == 200, r.describe()
        got = backend.calls("hdr.echo")[-1].headers
        assert got.get("idempotency-key") == "peer-key-1", got
        assert got.get("tracestate") == "agentd=peer", got
        # The trace id travels; the parent span may be a hop's own.
        assert got.get("traceparent", "").split("-")[1] == trace.split("-")[1], got
        assert 0 < int(got["x-agentd-deadline-ms"]) <= 20000, got
    finally:
        backend.close()


def test_the_callers_deadline_ends_the_call_on_every_hop(mesh):
    """Proves one deadline for the whole path: a call at C with
    `X-Agentd-Timeout-Ms: 1500` to a handler on A that does not answer gets
    504 `deadline_exceeded` (outcome unknown) at C, and the handler's
    connection on A is closed (the hops give up with the caller, none
    starts a fresh timeout); the handler ran once."""
    ch = build_chain(mesh)
    backend = ch.a.lan_backend()
    try:
        ch.a.serve(backend, "dl.echo")
        ch.a.serve(backend, "dl.slow", name="slow")
        wait_callable(ch.c, "dl.echo", {"warm": 1}, headers=ch.auth)
        ch.c.stack.wait_routable(envelope("dl.slow", {}), headers=ch.auth)
        r = ch.c.stack.http.post("/agent/v1/invoke", envelope("dl.slow", {"max_s": 30}),
                                 headers={**ch.auth, "X-Agentd-Timeout-Ms": "1500"}, timeout=20)
        assert r.status == 504 and r.error_code() == "deadline_exceeded", r.describe()
        assert r.json()["error"].get("outcome") == "unknown", r.describe()
        wait_for("the handler's connection on A to be closed", lambda: backend.peer_closed, timeout=10)
        assert len(backend.calls("dl.slow")) == 1
        assert 0 < int(backend.calls("dl.slow")[0].headers["x-agentd-deadline-ms"]) <= 1500
    finally:
        backend.close()


def test_a_body_too_large_for_the_next_hop_is_a_typed_refusal_on_the_warm_connection(mesh):
    """Proves stream-local refusal between real routers: C takes bodies up
    to 1 MiB, B only its default 64 KiB; a 256 KiB call at C is refused by
    B and relayed typed (413 `payload_too_large`, outcome rejected) without
    reaching A's handler, while a call started before it and one after it
    succeed, and no gateway makes a new TLS handshake."""
    ch = build_chain(mesh, c_gateway={"max_request_bytes": 1024 * 1024})
    backend = ch.a.lan_backend()
    try:
        ch.a.serve(backend, "big.echo")
        ch.a.serve(backend, "big.slow", name="slow")
        wait_callable(ch.c, "big.echo", {"warm": 1}, headers=ch.auth)
        ch.c.stack.wait_routable(envelope("big.slow", {}), headers=ch.auth)
        before = {r.name: r.gateway_stats(after=time.monotonic()) for r in (ch.a, ch.b, ch.c)}
        slow = InFlight(ch.c, envelope("big.slow", {"max_s": 20}), ch.auth)
        wait_for("the slow call to reach A", lambda: backend.calls("big.slow"), timeout=10)
        n = len(backend.calls("big.echo"))
        r = ch.c.stack.http.post("/agent/v1/invoke", envelope("big.echo", {"pad": "x" * (256 * 1024)}),
                                 headers=ch.auth, timeout=20)
        assert r.status == 413 and r.error_code() == "payload_too_large", r.describe()
        assert r.json()["error"].get("outcome") == "rejected", r.describe()
        assert len(backend.calls("big.echo")) == n
        backend.release()
        assert slow.result().status == 200
        ok = ch.c.stack.http.post("/agent/v1/invoke", envelope("big.echo", {"after": 1}), headers=ch.auth)
        assert ok.status == 200 and ok.json()["echo"] == {"after": 1}, ok.describe()
        after = time.monotonic()
        for router in (ch.a, ch.b, ch.c):
            now = router.gateway_stats(after=after)
            for k in ("peer_handshakes_out", "peer_handshakes_in"):
                assert now[k] == before[router.name][k], (router.name, k, before[router.name], now)
    finally:
        backend.release()
        backend.close()



def test_many_concurrent_calls_share_the_warm_connections(mesh):
    """Proves that calls across routers are concurrent h2 streams, not a
    queue: 48 slow calls from C's LAN are all at A's handler at the same
    time (each waits for the test's release), then all answer 200 with
    their own payload; no gateway on the path made a new TLS handshake."""
    ch = build_chain(mesh)
    backend = ch.a.lan_backend()
    calls = []
    try:
        ch.a.serve(backend, "many.echo")
        ch.a.serve(backend, "many.slow", name="slow")
        wait_callable(ch.c, "many.echo", {"warm": 1}, headers=ch.auth)
        ch.c.stack.wait_routable(envelope("many.slow", {}), headers=ch.auth)
        before = {r.name: r.gateway_stats(after=time.monotonic()) for r in (ch.a, ch.b, ch.c)}
        calls = [InFlight(ch.c, envelope("many.slow", {"i": i, "max_s": 30}), ch.auth) for i in range(48)]
        wait_for("all 48 calls at A's handler at once", lambda: len(backend.calls("many.slow")) == 48, timeout=20)
        assert backend.answered == [] or all(x.json()["intent"] != "many.slow" for x in backend.answered)
        backend.release()
        got = sorted(c.result().json()["echo"]["i"] for c in calls)
        assert got == list(range(48)), got
        after = time.monotonic()
        for router in (ch.a, ch.b, ch.c):
            now = router.gateway_stats(after=after)
            for k in ("peer_handshakes_out", "peer_handshakes_in"):
                assert now[k] == before[router.name][k], (router.name, k, before[router.name], now)
    finally:
        backend.release()
        backend.close()


def test_tenant_isolation_holds_end_to_end(mesh):
    """Proves tenant isolation across routers with verified identities: C
    knows tenants `lab` and `ops` (JWT keys); A serves `iso.lab` (tenant
    lab only) and `iso.shared` (tenant lab, `allowed_tenants` ops). An ops
    caller at C gets `iso.shared` served — A's handler sees tenant `ops`
    and the ops caller from the token, not the body's claims — and is
    refused `iso.lab` typed (404 `no_route`, reason `tenant_access`)
    without the handler seeing it."""
    ops = TenantKey.generate()

    def configure(a, b, c):
        c.cfg.sections.append(Section("tenant", "ops", {"name": "ops", "jwt_key": [ops.uci_value]}))

    ch = build_chain(mesh, configure=configure)
    backend = ch.a.lan_backend()
    try:
        ch.a.serve(backend, "iso.lab")
        ch.a.serve(backend, "iso.shared", name="shared", allowed_tenants=["ops"])
        wait_callable(ch.c, "iso.lab", {"warm": 1}, headers=ch.auth)
        tok = bearer(ops.mint(tenant="ops", sub="agent://ops/caller", scopes=("agent.invoke", "agent.route"),
                              aud=ch.audience))
        ch.c.stack.wait_routable(envelope("iso.shared", {}, tenant="ops", source_agent="agent://ops/caller"), headers=tok)
        r = ch.c.stack.http.post("/agent/v1/invoke", envelope("iso.shared", {"o": 1}, tenant="lab",
                                                              source_agent="agent://lab/admin"), headers=tok)
        assert r.status == 200, r.describe()
        assert (r.json()["tenant"], r.json()["source_agent"]) == ("ops", "agent://ops/caller"), r.describe()
        n = len(backend.calls("iso.lab"))
        r = ch.c.stack.http.post("/agent/v1/invoke", envelope("iso.lab", {"o": 2}, tenant="lab"), headers=tok)
        assert r.status == 404 and r.error_code() == "no_route", r.describe()
        assert r.json()["error"].get("reason") == "tenant_access", r.describe()
        assert len(backend.calls("iso.lab")) == n
    finally:
        backend.close()


def test_a_reload_that_changes_no_peer_keeps_the_data_plane(mesh):
    """Proves that the data plane follows the links, not the reloads: a
    SIGHUP reload of B that changes no peer (a new, unrelated rule) while a
    slow call from C to A is in flight through B leaves that call running
    to its 200 answer, and no gateway on the path makes a new TLS
    handshake."""
    ch = build_chain(mesh)
    backend = ch.a.lan_backend()
    try:
        ch.a.serve(backend, "rl.echo")
        ch.a.serve(backend, "rl.slow", name="slow")
        wait_callable(ch.c, "rl.echo", {"warm": 1}, headers=ch.auth)
        ch.c.stack.wait_routable(envelope("rl.slow", {}), headers=ch.auth)
        before = {r.name: r.gateway_stats(after=time.monotonic()) for r in (ch.a, ch.b, ch.c)}
        slow = InFlight(ch.c, envelope("rl.slow", {"max_s": 30}), ch.auth)
        wait_for("the slow call to reach A", lambda: backend.calls("rl.slow"), timeout=10)
        ch.b.cfg.sections.append(Section("rule", "unrelated", {
            "id": "90-unrelated", "priority": 1, "action": "deny", "capability": "nothing.here"}))
        ch.b.reload()
        # The reload has been applied once B's gateway refuses the new rule's capability.
        wait_for("B's gateway to apply the reload",
                 lambda: ch.b.stack.http.post("/agent/v1/route", envelope("nothing.here", {})).error_code()
                 == "policy_denied", timeout=15)
        assert backend.peer_closed == [], "the reload cancelled a call in flight"
        backend.release()
        r = slow.result()
        assert r.status == 200 and r.json()["echo"] == {"max_s": 30}, r.describe()
        after = time.monotonic()
        for router in (ch.a, ch.b, ch.c):
            now = router.gateway_stats(after=after)
            for k in ("peer_handshakes_out", "peer_handshakes_in"):
                assert now[k] == before[router.name][k], (router.name, k, before[router.name], now)
    finally:
        backend.release()
        backend.close()
