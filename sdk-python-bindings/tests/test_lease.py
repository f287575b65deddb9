"""Lease keeping against a recording HTTP peer in another process:
registration body, renewal, re-registration after a 404 and after a peer
restart, withdrawal on close, and renewal while Python holds the GIL."""

import sys
import time

import pytest

from agentd_sdk import Agent, RouterUnavailableError
from conftest import Recorder


def make_agent(url, lease=5):
    agent = Agent(router=url, tenant="lab", agent_id="echo", host="127.0.0.1", allow_loopback=True,
                  lease_seconds=lease)

    @agent.capability("demo.echo", version=2, idempotent=True, schema={"type": "object"}, effect="read",
                      latency_ms=3, trust=80)
    def echo(payload):
        """Echoes its payload."""
        return payload

    return agent


def paths(records):
    return [r["path"] for r in records]


def test_registers_with_the_nexus_fields_renews_and_withdraws(recorder):
    handle = make_agent(recorder.url).start()
    try:
        reg = recorder.until(lambda r: r["path"] == "/agent/v1/register")[-1]["body"]
        assert reg["intent"] == "demo.echo" and reg["version"] == 2
        assert reg["origin"] == "agent://lab/echo" and reg["tenant"] == "lab"
        assert reg["endpoint"] == f"http://127.0.0.1:{handle.port}/invoke"
        assert reg["lease_seconds"] == 5 and reg["latency_ms"] == 3 and reg["trust"] == 80
        for f in ("region", "cost_microunits", "load_permille", "hop_count"):
            assert f in reg
        assert reg["contract"] == {"idempotent": True, "effect": "read",
                                   "input_schema": {"type": "object"}, "description": "Echoes its payload."}
        renew = recorder.until(lambda r: r["path"] == "/agent/v1/renew")[-1]
        assert renew["body"] == {"route_id": "r1", "lease_seconds": 5}
        assert handle.leases()[0]["route_id"] == "r1"
    finally:
        assert handle.close() == []
    unreg = recorder.until(lambda r: r["path"] == "/agent/v1/unregister")[-1]
    assert unreg["body"] == {"route_id": "r1"}


def test_public_ipv6_is_asked_for_only_when_wanted_and_reported_per_lease(recorder):
    agent = make_agent(recorder.url)

    @agent.capability("demo.public", public_ipv6=True)
    def public(payload):
        return payload

    @agent.capability("demo.unserved", public_ipv6=True)
    def unserved(payload):
        return payload

    with pytest.raises(ValueError):
        agent.capability("demo.bad", public_ipv6="auto")
    handle = agent.start()
    try:
        seen = recorder.until(lambda r: r["path"] == "/agent/v1/register" and r["body"]["intent"] == "demo.unserved")
        regs = {r["body"]["intent"]: r["body"] for r in seen if r["path"] == "/agent/v1/register"}
        assert "public_ipv6" not in regs["demo.echo"]
        assert regs["demo.public"]["public_ipv6"] is True and regs["demo.unserved"]["public_ipv6"] is True
        echo, pub, uns = handle.leases()
        for key in ("public_ipv6", "public_url", "public_endpoint", "public_ipv6_status"):
            assert echo[key] is None, key
        assert pub["public_ipv6"] == "2001:db8:66::7"
        assert pub["public_url"] == "https://[2001:db8:66::7]:7443"
        assert pub["public_endpoint"] == {"address": "2001:db8:66::7", "port": 7443, "scheme": "https",
                                          "tls_server_name": "router-a",
                                          "ca_bundle_id": "agentd-ca-0011223344556677"}
        assert pub["public_ipv6_status"] == {"address": "2001:db8:66::7", "served": True}
        assert pub["last_error"] is None
        assert (uns["public_ipv6"], uns["public_url"], uns["public_endpoint"]) == (None, None, None)
        assert uns["public_ipv6_status"] == {"address": None, "served": False,
                                             "reason": "ipv6.mode 'off' on this router"}
    finally:
        handle.close()
    assert all(lease["public_url"] is None for lease in handle.leases())


def test_peer_restart_leads_to_reregistration(recorder):
    handle = make_agent(recorder.url).start()
    try:
        recorder.until(lambda r: r["path"] == "/agent/v1/register")
        port = recorder.port
        recorder.stop()  # connection refused from now on
        # Leave the router down for a moment so renewals meet refusals and
        # back off; the assertions below hold whether or not one did.
        time.sleep(0.5)
        second = Recorder(port)
        try:
            # The restarted peer knows no routes: renew gets 404, then register.
            seen = second.until(lambda r: r["path"] == "/agent/v1/register", timeout=20)
            assert paths(seen)[-2:] == ["/agent/v1/renew", "/agent/v1/register"]
            deadline = time.monotonic() + 10
            while handle.leases()[0]["reregistrations"] < 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            lease = handle.leases()[0]
            assert lease["reregistrations"] == 1 and lease["route_id"] == "r1"  # the new peer's first id
            handle.close()
            assert second.until(lambda r: r["path"] == "/agent/v1/unregister")[-1]["body"] == {"route_id": "r1"}
        finally:
            second.stop()
    finally:
        handle.close()


def test_renewal_continues_while_python_holds_the_gil(recorder):
    handle = make_agent(recorder.url).start()
    old = sys.getswitchinterval()
    try:
        # No other Python thread runs until this loop ends; a Python-thread
        # renewer would be starved. The native keeper must still renew.
        sys.setswitchinterval(100.0)
        deadline = time.monotonic() + 15
        renewed = False
        while time.monotonic() < deadline:
            if handle.leases()[0]["renewals"] >= 1:
                renewed = True
                break
        sys.setswitchinterval(old)
        assert renewed, "lease was not renewed while the GIL was held"
    finally:
        sys.setswitchinterval(old)
        handle.close()


def test_unreachable_router_fails_start_and_stops_serving():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    agent = make_agent(f"http://127.0.0.1:{port}")
    with pytest.raises(RouterUnavailableError) as info:
        agent.start()
    assert info.value.not_delivered
    # start() can be retried once the router is there.
    assert agent._handle is None


def test_static_token_is_sent_as_bearer(recorder, monkeypatch):
    monkeypatch.setenv("AGENTD_TOKEN", "tok.en")
    handle = make_agent(recorder.url).start()
    try:
        reg = recorder.until(lambda r: r["path"] == "/agent/v1/register")[-1]
        assert reg["headers"]["authorization"] == "Bearer tok.en"
    finally:
        handle.close()


def test_bootstrap_token_is_fetched_bound_to_the_agent_and_refreshed_after_401():
    rec = Recorder(mode="bootstrap")
    try:
        handle = make_agent(rec.url).start()
        try:
            seen = rec.until(lambda r: r["path"] == "/agent/v1/register")
            assert paths(seen) == ["/agent/v1/authentication", "/agent/v1/bootstrap", "/agent/v1/register"]
            boot = seen[1]["body"]
            assert boot == {"tenant": "lab", "origin": "agent://lab/echo",
                            "scopes": ["agent.register", "agent.route", "agent.invoke"]}
            assert seen[2]["headers"]["authorization"] == "Bearer boot-1"
            # The first renew is refused (401): the keeper fetches a new
            # token and retries at once with it.
            seen = rec.until(lambda r: r["path"] == "/agent/v1/renew" and
                             r["headers"].get("authorization") == "Bearer boot-3")
            assert paths(seen)[-3:] == ["/agent/v1/renew", "/agent/v1/bootstrap", "/agent/v1/renew"]
            assert handle.leases()[0]["route_id"] == "r1"
        finally:
            handle.close()
    finally:
        rec.stop()
