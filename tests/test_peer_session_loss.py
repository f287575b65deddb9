"""A peer session lost without a word (issue 8 item 5: "a peer session
loss makes its routes ineligible at once, so new calls fail fast with a
typed error ... instead of waiting for a timeout"): the link between B and
C is cut silently, so only the ARPX hold timer notices."""

from __future__ import annotations

from harness.http import envelope
from harness.peers import InFlight, SseReader, build_chain, outcome, wait_callable
from harness.poll import wait_for


def test_a_silently_cut_link_ends_the_calls_on_it_with_the_session(mesh):
    """Proves a session loss ends the calls on its connection instead of
    leaving them to their deadline: the B–C veth is cut (both ends down:
    no RST, nothing more arrives) under a slow call from C with a 30 s
    budget (ten times the 3 s hold time); when C's ARPX session with B
    ends by its hold timer the call fails typed (outcome `unknown`, not `deadline_exceeded`), B's side
    cancels the handler's call on A (its connection closes), and new calls
    at C are refused at once with `no_route`. With the link back, the
    sessions return and calls succeed."""
    ch = build_chain(mesh)
    backend = ch.a.lan_backend()
    try:
        ch.a.serve(backend, "chain.echo")
        ch.a.serve(backend, "fail.slow", name="slow")
        wait_callable(ch.c, "chain.echo", {"warm": 1}, headers=ch.auth)
        ch.c.stack.wait_routable(envelope("fail.slow", {}), headers=ch.auth)
        call = InFlight(ch.c, envelope("fail.slow", {"max_s": 60}), headers={**ch.auth, "X-Agentd-Timeout-Ms": "30000"},
                        timeout=40)
        wait_for("the slow call to reach A's handler", lambda: backend.calls("fail.slow"), timeout=10)
        mesh.net.set_link("router-b", "router-c", up=False)
        wait_for("B to cancel the handler's call on A", lambda: backend.peer_closed, timeout=20)
        r = call.result(timeout=45)
        assert r.status in (502, 503) and r.error_code() not in (None, "deadline_exceeded"), r.describe()
        assert outcome(r) == "unknown", r.describe()
        n = len(backend.calls("chain.echo"))
        refused = ch.c.stack.http.post("/agent/v1/invoke", envelope("chain.echo", {"cut": 1}), headers=ch.auth)
        assert refused.status == 404 and refused.error_code() == "no_route", refused.describe()
        assert len(backend.calls("chain.echo")) == n

        mesh.net.set_link("router-b", "router-c", up=True)
        ch.c.wait_established("router-b", timeout=30)
        wait_callable(ch.c, "chain.echo", {"back": 1}, headers=ch.auth)
        assert len(backend.calls("fail.slow")) == 1
    finally:
        backend.release()
        backend.close()


def test_a_silently_cut_link_ends_the_streams_on_it_with_the_session(mesh):
    """Proves the same for a stream: a paced stream (150 events, one per
    200 ms) from A followed at C when the B–C veth is cut; once C's session
    with B ends by its hold timer, C ends the caller's stream (an `error`
    event or the connection closed) instead of leaving it silent until the
    caller gives up (its socket timeout here: 40 s, longer than the
    producer's 30 s); with the link back, a resume at C with
    `Last-Event-ID` delivers the later events from A's history and the
    producer ran once."""
    # A keeps the whole stream, so the resume after the outage is exact.
    ch = build_chain(mesh, a_gateway={"stream_history_events": 256})
    backend = ch.a.lan_backend()
    try:
        ch.a.serve(backend, "chain.echo")
        ch.a.serve(backend, "cut.stream", name="streamer")
        wait_callable(ch.c, "chain.echo", {"warm": 1}, headers=ch.auth)
        ch.c.stack.wait_routable(envelope("cut.stream", {}), headers=ch.auth)
        env = envelope("cut.stream", {"count": 150, "pace_ms": 200})
        reader = SseReader(ch.c, env, ch.auth, timeout=40)
        wait_for("3 events at C", lambda: len(reader.events) >= 3, timeout=15)
        mesh.net.set_link("router-b", "router-c", up=False)
        reader.join(timeout=50)
        got = [e for e in reader.events if (e.event or "message") == "message"]
        assert reader.ended in ("eof", "complete"), (reader.ended, len(got))
        assert len(got) < 150, len(got)

        mesh.net.set_link("router-b", "router-c", up=True)
        ch.c.wait_established("router-b", timeout=30)
        wait_callable(ch.c, "chain.echo", {"back": 1}, headers=ch.auth)
        wait_for("the producer on A to finish", lambda: backend.streams_finished, timeout=40)
        cursor = int(got[-1].id)
        rest = ch.c.stack.http.stream("/agent/v1/invoke-stream", env, headers={**ch.auth, "Last-Event-ID": str(cursor)})
        assert rest.status == 200 and rest.complete, rest.error_body
        assert [e.json()["n"] for e in got + rest.events] == list(range(1, 151))
        assert len(backend.calls("cut.stream")) == 1
    finally:
        backend.close()
