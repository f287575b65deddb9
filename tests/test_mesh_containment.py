"""The mesh under attack from one of its members (issue 20 items 4 and 5),
with a misbehaving router written independently of the arpx crate
(`harness/arpx_wire.py`): what it sends is refused or contained with a
typed, counted reason, the honest routers' sessions stay established
throughout (sampled while the attack runs), and honest callers keep being
answered (their success rate is asserted).

* Reflection amplification: a rogue neighbour M of reflector B floods
  routes just under its neighbour limit. B holds at most
  `arpx.max_routes_per_origin` of them; C, whose limit for B is smaller
  than what B reflects, gives up M's paths — never A's — and keeps its
  session with B.
* Origin-key poisoning: while C holds no route of router-a, M (a pinned
  neighbour of C) announces a route "of router-a" under its own key. When
  the genuine routes arrive through B, with router-a's certificate from
  the domain CA attached, the certified key wins: M's forged path goes, B
  is not blamed, and M's next forgery costs only that route."""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from harness import arpx_wire as w
from harness.attack import Rogue, Sampler, call_many, counters, pin_rogue
from harness.http import envelope
from harness.peers import build_chain, wait_callable
from harness.poll import wait_for
from test_mesh_trust import DOMAIN, domain_ca, issue, use_ca


def test_a_reflected_flood_costs_the_flooder_not_the_honest_origin_or_session(mesh):
    """Before (issue 20 item 4): C closed its session with honest B eight
    times in 16 s over M's reflected routes and lost every route of A.
    Now: B keeps 150 of M's 299 routes (`arpx.max_routes_per_origin`),
    C keeps every route of A within its 120-path budget for B and gives
    up M's paths instead; no session leaves established; every call at C
    to A's capability is answered."""
    m_key = Ed25519PrivateKey.generate()

    def configure(a, b, c):
        b.cfg.section("arpx").options["max_routes_per_origin"] = 150
        pin_rogue(b, "router-m", m_key, max_routes=300)
        c.peer_with(b, max_routes=120)

    ch = build_chain(mesh, configure=configure)
    backend = ch.a.lan_backend()
    try:
        ch.a.serve(backend, "chain.echo")
        for extra in ("chain.one", "chain.two"):
            ch.a.serve(backend, extra, name=extra.split(".")[1])
        wait_callable(ch.c, "chain.echo", headers=ch.auth)
        before = counters(ch.c).get("arpx.sessions_established", 0)
        sampler = Sampler([(ch.c, "router-b"), (ch.b, "router-c"), (ch.b, "router-a"), (ch.a, "router-b")])
        rogue = Rogue(m_key, "router-m", mesh.workdir, ch.b)
        try:
            # M's own origin: a claim of A's origin would be an ownership
            # dispute (test_origin_takeover.py), not a flood.
            flood = [w.RouteAd(f"m-{i:04d}", "router-m", ["router-m"], capability="flood.x",
                               origin_agent="agent://lab/flood").sign(m_key)
                     for i in range(299)]
            rogue.update(flood)
            ok, n = call_many(ch.c, "chain.echo", 30, headers=ch.auth)
            wait_for("B to hold its share of the flood",
                     lambda: (ch.b.peer("router-m") or {}).get("dropped_routes", 0) >= 149, timeout=20)
            wait_for("C to give up flood paths for A's",
                     lambda: (ch.c.peer("router-b") or {}).get("dropped_routes", 0) >= 30, timeout=20)
            ok2, n2 = call_many(ch.c, "chain.echo", 30, headers=ch.auth)
            # A route of A's that arrives while C's budget for B is full
            # takes the place of one of M's paths.
            ch.a.serve(backend, "chain.late", name="late")
            wait_callable(ch.c, "chain.late", headers=ch.auth)
            assert counters(ch.c).get("arpx.evicted_fair_share", 0) >= 1
            m = ch.b.peer("router-m") or {}
            assert m.get("routes_in") == 150 and "max_routes_per_origin" in (m.get("last_drop") or ""), m
            cb = ch.c.peer("router-b") or {}
            assert cb.get("state") == "established" and cb.get("routes_in") == 120, cb
            held_a = {r["capability"] for r in ch.c.peer_routes() if (r.get("path") or [""])[0] == "router-a"}
            assert held_a >= {"chain.echo", "chain.one", "chain.two", "chain.late"}, held_a
        finally:
            rogue.close()
        sampler.assert_always_established()
        assert (ok + ok2, n + n2) == (60, 60), f"honest callers at C: {ok + ok2}/{n + n2} answered"
        assert counters(ch.c).get("arpx.sessions_established", 0) == before, "C reconnected to B"
        assert counters(ch.c).get("arpx.rejected.route_limit", 0) >= 30
    finally:
        backend.close()


