"""MCP across routers: the official Python client (`mcp` 2.3.0) at router
C's /mcp calls tools whose agents run on router A's LAN (C–B–A chain in
namespaces, real binaries, the peer data plane between the gateways), in
both of its modes: the call, progress from A's stream and a cancel that
reaches the handler on A all cross two routers."""

from __future__ import annotations

import asyncio
import json
from typing import Any, List, Optional

import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from harness.config import Section
from harness.peers import build_chain, wait_callable
from harness.poll import wait_for

MAPPINGS = [
    Section("mapping", "echo", {"capability": "mesh.echo", "title": "Echo on A"}),
    Section("mapping", "count", {"capability": "mesh.stream"}),
    Section("mapping", "slow", {"capability": "mesh.slow"}),
]


def client(ch, mode: str) -> Client:
    http = httpx2.AsyncClient(headers=ch.auth, timeout=30)
    return Client(streamable_http_client(ch.c.sdk_url + "/mcp", http_client=http), mode=mode)


@pytest.mark.parametrize("mode,revision", [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_client_at_c_calls_an_agent_at_a(mesh, mode, revision):
    """Proves that a client at C lists the mapped tools (their routes are
    A's, learned through B), calls one and gets A's handler's answer for
    C's verified caller, receives progress from A's stream, and that
    giving up on a slow call closes the handler's connection on A."""
    ch = build_chain(mesh, configure=lambda a, b, c: c.cfg.sections.extend(MAPPINGS))
    backend = ch.a.lan_backend()
    try:
        for cap in ("mesh.echo", "mesh.stream", "mesh.slow"):
            ch.a.serve(backend, cap)
        wait_callable(ch.c, "mesh.echo", headers=ch.auth)
        warm = len(backend.calls("mesh.echo"))
        progress: List[Any] = []

        async def on_progress(p: float, total: Optional[float], message: Optional[str]) -> None:
            progress.append(json.loads(message or "null"))

        async def go():
            async with client(ch, mode) as c:
                tools = sorted(t.name for t in (await c.list_tools()).tools)
                echo = await c.call_tool("echo", {"from": "c"})
                count = await c.call_tool("count", {"count": 3, "pace_ms": 20}, progress_callback=on_progress)
                with pytest.raises(MCPError):
                    await c.call_tool("slow", {"max_s": 30}, read_timeout_seconds=1.5)
                return c.protocol_version, tools, echo, count

        version, tools, echo, count = asyncio.run(asyncio.wait_for(go(), 90))
        assert version == revision
        assert tools == ["count", "echo", "slow"]
        assert not echo.is_error, echo
        sc = echo.structured_content
        assert sc["echo"] == {"from": "c"} and sc["source_agent"] == "agent://lab/caller" and sc["tenant"] == "lab"
        assert len(backend.calls("mesh.echo")) == warm + 1
        assert not count.is_error and count.structured_content == {"events": [{"n": n} for n in (1, 2, 3)]}
        assert progress == [{"n": n} for n in (1, 2, 3)]
        wait_for("the slow handler on A to see the cancel", lambda: len(backend.peer_closed) >= 1, timeout=20)
        assert [r.json()["intent"] for r in backend.peer_closed] == ["mesh.slow"]
    finally:
        backend.close()
