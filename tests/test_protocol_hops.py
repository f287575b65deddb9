"""`gateway.hop_limit` for MCP and A2A calls across a peer hop (issue 21
part 3): a protocol call names no `hop_limit`, so it leaves the ingress
gateway with `gateway.hop_limit`, as an SDK call does. With `hop_limit 2`
at C — the least that lets an SDK call cross one peer hop (C sends 2, A
delivers 1, docs/config.md) — the official MCP and A2A clients at C reach
the handler on A, which receives hop_limit 1."""

from __future__ import annotations

import asyncio

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from harness.a2a_client import A2a, data_message, run
from harness.config import Section
from harness.http import envelope
from harness.peers import wait_callable


def test_mcp_and_a2a_cross_one_peer_hop_under_hop_limit_2(mesh):
    """Proves with `gateway.hop_limit 2` at C and the handler on A: an SDK
    call, an MCP `tools/call` (official client) and an A2A `SendMessage`
    (official client) at C all reach A's handler, each with hop_limit 1."""
    a = mesh.router("router-a")
    c = mesh.router("router-c", gateway={"hop_limit": 2, "protocol_tenant": "lab"})
    c.cfg.sections.append(Section("mapping", "echo", {"capability": "hop.echo"}))
    c.cfg.sections.append(Section("mapping", "skill", {"protocol": "a2a", "capability": "hop.echo"}))
    mesh.link("router-a", "router-c")
    a.start()
    c.start()
    c.wait_established("router-a")
    backend = a.lan_backend()
    try:
        a.serve(backend, "hop.echo")
        wait_callable(c, "hop.echo")
        sdk = c.stack.http.post("/agent/v1/invoke", envelope("hop.echo", {"via": "sdk"}))
        assert sdk.status == 200, sdk.describe()
        assert backend.calls("hop.echo")[-1].json()["hop_limit"] == 1

        async def mcp_call():
            http = httpx2.AsyncClient(timeout=30)
            async with Client(streamable_http_client(c.sdk_url + "/mcp", http_client=http)) as cl:
                return await cl.call_tool("echo", {"via": "mcp"})

        r = asyncio.run(asyncio.wait_for(mcp_call(), 60))
        assert not r.is_error, r
        assert r.structured_content["echo"] == {"via": "mcp"}, r.structured_content
        assert backend.calls("hop.echo")[-1].json()["hop_limit"] == 1

        task = run(A2a(c.sdk_url, {}).send(data_message({"via": "a2a"})))[0]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        assert task["artifacts"][0]["parts"][0]["data"]["echo"] == {"via": "a2a"}, task
        assert backend.calls("hop.echo")[-1].json()["hop_limit"] == 1
        assert len(backend.calls("hop.echo")) >= 4
    finally:
        backend.close()
