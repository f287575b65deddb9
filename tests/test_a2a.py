"""A2A 1.0 ingress (issue 9 item 3, DESIGN §9 "A2A") with the official
`a2a-sdk` 1.x client, unmodified: the agent card (skills from `a2a`
mappings filtered by the caller's tenant and policy, the JSON-RPC URL the
caller used, streaming), SendMessage (blocking and returnImmediately),
SendStreamingMessage, GetTask, CancelTask reaching the handler,
SubscribeToTask, one agent per mapping, the docs' client script, and the
failures: unknown skill, a skill the policy denies, no route, the agent
gone mid-call, oversized input, a wrong or missing A2A-Version, another
tenant's or subject's task → the spec's errors, nothing reaching the
handler that should not, every stream ending. A cross-router case (client
at C, agent at A) is in test_a2a_mesh.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client.errors import AgentCardResolutionError
from a2a.helpers.proto_helpers import new_text_message
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Role,
)
from a2a.utils.errors import (
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from harness.a2a_client import A2a, data_message, kinds, run
from harness.backend import Backend, registration
from harness.config import Section
from harness.http import envelope
from harness.jwt import TenantKey
from harness.poll import wait_for

ROOT = Path(__file__).resolve().parent.parent


def mapping(name: str, capability: str, protocol: str = "a2a", **opts: Any) -> Section:
    return Section("mapping", name, {"protocol": protocol, "capability": capability, **opts})


MAPPINGS = [
    mapping("echo", "a2a.echo", title="Echo", description="Says the payload back"),
    mapping("slow", "a2a.slow"),
    mapping("gone", "a2a.gone"),
    mapping("nowhere", "a2a.nowhere"),
    mapping("denied", "admin.echo"),
    mapping("tool_only", "a2a.echo", protocol="mcp"),
]
RULES = [
    ("deny_admin", {"id": "10-deny-admin", "priority": 100, "action": "deny", "tenant": "*", "source": "*",
                    "capability": "admin.*"}),
]


@pytest.fixture
def a2a_env(make_stack, backend):
    gone = Backend(reset_all=True)
    stack = make_stack(gateway={"protocol_tenant": "lab", "max_request_bytes": 16384}, rules=RULES,
                       extra_sections=MAPPINGS)
    for cap, b in (("a2a.echo", backend), ("a2a.slow", backend), ("a2a.gone", gone), ("admin.echo", backend)):
        stack.register(registration(cap, b.endpoint, lease_seconds=120))
    for cap in ("a2a.echo", "a2a.slow"):
        stack.wait_routable(envelope(cap, {}))
    try:
        yield stack, backend, gone, A2a(stack.http.base_url)
    finally:
        gone.close()


def test_card_send_and_get_with_the_official_client(a2a_env):
    """Proves the card the official client resolves: the JSON-RPC URL at
    the address the client used, protocolBinding JSONRPC at version 1.0,
    streaming, and exactly the a2a mappings the caller may use (not the
    MCP one, not the one a deny rule covers); a blocking SendMessage
    returns the completed task with the handler's answer as its artifact,
    the handler got one ordinary invocation acting for the protocol
    tenant's A2A client, and GetTask returns the same task."""
    stack, backend, _, c = a2a_env

    async def card():
        async with httpx.AsyncClient(timeout=15) as http:
            return await c.card(http)

    card = run(card())
    iface = card.supported_interfaces[0]
    assert iface.url == f"{stack.http.base_url}/a2a", iface
    assert (iface.protocol_binding, iface.protocol_version) == ("JSONRPC", "1.0"), iface
    assert card.capabilities.streaming is True
    assert sorted(s.id for s in card.skills) == ["echo", "gone", "nowhere", "slow"], card.skills
    echo = next(s for s in card.skills if s.id == "echo")
    assert (echo.name, echo.description) == ("Echo", "Says the payload back")

    events = run(c.send(data_message({"job": 7}, skill="echo")))
    assert len(events) == 1 and "task" in events[0], events
    task = events[0]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert len(task["id"]) == 96 and all(ch in "0123456789abcdef" for ch in task["id"]), task["id"]
    answer = task["artifacts"][0]["parts"][0]["data"]
    assert answer["echo"] == {"job": 7} and answer["intent"] == "a2a.echo", answer
    calls = backend.calls("a2a.echo")
    assert len(calls) == 1
    env = calls[0].json()
    assert (env["tenant"], env["source_agent"]) == ("lab", "agent://lab/a2a-client"), env
    assert env["payload"] == {"job": 7}, env

    got = run(c.call("get_task", GetTaskRequest(id=task["id"])))
    assert got["id"] == task["id"] and got["status"]["state"] == "TASK_STATE_COMPLETED", got
    assert got["artifacts"] == task["artifacts"], got
    assert got["contextId"] == task["contextId"] and got["contextId"], got
    assert len(backend.calls("a2a.echo")) == 1


