"""Failures on the peer data plane (issue 8 items 5, 7; DESIGN §7): the
transit router killed while a call is in flight gives the caller a typed
outcome and never a second execution; calls work again once it is back;
a call whose first candidate's next hop is down moves to the next
candidate (a diamond: two paths to the same route)."""

from __future__ import annotations

from harness.config import Section
from harness.http import envelope
from harness.peers import InFlight, SseReader, build_chain, outcome as _outcome, wait_callable
from harness.poll import wait_for


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


def wait_warm(router, peers: int) -> None:
    """Until `router`'s data connections with each of its `peers` are up
    both ways (its own dial and the peer's): a next hop's first dial can be
    refused while that peer's gateway has not yet learnt the link, and a
    call never waits for the redial. Failover needs the second path warm."""
    wait_for(f"{router.name}'s data connections with its {peers} peers",
             lambda: router.gateway_stats()["peer_conns"] >= 2 * peers, timeout=20, interval=0.2)


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
        wait_warm(d, 2)
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


def _two_paths(mesh, d, capability, rid):
    def both():
        held = d.remote_set()
        return held if {f"{rid}@router-b", f"{rid}@router-c"} <= set(held) else None

    wait_for("D to hold both paths", both, timeout=20)
    wait_warm(d, 2)
    wait_callable(d, capability, {"warm": 1})
    first = d.stack.ctl_json("lookup", capability, "--tenant", "lab")["winner"]
    hop = first.split("@", 1)[1]
    return hop, ("router-c" if hop == "router-b" else "router-b")


def test_idempotent_call_with_a_key_moves_on_after_its_next_hop_died(mesh):
    """Proves the after-delivery retry rule across routers (DESIGN §7): an
    idempotent call with an Idempotency-Key is in flight on A's handler via
    D's preferred next hop when that hop's agent-gw is killed; A closes the
    first handler connection (the cancel), D sends the call again over the
    other path (same key at the handler), and the caller gets the second
    execution's answer with the route id of the other path — no error."""
    a, b, c, d = diamond(mesh)
    backend = a.lan_backend()
    try:
        ids = {"echo": a.serve(backend, "dia.echo"), "slow": a.serve(backend, "dia.slow", name="slow")}
        hop, other = _two_paths(mesh, d, "dia.echo", ids["echo"])
        d.stack.wait_routable(envelope("dia.slow", {}))
        assert d.stack.ctl_json("lookup", "dia.slow", "--tenant", "lab")["winner"] == f"{ids['slow']}@{hop}"
        call = InFlight(d, envelope("dia.slow", {"max_s": 30}),
                        headers={"X-Agentd-Idempotent": "1", "Idempotency-Key": "dia-key-1"})
        wait_for("the call to reach A's handler", lambda: len(backend.calls("dia.slow")) == 1, timeout=10)
        mesh.routers[hop].stack.gw.kill9()
        wait_for("the first execution's connection to be closed", lambda: len(backend.peer_closed) == 1, timeout=15)
        wait_for("the retry over the other path", lambda: len(backend.calls("dia.slow")) == 2, timeout=15)
        backend.release()
        r = call.result()
        assert r.status == 200 and r.json()["echo"] == {"max_s": 30}, r.describe()
        assert r.header("x-agentd-route-id") == f"{ids['slow']}@{other}", r.headers
        keys = [x.headers.get("idempotency-key") for x in backend.calls("dia.slow")]
        assert keys == ["dia-key-1", "dia-key-1"], keys
    finally:
        backend.release()
        backend.close()


