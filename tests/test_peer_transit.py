"""A router that passes calls through (data-plane.md, "Passing a call
through"): B sits between A and C and sends a neighbour's body on as it
arrives, holding it to the same bounds as a whole read — the size limit,
the SHA-256 the sender signed, the hop limit — and a receiving router
takes a forwarding assertion that follows the body in the trailers like
one in the headers.

As in test_peer_rogue.py the test holds router A's key and talks to B's
peer listener itself (`harness/peer_wire.py`, an encoder written apart
from agent-gw); A's link to B is pinned, so every call carries an
assertion. C serves `transit.echo` on its LAN, B serves `local.echo` on
its own."""

from __future__ import annotations

import time

import pytest

from harness.peer_wire import Claims, assertion, forward_headers, handler_body, wait_accepted
from harness.poll import wait_for

LIMIT = 1024 * 1024
# Bodies declared within one HTTP/2 stream window (256 KiB) are read
# before they are passed on; larger ones stream.
STREAMED = 300 * 1024


def _who(capability):
    return dict(source="router-a", target="router-b", origin="router-a", caller="agent://lab/caller",
                tenant="lab", capability=capability)


@pytest.fixture
def chain(mesh, workdir):
    """A — B — C; B's `max_request_bytes` is LIMIT. Yields (a, b, c,
    client, backends, transit_route, local_route) with `client` an h2
    connection to B as A."""
    a = mesh.router("router-a")
    b = mesh.router("router-b", gateway={"max_request_bytes": LIMIT})
    c = mesh.router("router-c", gateway={"max_request_bytes": 4 * LIMIT})
    mesh.link("router-a", "router-b")
    mesh.link("router-b", "router-c")
    for r in (a, b, c):
        r.start()
    b.wait_established("router-a")
    b.wait_established("router-c")
    at_c, at_b = c.lan_backend(), b.lan_backend()
    client = None
    try:
        far = c.serve(at_c, "transit.echo")
        near = b.serve(at_b, "local.echo", name="local")
        wait_for("B to hold its path to C's route",
                 lambda: [r for r in b.stack.routes() if r.get("route_id") == far and r.get("next_hop") == "router-c"],
                 timeout=20)

        client = wait_accepted(a, b, workdir)
        yield a, b, c, client, {"c": at_c, "b": at_b}, far, near
    finally:
        if client is not None:
            client.close()
        at_c.close()
        at_b.close()


def _send(client, route, body, claims_body=None, hop_limit="6", **kw):
    """A call from A for `transit.echo` pinned to `route`, signed over
    `claims_body` (the body itself unless told), stating `hop_limit`."""
    claims = Claims.for_body(claims_body if claims_body is not None else body, **_who("transit.echo"))
    head = forward_headers(assertion(claims, client.key), route, extra={"x-agentd-hop-limit": hop_limit})
    return client.request("POST", "/agent/v1/invoke", head, body, **kw)


def _refused(r, status, code, reason=None):
    assert r.status == status, r.describe()
    err = r.error()
    assert err.get("code") == code, r.describe()
    if reason is not None:
        assert err.get("reason") == reason, r.describe()
    assert r.headers.get("x-agentd-outcome") == "rejected", r.headers


