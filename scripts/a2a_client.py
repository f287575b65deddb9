#!/usr/bin/env python3
"""A2A 1.0 client example for an agentd router (docs/a2a.md), using the
official `a2a-sdk` 1.x client unmodified: resolve the router's agent card,
send one message to a skill (blocking, or streamed with --stream), print
every answer as one JSON line, and last the negotiated protocol version.

    python scripts/a2a_client.py http://192.0.2.1:7446 --skill echo --data '{"x": 1}'
    python scripts/a2a_client.py http://192.0.2.1:7446 --skill echo --text hello --stream
    python scripts/a2a_client.py http://192.0.2.1:7446/a2a/echo --text hello   # one mapping's agent

With JWT auth on the router, pass --token (or A2A_TOKEN): it is sent as
`Authorization: Bearer …` on the card request and on every RPC.
The test suite runs this script (tests/test_a2a.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import new_data_message, new_text_message
from a2a.types.a2a_pb2 import Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict


async def run(args: argparse.Namespace) -> int:
    token = args.token or os.environ.get("A2A_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=args.timeout) as http:
        factory = ClientFactory(ClientConfig(httpx_client=http, streaming=args.stream))
        card = await A2ACardResolver(http, args.url).get_agent_card()
        client = factory.create(card)
        if args.data is not None:
            message = new_data_message(json.loads(args.data), role=Role.ROLE_USER)
        else:
            message = new_text_message(args.text, role=Role.ROLE_USER)
        if args.skill:
            message.metadata.update({"skill": args.skill})
        async for answer in client.send_message(SendMessageRequest(message=message)):
            print(json.dumps(MessageToDict(answer)), flush=True)
        versions = [i.protocol_version for i in card.supported_interfaces]
        print(json.dumps({"negotiated": {"protocolVersion": versions[0] if versions else None,
                                         "url": card.supported_interfaces[0].url,
                                         "streaming": card.capabilities.streaming}}), flush=True)
        await client.close()
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("url", help="the router's base URL (its card is at <url>/.well-known/agent-card.json)")
    p.add_argument("--skill", help="the skill to call (metadata.skill); implied when the agent has one")
    p.add_argument("--text", default="hello", help="a text message (default: hello)")
    p.add_argument("--data", help="a JSON object sent as one data part (the capability's payload)")
    p.add_argument("--stream", action="store_true", help="SendStreamingMessage instead of SendMessage")
    p.add_argument("--token", help="a JWT for routers with auth 'jwt' (or A2A_TOKEN)")
    p.add_argument("--timeout", type=float, default=30.0, help="HTTP timeout in seconds (default 30)")
    return asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
