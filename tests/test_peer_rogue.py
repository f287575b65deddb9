"""A router that misbehaves on the peer data plane (issue 8 items 2, 4, 7):
the test holds router A's key (MeshRouter keys are made in Python) and
talks to B's peer listener itself — TLS 1.3 with A's certificate, ALPN h2,
forwarding assertions built by `harness/peer_wire.py`, an encoder written
independently of agent-gw. A correct call succeeds first (the positive
control: it proves the encoding); then every forged, replayed, expired or
misaddressed assertion gets 403 `assertion_refused` with its reason and
never reaches the handler, and an oversized request resets only its own
stream: the other streams of the connection finish, nothing reconnects."""

from __future__ import annotations

import ssl
import time

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from harness.http import envelope
from harness.peer_wire import (Claims, assertion, batch, connect_as, encode_assertion, forward_headers,
                               handler_body, leaf_hash, merkle, now_ms, root_message, wait_accepted)
from harness.poll import wait_for

SKEW_S = 5
MAX_REQUEST = 16 * 1024


@pytest.fixture
def pair(mesh):
    """Routers A and B peered; B serves `rogue.echo` / `rogue.slow` on its
    LAN. Yields (a, b, backend, echo_route, slow_route)."""
    a = mesh.router("router-a")
    b = mesh.router("router-b", gateway={"clock_skew": SKEW_S, "max_request_bytes": MAX_REQUEST})
    mesh.link("router-a", "router-b")
    a.start()
    b.start()
    b.wait_established("router-a")
    backend = b.lan_backend()
    try:
        echo = b.serve(backend, "rogue.echo")
        slow = b.serve(backend, "rogue.slow", name="slow")
        yield a, b, backend, echo, slow
    finally:
        backend.close()


def call(client, claims, key, route_id, body, **kw):
    return client.request("POST", "/agent/v1/invoke", forward_headers(assertion(claims, key), route_id, **kw), body)


def refused(r, reason, status=403):
    assert r.status == status, r.describe()
    err = r.error()
    assert err.get("code") == "assertion_refused" and err.get("reason") == reason, r.describe()
    assert r.headers.get("x-agentd-outcome") in ("rejected", "not_delivered"), r.headers