def test_async_task_is_reached_over_any_live_path_to_its_route(mesh):
    """Proves task handles across routers stay pinned to the route, not to
    a path: an async task started at D runs on A's handler via D's
    preferred next hop; with that hop's agent-gw killed, the task's status
    at D still answers `running` (over the other path), its cancel at D
    answers `cancelled` and closes the handler's connection on A, and the
    handler ran once."""
    a, b, c, d = diamond(mesh)
    backend = a.lan_backend()
    try:
        rid = a.serve(backend, "dia.echo")
        a.serve(backend, "dia.slow", name="slow")
        hop, _ = _two_paths(mesh, d, "dia.echo", rid)
        d.stack.wait_routable(envelope("dia.slow", {}))
        r = d.stack.http.post("/agent/v1/invoke", envelope("dia.slow", {"max_s": 30}), headers={"Prefer": "respond-async"})
        assert r.status == 202, r.describe()
        task_id, tok = r.header("x-nexus-task-id"), {"X-Nexus-Task-Token": r.header("x-nexus-task-token")}
        wait_for("the task to reach A's handler", lambda: len(backend.calls("dia.slow")) == 1, timeout=10)
        mesh.routers[hop].stack.gw.kill9()

        # At once: a task operation never delivered on the dead hop moves
        # to the other path like any call.
        st = d.stack.http.get(f"/agent/v1/tasks/{task_id}", headers=tok)
        assert st.status == 200 and st.json()["status"] == "running", st.describe()
        r = d.stack.http.request("DELETE", f"/agent/v1/tasks/{task_id}", headers=tok)
        assert r.status == 200 and r.json()["status"] == "cancelled", r.describe()
        wait_for("the cancel to close the handler's connection on A", lambda: backend.peer_closed, timeout=10)
        assert len(backend.calls("dia.slow")) == 1
        assert backend.answered == [] or all(x.json()["intent"] != "dia.slow" for x in backend.answered)
    finally:
        backend.close()


def test_stream_resumes_after_the_transit_router_died_without_restarting_the_producer(mesh):
    """Proves stream resume across a broken hop: a paced stream (30 events,
    one per 100 ms) from A's handler is followed at C; B's agent-gw is
    killed after a few events, which ends C's connection; the producer on A
    keeps running into A's history (it finishes, never cancelled); with B
    back, the same envelope with `Last-Event-ID` at C delivers exactly the
    later events up to the completion marker, and the handler ran once."""
    ch = build_chain(mesh)
    backend = ch.a.lan_backend()
    try:
        ch.a.serve(backend, "chain.echo")
        ch.a.serve(backend, "fail.stream", name="streamer")
        wait_callable(ch.c, "chain.echo", {"warm": 1}, headers=ch.auth)
        ch.c.stack.wait_routable(envelope("fail.stream", {}), headers=ch.auth)
        env = envelope("fail.stream", {"count": 30, "pace_ms": 100})
        reader = SseReader(ch.c, env, ch.auth)
        wait_for("3 events at C", lambda: len(reader.events) >= 3, timeout=15)
        ch.b.stack.gw.kill9()
        reader.join()
        assert reader.status == 200, reader.status
        got = [e for e in reader.events if (e.event or "message") == "message"]
        assert got and len(got) < 30, (len(got), reader.ended)
        cursor = int(got[-1].id)
        wait_for("the producer on A to finish", lambda: backend.streams_finished, timeout=20)
        assert backend.peer_closed == []

        ch.b.stack.start_gw()
        wait_callable(ch.c, "chain.echo", {"back": 1}, headers=ch.auth)
        rest = ch.c.stack.http.stream("/agent/v1/invoke-stream", env, headers={**ch.auth, "Last-Event-ID": str(cursor)})
        assert rest.status == 200, rest.error_body
        assert rest.complete, "the resumed stream did not end with the completion marker"
        ids = [int(e.id) for e in rest.events]
        assert ids and ids[0] > cursor and ids == sorted(set(ids)), (cursor, ids)
        assert [e.json()["n"] for e in got + rest.events] == list(range(1, 31))
        assert len(backend.calls("fail.stream")) == 1, "the producer was restarted"
    finally:
        backend.close()


