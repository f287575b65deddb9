"""MCP at /mcp with the official Python client (`mcp` 2.3.0, unmodified):
its default mode (probe `server/discover` at 2026-07-28, fall back to the
handshake) and its legacy mode (`initialize` at 2025-11-25), listing and
calling tools that are ordinary capabilities routed by agentd, progress
from a capability's stream, cancellation reaching the handler, and the
failures a client must be told about in the protocol's own terms."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from harness.backend import Backend, registration
from harness.config import Section
from harness.http import envelope
from harness.jwt import TenantKey
from harness.poll import wait_for

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "scripts" / "mcp_client_example.py"

MAPPINGS = [
    Section("mapping", "echo", {"capability": "mcp.echo", "title": "Echo", "description": "Echoes its arguments."}),
    Section("mapping", "count", {"capability": "mcp.stream", "description": "Streams n events."}),
    Section("mapping", "slow", {"capability": "mcp.slow", "description": "Answers when released."}),
    Section("mapping", "missing", {"capability": "mcp.missing.echo", "description": "No agent serves it."}),
    Section("mapping", "secret", {"capability": "other.echo", "description": "Of tenant other."}),
    Section("mapping", "denied", {"capability": "mcp.denied.echo", "description": "Denied by policy."}),
    Section("mapping", "gone", {"capability": "mcp.gone.echo", "description": "Its agent drops every call."}),
    Section("mapping", "a2a_only", {"protocol": "a2a", "capability": "mcp.echo"}),
    Section("mapping", "strict", {
        "capability": "mcp.echo", "description": "Echoes one message.",
        "input_schema": json.dumps({
            "type": "object", "required": ["msg"], "additionalProperties": False,
            "properties": {"msg": {"type": "string", "maxLength": 8},
                           "tags": {"type": "array", "items": {"enum": ["a", "b"]}}}})}),
]


def run(coro: Any, timeout: float = 60.0) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


@pytest.fixture
def mcp_stack(make_stack, backend):
    stack = make_stack(
        gateway={"protocol_tenant": "lab"},
        rules=[("deny_denied", {"action": "deny", "capability": "mcp.denied.echo", "priority": 10})],
        extra_sections=MAPPINGS,
    )
    for intent in ("mcp.echo", "mcp.stream", "mcp.slow", "mcp.denied.echo"):
        stack.register(registration(intent, backend.endpoint, lease_seconds=120))
    stack.register(registration("other.echo", backend.endpoint, tenant="other", lease_seconds=120))
    stack.wait_routable(envelope("mcp.slow", {}))
    return stack


def url(stack) -> str:
    return f"http://{stack.cfg.sdk_host}:{stack.cfg.sdk_port}/mcp"


def test_default_mode_negotiates_2026_and_lists_and_calls(mcp_stack, backend):
    """Proves that the official client in its default mode negotiates
    2026-07-28 through its `server/discover` probe (no fallback needed),
    lists exactly the tools its tenant may use (mappings with no eligible
    route included, another tenant's and the policy-denied one left out,
    an a2a mapping not an MCP tool) with their titles and schemas, and
    that a call reaches the handler as an ordinary invocation for the
    lab-mode identity and returns its answer as content and
    structuredContent."""

    async def go():
        async with Client(url(mcp_stack)) as c:
            tools = await c.list_tools()
            result = await c.call_tool("echo", {"msg": "hi"})
            return c.protocol_version, tools, result

    version, tools, result = run(go())
    assert version == "2026-07-28"
    names = sorted(t.name for t in tools.tools)
    assert names == ["count", "echo", "gone", "missing", "slow", "strict"], names
    echo = next(t for t in tools.tools if t.name == "echo")
    assert echo.title == "Echo" and echo.description == "Echoes its arguments."
    assert echo.input_schema == {"type": "object"}
    assert not result.is_error, result
    sc = result.structured_content
    assert sc["echo"] == {"msg": "hi"} and sc["intent"] == "mcp.echo"
    assert sc["tenant"] == "lab" and sc["source_agent"] == "agent://lab/mcp-client"
    assert json.loads(result.content[0].text) == sc
    assert len(backend.calls("mcp.echo")) == 1


def test_legacy_mode_handshake_session_and_call(mcp_stack, backend):
    """Proves that the client's legacy mode negotiates 2025-11-25 through
    `initialize` (a session id, `notifications/initialized` accepted, its
    GET stream and its closing DELETE served), lists the same tools and
    calls one, and that the session is gone after the client closed it
    (its id answers 404)."""

    seen: Dict[str, Any] = {}

    async def go():
        async with Client(url(mcp_stack), mode="legacy") as c:
            tools = await c.list_tools()
            result = await c.call_tool("echo", {"n": 7})
            seen["ping"] = await c.send_ping()
            return c.protocol_version, tools, result

    version, tools, result = run(go())
    assert version == "2025-11-25"
    assert sorted(t.name for t in tools.tools) == ["count", "echo", "gone", "missing", "slow", "strict"]
    assert not result.is_error and result.structured_content["echo"] == {"n": 7}
    assert len(backend.calls("mcp.echo")) == 1
    # The session's whole life from the raw side: initialize, then DELETE.
    h = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    r = httpx2.post(url(mcp_stack), json=init, headers=h)
    assert r.status_code == 200 and r.json()["result"]["protocolVersion"] == "2025-06-18"
    sid = r.headers["mcp-session-id"]
    assert len(sid) >= 32
    hs = {**h, "MCP-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}
    note = httpx2.post(url(mcp_stack), json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=hs)
    assert note.status_code == 202
    assert httpx2.delete(url(mcp_stack), headers=hs).status_code == 200
    gone = httpx2.post(url(mcp_stack), json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=hs)
    assert gone.status_code == 404 and gone.json()["error"]["code"] == -32600


def test_the_documented_example_runs_in_both_modes(mcp_stack):
    """Proves that scripts/mcp_client_example.py (the copy-paste example of
    docs/mcp.md and what `make demo` runs) lists and calls a tool with the
    official client in both modes and reports the revision each
    negotiated."""
    for extra, revision in (([], "2026-07-28"), (["--legacy"], "2025-11-25")):
        p = subprocess.run(
            [sys.executable, str(EXAMPLE), url(mcp_stack), "echo", '{"x": 1}', *extra],
            capture_output=True, text=True, timeout=60,
        )
        assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout)
        assert out["protocol_version"] == revision
        assert "echo" in out["tools"]
        assert out["result"]["is_error"] is False and out["result"]["structured"]["echo"] == {"x": 1}


H = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
MODERN = "2026-07-28"


def modern_body(method: str, params: Optional[Dict[str, Any]] = None, rid: Any = 1, version: str = MODERN) -> Dict[str, Any]:
    p = dict(params or {})
    p["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        **p.get("_meta", {}),
    }
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": p}


def modern_headers(method: str, name: Optional[str] = None, version: str = MODERN) -> Dict[str, str]:
    h = {**H, "MCP-Protocol-Version": version, "Mcp-Method": method}
    if name is not None:
        h["Mcp-Name"] = name
    return h


def sse_messages(text: str) -> List[Dict[str, Any]]:
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].strip() for line in block.split("\n") if line.startswith("data:")]
        if data and data[0]:
            out.append(json.loads("\n".join(data)))
    return out


@pytest.mark.parametrize("mode,revision", [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_progress_comes_from_the_capabilitys_stream_events(mcp_stack, backend, mode, revision):
    """Proves that a call with a progress callback (the client sends a
    progressToken) runs as a stream: every event the capability streams
    arrives as a progress notification for that token, in order, before
    the result, and the result carries every event; the producer ran once."""
    progress: List[Any] = []

    async def on_progress(p: float, total: Optional[float], message: Optional[str]) -> None:
        progress.append((p, message))

    async def go():
        async with Client(url(mcp_stack), mode=mode) as c:
            r = await c.call_tool("count", {"count": 4, "pace_ms": 20}, progress_callback=on_progress)
            return c.protocol_version, r

    version, result = run(go())
    assert version == revision
    assert not result.is_error, result
    assert [p for p, _ in progress] == [1, 2, 3, 4], progress
    assert [json.loads(m) for _, m in progress] == [{"n": n} for n in range(1, 5)]
    assert result.structured_content == {"events": [{"n": n} for n in range(1, 5)]}
    assert [json.loads(c.text) for c in result.content] == [{"n": n} for n in range(1, 5)]
    assert len(backend.calls("mcp.stream")) == 1


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_cancel_reaches_the_handler_and_the_session_goes_on(mcp_stack, backend, mode):
    """Proves that a call the client gives up on (its read timeout: the
    client cancels — `notifications/cancelled` in the handshake revisions,
    closing the response at 2026-07-28) closes the handler's connection,
    for a plain call and for a streaming one (the stream task is
    cancelled, not left producing), and that the same client then calls
    again successfully (nothing hung)."""

    async def go():
        async with Client(url(mcp_stack), mode=mode) as c:
            with pytest.raises(MCPError):
                await c.call_tool("slow", {"max_s": 30}, read_timeout_seconds=1.0)
            wait = lambda: len(backend.peer_closed) >= 1  # noqa: E731
            await asyncio.to_thread(wait_for, "the slow handler to see its caller go", wait, 15.0)

            async def ignore(*_a: Any) -> None:
                return None

            with pytest.raises(MCPError):
                await c.call_tool("count", {"count": 500, "pace_ms": 50}, read_timeout_seconds=1.0,
                                  progress_callback=ignore)
            wait2 = lambda: len(backend.peer_closed) >= 2  # noqa: E731
            await asyncio.to_thread(wait_for, "the streaming handler to see its caller go", wait2, 15.0)
            again = await c.call_tool("echo", {"after": "cancel"})
            return again

    again = run(go())
    assert not again.is_error and again.structured_content["echo"] == {"after": "cancel"}
    closed = [r.json()["intent"] for r in backend.peer_closed]
    assert sorted(closed) == ["mcp.slow", "mcp.stream"], closed
    assert not backend.streams_finished, "the cancelled stream kept producing"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_eight_sequential_fresh_sessions_and_eight_concurrent_calls(mcp_stack, backend, mode):
    """Proves that 8 calls each from a new client (a fresh session or a
    fresh discover each time) and 8 concurrent clients all get their own
    correct answers, in both modes."""

    async def one(i: int) -> Any:
        async with Client(url(mcp_stack), mode=mode) as c:
            r = await c.call_tool("echo", {"i": i})
            return r.structured_content["echo"]["i"], r.is_error

    async def go():
        seq = [await one(i) for i in range(8)]
        conc = await asyncio.gather(*(one(100 + i) for i in range(8)))
        return seq, conc

    seq, conc = run(go(), timeout=120)
    assert seq == [(i, False) for i in range(8)]
    assert sorted(conc) == [(100 + i, False) for i in range(8)]
    assert len(backend.calls("mcp.echo")) == 16


def test_failures_are_typed_and_reach_no_handler(mcp_stack, backend):
    """Proves the failure cases: an unknown tool, another tenant's tool and
    a policy-denied one are all "unknown tool" results (isError: nothing
    tells a caller what exists for others); a mapping without an eligible
    route fails typed (`no_route`); an agent that drops the call after
    reading it gives an isError result with outcome `unknown`; an
    oversized input is a JSON-RPC error (-32600, HTTP 413) before anything
    is routed; invalid arguments are -32602; an argument named
    `nexus_direct_task_control` (nexilume's task control, which would act
    on a task instead of being data) is refused as `invalid_field`. None
    of these reached a handler that should not see it, and the client
    goes on working."""
    gone = Backend(reset_all=True)
    try:
        mcp_stack.register(registration("mcp.gone.echo", gone.endpoint, lease_seconds=120))
        mcp_stack.wait_routable(envelope("mcp.gone.echo", {}))

        async def go():
            out: Dict[str, Any] = {}
            async with Client(url(mcp_stack)) as c:
                for name in ("nope", "secret", "denied", "missing", "gone"):
                    out[name] = await c.call_tool(name, {"x": 1})
                with pytest.raises(MCPError) as big:
                    await c.call_tool("echo", {"blob": "x" * 70_000})
                out["big"] = big.value.error
                out["reserved"] = await c.call_tool(
                    "echo", {"nexus_direct_task_control": {"action": "status", "direct_task_id": "t"}})
                out["after"] = await c.call_tool("echo", {"still": "ok"})
            return out

        out = run(go())
        for name in ("nope", "secret", "denied"):
            r = out[name]
            assert r.is_error and r.content[0].text == f"unknown tool '{name}'", (name, r)
        missing = out["missing"]
        assert missing.is_error and missing.structured_content["error"]["code"] == "no_route", missing
        g = out["gone"]
        assert g.is_error and g.structured_content["error"]["outcome"] == "unknown", g
        assert len(gone.received) == 1
        assert out["big"].code == -32600 and "payload_too_large" in out["big"].message, out["big"]
        reserved = out["reserved"]
        assert reserved.is_error and reserved.structured_content["error"]["code"] == "invalid_field", reserved
        assert "'nexus_direct_task_control' is reserved" in reserved.content[0].text, reserved
        assert not out["after"].is_error
        intents = [r.json().get("intent") for r in backend.received]
        assert intents == ["mcp.echo"], intents
    finally:
        gone.close()
    # Invalid params, from the raw side (the client validates its own).
    r = httpx2.post(url(mcp_stack), json=modern_body("tools/call", {"name": "echo", "arguments": [1]}),
                    headers=modern_headers("tools/call", "echo"))
    assert r.status_code == 400 and r.json()["error"]["code"] == -32602, r.text


def test_arguments_the_input_schema_refuses_reach_no_handler(mcp_stack, backend):
    """Proves tool arguments are checked against the tool's input schema
    before anything is routed: a wrong type, a missing required property,
    an undeclared property, a string too long and an array item outside
    its enum each come back as a tool execution error (isError, typed
    `invalid_field`, naming where in the arguments and what was expected,
    so the model can correct the call), and only the valid call reaches
    the handler."""

    async def go():
        async with Client(url(mcp_stack)) as c:
            bad = [await c.call_tool("strict", a) for a in (
                {"msg": 5}, {}, {"msg": "hi", "x": 1}, {"msg": "much too long"},
                {"msg": "hi", "tags": ["a", "c"]})]
            good = await c.call_tool("strict", {"msg": "hi", "tags": ["b"]})
            return bad, good

    before = len(backend.calls("mcp.echo"))
    bad, good = run(go())
    texts = []
    for r in bad:
        assert r.is_error and r.structured_content["error"]["code"] == "invalid_field", r
        texts.append(r.content[0].text)
    assert texts == [
        "invalid_field: arguments at /msg: string, got number",
        "invalid_field: arguments at /: the required property 'msg'",
        "invalid_field: arguments at /: no property 'x' (not in the schema)",
        "invalid_field: arguments at /msg: at most 8 characters, got 13",
        'invalid_field: arguments at /tags/1: one of ["a", "b"]',
    ], texts
    assert not good.is_error and good.structured_content["echo"] == {"msg": "hi", "tags": ["b"]}, good
    assert len(backend.calls("mcp.echo")) == before + 1


def test_2026_wire_errors_carry_the_spec_codes(mcp_stack):
    """Proves the 2026-07-28 refusals: GET and DELETE 405 (Allow: POST);
    headers that disagree with the body -32020; no `_meta` -32602; an
    unserved version -32022 naming the served ones; an unknown method
    -32601 with 404; malformed JSON -32700; and that a notification is
    acknowledged 202 and `server/discover` names every served revision."""
    u = url(mcp_stack)
    for method in ("GET", "DELETE"):
        r = httpx2.request(method, u, headers=modern_headers("tools/list"))
        assert r.status_code == 405 and r.headers["allow"] == "POST", (method, r.status_code)
    r = httpx2.post(u, json=modern_body("tools/list"), headers=modern_headers("tools/call"))
    assert (r.status_code, r.json()["error"]["code"], r.json()["id"]) == (400, -32020, 1)
    r = httpx2.post(u, json=modern_body("tools/call", {"name": "echo"}), headers=modern_headers("tools/call", "slow"))
    assert r.status_code == 400 and r.json()["error"]["code"] == -32020
    r = httpx2.post(u, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=modern_headers("tools/list"))
    assert r.status_code == 400 and r.json()["error"]["code"] == -32602
    r = httpx2.post(u, json=modern_body("tools/list", version="2099-01-01"),
                    headers=modern_headers("tools/list", version="2099-01-01"))
    err = r.json()["error"]
    assert r.status_code == 400 and err["code"] == -32022
    assert "2026-07-28" in err["data"]["supported"] and err["data"]["requested"] == "2099-01-01"
    r = httpx2.post(u, json=modern_body("resources/list"), headers=modern_headers("resources/list"))
    assert r.status_code == 404 and r.json()["error"]["code"] == -32601
    r = httpx2.post(u, content=b'{"jsonrpc":"2.0",', headers=modern_headers("tools/list"))
    assert r.status_code == 400 and r.json()["error"]["code"] == -32700 and r.json()["id"] is None
    r = httpx2.post(u, json={"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
                    headers=modern_headers("notifications/cancelled"))
    assert r.status_code == 202
    r = httpx2.post(u, json=modern_body("server/discover"), headers=modern_headers("server/discover"))
    d = r.json()["result"]
    assert d["supportedVersions"] == ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]
    assert d["capabilities"]["tools"] == {"listChanged": False} and d["resultType"] == "complete"


def test_legacy_streams_resume_with_last_event_id(mcp_stack, backend):
    """Proves that a handshake-era tools/call stream carries event ids and
    that a client that loses the response after the first progress event
    resumes with GET + Last-Event-ID and receives exactly the later events
    and the result, without the producer running again."""
    u = url(mcp_stack)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    sid = httpx2.post(u, json=init, headers=H).headers["mcp-session-id"]
    hs = {**H, "MCP-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
    call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "count", "arguments": {"count": 5, "pace_ms": 100}, "_meta": {"progressToken": "p"}}}
    first: List[tuple] = []
    with httpx2.stream("POST", u, json=call, headers=hs) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        ev_id = None
        for line in r.iter_lines():
            if line.startswith("id:"):
                ev_id = line[3:].strip()
            elif line.startswith("data:") and line[5:].strip():
                first.append((ev_id, json.loads(line[5:])))
                break
    assert first and first[0][1]["method"] == "notifications/progress" and first[0][1]["params"]["progress"] == 1
    last = first[-1][0]
    resumed = httpx2.get(u, headers={**hs, "Last-Event-ID": last}, timeout=30)
    assert resumed.status_code == 200, resumed.text
    msgs = sse_messages(resumed.text)
    assert [m["params"]["progress"] for m in msgs[:-1]] == [2, 3, 4, 5], msgs
    final = msgs[-1]
    assert final["id"] == 9 and final["result"]["structuredContent"]["events"] == [{"n": n} for n in range(1, 6)]
    assert len(backend.calls("mcp.stream")) == 1
    bad = httpx2.get(u, headers={**hs, "Last-Event-ID": "999-1"})
    assert bad.status_code == 400


def test_host_and_origin_are_checked(make_stack, backend):
    """Proves DNS-rebinding protection on by default: a foreign Host is 421
    and a foreign Origin 403 before anything else (no session is made, no
    handler is called), while the router's own addresses, localhost and
    the names in gateway.allowed_hosts pass."""
    stack = make_stack(gateway={"protocol_tenant": "lab", "allowed_hosts": ["router.lan"]}, extra_sections=MAPPINGS)
    u = url(stack)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    r = httpx2.post(u, json=init, headers={**H, "Host": "evil.example"})
    assert r.status_code == 421 and "allowed_hosts" in r.json()["error"]["message"]
    r = httpx2.post(u, json=init, headers={**H, "Origin": "http://evil.example"})
    assert r.status_code == 403
    r = httpx2.post(u, json=init, headers={**H, "Origin": "null"})
    assert r.status_code == 403
    for host in ("router.lan", f"localhost:{stack.cfg.sdk_port}", f"127.0.0.1:{stack.cfg.sdk_port}"):
        r = httpx2.post(u, json=init, headers={**H, "Host": host, "Origin": f"http://{host}"})
        assert r.status_code == 200 and "mcp-session-id" in r.headers, host
    assert not backend.received


def test_sessions_are_bound_to_the_identity_that_made_them(make_stack, backend):
    """Proves with JWT auth that a session id is usable only with the
    credentials that created it: the same tenant's other subject and
    another tenant both get 404 (as for an unknown id) and cannot end it,
    a request without a token is 401, and the owner goes on using it. The
    official client works with a bearer token too."""
    lab, other = TenantKey.generate(), TenantKey.generate()
    stack = make_stack(
        auth="jwt",
        tenants=[("lab", {"name": "lab", "jwt_key": [lab.uci_value]}),
                 ("other", {"name": "other", "jwt_key": [other.uci_value]})],
        extra_sections=MAPPINGS,
    )
    aud = stack.http.get("/agent/v1/authentication").json()["authentication"]["audience"]
    agent = lab.mint(tenant="lab", sub="agent://lab/echo", scopes=["agent.register"], aud=aud)
    stack.register(registration("mcp.echo", backend.endpoint, lease_seconds=120),
                   headers={"Authorization": f"Bearer {agent}"})
    a = lab.mint(tenant="lab", sub="agent://lab/alice", scopes=["agent.invoke"], aud=aud)
    b = lab.mint(tenant="lab", sub="agent://lab/bob", scopes=["agent.invoke"], aud=aud)
    o = other.mint(tenant="other", sub="agent://other/eve", scopes=["agent.invoke"], aud=aud)
    u = url(stack)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    assert httpx2.post(u, json=init, headers=H).status_code == 401
    sid = httpx2.post(u, json=init, headers={**H, "Authorization": f"Bearer {a}"}).headers["mcp-session-id"]
    lst = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    hs = {**H, "MCP-Session-Id": sid}
    for tok in (b, o):
        r = httpx2.post(u, json=lst, headers={**hs, "Authorization": f"Bearer {tok}"})
        assert r.status_code == 404, r.text
        assert httpx2.delete(u, headers={**hs, "Authorization": f"Bearer {tok}"}).status_code == 404
    r = httpx2.post(u, json=lst, headers={**hs, "Authorization": f"Bearer {a}"})
    assert r.status_code == 200 and "echo" in [t["name"] for t in r.json()["result"]["tools"]]
    p = subprocess.run([sys.executable, str(EXAMPLE), u, "echo", '{"k": 2}', "--token", a],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)["result"]
    assert res["structured"]["source_agent"] == "agent://lab/alice" and res["structured"]["tenant"] == "lab"
