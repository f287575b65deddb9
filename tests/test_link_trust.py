"""Calls between routers per DESIGN §3 (issue 21 part 2), two routers
in namespaces with real binaries and a real domain CA (`agentctl pki`).

Inside one domain (each router's certificate chains to the domain CA)
the mutually authenticated h2 link authenticates every call: the sending
gateway states the call's ingress router, caller and tenant in headers,
and no forwarding assertion is signed or verified. A peer section with
`sign_calls '1'` makes the same link carry signed assertions again, as a
pinned neighbour outside the domain always does (test_peer_chain)."""

from __future__ import annotations

import time

from harness.http import envelope
from harness.peers import wait_callable
from harness.poll import wait_for
from test_mesh_trust import DOMAIN, domain_ca, issue, use_ca


def _domain_pair(mesh, bins):
    a = mesh.router("router-a")
    c = mesh.router("router-c")
    mesh.link("router-a", "router-c", pin=False)
    ca = domain_ca(bins, mesh.workdir / "ca", DOMAIN)
    use_ca(a, ca, issue(bins, ca, a, "router-a", DOMAIN))
    use_ca(c, ca, issue(bins, ca, c, "router-c", DOMAIN))
    a.start()
    c.start()
    a.wait_established("router-c")
    c.wait_established("router-a")
    return a, c


def _call(c, n: int):
    r = c.stack.http.post("/agent/v1/invoke", envelope("link.echo", {"n": n}, source_agent="agent://lab/remote caller"))
    assert r.status == 200, r.describe()
    return r.json()


def test_calls_inside_the_domain_are_authenticated_by_the_link_and_signed_only_when_asked(mesh, bins):
    """Proves the in-domain rule and the switch back: calls from C's LAN
    reach A's handler with the caller and tenant C stated, while neither
    gateway signs or verifies an assertion; after `sign_calls '1'` on
    both peer sections (a reload, no restart), the same calls carry
    assertions that A verifies."""
    a, c = _domain_pair(mesh, bins)
    backend = a.lan_backend()
    try:
        a.serve(backend, "link.echo")
        wait_callable(c, "link.echo")
        for n in range(5):
            got = _call(c, n)
            assert got["echo"] == {"n": n}, got
            assert (got["tenant"], got["source_agent"]) == ("lab", "agent://lab/remote caller"), got
        sa, sc = (r.gateway_stats(after=time.monotonic()) for r in (a, c))
        assert sc["peer_assertions_signed"] == 0, sc
        assert sa["peer_assertions_verified"] == 0, sa
        assert sa["peer_streams_refused"] == 0, sa

        for r in (a, c):
            for p in r.peers:
                p.options["sign_calls"] = "1"
            r._write_peers()
            r.reload()

        def signed_call_verified():
            got = c.stack.http.post("/agent/v1/invoke", envelope("link.echo", {"n": "signed"}))
            if got.status != 200:
                return None
            st = a.gateway_stats(after=time.monotonic())
            return st if st["peer_assertions_verified"] >= 1 else None

        st = wait_for("A to verify an assertion after sign_calls", signed_call_verified, timeout=30)
        assert st["peer_assertions_verified"] >= 1, st
        sc = c.gateway_stats(after=time.monotonic())
        assert sc["peer_assertions_signed"] >= 1, sc
    finally:
        backend.close()