def test_forged_replayed_expired_assertions_are_refused_before_the_handler(pair, mesh, workdir):
    """Proves the receiver's checks of a forwarding assertion against a
    peer that holds a real router key: a correct assertion from A to B is
    served (the handler's answer; tenant and caller come from the
    assertion, not from the body, which claims tenant `ops`); then the same
    assertion again (`assertion_replayed`), an expired one (beyond
    clock_skew: `assertion_expired`), one that claims a lifetime beyond
    assertion_ttl (`assertion_lifetime`), a tampered body under a valid
    signature (`assertion_digest`), one addressed to C
    (`assertion_wrong_target`), one for another capability
    (`assertion_wrong_capability`), one signed by a key that is not the TLS
    peer's (`assertion_bad_signature`) and one claiming to come from C,
    signed with C's real key, over A's TLS session
    (`assertion_wrong_signer`), garbage and an over-long header
    (`assertion_malformed`) and the first assertion replayed on a second
    connection are each refused with 403
    `assertion_refused` naming the reason and `x-agentd-outcome`, and none
    of them reaches the handler: it ran exactly once. A certificate for a
    key B has no session with is refused at the handshake."""
    a, b, backend, echo, _ = pair
    c = mesh.router("router-c")  # its key only: never started
    client = wait_accepted(a, b, workdir)
    try:
        body = handler_body("rogue.echo", {"n": 1}, tenant="ops", source_agent="agent://ops/evil")
        good = Claims.for_body(body, source="router-a", target="router-b", origin="router-a",
                               caller="agent://lab/caller", tenant="lab", capability="rogue.echo")
        head = assertion(good, a.key.private)
        r = client.request("POST", "/agent/v1/invoke", forward_headers(head, echo), body)
        assert r.status == 200, r.describe()
        got = r.json()
        assert got["echo"] == {"n": 1} and got["route_id"] == echo, got
        assert (got["tenant"], got["source_agent"]) == ("lab", "agent://lab/caller"), got
        assert len(backend.calls("rogue.echo")) == 1

        # The same header and body again.
        refused(client.request("POST", "/agent/v1/invoke", forward_headers(head, echo), body), "assertion_replayed")
        expired = good.fresh(expires_ms=now_ms() - (SKEW_S + 10) * 1000)
        refused(call(client, expired, a.key.private, echo, body), "assertion_expired")
        too_long = good.fresh(expires_ms=now_ms() + (30 + SKEW_S + 120) * 1000)
        refused(call(client, too_long, a.key.private, echo, body), "assertion_lifetime")
        tampered = body.replace(b'{"n":1}', b'{"n":2}')
        assert tampered != body
        refused(call(client, good.fresh(), a.key.private, echo, tampered), "assertion_digest")
        refused(call(client, good.fresh(target="router-c"), a.key.private, echo, body), "assertion_wrong_target")
        other = handler_body("rogue.slow", {"n": 1})
        refused(call(client, good.fresh(), a.key.private, echo, other), "assertion_wrong_capability")
        refused(call(client, good.fresh(), Ed25519PrivateKey.generate(), echo, body), "assertion_bad_signature")
        as_c = good.fresh(source="router-c", origin="router-c")
        refused(call(client, as_c, c.key.private, echo, body), "assertion_wrong_signer")
        # Not an assertion: garbage, and longer than any real one.
        refused(client.request("POST", "/agent/v1/invoke", forward_headers("!!not-base64!!", echo), body),
                "assertion_malformed")
        refused(client.request("POST", "/agent/v1/invoke", forward_headers("A" * 3000, echo), body),
                "assertion_malformed")
        # The replay cache is the gateway's, not the connection's.
        second = connect_as(a, b, workdir)
        try:
            refused(second.request("POST", "/agent/v1/invoke", forward_headers(head, echo), body), "assertion_replayed")
        finally:
            second.close()
        # No assertion at all.
        r = client.request("POST", "/agent/v1/invoke", {k: v for k, v in forward_headers("", echo).items()
                                                        if k != "x-agentd-assertion"}, body)
        assert r.status == 403 and r.error().get("code") == "assertion_refused", r.describe()

        # Nothing refused reached the handler; the connection still serves.
        assert len(backend.calls("rogue.echo")) == 1, [x.body for x in backend.calls()]
        assert backend.calls("rogue.slow") == []
        again = handler_body("rogue.echo", {"n": 3})
        r = call(client, Claims.for_body(again, **_who("rogue.echo")), a.key.private, echo, again)
        assert r.status == 200 and r.json()["echo"] == {"n": 3}, r.describe()
        assert client.closed is None
    finally:
        client.close()

    # A key B has no ARPX session with, claiming to be A: no handshake.
    with pytest.raises((ssl.SSLError, ConnectionError, OSError, TimeoutError)):
        stranger = connect_as(a, b, workdir, key=Ed25519PrivateKey.generate())
        try:
            stranger.request("GET", "/agent/v1/none", forward_headers("", ""), timeout=5)
        finally:
            stranger.close()
    assert len(backend.calls("rogue.echo")) == 2