def test_a_refusal_by_the_next_hop_before_dispatch_moves_to_the_next_candidate(mesh):
    """Proves that a transit router's typed refusal before dispatch counts
    as never delivered: D's preferred next hop gets a deny rule for the
    capability (reload; applied once its own gateway refuses the route);
    a call at D is refused there (`x-agentd-outcome: rejected`) and moves
    to the other path: 200 with the other route id, the handler run once."""
    a, b, c, d = diamond(mesh)
    backend = a.lan_backend()
    try:
        rid = a.serve(backend, "dia.echo")
        hop, other = _two_paths(mesh, d, "dia.echo", rid)
        transit = mesh.routers[hop]
        transit.cfg.sections.append(Section("rule", "deny_dia", {
            "id": "10-deny-dia", "priority": 100, "action": "deny", "capability": "dia.echo"}))
        transit.reload()
        wait_for(f"{hop}'s gateway to deny dia.echo",
                 lambda: transit.stack.http.post("/agent/v1/route", envelope("dia.echo", {})).error_code()
                 == "policy_denied", timeout=15)
        assert d.stack.ctl_json("lookup", "dia.echo", "--tenant", "lab")["winner"] == f"{rid}@{hop}"
        n = len(backend.calls("dia.echo"))
        r = d.stack.http.post("/agent/v1/invoke", envelope("dia.echo", {"moved": 1}))
        assert r.status == 200 and r.json()["echo"] == {"moved": 1}, r.describe()
        assert r.header("x-agentd-route-id") == f"{rid}@{other}", r.headers
        assert len(backend.calls("dia.echo")) == n + 1
    finally:
        backend.close()


def test_async_task_outlives_the_transit_routers_outage(mesh):
    """Proves an async task stays where it runs while the path to it is
    down: a slow task started at C runs on A; with B's agent-gw killed its
    status at C is a typed refusal (never a wrong answer, never a new
    execution); with B back, the same handle at C reports `running`, then
    the result of the one execution once the handler is released."""
    ch = build_chain(mesh)
    backend = ch.a.lan_backend()
    try:
        ch.a.serve(backend, "chain.echo")
        ch.a.serve(backend, "fail.slow", name="slow")
        wait_callable(ch.c, "chain.echo", {"warm": 1}, headers=ch.auth)
        ch.c.stack.wait_routable(envelope("fail.slow", {}), headers=ch.auth)
        r = ch.c.stack.http.post("/agent/v1/invoke", envelope("fail.slow", {"max_s": 30, "task": 1}),
                                 headers={**ch.auth, "Prefer": "respond-async"})
        assert r.status == 202, r.describe()
        task_id = r.header("x-nexus-task-id")
        tok = {**ch.auth, "X-Nexus-Task-Token": r.header("x-nexus-task-token")}
        wait_for("the task to reach A's handler", lambda: backend.calls("fail.slow"), timeout=10)

        ch.b.stack.gw.kill9()
        down = ch.c.stack.http.get(f"/agent/v1/tasks/{task_id}", headers=tok)
        # Not "no such task": the task exists, its path does not.
        assert down.status == 502 and down.error_code() == "not_delivered", down.describe()
        assert _outcome(down) == "not_delivered", down.describe()

        ch.b.stack.start_gw()
        st = wait_for("the task's status at C with B back",
                      lambda: (lambda x: x if x.status == 200 else None)(
                          ch.c.stack.http.get(f"/agent/v1/tasks/{task_id}", headers=tok)), timeout=20)
        assert st.json()["status"] == "running", st.describe()
        backend.release()
        done = wait_for("the task to complete", lambda: (lambda x: x if x.json().get("status") == "completed" else None)(
            ch.c.stack.http.get(f"/agent/v1/tasks/{task_id}", headers=tok)), timeout=15)
        assert done.status == 200
        res = ch.c.stack.http.get(f"/agent/v1/tasks/{task_id}/result", headers=tok)
        assert res.status == 200 and res.json()["result"]["echo"] == {"max_s": 30, "task": 1}, res.describe()
        assert len(backend.calls("fail.slow")) == 1
        assert backend.peer_closed == []
    finally:
        backend.release()
        backend.close()