def test_streaming_message_with_skill(a2a_env):
    """Proves SendStreamingMessage: the task as submitted, then working,
    the artifact, completed — and the stream ends by itself; a text
    message reaches the handler as {"text": ...}."""
    _, backend, _, c = a2a_env
    m = new_text_message("hello there", role=Role.ROLE_USER)
    m.metadata.update({"skill": "echo"})
    events = run(c.send(m, streaming=True))
    assert kinds(events) == [
        ("task", "TASK_STATE_SUBMITTED"),
        ("statusUpdate", "TASK_STATE_WORKING"),
        ("artifactUpdate", None),
        ("statusUpdate", "TASK_STATE_COMPLETED"),
    ], events
    art = events[2]["artifactUpdate"]["artifact"]
    assert art["parts"][0]["data"]["echo"] == {"text": "hello there"}, art
    assert len({e[k]["taskId"] if k != "task" else e[k]["id"] for e in events for k in e}) == 1
    assert backend.calls("a2a.echo")[-1].json()["payload"] == {"text": "hello there"}


def test_cancel_reaches_the_handler_and_a_second_cancel_is_refused(a2a_env):
    """Proves returnImmediately (the client's polling mode): SendMessage
    answers while the handler still runs; CancelTask answers the task
    CANCELED and the cancel reaches the handler (the gateway closes its
    connection before it answered); GetTask then says CANCELED, and a
    second CancelTask is TaskNotCancelable (-32002)."""
    _, backend, _, c = a2a_env
    events = run(c.send(data_message({"max_s": 20}, skill="slow"), polling=True))
    task = events[0]["task"]
    assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"), task
    wait_for("the handler to receive the call", lambda: backend.calls("a2a.slow"), timeout=10)

    got = run(c.call("cancel_task", CancelTaskRequest(id=task["id"])))
    assert got["status"]["state"] == "TASK_STATE_CANCELED", got
    wait_for("the cancel to close the handler's connection", lambda: backend.peer_closed, timeout=10)
    assert backend.answered == []
    got = run(c.call("get_task", GetTaskRequest(id=task["id"])))
    assert got["status"]["state"] == "TASK_STATE_CANCELED", got
    with pytest.raises(TaskNotCancelableError) as e:
        run(c.call("cancel_task", CancelTaskRequest(id=task["id"])))
    assert e.value.data and e.value.data.get("state") == "TASK_STATE_CANCELED", e.value