def test_a_batch_signature_is_checked_call_by_call(pair, workdir):
    """Proves the batch form of the assertion (one Ed25519 signature over
    a hash tree of calls): three calls of one batch signed by A each
    succeed with their own inclusion proof; a call whose proof was altered
    (a sibling hash flipped), one carrying the proof of another batch, one
    whose root A never signed (another key's signature over a tree that
    contains the call), and one whose proof fits no tree of its size are
    refused (`assertion_bad_signature`, `assertion_bad_proof`) and never
    reach the handler; the nonces of a cached batch are still one use each
    (`assertion_replayed`)."""
    a, b, backend, echo, _ = pair
    client = wait_accepted(a, b, workdir)
    try:
        bodies = [handler_body("rogue.echo", {"n": 10 + i}) for i in range(5)]
        expires = now_ms() + 10_000
        claims = [Claims.for_body(x, **_who("rogue.echo"), expires_ms=expires) for x in bodies]
        heads = batch(claims[:3], a.key.private)

        def send(head, body):
            return client.request("POST", "/agent/v1/invoke", forward_headers(head, echo), body)

        r = send(heads[0], bodies[0])
        assert r.status == 200 and r.json()["echo"] == {"n": 10}, r.describe()

        root, paths = merkle([leaf_hash(c) for c in claims[:3]])
        sig = a.key.private.sign(root_message("router-a", "router-b", expires, 3, root))
        # Call 2 with a sibling hash flipped: leads to a root A never signed.
        flipped = [bytes([paths[1][0][0] ^ 1]) + paths[1][0][1:]] + paths[1][1:]
        refused(send(encode_assertion(claims[1], 1, 3, flipped, sig), bodies[1]), "assertion_bad_signature")
        # Call 2 with the proof (and signature) of another batch A signed.
        other = [c.fresh() for c in claims[:3]]
        oroot, opaths = merkle([leaf_hash(c) for c in other])
        osig = a.key.private.sign(root_message("router-a", "router-b", expires, 3, oroot))
        refused(send(encode_assertion(claims[1], 1, 3, opaths[1], osig), bodies[1]), "assertion_bad_signature")
        refused(send(encode_assertion(claims[1], 1, 3, opaths[1], sig), bodies[1]), "assertion_bad_signature")
        # A tree containing call 4 whose root only another key signed.
        forged = batch([claims[3], claims[4]], Ed25519PrivateKey.generate())
        refused(send(forged[0], bodies[3]), "assertion_bad_signature")
        # A proof one hash short for its position.
        refused(send(encode_assertion(claims[1], 1, 3, paths[1][:-1], sig), bodies[1]), "assertion_bad_proof")
        assert [x.json()["payload"] for x in backend.calls("rogue.echo")] == [{"n": 10}]

        # The untouched calls of the batch (root already verified) succeed.
        for i in (1, 2):
            r = send(heads[i], bodies[i])
            assert r.status == 200 and r.json()["echo"] == {"n": 10 + i}, r.describe()
        refused(send(heads[2], bodies[2]), "assertion_replayed")
        assert len(backend.calls("rogue.echo")) == 3
    finally:
        client.close()


def _who(capability):
    return dict(source="router-a", target="router-b", origin="router-a", caller="agent://lab/caller",
                tenant="lab", capability=capability)


def test_oversized_request_resets_only_its_stream(pair, workdir):
    """Proves stream-local refusal on the peer plane: on one h2 connection
    from A, two slow calls are in flight while a third stream sends a body
    four times `gateway.max_request_bytes`; that stream alone is refused
    (RST_STREAM, or 413 `payload_too_large`) and never reaches the handler,
    the two slow calls then complete with the handler's answer and a later
    call on the same connection succeeds; the connection never ends, and B's
    gateway counts no new TLS handshake in or out (`agentctl stats`:
    `peer_handshakes_in` / `peer_handshakes_out`) and the refused stream
    (`peer_streams_refused`) in a report made after all of it."""
    a, b, backend, echo, slow = pair
    client = wait_accepted(a, b, workdir)
    try:
        warm = handler_body("rogue.echo", {"warm": 1})
        r = call(client, Claims.for_body(warm, **_who("rogue.echo")), a.key.private, echo, warm)
        assert r.status == 200, r.describe()
        before = b.gateway_stats(after=time.monotonic())
        assert "peer_handshakes_in" in before and "peer_handshakes_out" in before, before

        slow_ids = []
        for i in range(2):
            sb = handler_body("rogue.slow", {"i": i, "max_s": 20})
            slow_ids.append(client.start("POST", "/agent/v1/invoke", forward_headers(
                assertion(Claims.for_body(sb, **_who("rogue.slow")), a.key.private), slow, deadline_ms=30_000), sb))
        client.pump(lambda: len(backend.calls("rogue.slow")) == 2, timeout=10)

        big = handler_body("rogue.echo", {"pad": "x" * (4 * MAX_REQUEST)})
        big_id = client.start("POST", "/agent/v1/invoke", forward_headers(
            assertion(Claims.for_body(big, **_who("rogue.echo")), a.key.private), echo), big)
        (big_r,) = client.wait(big_id, timeout=15)
        assert big_r.reset is not None or big_r.status == 413, big_r.describe()
        if big_r.reset is None:
            assert big_r.error().get("code") == "payload_too_large", big_r.describe()
        assert not any(s.done for s in (client.streams[x] for x in slow_ids)), client.streams

        backend.release()
        for r in client.wait(*slow_ids, timeout=15):
            assert r.status == 200 and r.json()["intent"] == "rogue.slow", r.describe()
        after_body = handler_body("rogue.echo", {"after": 1})
        r = call(client, Claims.for_body(after_body, **_who("rogue.echo")), a.key.private, echo, after_body)
        assert r.status == 200 and r.json()["echo"] == {"after": 1}, r.describe()
        assert client.closed is None, client.closed
        assert [x.json()["payload"] for x in backend.calls("rogue.echo")] == [{"warm": 1}, {"after": 1}]

        after = b.gateway_stats(after=time.monotonic())
        for k in ("peer_handshakes_in", "peer_handshakes_out"):
            assert after[k] == before[k], (k, before, after)
        assert after["peer_streams_refused"] > before["peer_streams_refused"], (before, after)
    finally:
        client.close()


