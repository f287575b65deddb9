"""Who may be a peer, and what a peer may not do.

Trust: a certificate from another domain's CA, an unpinned self-signed
key, or a domain certificate issued for another router_id → no session and
a clear `last_error` in `agentctl peers`; nothing is learned.

Misbehaviour (a raw TLS 1.3 client written here, `harness/arpx_wire.py`,
holding a pinned router key): garbage, a looped path, a forged owner, a
sequence gap, too many routes → a typed Close, nothing it sent stays in the
RIB, and the router's session with a well-behaved peer stays up with its
route eligible throughout."""

from __future__ import annotations

import os

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from harness import arpx_wire as w
from harness.mesh import ARPX_PORT, PeerSpec
from harness.pki import DOMAIN, domain_ca, issue, use_ca
from harness.poll import wait_for

def wait_error(router, peer: str, *words: str, timeout: float = 20.0) -> str:
    def check():
        p = router.peer(peer)
        err = (p or {}).get("last_error") or ""
        return err if err and all(x in err.lower() for x in words) else None

    return wait_for(f"{router.name}: last_error about {peer} mentioning {words}", check, timeout=timeout)


@pytest.mark.parametrize("case", ["wrong_domain", "unpinned", "router_id_mismatch"])
def test_untrusted_peers_get_no_session(mesh, bins, case):
    a = mesh.router("router-a")
    # router_id_mismatch: the router at B's address is really router-x
    # (its own config and domain certificate say so), while A's peer
    # section expects router-b there.
    b = mesh.router("router-b", agentd={"router_id": "router-x"} if case == "router_id_mismatch" else None)
    mesh.link("router-a", "router-b", pin=False)
    ca = domain_ca(bins, mesh.workdir / "ca", DOMAIN)
    use_ca(a, ca, issue(bins, ca, a, "router-a", DOMAIN))
    if case == "wrong_domain":
        other = domain_ca(bins, mesh.workdir / "other-ca", "other.example")
        use_ca(b, other, issue(bins, other, b, "router-b", "other.example"))
        words = ("domain ca",)
    elif case == "unpinned":
        # B has no domain certificate: it presents its self-signed key,
        # which A neither pins nor can chain.
        words = ("router-b",)
    else:
        use_ca(b, ca, issue(bins, ca, b, "router-x", DOMAIN))
        words = ("not valid for router-b",)
    a.start()
    b.start()
    b.register("b-route")
    err = wait_error(a, "router-b", *words)
    assert "certificate" in err.lower() or "key" in err.lower(), err
    assert (a.peer("router-b") or {}).get("state") != "established"
    assert a.peer_routes() == []


def test_ca_mode_session_comes_up(mesh, bins):
    a = mesh.router("router-a")
    b = mesh.router("router-b")
    mesh.link("router-a", "router-b", pin=False)
    ca = domain_ca(bins, mesh.workdir / "ca", DOMAIN)
    use_ca(a, ca, issue(bins, ca, a, "router-a", DOMAIN))
    use_ca(b, ca, issue(bins, ca, b, "router-b", DOMAIN))
    a.start()
    b.start()
    a.wait_established("router-b")
    rid = b.register("b-route")["route_id"]
    wait_for("A to learn B's route", lambda: rid in {r["route_id"] for r in a.peer_routes()}, timeout=15)


# ---- a misbehaving peer -------------------------------------------------------


@pytest.fixture
def victim(mesh, bins):
    """Router R with a well-behaved peer S (one route) and a pinned peer
    section for `rogue`, whose key the test holds."""
    r = mesh.router("router-r")
    s = mesh.router("router-s")
    mesh.link("router-r", "router-s")
    rogue_key = Ed25519PrivateKey.generate()
    # R dials the rogue's configured address in vain (nothing listens);
    # the rogue connects to R instead.
    r.peers.append(PeerSpec("rogue", "192.0.2.1", {
        "router_id": "rogue", "address": "192.0.2.1", "port": ARPX_PORT,
        "key_fingerprint": w.fingerprint_of(rogue_key), "max_routes": 5,
    }))
    r._write_peers()
    r.start()
    s.start()
    r.wait_established("router-s")
    good = s.register("good")["route_id"]
    wait_for("R to learn S's route", lambda: good in {x["route_id"] for x in r.peer_routes()}, timeout=15)
    return r, s, rogue_key, good


def connect_rogue(mesh, r, key) -> w.RoguePeer:
    rogue = w.RoguePeer(key, "rogue", mesh.workdir)
    rogue.connect(r.ns.mgmt_addr, ARPX_PORT, source=r.ns.mgmt_host_addr)
    return rogue


def establish(rogue: w.RoguePeer) -> None:
    rogue.send(w.open_msg("rogue", boot_epoch=int.from_bytes(os.urandom(4), "big")))
    first = rogue.recv()
    assert first is not None and first["type"] == "open", first
    assert first["router_id"] == "router-r"


def signed(route_id: str, key, path=None, origin="rogue") -> w.RouteAd:
    return w.RouteAd(route_id, origin, path or [origin]).sign(key)