def test_subscribe_follows_a_running_task_to_its_end(a2a_env):
    """Proves SubscribeToTask: the first event is the task as it is now
    (working), then the artifact and COMPLETED once the handler answers,
    then the stream ends; subscribing to the ended task is
    UnsupportedOperation, an unknown id TaskNotFound."""
    _, backend, _, c = a2a_env
    events = run(c.send(data_message({"max_s": 20}, skill="slow"), polling=True))
    task_id = events[0]["task"]["id"]
    wait_for("the handler to receive the call", lambda: backend.calls("a2a.slow"), timeout=10)
    seen = run(c.subscribe_then(task_id, backend.release))
    assert kinds(seen) == [
        ("task", "TASK_STATE_WORKING"),
        ("artifactUpdate", None),
        ("statusUpdate", "TASK_STATE_COMPLETED"),
    ], seen
    assert seen[1]["artifactUpdate"]["artifact"]["parts"][0]["data"]["echo"] == {"max_s": 20}
    with pytest.raises(UnsupportedOperationError):
        run(c.subscribe_then(task_id, lambda: None))
    with pytest.raises(TaskNotFoundError):
        run(c.subscribe_then("0" * 96, lambda: None))
    with pytest.raises(TaskNotFoundError):
        run(c.call("get_task", GetTaskRequest(id="not-a-task")))


def test_skill_selection_and_refusals_are_typed(a2a_env):
    """Proves the refusals before anything is dispatched: no skill named
    while the agent has several, an unknown skill and a skill a deny rule
    covers (not listed, so unknown to this caller) → InvalidParams with
    the usable skills in its data; a listed skill with no route →
    InternalError carrying the gateway's `no_route`; none of them reaches
    a handler."""
    _, backend, _, c = a2a_env
    with pytest.raises(InvalidParamsError) as e:
        run(c.send(data_message({"a": 1})))
    assert "several" in e.value.message and e.value.data["skills"] == "echo, gone, nowhere, slow", e.value
    for skill in ("nope", "denied"):
        with pytest.raises(InvalidParamsError) as e:
            run(c.send(data_message({"a": 1}, skill=skill), streaming=True))
        assert e.value.data["skill"] == skill and "echo" in e.value.data["skills"], e.value
    with pytest.raises(InternalError) as e:
        run(c.send(data_message({"a": 1}, skill="nowhere")))
    assert e.value.data["code"] == "no_route" and e.value.data["capability"] == "a2a.nowhere", e.value
    assert backend.calls() == []