def test_receiver_applies_tenant_access_and_its_rate_limit(mesh, workdir):
    """Proves that B decides with the assertion's tenant, never the body's,
    for a peer's call: a route of tenant `ops` called under an assertion
    for tenant `lab` (the body claiming `ops`) is refused typed (404
    `no_route`, outcome rejected) without reaching its handler; B's own
    rate limit of tenant `lab` (1/s, burst 4) applies to the peer's calls
    (429 `rate_limited` with Retry-After, outcome rejected; only the calls
    answered 200 reached the handler); an unknown route id is a typed
    `no_route`, a path id (`R@hop`) instead of the base id a typed refusal,
    a path outside the peer API a 404 JSON `not_found`."""
    a = mesh.router("router-a")
    b = mesh.router("router-b", tenants=[("lab", {"name": "lab", "rate_per_second": 1, "rate_burst": 4})])
    mesh.link("router-a", "router-b")
    a.start()
    b.start()
    b.wait_established("router-a")
    backend = b.lan_backend()
    try:
        echo = b.serve(backend, "rogue.echo")
        secret = b.serve(backend, "ops.secret", tenant="ops", name="secret")
        client = wait_accepted(a, b, workdir)
        try:
            body = handler_body("ops.secret", {"s": 1}, tenant="ops", source_agent="agent://ops/admin")
            r = call(client, Claims.for_body(body, **_who("ops.secret")), a.key.private, secret, body)
            assert r.status == 404 and r.error().get("code") == "no_route", r.describe()
            assert r.headers.get("x-agentd-outcome") == "rejected", r.headers
            assert backend.calls("ops.secret") == []

            unknown = handler_body("rogue.echo", {"u": 1})
            r = call(client, Claims.for_body(unknown, **_who("rogue.echo")), a.key.private, "no-such-route", unknown)
            assert r.status == 404 and r.error().get("code") == "no_route", r.describe()
            # A path id (`R@hop`) where the base id belongs: typed, not served.
            r = call(client, Claims.for_body(unknown, **_who("rogue.echo")), a.key.private, f"{echo}@router-a", unknown)
            assert r.status in (400, 404) and r.error().get("code") in ("invalid_field", "no_route"), r.describe()
            assert r.headers.get("x-agentd-outcome") == "rejected", r.headers
            r = client.request("GET", "/agent/v1/admin", forward_headers("", echo))
            assert r.status == 404 and r.error().get("code") == "not_found", r.describe()

            answers = []
            for i in range(10):
                b_i = handler_body("rogue.echo", {"i": i}, tenant="other")
                answers.append(call(client, Claims.for_body(b_i, **_who("rogue.echo")), a.key.private, echo, b_i))
                if answers[-1].status == 429:
                    break
            limited = answers[-1]
            assert limited.status == 429 and limited.error().get("code") == "rate_limited", \
                [x.describe() for x in answers]
            assert limited.headers.get("x-agentd-outcome") == "rejected" and limited.headers.get("retry-after"), \
                limited.headers
            ok = [x for x in answers if x.status == 200]
            assert all(x.json()["tenant"] == "lab" for x in ok), [x.describe() for x in ok]
            assert len(backend.calls("rogue.echo")) == len(ok), (len(ok), [x.describe() for x in answers])
        finally:
            client.close()
    finally:
        backend.close()