def expect_close(rogue: w.RoguePeer, code: str) -> dict:
    msg = rogue.recv_until("close")
    assert msg is not None, f"connection ended without a Close (wanted {code})"
    assert msg["code"] == code, msg
    # Then the router ends the connection.
    assert rogue.recv() is None
    return msg


def aftermath(r, good: str, rogue_ids) -> None:
    held = {x["route_id"] for x in r.peer_routes()}
    assert not (held & set(rogue_ids)), f"rogue routes kept: {held & set(rogue_ids)}"
    assert (r.peer("router-s") or {}).get("state") == "established"
    assert good in base_eligible(r)


def base_eligible(r):
    return {k.split("@", 1)[0] for k in r.remote_set()}


def test_open_naming_another_router_than_the_certificate(mesh, victim):
    r, s, key, good = victim
    rogue = connect_rogue(mesh, r, key)
    rogue.send(w.open_msg("router-s"))
    expect_close(rogue, "IdentityMismatch")
    aftermath(r, good, [])


def test_garbage_gets_a_decode_close(mesh, victim):
    r, s, key, good = victim
    rogue = connect_rogue(mesh, r, key)
    establish(rogue)
    rogue.send(b"\xff\xff\xff\xff\x07")
    expect_close(rogue, "Decode")
    wait_for("R to record the close", lambda: (r.peer("rogue") or {}).get("last_close"), timeout=10)
    aftermath(r, good, [])


def test_looped_path_and_sequence_gap_close_the_session(mesh, victim):
    r, s, key, good = victim
    cases = [
        # A path through R itself.
        ("LoopDetected", lambda seq: [w.update(seq, [signed("loop", key, ["rogue", "router-r", "rogue"])])], ["loop"]),
        # seq 1 then 3.
        ("SequenceGap", lambda seq: [w.update(seq, [signed("g1", key)]), w.update(seq + 2, [signed("g2", key)])], ["g1", "g2"]),
    ]
    for code, messages, ids in cases:
        rogue = connect_rogue(mesh, r, key)
        establish(rogue)
        rogue.send(w.snapshot_begin(1))
        rogue.send(w.update(1, [signed("ok-then-gone", key)]))
        rogue.send(w.snapshot_end(1))
        wait_for("the rogue's first route to be held", lambda: "ok-then-gone" in {x["route_id"] for x in r.peer_routes()}, timeout=10)
        for body in messages(2):
            rogue.send(body)
        msg = expect_close(rogue, code)
        assert msg["reason"], msg
        wait_for(f"R to drop everything the rogue sent ({code})",
                 lambda: not ({x["route_id"] for x in r.peer_routes()} & {"ok-then-gone", *ids} - {good}),
                 timeout=10)
        aftermath(r, good, ["ok-then-gone", *[i for i in ids if i != good]])
        last = (r.peer("rogue") or {}).get("last_close") or {}
        assert code.lower() in str(last).lower().replace("_", ""), last
        rogue.close()


def test_forged_owner_and_route_limit_cost_only_those_routes(mesh, victim):
    """Issue 20 items 4 and 5: a route of S's origin signed with the
    rogue's key, and one path more than the rogue's `max_routes` (5), are
    dropped alone — counted, logged and shown in `agentctl peers` — while
    the rogue's session and its other routes stay. S's path is untouched."""
    r, s, key, good = victim
    rogue = connect_rogue(mesh, r, key)
    establish(rogue)
    rogue.send(w.snapshot_begin(1))
    rogue.send(w.update(1, [signed("ok", key)]))
    rogue.send(w.snapshot_end(1))
    wait_for("the rogue's first route to be held", lambda: "ok" in {x["route_id"] for x in r.peer_routes()}, timeout=10)
    # S's route id and origin, signed with the rogue's key.
    rogue.send(w.update(2, [signed(good, key, ["router-s", "rogue"], origin="router-s")]))
    rogue.send(w.update(3, [signed(f"m{i}", key) for i in range(6)]))
    rogue.send(w.heartbeat())

    def dropped():
        p = r.peer("rogue") or {}
        return p if p.get("dropped_routes", 0) >= 3 else None

    # forged owner (1) + two of "ok", m0..m5 beyond 5 paths (2).
    p = wait_for("R to count the rogue's dropped paths", dropped, timeout=10)
    assert p["state"] == "established", p
    assert "max_routes" in (p.get("last_drop") or ""), p
    held = {x["route_id"] for x in r.peer_routes() if x.get("next_hop") == "rogue"}
    assert len(held) == 5 and "ok" in held, held
    flat = r.stack.ctl_json("stats")["counters"]
    assert flat.get("arpx.rejected.origin_key", 0) >= 1, flat
    assert flat.get("arpx.rejected.route_limit", 0) >= 2, flat
    # S's path is S's: the forged copy changed nothing about it.
    paths = {k: v for k, v in r.remote_set().items() if k.startswith(good + "@")}
    assert paths == {f"{good}@router-s": ["router-s"]}, paths
    assert (r.peer("router-s") or {}).get("state") == "established"
    rogue.close()

