"""Compatibility with agents and callers written for the Nexus Python SDK
(`nexilume` 0.51.1), unchanged: the agent runs in a network namespace on a
veth address, agent-gw listens on the veth peer address."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from nexus_agent.client import NexusAgentClient

from harness.agentproc import AgentProcess
from harness.http import envelope
from harness.poll import wait_for

AGENTS = Path(__file__).resolve().parent / "agents"


def start_nexilume_agent(stack, netns, workdir, lease=30, cloud_publish=True):
    router = f"http://{stack.cfg.sdk_host}:{stack.cfg.sdk_port}"
    argv = netns.exec_argv(
        [sys.executable, str(AGENTS / "nexilume_agent.py"), router, "lab", "nx-echo", str(lease), "1" if cloud_publish else "0"]
    )
    agent = AgentProcess(argv, workdir / "nexilume-agent.log")
    return agent, agent.wait_message("ready", timeout=30)


def test_nexilume_agent_registers_is_invoked_streams_and_unregisters(make_stack, netns, workdir):
    """Proves that an unmodified nexilume agent registers both of its
    capabilities through agent-gw (register answer carries route_id and
    generation, the route is in agentd's RIB with the agent's veth
    endpoint), that the nexilume client invokes it through the gateway and
    gets the agent's JSON back unchanged (with X-Agentd-Route-Id naming the
    registered route), that a nexilume stream arrives as numbered SSE
    events ending with the completion marker, and that stopping the agent
    withdraws its routes (no_route within 5 s, gone from the RIB)."""
    stack = make_stack(sdk_host=netns.host_addr)
    agent, ready = start_nexilume_agent(stack, netns, workdir)
    try:
        assert len(ready["route_ids"]) == 2, ready
        assert ready["endpoint"].startswith(f"http://{netns.ns_addr}:"), ready

        # The RIB holds both routes with the agent's endpoint.
        routes = wait_for(
            "both nexilume routes in agentctl routes",
            lambda: [r for r in stack.routes() if str(r.get("route_id")) in ready["route_ids"]]
            if len([r for r in stack.routes() if str(r.get("route_id")) in ready["route_ids"]]) == 2
            else None,
        )
        assert {str(r.get("endpoint")) for r in routes} == {ready["endpoint"]}, routes

        client = NexusAgentClient(stack.http.base_url, auth="none", use_environment_proxy=False)
        stack.wait_routable(envelope("nx.echo", {}, source_agent="agent://lab/caller"))
        result = client.invoke_intent("nx.echo", {"text": "hello"}, tenant="lab", source_agent="agent://lab/caller")
        assert result == {"echo": {"text": "hello"}, "via": "nexilume"}, result

        # Same call over raw HTTP: the answering route is named.
        r = stack.http.post("/agent/v1/invoke", envelope("nx.echo", {"k": 1}))
        assert r.status == 200, r.describe()
        assert r.json() == {"echo": {"k": 1}, "via": "nexilume"}
        assert r.header("x-agentd-route-id") in ready["route_ids"]

        events = list(
            client.invoke_stream(
                envelope("nx.count", {"n": 4}),
                resume=True,
                max_reconnects=0,
            )
        )
        data = [json.loads(e.data) for e in events]
        assert data == [{"i": 0}, {"i": 1}, {"i": 2}, {"i": 3}], data
        ids = [int(e.event_id) for e in events]
        assert ids == sorted(ids) and len(set(ids)) == 4 and ids[0] >= 1, ids

        # Stopping the agent unregisters. (That the refusal is immediate is
        # test_lease.py::test_unregister_stops_eligibility_immediately.)
        assert agent.stop() == 0, agent.log_text()
        gone = wait_for(
            "nx.echo to be withdrawn",
            lambda: (lambda r: r if r.status == 404 else None)(stack.http.post("/agent/v1/route", envelope("nx.echo", {}))),
            timeout=5,
        )
        assert gone.error_code() == "no_route", gone.describe()
        assert not [r for r in stack.routes() if str(r.get("route_id")) in ready["route_ids"]]
    finally:
        agent.stop()


@pytest.mark.parametrize("cloud_publish", [False, True], ids=["renew-404-reregister", "register-upsert"])
def test_nexilume_lease_keeping_recovers_a_withdrawn_route(make_stack, netns, workdir, cloud_publish):
    """Proves both ways nexilume keeps its lease work against agent-gw:
    after the route is withdrawn behind the agent's back, (a) with
    `cloud_publish=False` its next /renew gets 404 `not_found` and it
    registers again; (b) with the SDK default it re-registers with its
    route_id (an upsert of an unknown id). Either way the capability is
    routable and invocable again without restarting the agent. Lease 5 s:
    nexilume renews at 0.6 of it (about 3 s). The withdrawal is the
    operator's (`agentctl unregister`): the gateway refuses it from another
    host with 403 `forbidden`."""
    stack = make_stack(sdk_host=netns.host_addr)
    agent, ready = start_nexilume_agent(stack, netns, workdir, lease=5, cloud_publish=cloud_publish)
    try:
        echo_route = None
        for rid in ready["route_ids"]:
            rt = stack.http.post("/agent/v1/route", envelope("nx.echo", {}))
            if rt.status == 200 and rt.json()["route"]["route_id"] == rid:
                echo_route = rid
        assert echo_route is not None, ready
        # Withdrawn by the operator: another host may not unregister the
        # agent's route (route ownership), agentctl may.
        r = stack.http.post("/agent/v1/unregister", {"route_id": echo_route})
        assert r.status == 403 and r.json()["error"]["reason"] == "origin_owned", r.describe()
        assert stack.ctl_json("unregister", echo_route)["removed"] is True
        wait_for(
            "nx.echo to be withdrawn",
            lambda: stack.http.post("/agent/v1/route", envelope("nx.echo", {})).error_code() == "no_route",
            timeout=2,
            interval=0.005,
        )
        again = stack.wait_routable(envelope("nx.echo", {}), timeout=15)
        assert again["route"]["origin"] == "agent://lab/nx-echo", again
        r = stack.http.post("/agent/v1/invoke", envelope("nx.echo", {"after": "reregister"}))
        assert r.status == 200 and r.json()["echo"] == {"after": "reregister"}, r.describe()
    finally:
        agent.stop()