def test_a_removed_link_closes_its_connections_and_trust(pair, workdir):
    """Proves that the data plane trusts exactly the current ARPX links:
    a connection authenticated with A's key serves calls; when B's operator
    removes the peer A (reload), B closes that connection by itself and a
    new handshake with A's key is refused."""
    a, b, backend, echo, _ = pair
    client = wait_accepted(a, b, workdir)
    try:
        body = handler_body("rogue.echo", {"before": 1})
        r = call(client, Claims.for_body(body, **_who("rogue.echo")), a.key.private, echo, body)
        assert r.status == 200, r.describe()
        b.unpeer("router-a")
        b.reload()
        client.pump(lambda: client.closed is not None, timeout=15)
    finally:
        client.close()

    def refused_now():
        try:
            c = connect_as(a, b, workdir)
        except (ssl.SSLError, ConnectionError, OSError):
            return True
        try:
            c.request("GET", "/agent/v1/none", forward_headers("", ""), timeout=5)
        except (ssl.SSLError, ConnectionError, OSError, TimeoutError):
            return True
        finally:
            c.close()
        return False

    wait_for("a handshake with A's key to be refused", refused_now, timeout=10, interval=0.2)
    assert len(backend.calls("rogue.echo")) == 1


def test_a_full_replay_cache_refuses_new_nonces_and_forgets_none_alive(mesh, workdir):
    """Proves the bounded replay cache (`gateway.replay_cache` 3, no clock
    skew): three calls with live assertions (expiring in 3 s) fill it; a
    fourth, otherwise correct, is refused with 503 `assertion_refused` /
    `assertion_cache_full` (outcome rejected) and never reaches the handler, and a replay of the first is still
    `assertion_replayed` (its nonce was not evicted to make room); once the
    first three expired, a new assertion is accepted again."""
    a = mesh.router("router-a")
    b = mesh.router("router-b", gateway={"replay_cache": 3, "clock_skew": 0})
    mesh.link("router-a", "router-b")
    a.start()
    b.start()
    b.wait_established("router-a")
    backend = b.lan_backend()
    try:
        echo = b.serve(backend, "rogue.echo")
        client = wait_accepted(a, b, workdir)
        try:
            # A's own gateway may not send B anything meanwhile: no call
            # goes from A to B in this test, so the cache is ours alone.
            sent = []
            for i in range(3):
                body = handler_body("rogue.echo", {"i": i})
                head = assertion(Claims.for_body(body, **_who("rogue.echo"), expires_ms=now_ms() + 3000), a.key.private)
                r = client.request("POST", "/agent/v1/invoke", forward_headers(head, echo), body)
                assert r.status == 200, r.describe()
                sent.append((head, body))
            fourth = handler_body("rogue.echo", {"i": 3})
            # A capacity refusal, not a forgery: 503, and the sender may
            # try another path.
            full = call(client, Claims.for_body(fourth, **_who("rogue.echo")), a.key.private, echo, fourth)
            refused(full, "assertion_cache_full", status=503)
            head, body = sent[0]
            refused(client.request("POST", "/agent/v1/invoke", forward_headers(head, echo), body), "assertion_replayed")
            assert len(backend.calls("rogue.echo")) == 3

            def accepted_again():
                again = handler_body("rogue.echo", {"again": 1})
                r = call(client, Claims.for_body(again, **_who("rogue.echo")), a.key.private, echo, again)
                if r.status == 200:
                    return r
                assert r.error().get("reason") == "assertion_cache_full", r.describe()
                return None

            wait_for("the cache to have room once the first assertions expired", accepted_again, timeout=15,
                     interval=0.25)
        finally:
            client.close()
    finally:
        backend.close()


