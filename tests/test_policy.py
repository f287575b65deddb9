"""Eligibility and policy on the gateway's FIB replica: tenant isolation and
deny rules give immediate typed refusals, and the handler never sees a
refused call."""

from __future__ import annotations

from harness.backend import registration
from harness.http import envelope


def test_wrong_tenant_gets_no_route(stack, backend):
    """Proves tenant isolation: a route of tenant `lab` is not eligible for
    a caller of tenant `other` (404 `no_route`, reason `tenant_access`,
    outcome `rejected`, naming the capability), the refusal does not reach
    the handler, while a `lab` caller is served and a route that lists
    `other` in `allowed_tenants` serves `other`."""
    stack.register(registration("ten.echo", backend.endpoint, lease_seconds=60))
    stack.register(registration("ten.shared", backend.endpoint, lease_seconds=60, allowed_tenants=["other"]))
    stack.wait_routable(envelope("ten.echo", {}))
    stack.wait_routable(envelope("ten.shared", {}))

    foreign = envelope("ten.echo", {"q": 1}, tenant="other", source_agent="agent://other/caller")
    for path in ("/agent/v1/invoke", "/agent/v1/route"):
        r = stack.http.post(path, foreign)
        assert r.status == 404, r.describe()
        err = r.json()["error"]
        assert err["code"] == "no_route", err
        assert err.get("reason") == "tenant_access", err
        assert err.get("outcome") == "rejected", err
        assert "ten.echo" in err["message"], err
    assert r.header("x-agentd-outcome") == "rejected", r.headers

    assert backend.calls("ten.echo") == []
    ok = stack.http.post("/agent/v1/invoke", envelope("ten.echo", {"q": 2}))
    assert ok.status == 200 and ok.json()["echo"] == {"q": 2}, ok.describe()
    shared = stack.http.post("/agent/v1/invoke", envelope("ten.shared", {"q": 3}, tenant="other", source_agent="agent://other/caller"))
    assert shared.status == 200 and shared.json()["echo"] == {"q": 3}, shared.describe()
    assert shared.json()["tenant"] == "other"

    missing = stack.http.post("/agent/v1/invoke", envelope("ten.nothing", {}))
    assert missing.status == 404 and missing.json()["error"].get("reason") == "capability_version", missing.describe()


def test_deny_rule_is_final_403(make_stack, backend):
    """Proves that a matching `deny` rule refuses with 403 `policy_denied`
    on invoke and route (no fall-through to the lower-priority allow rule
    that also matches), only for what it matches: `admin.*` is denied for
    everyone, `ops.echo` only for source `agent://lab/intruder`; other
    callers and capabilities are served and the handler sees no denied
    call."""
    stack = make_stack(
        rules=[
            ("deny_admin", {"id": "10-deny-admin", "priority": 100, "action": "deny", "tenant": "*", "source": "*", "capability": "admin.*"}),
            ("deny_intruder", {"id": "11-deny-intruder", "priority": 100, "action": "deny", "source": "agent://lab/intruder", "capability": "ops.echo"}),
            ("allow_all", {"id": "50-allow", "priority": 10, "action": "allow", "tenant": "*", "capability": "*"}),
        ]
    )
    stack.register(registration("admin.reboot.echo", backend.endpoint, lease_seconds=60))
    stack.register(registration("ops.echo", backend.endpoint, lease_seconds=60))
    stack.wait_routable(envelope("ops.echo", {}))

    for path in ("/agent/v1/invoke", "/agent/v1/route"):
        r = stack.http.post(path, envelope("admin.reboot.echo", {}))
        assert r.status == 403, r.describe()
        assert r.json()["error"]["code"] == "policy_denied", r.describe()
        r = stack.http.post(path, envelope("ops.echo", {}, source_agent="agent://lab/intruder"))
        assert r.status == 403 and r.json()["error"]["code"] == "policy_denied", r.describe()

    ok = stack.http.post("/agent/v1/invoke", envelope("ops.echo", {"fine": 1}, source_agent="agent://lab/friend"))
    assert ok.status == 200 and ok.json()["echo"] == {"fine": 1}, ok.describe()
    assert backend.calls("admin.reboot.echo") == []
    assert [c.json()["source_agent"] for c in backend.calls("ops.echo")] == ["agent://lab/friend"]
