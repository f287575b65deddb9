"""Large bodies and long streams across routers (issue 8 item 4): HTTP/2
flow control between the gateways carries a 1 MiB request and its 1 MiB
answer, and a stream of 20 000 events, C→B→A, while other calls share the
same connections — all on the warm connections, with no new TLS handshake
anywhere on the path."""

from __future__ import annotations

import threading
import time
from typing import Any, List

from harness.backend import registration
from harness.http import envelope
from harness.jwt import bearer
from harness.peers import build_chain, wait_callable
from harness.poll import wait_for

MIB = 1024 * 1024
# Every gateway of the chain takes a 1 MiB payload (plus envelope).
BIG = {"max_request_bytes": 2 * MIB}


def _handshakes(router: Any) -> tuple:
    s = router.gateway_stats(after=time.monotonic())
    return (s["peer_handshakes_out"], s["peer_handshakes_in"])


def test_one_mib_bodies_and_a_long_stream_cross_two_routers_on_the_warm_connections(mesh):
    """Proves flow control end to end: a 1 MiB payload (four of the
    gateways' 256 KiB stream windows, sixteen of h2's default) reaches the handler on A
    byte for byte and its echo comes back whole at C; a 20 000-event
    stream arrives complete and in order; four of each at once, on the
    same connections, all correct; and the gateways of C and B count the
    same TLS handshakes before and after (nothing reconnected)."""
    # Every gateway of the chain keeps each 1 MiB body until its answer
    # starts (C and B to resend it, A while its handler reads it), and
    # each stream reserves its history where its task lives. Four of each
    # at once come from one address at every hop — the test client at C,
    # router C at B, router B at A — so at each hop they would sit right
    # at that address's default share (a quarter of 16 MiB), and a stream
    # that arrives after the four bodies is refused `share_exceeded`. The
    # shares have tests of their own; this one is about flow control, so
    # every gateway gets room.
    room = {**BIG, "buffer_budget": 64 * MIB}
    ch = build_chain(mesh, a_gateway=room, b_gateway=room, c_gateway=room)
    backend = ch.a.lan_backend()
    try:
        ch.a.serve(backend, "flow.echo")
        ch.a.serve(backend, "flow.stream", name="streamer")
        wait_callable(ch.c, "flow.echo", {"warm": 1}, headers=ch.auth)
        ch.c.stack.wait_routable(envelope("flow.stream", {}), headers=ch.auth)
        before_c, before_b = _handshakes(ch.c), _handshakes(ch.b)
        assert before_c[0] >= 1 and before_b[1] >= 1, (before_c, before_b)

        blob = "".join(chr(0x61 + i % 26) for i in range(MIB))

        def big_call() -> Any:
            r = ch.c.stack.http.post("/agent/v1/invoke", envelope("flow.echo", {"blob": blob}),
                                     headers=ch.auth, timeout=60)
            assert r.status == 200, r.describe()[:500]
            return r.json()

        got = big_call()
        assert got["echo"]["blob"] == blob
        seen = backend.calls("flow.echo")[-1].json()
        assert seen["payload"]["blob"] == blob, "the handler on A got another body"

        def long_stream() -> List[int]:
            s = ch.c.stack.http.stream("/agent/v1/invoke-stream", envelope("flow.stream", {"count": 20000}),
                                       headers=ch.auth, timeout=120)
            assert s.status == 200, s.error_body
            assert s.complete, "the stream did not end with its completion marker"
            return [e.json()["n"] for e in s.events]

        assert long_stream() == list(range(1, 20001))

        errors: List[BaseException] = []
        results: List[Any] = []

        def run(fn: Any) -> None:
            try:
                results.append(fn())
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(f,)) for f in [big_call, long_stream] * 4]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=180)
        assert not any(t.is_alive() for t in threads), "a concurrent call did not end"
        assert errors == [], errors
        assert len(results) == 8
        for r in results:
            if isinstance(r, list):
                assert r == list(range(1, 20001))
            else:
                assert r["echo"]["blob"] == blob

        assert _handshakes(ch.c) == before_c, "C's gateway reconnected"
        assert _handshakes(ch.b) == before_b, "B's gateway reconnected"
    finally:
        backend.close()