def test_a_transit_router_passes_signed_bodies_on_and_cuts_one_that_breaks_its_bounds(chain):
    """Proves B's transit path: calls pinned to C's route, signed by A —
    one streamed (300 KiB), one read first (small) — reach C's handler
    with the hops B stated (A says 6 left: B passes on 5, C's handler gets
    4) and B counts both as passed through, with their bytes. Then a body
    that is not what A signed (same length, one byte changed) is refused
    403 `assertion_refused` / `assertion_digest`, streamed (cut at its
    end) or not, and C's handler never runs. A body over B's
    `max_request_bytes` is refused 413 when declared, and cut as it
    passes when not declared; a call with 1 hop left is refused 508 and a
    malformed hop count 403 `identity_refused` — none of them reaches
    C."""
    _, b, _, client, backends, far, _ = chain
    at_c = backends["c"]
    before = b.gateway_stats(after=time.monotonic())
    body = handler_body("transit.echo", {"n": 1, "pad": "x" * STREAMED})
    small = handler_body("transit.echo", {"n": 2})
    for i, sent in enumerate((body, small)):
        r = _send(client, far, sent)
        assert r.status == 200, r.describe()
        assert r.json()["echo"]["n"] == i + 1
    calls = at_c.calls("transit.echo")
    assert len(calls) == 2 and all(x.json()["hop_limit"] == 4 for x in calls), [x.json()["hop_limit"] for x in calls]
    after = wait_for("B's report of the calls it passed through",
                     lambda: (lambda s: s if s["peer_transit_calls"] >= before["peer_transit_calls"] + 2 else None)(
                         b.gateway_stats(after=time.monotonic())), timeout=15)
    assert after["peer_transit_calls"] == before["peer_transit_calls"] + 2, (before, after)
    assert after["peer_transit_bytes"] - before["peer_transit_bytes"] == len(body) + len(small), after

    for signed in (body, small):
        tampered = signed.replace(b'"n":', b'"m":')
        assert len(tampered) == len(signed) and tampered != signed
        _refused(_send(client, far, tampered, claims_body=signed), 403, "assertion_refused", "assertion_digest")

    big = handler_body("transit.echo", {"pad": "y" * (LIMIT + 1024)})
    _refused(_send(client, far, big), 413, "payload_too_large")
    _refused(_send(client, far, big, declare_length=False), 413, "payload_too_large")
    _refused(_send(client, far, body, hop_limit="1"), 508, "hop_limit_exceeded")
    _refused(_send(client, far, body, hop_limit="0"), 403, "identity_refused")
    _refused(_send(client, far, body, hop_limit="many"), 403, "identity_refused")

    assert len(at_c.calls("transit.echo")) == 2, [x.json()["payload"].get("n") for x in at_c.calls()]
    # The connection carried every refusal on its own stream and still serves.
    again = handler_body("transit.echo", {"n": 3})
    r = _send(client, far, again)
    assert r.status == 200 and r.json()["echo"] == {"n": 3}, r.describe()
    assert client.closed is None


def test_an_assertion_that_follows_the_body_is_checked_like_one_in_the_headers(chain):
    """Proves the trailer form a transit router uses toward a signed next
    hop: a call to B's own route whose request says `trailer:
    x-agentd-assertion` and sends the assertion after the body is served;
    one whose trailer never comes is refused `assertion_missing`, one
    whose trailer signs another body `assertion_digest`, one whose
    trailer is garbage `assertion_malformed` — and B's handler ran only
    for the first."""
    _, _, _, client, backends, _, near = chain
    at_b = backends["b"]
    body = handler_body("local.echo", {"t": 1})
    head = forward_headers("", near, extra={"trailer": "x-agentd-assertion", "x-agentd-hop-limit": "6"})
    del head["x-agentd-assertion"]

    def trailer_for(signed_body):
        return {"x-agentd-assertion": assertion(Claims.for_body(signed_body, **_who("local.echo")), client.key)}

    r = client.request("POST", "/agent/v1/invoke", head, body, trailers=trailer_for(body))
    assert r.status == 200 and r.json()["echo"] == {"t": 1}, r.describe()
    got = at_b.calls("local.echo")
    assert len(got) == 1 and got[0].json()["tenant"] == "lab", got

    _refused(client.request("POST", "/agent/v1/invoke", head, body), 403, "assertion_refused", "assertion_missing")
    other = handler_body("local.echo", {"t": 2})
    _refused(client.request("POST", "/agent/v1/invoke", head, body, trailers=trailer_for(other)),
             403, "assertion_refused", "assertion_digest")
    _refused(client.request("POST", "/agent/v1/invoke", head, body, trailers={"x-agentd-assertion": "!!"}),
             403, "assertion_refused", "assertion_malformed")
    assert len(at_b.calls("local.echo")) == 1
