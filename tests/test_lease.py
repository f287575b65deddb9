"""Leases: a registration that is not renewed stops being eligible at its
deadline — in agentd's RIB and in agent-gw's FIB replica — not before and
not at some later poll."""

from __future__ import annotations

import json
import time

from harness.backend import registration
from harness.http import envelope
from harness.poll import Fatal, wait_for

# CLOCK_MONOTONIC is system-wide on Linux: agentd's lease deadlines, the
# gateway's eligibility checks and Python's time.monotonic() read the same
# clock. Millisecond truncation on either side is all the slack needed.
CLOCK_SLACK_S = 0.002
# Liveness bound for agentd's timer-driven removal from its table (a poll
# bound, not a timing claim: eligibility itself is checked exactly below).
REMOVAL_BOUND_S = 15.0


def _agentd_lookup(stack, capability):
    """`agentctl lookup` evaluated by agentd at the instant it handles the
    request: (winner route id or None, refusal reason or None)."""
    p = stack.ctl("lookup", capability, "--tenant", "lab", "--source", "agent://lab/caller")
    out = json.loads(p.stdout) if p.stdout.strip() else {}
    assert p.returncode in (0, 1) and "winner" in out, (p.returncode, p.stdout, p.stderr)
    return out.get("winner"), out.get("refusal")


def test_lease_expiry_removes_route_by_its_deadline(stack, backend):
    """Proves that a 5 s lease (the default minimum) that is never renewed
    stops being eligible exactly at its deadline — in the gateway's route
    lookup and in agentd's own `lookup` — never before it, and that agentd
    then drops it from `agentctl routes`.

    The deadline is bracketed without trusting any wall-clock margin: the
    register round trip bounds it ([sent + lease, answered + lease]), and
    agentd's own report (`expires_in_s` of `agentctl routes`, floor of the
    remaining seconds) narrows it and must agree with it. Each observation
    is bracketed by the monotonic clock before sending and after the
    answer: "eligible" at a request sent at t0 means the deadline is after
    t0; "not eligible" answered by t1 means it is not after t1. Load can
    only delay answers, which weakens neither inference, so there is no
    upper wall-clock margin to flake on. Table removal is timer-driven and
    only bounded by a generous poll."""
    lease = 5
    body = registration("lease.echo", backend.endpoint, lease_seconds=lease)
    t_sent = time.monotonic()
    info = stack.register(body)
    t_answered = time.monotonic()
    assert info["lease_seconds"] == lease, info
    route_id = info["route_id"]
    earliest = t_sent + lease
    latest = t_answered + lease

    # The daemon's own deadline, as it reports it.
    t0 = time.monotonic()
    rows = {r["route_id"]: r for r in stack.routes()}
    t1 = time.monotonic()
    assert route_id in rows, rows
    remaining = rows[route_id]["expires_in_s"]
    assert isinstance(remaining, int) and 0 <= remaining <= lease, rows[route_id]
    reported_lo = t0 + remaining - CLOCK_SLACK_S
    reported_hi = t1 + remaining + 1 + CLOCK_SLACK_S
    assert reported_lo <= latest + CLOCK_SLACK_S and reported_hi >= earliest - CLOCK_SLACK_S, (
        f"agentd reports {remaining}s left, inconsistent with a {lease}s lease granted "
        f"{t0 - t_answered:.3f}..{t1 - t_sent:.3f}s ago"
    )
    earliest = max(earliest, reported_lo)
    latest = min(latest, reported_hi)

    env = envelope("lease.echo", {})
    # Routable on the gateway before its deadline (the FIB replica caught up).
    stack.wait_routable(env, timeout=max(0.1, earliest - time.monotonic()))

    gw_gone_at = None
    ctl_gone_at = None
    while gw_gone_at is None or ctl_gone_at is None:
        assert time.monotonic() < latest + REMOVAL_BOUND_S, "eligibility outlived the deadline bound"
        if gw_gone_at is None:
            t0 = time.monotonic()
            r = stack.http.post("/agent/v1/route", env)
            t1 = time.monotonic()
            if r.status == 200:
                assert t0 < latest + CLOCK_SLACK_S, (
                    f"gateway routes a request sent {t0 - latest:.3f}s after the latest deadline"
                )
            else:
                assert r.status == 404 and r.error_code() == "no_route", r.describe()
                assert r.json()["error"].get("reason") in ("lease_expired", "capability_version"), r.describe()
                assert t1 >= earliest - CLOCK_SLACK_S, (
                    f"gateway dropped the route {earliest - t1:.3f}s before the deadline"
                )
                gw_gone_at = t1
        if ctl_gone_at is None:
            t0 = time.monotonic()
            winner, refusal = _agentd_lookup(stack, "lease.echo")
            t1 = time.monotonic()
            if winner == route_id:
                assert t0 < latest + CLOCK_SLACK_S, (
                    f"agentd selects the route {t0 - latest:.3f}s after the latest deadline"
                )
            else:
                assert winner is None and refusal in ("lease_expired", "capability_version"), (winner, refusal)
                assert t1 >= earliest - CLOCK_SLACK_S, (
                    f"agentd stopped selecting the route {earliest - t1:.3f}s before the deadline"
                )
                ctl_gone_at = t1
        time.sleep(0.02)

    # agentd's expiry timer then removes it from the table (and so from
    # every FIB replica); until then it reports no time left.
    def removed() -> bool:
        t0 = time.monotonic()
        rows = {r["route_id"]: r for r in stack.routes()}
        t1 = time.monotonic()
        if route_id not in rows:
            if t1 < earliest - CLOCK_SLACK_S:
                raise Fatal(f"agentd removed the route {earliest - t1:.3f}s before the deadline")
            return True
        if t0 >= latest and rows[route_id]["expires_in_s"] != 0:
            raise Fatal(f"agentd reports time left after the deadline: {rows[route_id]}")
        return False

    wait_for("agentd to remove the expired route", removed, timeout=REMOVAL_BOUND_S)
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
