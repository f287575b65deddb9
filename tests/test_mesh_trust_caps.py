"""Self-declared trust (issue 20 item 2): `trust` in a registration or an
advertisement is a claim, capped by the router that receives it — per
tenant for LAN registrations (`tenant.max_trust`), per neighbour for
advertised routes (`peer.max_trust`, applied before reflection: the
reflector passes on no more than it granted).

Before: a host on C's LAN registered with `"trust": 100` and its route
ranked first at A, above A's own agent (score 20 000 against 250 000).
Now, in a chain A–B–C (B reflects; B grants C at most 20): C grants its
own LAN claim 50, B grants it 20, A grants it 20 although A would allow
B 50, and A's own agent wins every call at A."""

from __future__ import annotations

from harness.attack import Sampler, call_many
from harness.http import envelope
from harness.poll import wait_for


def lookup(router, capability):
    return router.stack.ctl_json("lookup", capability, "--tenant", "lab", "--explain")


def trust_of(router, origin):
    for r in router.stack.routes():
        if r.get("origin") == origin:
            return r.get("trust")
    return None


def test_claimed_trust_is_capped_by_tenant_and_by_each_neighbour_on_the_path(mesh):
    a = mesh.router("router-a")
    b = mesh.router("router-b", reflector=True)
    c = mesh.router("router-c")
    mesh.link("router-a", "router-b")
    mesh.link("router-b", "router-c", a_opts={"max_trust": 20})
    for r in (a, b, c):
        r.start()
    b.wait_established("router-a")
    b.wait_established("router-c")
    home = a.lan_backend()
    impostor = c.lan_backend()
    try:
        a.serve(home, "demo.echo", name="echo")
        c.serve(impostor, "demo.echo", name="impostor", trust=100)
        wait_for("A to learn C's route through B", lambda: trust_of(a, "agent://lab/impostor") is not None,
                 timeout=15)
        assert trust_of(c, "agent://lab/impostor") == 50, "C's tenant cap (default 50)"
        assert trust_of(b, "agent://lab/impostor") == 20, "B's cap for C"
        assert trust_of(a, "agent://lab/impostor") == 20, "B's grant travels as the route's trust limit"
        assert trust_of(a, "agent://lab/echo") == 50
        ranked = lookup(a, "demo.echo")["candidates"]
        assert [x["origin"] for x in ranked] == ["agent://lab/echo", "agent://lab/impostor"], ranked
        a.stack.wait_routable(envelope("demo.echo", {}))
        sampler = Sampler([(a, "router-b"), (b, "router-c")])
        ok, n = call_many(a, "demo.echo", 20)
        sampler.assert_always_established()
        assert (ok, n) == (20, 20), f"callers at A: {ok}/{n} answered"
        assert len(home.calls("demo.echo")) == 20 and not impostor.calls("demo.echo"), "A's own agent answers"
    finally:
        home.close()
        impostor.close()
