"""Leases: a registration that is not renewed stops being eligible at its
deadline — in agentd's RIB and in agent-gw's FIB replica — not before and
not at some later poll."""

from __future__ import annotations

import time

from harness.backend import registration
from harness.http import envelope

# How late after the deadline the route may still be seen. Generous for a
# loaded 2-core CI machine, small against the lease itself.
MARGIN_S = 0.5


def test_lease_expiry_removes_route_by_its_deadline(stack, backend):
    """Proves that a 5 s lease (the default minimum) that is never renewed is gone from both the
    gateway's route lookup and `agentctl routes` no later than deadline +
    0.5 s, and that neither drops it before the deadline. The deadline
    window is bracketed by the time before sending the register and the
    time its answer arrived; each observation is bracketed the same way."""
    lease = 5
    body = registration("lease.echo", backend.endpoint, lease_seconds=lease)
    t_sent = time.monotonic()
    info = stack.register(body)
    t_answered = time.monotonic()
    assert info["lease_seconds"] == lease, info
    route_id = info["route_id"]
    earliest = t_sent + lease
    latest = t_answered + lease
    env = envelope("lease.echo", {})

    # Seen right after registering (the FIB replica catches up quickly).
    stack.wait_routable(env, timeout=min(2.0, lease - 0.5))

    gw_gone_at = None
    rib_gone_at = None
    hard_stop = latest + 10.0
    while (gw_gone_at is None or rib_gone_at is None) and time.monotonic() < hard_stop:
        if gw_gone_at is None:
            t0 = time.monotonic()
            r = stack.http.post("/agent/v1/route", env)
            t1 = time.monotonic()
            if r.status == 200:
                # Present at some instant after t0: the deadline is not before t0.
                assert t0 <= latest + MARGIN_S, f"gateway still routes {t0 - latest:.3f}s after the deadline"
            else:
                assert r.status == 404 and r.error_code() == "no_route", r.describe()
                assert r.json()["error"].get("reason") in ("lease_expired", "capability_version"), r.describe()
                assert t1 >= earliest, f"gateway dropped the route {earliest - t1:.3f}s before the deadline"
                gw_gone_at = t1
        if rib_gone_at is None:
            t0 = time.monotonic()
            ids = stack.route_ids()
            t1 = time.monotonic()
            if route_id in ids:
                assert t0 <= latest + MARGIN_S, f"agentd still lists the route {t0 - latest:.3f}s after the deadline"
            else:
                assert t1 >= earliest, f"agentd dropped the route {earliest - t1:.3f}s before the deadline"
                rib_gone_at = t1
        time.sleep(0.02)

    assert gw_gone_at is not None, "gateway never dropped the expired route"
    assert rib_gone_at is not None, "agentd never dropped the expired route"
    # Renewing the expired lease is refused so that SDKs re-register.
    r = stack.http.post("/agent/v1/renew", {"route_id": route_id})
    assert r.status == 404 and r.error_code() == "not_found", r.describe()


def test_renew_extends_and_unknown_renew_is_404(stack, backend):
    """Proves that renewing before expiry keeps the route past its first
    deadline (generation increases), that register with the existing
    route_id is an upsert (same route_id), and that renew of a route_id
    nobody registered answers 404 `not_found`."""
    lease = 5
    info = stack.register(registration("renew.echo", backend.endpoint, lease_seconds=lease))
    assert info["lease_seconds"] == lease, info
    rid, gen = info["route_id"], info["generation"]
    first_deadline = time.monotonic() + lease
    renewals = 0
    while time.monotonic() < first_deadline + 1.0:
        r = stack.http.post("/agent/v1/renew", {"route_id": rid, "lease_seconds": lease})
        assert r.status == 200, r.describe()
        assert r.json()["generation"] > gen
        gen = r.json()["generation"]
        renewals += 1
        time.sleep(1.0)  # renewal pacing, not a wait for a condition
    assert renewals >= 5
    rt = stack.http.post("/agent/v1/route", envelope("renew.echo", {}))
    assert rt.status == 200 and rt.json()["route"]["route_id"] == rid, rt.describe()

    up = stack.register(registration("renew.echo", backend.endpoint, lease_seconds=lease, route_id=rid))
    assert up["route_id"] == rid and up["generation"] > gen, up

    r = stack.http.post("/agent/v1/renew", {"route_id": "r-does-not-exist"})
    assert r.status == 404 and r.error_code() == "not_found", r.describe()


def test_unregister_stops_eligibility_immediately(stack, backend):
    """Proves the contract "the route stops being eligible immediately"
    (docs/sdk-api.md, unregister): 20 times, right after the 200 answer to
    /agent/v1/unregister, the gateway's lookup and an invocation through
    the same gateway already refuse with `no_route`, and the handler is not
    called."""
    for i in range(20):
        info = stack.register(registration("unreg.echo", backend.endpoint, lease_seconds=60))
        stack.wait_routable(envelope("unreg.echo", {}))
        r = stack.http.post("/agent/v1/unregister", {"route_id": info["route_id"]})
        assert r.status == 200 and r.json()["removed"] is True, r.describe()
        before = len(backend.calls("unreg.echo"))
        inv = stack.http.post("/agent/v1/invoke", envelope("unreg.echo", {"i": i}))
        assert inv.status == 404 and inv.error_code() == "no_route", (i, inv.describe())
        assert len(backend.calls("unreg.echo")) == before
