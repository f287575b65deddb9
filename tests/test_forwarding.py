"""Forwarding to local endpoints (DESIGN §7): safe retry across
candidates, typed outcomes, deadline propagation, relayed headers."""

from __future__ import annotations

import socket
import uuid

from harness.backend import Backend, registration
from harness.http import envelope
from harness.poll import wait_for


def _closed_port() -> int:
    """A loopback port nothing listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_candidates(stack, intent, n):
    """The gateway's route lookup once it lists `n` candidates."""
    return wait_for(
        f"{n} candidates for {intent} on agent-gw",
        lambda: (lambda r: r if len(r.get("candidates", [])) >= n else None)(stack.wait_routable(envelope(intent, {}))),
    )


def test_never_delivered_moves_to_the_next_candidate(stack, backend):
    """Proves the never-delivered retry: the best-scored route's endpoint
    refuses connections, so even a non-idempotent call moves on to the next
    candidate and succeeds there (X-Agentd-Route-Id names the route that
    answered); a capability whose only route is dead fails at once with
    502 `not_delivered`, outcome `not_delivered`."""
    dead = stack.register(
        registration("fw.echo", f"http://127.0.0.1:{_closed_port()}/invoke", name="dead", lease_seconds=60, latency_ms=0)
    )
    live = stack.register(registration("fw.echo", backend.endpoint, name="live", lease_seconds=60, latency_ms=50))
    route = _wait_candidates(stack, "fw.echo", 2)
    assert [c["route_id"] for c in route["candidates"]][:2] == [dead["route_id"], live["route_id"]], route

    r = stack.http.post("/agent/v1/invoke", envelope("fw.echo", {"n": 1}))
    assert r.status == 200 and r.json()["echo"] == {"n": 1}, r.describe()
    assert r.header("x-agentd-route-id") == live["route_id"], r.headers

    stack.register(
        registration("fw.dead", f"http://127.0.0.1:{_closed_port()}/invoke", name="dead", lease_seconds=60)
    )
    stack.wait_routable(envelope("fw.dead", {}))
    r = stack.http.post("/agent/v1/invoke", envelope("fw.dead", {"n": 2}))
    assert r.status == 502, r.describe()
    assert r.error_code() == "not_delivered" and r.json()["error"]["outcome"] == "not_delivered", r.describe()
    assert r.header("x-agentd-outcome") == "not_delivered"


def test_possibly_delivered_retries_only_idempotent_calls_with_a_key(stack, backend):
    """Proves the after-delivery retry rule: the first candidate reads the
    request and drops the connection without answering. A call without
    idempotency gets 502 `upstream_unknown` (outcome `unknown`) and is not
    sent anywhere else; the same call marked idempotent and carrying an
    Idempotency-Key moves to the next candidate and succeeds; marked
    idempotent but without a key it does not move."""
    resetter = Backend(reset_all=True)
    try:
        first = stack.register(registration("fw2.echo", resetter.endpoint, name="flaky", lease_seconds=60, latency_ms=0))
        second = stack.register(registration("fw2.echo", backend.endpoint, name="good", lease_seconds=60, latency_ms=50))
        route = _wait_candidates(stack, "fw2.echo", 2)
        assert [c["route_id"] for c in route["candidates"]][:2] == [first["route_id"], second["route_id"]], route

        r = stack.http.post("/agent/v1/invoke", envelope("fw2.echo", {"plain": 1}))
        assert r.status == 502 and r.error_code() == "upstream_unknown", r.describe()
        assert r.json()["error"]["outcome"] == "unknown", r.describe()
        r = stack.http.post("/agent/v1/invoke", envelope("fw2.echo", {"nokey": 1}), headers={"X-Agentd-Idempotent": "1"})
        assert r.status == 502 and r.error_code() == "upstream_unknown", r.describe()
        assert backend.calls("fw2.echo") == [], "a call that may have run moved to another candidate"

        key = str(uuid.uuid4())
        r = stack.http.post(
            "/agent/v1/invoke",
            envelope("fw2.echo", {"idem": 1}),
            headers={"X-Agentd-Idempotent": "1", "Idempotency-Key": key},
        )
        assert r.status == 200 and r.json()["echo"] == {"idem": 1}, r.describe()
        assert r.header("x-agentd-route-id") == second["route_id"]
        got = backend.calls("fw2.echo")
        assert len(got) == 1 and got[0].headers.get("idempotency-key") == key, [c.headers for c in got]
        assert len(resetter.calls("fw2.echo")) == 3  # each of the 3 calls reached the flaky handler first
    finally:
        resetter.close()


def test_deadline_and_headers_reach_the_handler(stack, backend):
    """Proves deadline propagation and header relay: with
    `X-Agentd-Timeout-Ms: 3000` the handler receives `X-Agentd-Deadline-Ms`
    between 1 and 3000 (what is left, not a fresh timeout) and the
    `X-Agentd-Route-Id` of its route, plus the caller's `traceparent`; a
    handler slower than a 300 ms budget makes the call end with 504
    `deadline_exceeded` (outcome `unknown`) instead of waiting for it."""
    info = stack.register(registration("dl.slow", backend.endpoint, lease_seconds=60))
    stack.wait_routable(envelope("dl.slow", {}))
    backend.release()  # the first call answers at once
    trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    r = stack.http.post(
        "/agent/v1/invoke",
        envelope("dl.slow", {"max_s": 0}),
        headers={"X-Agentd-Timeout-Ms": "3000", "traceparent": trace},
    )
    assert r.status == 200, r.describe()
    seen = backend.calls("dl.slow")[-1].headers
    assert 1 <= int(seen["x-agentd-deadline-ms"]) <= 3000, seen
    assert seen["x-agentd-route-id"] == info["route_id"], seen
    assert seen.get("traceparent") == trace, seen

    slow = Backend()  # never released: answers only after max_s
    try:
        stack.http.post("/agent/v1/unregister", {"route_id": info["route_id"]})
        stack.register(registration("dl.slow", slow.endpoint, lease_seconds=60))
        stack.wait_routable(envelope("dl.slow", {}))
        r = stack.http.post("/agent/v1/invoke", envelope("dl.slow", {"max_s": 10}), headers={"X-Agentd-Timeout-Ms": "300"})
        assert r.status == 504 and r.error_code() == "deadline_exceeded", r.describe()
        assert r.json()["error"]["outcome"] == "unknown", r.describe()
    finally:
        slow.close()