def test_a_peers_hop_limit_is_checked_and_capped(pair, workdir):
    """Proves that the hop limit in a peer's body grants nothing: a call
    arriving with `hop_limit` 1 is refused before dispatch (508
    `hop_limit_exceeded`, outcome rejected, the handler untouched), one
    claiming 200 hops reaches the handler with at most B's own
    `gateway.hop_limit` (8)."""
    a, b, backend, echo, _ = pair
    client = wait_accepted(a, b, workdir)
    try:
        last = handler_body("rogue.echo", {"h": 1}, hop_limit=1)
        r = call(client, Claims.for_body(last, **_who("rogue.echo")), a.key.private, echo, last)
        assert r.status == 508 and r.error().get("code") == "hop_limit_exceeded", r.describe()
        assert r.headers.get("x-agentd-outcome") == "rejected", r.headers
        assert backend.calls("rogue.echo") == []
        many = handler_body("rogue.echo", {"h": 200}, hop_limit=200)
        r = call(client, Claims.for_body(many, **_who("rogue.echo")), a.key.private, echo, many)
        assert r.status == 200, r.describe()
        got = backend.calls("rogue.echo")
        assert len(got) == 1 and 1 <= got[0].json()["hop_limit"] <= 8, got[0].json()
    finally:
        client.close()


def test_one_neighbour_holds_only_its_share_of_in_flight_slots(mesh, workdir):
    """Proves `gateway.max_inflight_per_peer` (issue 21): B runs with
    `max_inflight 8` and `max_inflight_per_peer 4`; A starts eight slow
    calls on one connection. Four reach the handler and hold their slots,
    the other four are refused at once with 503 `overloaded` (reason
    `peer_inflight`, outcome rejected: A may move them) and never reach it.
    Meanwhile a caller on B's LAN is still served, where a gateway without
    the share let A hold all eight slots and answered it 503. Released, A's
    four calls finish 200."""
    a = mesh.router("router-a")
    b = mesh.router("router-b", gateway={"max_inflight": 8, "max_inflight_per_peer": 4})
    mesh.link("router-a", "router-b")
    a.start()
    b.start()
    b.wait_established("router-a")
    backend = b.lan_backend()
    try:
        b.serve(backend, "rogue.echo")
        slow = b.serve(backend, "rogue.slow", name="slow")
        client = wait_accepted(a, b, workdir)
        try:
            ids = []
            for i in range(8):
                sb = handler_body("rogue.slow", {"i": i, "max_s": 20})
                head = assertion(Claims.for_body(sb, **_who("rogue.slow")), a.key.private)
                ids.append(client.start("POST", "/agent/v1/invoke", forward_headers(head, slow, deadline_ms=30_000), sb))

            def settled() -> bool:
                refused_now = sum(1 for s in ids if client.streams[s].done)
                return refused_now == 4 and len(backend.calls("rogue.slow")) == 4

            client.pump(settled, timeout=10)
            held = [s for s in ids if not client.streams[s].done]
            for s in ids:
                r = client.streams[s]
                if not r.done:
                    continue
                assert r.status == 503, r.describe()
                assert r.error().get("code") == "overloaded" and r.error().get("reason") == "peer_inflight", r.describe()
                assert r.headers.get("x-agentd-outcome") == "rejected", r.headers

            lan = b.stack.http.post("/agent/v1/invoke", envelope("rogue.echo", {"lan": 1}))
            assert lan.status == 200, lan.describe()
            assert lan.json()["echo"] == {"lan": 1}, lan.describe()

            backend.release()
            for r in client.wait(*held, timeout=15):
                assert r.status == 200 and r.json()["intent"] == "rogue.slow", r.describe()
            assert len(backend.calls("rogue.slow")) == 4
        finally:
            client.close()
    finally:
        backend.close()
