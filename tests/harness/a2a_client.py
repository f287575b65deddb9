"""The official `a2a-sdk` client as the A2A tests use it: one agent URL,
its card resolved there, every call bounded (a hung stream fails the
test instead of hanging it)."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Optional, Tuple

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import new_data_message
from a2a.types.a2a_pb2 import Role, SendMessageRequest, SubscribeToTaskRequest
from google.protobuf.json_format import MessageToDict

#: Every client call of a test is bounded: a hung stream fails the test.
CALL_TIMEOUT = 30.0


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, CALL_TIMEOUT))


class A2a:
    """The official client against one agent URL (card resolved there)."""

    def __init__(self, url: str, headers: Optional[Dict[str, str]] = None) -> None:
        self.url = url
        self.headers = dict(headers or {})

    async def card(self, http: httpx.AsyncClient):
        return await A2ACardResolver(http, self.url).get_agent_card()

    async def send(self, message, *, streaming: bool = False, polling: bool = False) -> List[Dict[str, Any]]:
        async with httpx.AsyncClient(headers=self.headers, timeout=15) as http:
            card = await self.card(http)
            client = ClientFactory(ClientConfig(httpx_client=http, streaming=streaming, polling=polling)).create(card)
            return [MessageToDict(e) async for e in client.send_message(SendMessageRequest(message=message))]

    async def call(self, method: str, request):
        async with httpx.AsyncClient(headers=self.headers, timeout=15) as http:
            client = ClientFactory(ClientConfig(httpx_client=http)).create(await self.card(http))
            return MessageToDict(await getattr(client, method)(request))

    async def subscribe_then(self, task_id: str, between) -> List[Dict[str, Any]]:
        """SubscribeToTask; after the first event `between()` runs; all
        events until the stream ends."""
        async with httpx.AsyncClient(headers=self.headers, timeout=15) as http:
            client = ClientFactory(ClientConfig(httpx_client=http)).create(await self.card(http))
            out = []
            async for e in client.subscribe(SubscribeToTaskRequest(id=task_id)):
                out.append(MessageToDict(e))
                if len(out) == 1:
                    between()
            return out


def data_message(data: Any, skill: Optional[str] = None):
    m = new_data_message(data, role=Role.ROLE_USER)
    if skill:
        m.metadata.update({"skill": skill})
    return m


def kinds(events: List[Dict[str, Any]]) -> List[Tuple[str, Optional[str]]]:
    out = []
    for e in events:
        (kind, body), = e.items()
        state = (body.get("status") or {}).get("state")
        out.append((kind, state))
    return out
