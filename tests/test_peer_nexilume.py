"""The nexilume SDK on both ends of a call across routers (issue 8 item
7): an unmodified nexilume agent on router A's LAN (registered through
A's trusted-LAN bootstrap, `auth="auto"`) invoked by a nexilume caller on
router C's LAN through B, with `target_agent`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from nexus_agent.client import NexusAgentClient
from nexus_agent.errors import NexusHttpError

from harness.agentproc import AgentProcess
from harness.http import envelope
from harness.peers import build_chain, wait_callable

AGENTS = Path(__file__).resolve().parent / "agents"


def test_nexilume_caller_at_c_invokes_a_nexilume_agent_on_a(mesh, workdir):
    """Proves nexilume compatibility across routers: the agent on A's LAN
    registers through A's bootstrap (A runs auth `jwt`); a nexilume client
    at C (a tenant JWT) invoking `nx.echo` with `target_agent` naming the
    agent gets the agent's JSON unchanged; a `target_agent` naming no agent
    gets the typed `no_route` (nothing is sent across); a nexilume stream
    at C arrives as the agent's numbered events in order."""

    def configure(a, b, c):
        a.cfg.section("gateway").options.update(auth="jwt", bootstrap_networks=[f"{a.ns.mgmt_host_addr}/32"],
                                                 bootstrap_tenant=["lab"])

    ch = build_chain(mesh, configure=configure)
    argv = [sys.executable, str(AGENTS / "nexilume_agent.py"), ch.a.sdk_url, "lab", "nx-echo", "30", "0", "auto"]
    agent = AgentProcess(argv, workdir / "nexilume-agent.log")
    try:
        ready = agent.wait_message("ready", timeout=30)
        assert len(ready["route_ids"]) == 2, ready
        assert ready["endpoint"].startswith(f"http://{ch.a.ns.mgmt_host_addr}:"), ready
        wait_callable(ch.c, "nx.echo", {"warm": 1}, headers=ch.auth)

        client = NexusAgentClient(ch.c.sdk_url, token=ch.token, use_environment_proxy=False, timeout=20)
        result = client.invoke_intent("nx.echo", {"text": "across"}, tenant="lab", source_agent="agent://lab/caller",
                                      target_agent="agent://lab/nx-echo")
        assert result == {"echo": {"text": "across"}, "via": "nexilume"}, result

        with pytest.raises(NexusHttpError) as refused:
            client.invoke_intent("nx.echo", {"text": "nobody"}, tenant="lab", source_agent="agent://lab/caller",
                                 target_agent="agent://lab/nobody")
        assert refused.value.status == 404 and refused.value.code == "no_route", refused.value

        events = list(client.invoke_stream(envelope("nx.count", {"n": 4}, target_agent="agent://lab/nx-echo"),
                                           resume=True, max_reconnects=0))
        assert [json.loads(e.data) for e in events] == [{"i": i} for i in range(4)]
        ids = [int(e.event_id) for e in events]
        assert ids == sorted(set(ids)) and ids[0] >= 1, ids
    finally:
        agent.stop()