def test_a_forged_origin_key_loses_to_the_certified_one_and_costs_only_its_route(mesh, bins):
    """Before (issue 20 item 5): C recorded M's key as router-a's and then
    closed honest B again and again (`bad_signature … contradicts its
    known key`), losing A. Now: A's routes carry A's domain certificate;
    C certifies router-a's key from it, drops M's forged path
    (`arpx.rejected.origin_key`), keeps B, and a later forgery by M costs
    only that route. Every call at C to A's capability is answered."""
    m_key = Ed25519PrivateKey.generate()
    ca = domain_ca(bins, mesh.workdir / "ca", DOMAIN)

    def configure(a, b, c):
        for r in (a, b, c):
            use_ca(r, ca, issue(bins, ca, r, r.name, DOMAIN))
        # Trust by the domain CA alone, as a domain deployment does.
        for r, others in ((a, [b]), (b, [a, c]), (c, [b])):
            for o in others:
                r.peer_with(o, pin=False)
        pin_rogue(c, "router-m", m_key)

    ch = build_chain(mesh, configure=configure)
    backend = ch.a.lan_backend()
    sampler = Sampler([(ch.c, "router-b"), (ch.b, "router-c"), (ch.b, "router-a")])
    rogue = Rogue(m_key, "router-m", mesh.workdir, ch.c)
    try:
        wait_for("C's session with M", lambda: (ch.c.peer("router-m") or {}).get("state") == "established", timeout=15)
        before = counters(ch.c).get("arpx.sessions_established", 0)
        # C holds no route of router-a yet: M's claim comes first.
        forged = w.RouteAd("fake-echo", "router-a", ["router-a", "router-m"], capability="chain.echo").sign(m_key)
        rogue.update([forged])
        wait_for("C to hold M's forged path", lambda: any(r["route_id"] == "fake-echo" for r in ch.c.peer_routes()),
                 timeout=15)
        ch.a.serve(backend, "chain.echo")
        wait_callable(ch.c, "chain.echo", headers=ch.auth)
        wait_for("the forged path to go",
                 lambda: not any(r["route_id"] == "fake-echo" for r in ch.c.peer_routes()), timeout=15)
        ok, n = call_many(ch.c, "chain.echo", 20, headers=ch.auth)
        rogue.update([w.RouteAd("fake-two", "router-a", ["router-a", "router-m"], capability="chain.echo")
                      .sign(m_key)])
        wait_for("C to count M's second forgery",
                 lambda: (ch.c.peer("router-m") or {}).get("dropped_routes", 0) >= 1, timeout=15)
        ok2, n2 = call_many(ch.c, "chain.echo", 20, headers=ch.auth)
        assert rogue.closed_with is None, f"M's own session was closed: {rogue.closed_with}"
    finally:
        rogue.close()
        backend.close()
    sampler.assert_always_established()
    assert (ok + ok2, n + n2) == (40, 40), f"honest callers at C: {ok + ok2}/{n + n2} answered"
    cm = ch.c.peer("router-m") or {}
    assert "contradicts" in (cm.get("last_drop") or ""), cm
    routes = {(r["route_id"], r.get("next_hop")) for r in ch.c.peer_routes()}
    assert not {rid for rid, _ in routes} & {"fake-echo", "fake-two"}, routes
    assert any(hop == "router-b" for _, hop in routes), routes
    c = counters(ch.c)
    assert c.get("arpx.rejected.origin_key", 0) >= 2, c
    assert c.get("arpx.sessions_established", 0) == before, "C reconnected to B"
    # Only the start-up dial collision may have closed a connection to B.
    last = (ch.c.peer("router-b") or {}).get("last_close") or {}
    assert last.get("code") in (None, "collision"), last


def test_a_neighbours_proof_is_capped_before_reflection(mesh):
    """A member router's `proof` is its own word: rogue M advertises
    `proof jwt` for A's origin, which would make A's unproven claim lose
    the race rule everywhere. B trusts M's proofs no further than
    `static` (`peer.max_proof`), applied before reflection: at B and at C
    M's claim is unproven, A's claim (smaller router id) wins, M's is the
    disputed one, and C's callers naming A's origin are answered by A."""
    m_key = Ed25519PrivateKey.generate()

    def configure(a, b, c):
        pin_rogue(b, "router-m", m_key, max_proof="static")

    ch = build_chain(mesh, configure=configure)
    backend = ch.a.lan_backend()
    rogue = None
    try:
        ch.a.serve(backend, "chain.echo")
        wait_callable(ch.c, "chain.echo", headers=ch.auth)
        sampler = Sampler([(ch.c, "router-b"), (ch.b, "router-a")])
        rogue = Rogue(m_key, "router-m", mesh.workdir, ch.b)
        lie = w.RouteAd("m-echo", "router-m", ["router-m"], capability="chain.echo",
                        origin_agent="agent://lab/echo", proof="Jwt").sign(m_key)
        rogue.update([lie])

        def m_route(router):
            for r in router.stack.routes():
                if r.get("route_id") == "m-echo":
                    return r
            return None

        for r in (ch.b, ch.c):
            got = wait_for(f"{r.name} to hold M's claim", lambda r=r: m_route(r), timeout=15)
            assert got.get("proof") == "static", got
            wait_for(f"{r.name} to dispute M's claim", lambda r=r: (m_route(r) or {}).get("disputed") is True,
                     timeout=15)
        a_routes = [x for x in ch.c.stack.routes() if x.get("origin") == "agent://lab/echo"
                    and (x.get("path") or [""])[0] == "router-a"]
        assert a_routes and not any(x.get("disputed") for x in a_routes), a_routes
        ok = 0
        for i in range(20):
            r = ch.c.stack.http.post("/agent/v1/invoke", envelope("chain.echo", {"i": i},
                                                                  target_agent="agent://lab/echo"),
                                     headers=ch.auth)
            ok += r.status == 200 and r.json().get("route_id", "").startswith("r-")
        sampler.assert_always_established()
        assert ok == 20, f"callers at C naming A's origin: {ok}/20 answered by A"
    finally:
        if rogue is not None:
            rogue.close()
        backend.close()
