"""agentd keeps only CAP_NET_ADMIN of root's capabilities (DESIGN §9,
openwrt-feed/README.md "Privileges"): procd applies a capabilities file
only inside a ujail, so agentd drops the rest itself before its first
thread, bounding set included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.backend import registration
from harness.http import envelope

CAP_NET_ADMIN = 1 << 12


def caps(status: Path) -> dict[str, int]:
    out = {}
    for line in status.read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            out[key] = int(value.strip(), 16)
    return out


@pytest.mark.skipif(os.geteuid() != 0, reason="agentd drops capabilities only when started with them (root)")
def test_agentd_runs_with_cap_net_admin_only_in_every_thread(stack, backend):
    """Proves that every thread of a running agentd (the main one, tokio's
    and mdns-sd's) holds CAP_NET_ADMIN and nothing else, in the permitted,
    effective and bounding sets, with nothing inheritable or ambient — and
    that agentd still does its work: a registration through the gateway
    becomes a route that is invoked."""
    stack.register(registration("priv.echo", backend.endpoint, lease_seconds=30))
    stack.wait_routable(envelope("priv.echo", {}))
    r = stack.http.post("/agent/v1/invoke", envelope("priv.echo", {"n": 1}))
    assert r.status == 200, r.describe()
    tasks = list(Path(f"/proc/{stack.agentd.pid}/task").iterdir())
    assert tasks
    for t in tasks:
        c = caps(t / "status")
        assert c["CapPrm"] == CAP_NET_ADMIN and c["CapEff"] == CAP_NET_ADMIN, (t.name, c)
        assert c["CapBnd"] == CAP_NET_ADMIN, (t.name, c)
        assert c["CapInh"] == 0 and c.get("CapAmb", 0) == 0, (t.name, c)
    assert "all but CAP_NET_ADMIN dropped" in stack.agentd.log_text()