def test_a_sending_gateway_costs_one_replay_window_at_any_rate(mesh):
    """Proves the replay cache holds windows, not one nonce per call: with
    room for only two windows at A and at B (`gateway.replay_cache` 2), 300
    calls C→B→A in a row all succeed — each gateway numbers its assertions
    to each neighbour, so a sender is one window whatever its rate — and
    none is refused as `assertion_cache_full`."""
    tiny = {"replay_cache": 2}

    def unmetered(a, b, c):
        # 300 calls as fast as the path allows: the tenant's rate at C
        # (100/s, burst 200 by default) is not what this test is about.
        for s in c.cfg.sections:
            if s.type == "tenant":
                s.options.update({"rate_per_second": "100000", "rate_burst": "100000"})

    ch = build_chain(mesh, a_gateway=tiny, b_gateway=tiny, configure=unmetered)
    backend = ch.a.lan_backend()
    try:
        ch.a.serve(backend, "flow.echo")
        wait_callable(ch.c, "flow.echo", {"warm": 1}, headers=ch.auth)
        for i in range(300):
            r = ch.c.stack.http.post("/agent/v1/invoke", envelope("flow.echo", {"i": i}), headers=ch.auth)
            assert r.status == 200 and r.json()["echo"] == {"i": i}, (i, r.describe())
        assert len([x for x in backend.calls("flow.echo") if "i" in x.json()["payload"]]) == 300
    finally:
        backend.close()


def test_a_task_held_here_falls_back_to_a_peer_path_when_the_local_handler_is_down(mesh):
    """Proves the mixed candidate list of an async call and of a stream: at
    C the best route is a local one whose handler is gone (connection
    refused: never delivered) and the next is the path to A's route via B;
    the task and the stream are then C's own (its first candidate was
    local), and their one call goes on over the peer path, signed for the
    caller: the task completes with A's answer, the stream delivers A's
    events, each handler on A ran once."""
    ch = build_chain(mesh)
    backend = ch.a.lan_backend()
    dead = ch.c.lan_backend()
    try:
        a_echo = ch.a.serve(backend, "mix.echo")
        a_stream = ch.a.serve(backend, "mix.stream", name="streamer")
        def register_at_c(cap: str, name: str) -> str:
            token = ch.lab.mint(tenant="lab", sub=f"agent://lab/{name}", scopes=("agent.register",),
                                aud=ch.audience)
            r = ch.c.stack.http.post("/agent/v1/register", registration(cap, dead.endpoint, name=name, lease_seconds=60),
                                     headers=bearer(token))
            assert r.status in (200, 201), r.describe()
            return str(r.json()["route_id"])

        gone_echo = register_at_c("mix.echo", "gone-echo")
        gone_stream = register_at_c("mix.stream", "gone-streamer")
        dead.close()
        paths = {f"{a_echo}@router-b", f"{a_stream}@router-b"}
        wait_for("C to hold the paths to A's routes", lambda: paths <= set(ch.c.remote_set()), timeout=30)
        for cap, local in (("mix.echo", gone_echo), ("mix.stream", gone_stream)):
            winner = ch.c.stack.ctl_json("lookup", cap, "--tenant", "lab")["winner"]
            assert winner == local, (cap, winner, "the local route must rank first for this test")

        r = ch.c.stack.http.post("/agent/v1/invoke", envelope("mix.echo", {"job": 1}),
                                 headers={**ch.auth, "Prefer": "respond-async"})
        assert r.status == 202, r.describe()
        tid, token = r.header("x-nexus-task-id"), r.header("x-nexus-task-token")

        def done():
            s = ch.c.stack.http.get(f"/agent/v1/tasks/{tid}", headers={**ch.auth, "x-nexus-task-token": token})
            return s if s.status == 200 and s.json()["status"] not in ("pending", "running") else None

        status = wait_for("the task at C to finish", done, timeout=20).json()
        assert status["status"] == "completed", status
        assert backend.calls("mix.echo")[-1].json()["payload"] == {"job": 1}
        assert len(backend.calls("mix.echo")) == 1

        s = ch.c.stack.http.stream("/agent/v1/invoke-stream", envelope("mix.stream", {"count": 5}),
                                   headers=ch.auth, timeout=30)
        assert s.status == 200, s.error_body
        assert [e.json()["n"] for e in s.events] == [1, 2, 3, 4, 5] and s.complete
        assert len(backend.calls("mix.stream")) == 1
    finally:
        backend.close()
