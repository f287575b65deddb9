#!/usr/bin/env python3
"""List the MCP tools of an agentd router and call one, with the official
Python MCP client (`pip install mcp==2.3.0`), unmodified.

    scripts/mcp_client_example.py URL [TOOL [JSON_ARGUMENTS]] [--legacy] [--token JWT]

URL is the router's MCP endpoint, e.g. http://192.168.1.1:7446/mcp. The
default mode probes revision 2026-07-28 (`server/discover`) and falls back
to the `initialize` handshake; `--legacy` forces the handshake
(2025-11-25). With `--token` the calls carry `Authorization: Bearer JWT`
(routers with `gateway.auth 'jwt'`). Prints one JSON object: the
negotiated revision, the tool names and the call's result.

docs/mcp.md shows this script; the test suite runs it (tests/test_mcp.py).
"""

import argparse
import asyncio
import json

import httpx2
from mcp import Client


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("tool", nargs="?")
    ap.add_argument("arguments", nargs="?", default="{}")
    ap.add_argument("--legacy", action="store_true", help="use the initialize handshake")
    ap.add_argument("--token", help="bearer token for auth 'jwt' routers")
    a = ap.parse_args()

    server = a.url
    if a.token:
        # The client takes a transport for custom headers; the URL form
        # is the plain case.
        from mcp.client.streamable_http import streamable_http_client

        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {a.token}"})
        server = streamable_http_client(a.url, http_client=http)

    async with Client(server, mode="legacy" if a.legacy else "auto") as client:
        tools = await client.list_tools()
        out = {
            "protocol_version": client.protocol_version,
            "tools": [t.name for t in tools.tools],
        }
        if a.tool:
            result = await client.call_tool(a.tool, json.loads(a.arguments))
            out["result"] = {
                "is_error": bool(result.is_error),
                "text": [c.text for c in result.content if c.type == "text"],
                "structured": result.structured_content,
            }
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