def test_agent_gone_mid_call_fails_the_task_and_ends_the_stream(a2a_env):
    """Proves a handler that takes the call and drops the connection
    without an answer: the blocking SendMessage returns a FAILED task whose
    status message names `upstream_unknown`; the streaming one ends with
    FAILED (no hung stream); the handler saw each call once."""
    _, _, gone, c = a2a_env
    task = run(c.send(data_message({"a": 1}, skill="gone")))[0]["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED", task
    text = task["status"]["message"]["parts"][0]["text"]
    assert text.startswith("upstream_unknown:"), text
    events = run(c.send(data_message({"a": 2}, skill="gone"), streaming=True))
    assert kinds(events)[-1] == ("statusUpdate", "TASK_STATE_FAILED"), events
    assert len(gone.calls()) == 2


def test_oversized_input_and_protocol_errors(a2a_env):
    """Proves an input above gateway.max_request_bytes is InvalidRequest
    (-32600) and data carrying `nexus_direct_task_control` InvalidParams,
    neither reaching the handler; and, with raw JSON-RPC, a
    missing A2A-Version (= 0.3) and an unsupported one are -32009 with
    ErrorInfo VERSION_NOT_SUPPORTED, an unknown method -32601, bad params
    -32602, unreadable JSON -32700 — all HTTP 200 JSON-RPC answers."""
    stack, backend, _, c = a2a_env
    with pytest.raises(InvalidRequestError):
        run(c.send(data_message({"blob": "x" * 20000}, skill="echo")))
    # nexilume's task control is no message data (it would act on a task).
    with pytest.raises(InvalidParamsError) as e:
        run(c.send(data_message({"nexus_direct_task_control": {"action": "cancel"}}, skill="echo")))
    assert "'nexus_direct_task_control' is reserved" in e.value.message, e.value
    assert backend.calls("a2a.echo") == []

    url = f"{stack.http.base_url}/a2a"
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    with httpx.Client(timeout=15) as http:
        for headers in ({}, {"A2A-Version": "0.3"}, {"A2A-Version": "2.0"}):
            r = http.post(url, json=body, headers=headers)
            assert r.status_code == 200, r.text
            err = r.json()["error"]
            assert err["code"] == -32009, (headers, err)
            assert err["data"][0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo", err
            assert err["data"][0]["reason"] == "VERSION_NOT_SUPPORTED", err
        v1 = {"A2A-Version": "1.0"}
        r = http.post(url, json={**body, "method": "message/send"}, headers=v1)
        assert r.json()["error"]["code"] == -32601, r.text
        r = http.post(url, json={**body, "method": "SendMessage", "params": {"message": {"parts": []}}}, headers=v1)
        assert r.json()["error"]["code"] == -32602 and r.json()["id"] == 1, r.text
        r = http.post(url, content=b"{nope", headers={**v1, "Content-Type": "application/json"})
        assert r.json()["error"]["code"] == -32700 and r.json()["id"] is None, r.text
        r = http.get(url)
        assert r.status_code == 405, r.text
    assert backend.calls() == []


def test_one_agent_per_mapping(a2a_env):
    """Proves /a2a/<name>: its card names that one skill and its own RPC
    URL, a message without metadata reaches that skill, a message naming
    another skill is InvalidParams; an unknown or denied name has no card
    (the client's card resolution fails with 404)."""
    stack, backend, _, _ = a2a_env
    c = A2a(f"{stack.http.base_url}/a2a/echo")

    async def card():
        async with httpx.AsyncClient(timeout=15) as http:
            return await c.card(http)

    card = run(card())
    assert card.supported_interfaces[0].url == f"{stack.http.base_url}/a2a/echo"
    assert [s.id for s in card.skills] == ["echo"]
    task = run(c.send(data_message({"solo": True})))[0]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert backend.calls("a2a.echo")[-1].json()["payload"] == {"solo": True}
    with pytest.raises(InvalidParamsError):
        run(c.send(data_message({"x": 1}, skill="slow")))
    for name in ("nope", "denied"):
        with pytest.raises(AgentCardResolutionError) as e:
            run(A2a(f"{stack.http.base_url}/a2a/{name}").send(data_message({})))
        assert e.value.status_code == 404, e.value


def test_the_docs_client_script(a2a_env):
    """Proves the copy-paste example of docs/a2a.md (scripts/a2a_client.py)
    works as printed, blocking and streaming, and reports the negotiated
    protocol version 1.0."""
    stack, backend, _, _ = a2a_env
    script = ROOT / "scripts" / "a2a_client.py"
    for extra in ([], ["--stream"]):
        p = subprocess.run([sys.executable, str(script), stack.http.base_url, "--skill", "echo",
                            "--data", '{"x": 1}', *extra], capture_output=True, timeout=60)
        assert p.returncode == 0, p.stderr.decode(errors="replace")
        lines = [json.loads(x) for x in p.stdout.decode().splitlines() if x.strip()]
        assert lines[-1]["negotiated"]["protocolVersion"] == "1.0", lines
        last = lines[-2]
        state = (last.get("task") or last.get("statusUpdate"))["status"]["state"]
        assert state == "TASK_STATE_COMPLETED", lines
    assert len(backend.calls("a2a.echo")) == 2


def test_tasks_are_bound_to_the_callers_tenant_and_subject(make_stack, backend):
    """Proves with JWT auth: a task id is useless to anyone but the caller
    that created it — another tenant's GetTask/CancelTask/SubscribeToTask
    and the same tenant's other agent get TaskNotFound (as for an unknown
    id), and the task runs on untouched; the other tenant's card lists no
    skill of lab's routes; a card request without a token is 401; the
    payload's `tenant` field changes nothing."""
    lab, other = TenantKey.generate(), TenantKey.generate()
    stack = make_stack(auth="jwt", tenants=[("lab", {"name": "lab", "jwt_key": [lab.uci_value]}),
                                            ("other", {"name": "other", "jwt_key": [other.uci_value]})],
                       extra_sections=[mapping("slow", "a2a.slow")])
    aud = stack.http.get("/agent/v1/authentication").json()["authentication"]["audience"]

    def tok(key, tenant, sub, scopes=("agent.invoke", "agent.route")):
        return {"Authorization": "Bearer " + key.mint(tenant=tenant, sub=sub, scopes=scopes, aud=aud)}

    reg = tok(lab, "lab", "agent://lab/echo", ("agent.register",))
    stack.register(registration("a2a.slow", backend.endpoint, lease_seconds=120), headers=reg)
    owner = A2a(stack.http.base_url, tok(lab, "lab", "agent://lab/caller"))
    stack.wait_routable(envelope("a2a.slow", {}), headers=owner.headers)

    m = data_message({"max_s": 20})
    events = run(owner.send(m, polling=True))
    task_id = events[0]["task"]["id"]
    wait_for("the handler to receive the call", lambda: backend.calls("a2a.slow"), timeout=10)
    assert backend.calls("a2a.slow")[0].json()["source_agent"] == "agent://lab/caller"

    for who in (A2a(stack.http.base_url, tok(other, "other", "agent://other/caller")),
                A2a(stack.http.base_url, tok(lab, "lab", "agent://lab/intruder"))):
        with pytest.raises(TaskNotFoundError):
            run(who.call("get_task", GetTaskRequest(id=task_id)))
        with pytest.raises(TaskNotFoundError):
            run(who.call("cancel_task", CancelTaskRequest(id=task_id)))
        with pytest.raises(TaskNotFoundError):
            run(who.subscribe_then(task_id, lambda: None))
    got = run(owner.call("get_task", GetTaskRequest(id=task_id)))
    assert got["status"]["state"] == "TASK_STATE_WORKING", got
    assert backend.peer_closed == []

    stranger = A2a(stack.http.base_url, tok(other, "other", "agent://other/caller"))

    async def card(c):
        async with httpx.AsyncClient(headers=c.headers, timeout=15) as http:
            return await c.card(http)

    assert list(run(card(stranger)).skills) == []
    with pytest.raises(InvalidParamsError):
        run(stranger.send(data_message({"x": 1})))
    with pytest.raises(AgentCardResolutionError) as e:
        run(card(A2a(stack.http.base_url)))
    assert e.value.status_code == 401, e.value
    backend.release()
    done = run(owner.call("get_task", GetTaskRequest(id=task_id)))
    wait_for("the task to complete", lambda: run(owner.call("get_task", GetTaskRequest(id=task_id)))["status"]["state"]
             == "TASK_STATE_COMPLETED", timeout=10)
    assert done["id"] == task_id
    assert len(backend.calls("a2a.slow")) == 1


def test_dns_rebinding_is_refused_on_card_and_rpc(a2a_env):
    """Proves the Host/Origin check on the A2A endpoints (shared with
    /mcp): a request naming a Host that is not the router's (421) or
    carrying a foreign Origin (403) gets neither the card nor an RPC
    answer, and nothing reaches a handler; the router's own address with
    its own Origin is served."""
    stack, backend, _, _ = a2a_env
    base = stack.http.base_url
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
           "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": {"a": 1}}],
                                  "metadata": {"skill": "echo"}}}}
    v1 = {"A2A-Version": "1.0"}
    with httpx.Client(timeout=15) as http:
        for headers, status in (({"Host": "evil.example"}, 421),
                                ({"Origin": "http://evil.example"}, 403),
                                ({"Origin": "null"}, 403)):
            r = http.get(f"{base}/.well-known/agent-card.json", headers=headers)
            assert r.status_code == status, (headers, r.text)
            r = http.post(f"{base}/a2a", json=rpc, headers={**v1, **headers})
            assert r.status_code == status, (headers, r.text)
        assert backend.calls() == []
        r = http.get(f"{base}/.well-known/agent-card.json", headers={"Origin": base})
        assert r.status_code == 200, r.text
        r = http.post(f"{base}/a2a", json=rpc, headers={**v1, "Origin": base})
        assert r.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", r.text
    assert len(backend.calls("a2a.echo")) == 1
