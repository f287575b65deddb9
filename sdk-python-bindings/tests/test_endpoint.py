"""The served handler endpoint: envelopes POSTed with urllib, as the router
would, against handlers declared with @agent.capability."""

import json
import threading

import pytest

from agentd_sdk import Agent, Event, HandlerError
from conftest import envelope, get, post


@pytest.fixture
def served():
    agent = Agent(router="http://192.0.2.1:7446", tenant="lab", agent_id="echo",
                  host="127.0.0.1", allow_loopback=True, max_body=4096)
    seen = {}
    release = threading.Event()
    cancelled = threading.Event()

    @agent.capability("demo.echo", version=1, idempotent=True)
    def echo(payload):
        return {"echo": payload}

    @agent.capability("demo.echo", version=2)
    def echo2(payload, ctx):
        seen["deadline"] = ctx.deadline
        seen["ctx"] = (ctx.task_id, ctx.capability, ctx.version, ctx.tenant, ctx.source_agent, ctx.route_id)
        return {"v2": payload}

    @agent.capability("demo.fail")
    def fail(payload):
        if payload.get("typed"):
            raise HandlerError("no such city", code="BAD_CITY", status=422)
        raise ValueError("secret internals")

    @agent.capability("demo.slow")
    def slow(payload, ctx):
        ctx.wait_cancelled(10)
        if ctx.cancelled:
            cancelled.set()
        return {"slept": True}

    @agent.capability("demo.wait")
    def wait(payload):
        release.wait(10)
        return {"released": True}

    @agent.capability("demo.async_def")
    async def coro(payload):
        return {"async": payload}

    @agent.capability("demo.count")
    def count(payload):
        for i in range(payload["to"]):
            yield {"n": i + 1}
        yield Event("done", event="end")

    handle = agent.start(register=False)
    base = f"http://127.0.0.1:{handle.port}"
    yield base, seen, release, cancelled
    release.set()
    handle.close()


def test_sync_invocation_returns_the_handler_json(served):
    base, *_ = served
    status, headers, body = post(base + "/invoke", envelope("demo.echo", {"text": "hi"}))
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"echo": {"text": "hi"}}


def test_versions_are_distinct_and_the_context_carries_the_envelope(served):
    base, seen, *_ = served
    status, _, body = post(base + "/invoke", envelope("demo.echo", [1], version=2, task_id="task-9"),
                           headers={"X-Agentd-Route-Id": "route-7"})
    assert (status, json.loads(body)) == (200, {"v2": [1]})
    assert seen["ctx"] == ("task-9", "demo.echo", 2, "lab", "agent://lab/caller", "route-7")


def test_async_def_handlers_are_awaited(served):
    base, *_ = served
    status, _, body = post(base + "/invoke", envelope("demo.async_def", 5))
    assert (status, json.loads(body)) == (200, {"async": 5})


def test_unknown_capability_or_version_is_a_typed_404(served):
    base, *_ = served
    for env in (envelope("demo.nope", {}), envelope("demo.echo", {}, version=3)):
        status, _, body = post(base + "/invoke", env)
        assert status == 404
        assert json.loads(body)["error"]["code"] == "intent_not_served"


@pytest.mark.parametrize("raw,code", [
    (b"{not json", "invalid_json"),
    (json.dumps(envelope("demo.echo", None)).encode(), "invalid_field"),
    (json.dumps(envelope("demo.echo", {}, hop_limit=0)).encode(), "invalid_field"),
    (json.dumps({**envelope("demo.echo", {}), "version": "2.0"}).encode(), "invalid_field"),
    (b'{"version":"1.0","version":"1.0"}', "duplicate_key"),
])
def test_malformed_envelopes_get_typed_400s(served, raw, code):
    base, *_ = served
    status, _, body = post(base + "/invoke", raw)
    assert status == 400
    err = json.loads(body)["error"]
    assert err["code"] == code and err["message"]
    # The endpoint still serves afterwards.
    assert post(base + "/invoke", envelope("demo.echo", 1))[0] == 200


def test_handler_failures_are_typed_and_do_not_leak_internals(served):
    base, *_ = served
    status, _, body = post(base + "/invoke", envelope("demo.fail", {"typed": True}))
    assert (status, json.loads(body)["error"]) == (422, {"code": "BAD_CITY", "message": "no such city"})
    status, _, body = post(base + "/invoke", envelope("demo.fail", {}))
    err = json.loads(body)["error"]
    assert status == 500 and err["code"] == "handler_failed"
    assert "secret" not in err["message"] and "ValueError" in err["message"]


def test_oversized_bodies_get_413(served):
    base, *_ = served
    status, _, body = post(base + "/invoke", envelope("demo.echo", "x" * 8000))
    assert status == 413
    assert json.loads(body)["error"]["code"] == "payload_too_large"


def test_healthz_and_unknown_paths(served):
    base, *_ = served
    assert get(base + "/healthz")[0] == 200
    status, _, body = get(base + "/elsewhere")
    assert status == 404 and json.loads(body)["error"]["code"] == "not_found"


def test_healthz_answers_while_a_handler_is_busy(served):
    base, _, release, _ = served
    t = threading.Thread(target=post, args=(base + "/invoke", envelope("demo.wait", {})))
    t.start()
    try:
        assert get(base + "/healthz")[0] == 200
    finally:
        release.set()
        t.join(10)


def test_async_task_status_result_and_token_check(served):
    base, *_ = served
    status, headers, body = post(base + "/invoke", envelope("demo.echo", {"a": 1}, task_id="job-1"),
                                 headers={"Prefer": "respond-async"})
    assert status == 202
    task_id, token = headers["X-Nexus-Task-Id"], headers["X-Nexus-Task-Token"]
    assert json.loads(body)["task_id"] == task_id == "job-1"
    for _ in range(200):
        status, _, body = get(f"{base}/agent/v1/tasks/{task_id}", {"X-Nexus-Task-Token": token})
        st = json.loads(body)
        if st["status"] != "running":
            break
        threading.Event().wait(0.01)
    assert status == 200 and st["status"] == "completed" and st["result"] == {"echo": {"a": 1}}
    status, _, body = get(f"{base}/agent/v1/tasks/{task_id}", {"X-Nexus-Task-Token": "wrong"})
    assert status == 404 and json.loads(body)["error"]["code"] == "not_found"
    assert get(f"{base}/agent/v1/tasks/unknown", {"X-Nexus-Task-Token": token})[0] == 404


def test_cancelling_an_async_task_reaches_the_handler(served):
    base, _, _, cancelled = served
    _, headers, _ = post(base + "/invoke", envelope("demo.slow", {}), headers={"Prefer": "respond-async"})
    task_id, token = headers["X-Nexus-Task-Id"], headers["X-Nexus-Task-Token"]
    status, _, body = get(f"{base}/agent/v1/tasks/{task_id}", {"X-Nexus-Task-Token": token}, method="DELETE")
    assert status == 200 and json.loads(body)["status"] == "cancelled"
    assert cancelled.wait(10), "handler never saw the cancellation"
    _, _, body = get(f"{base}/agent/v1/tasks/{task_id}", {"X-Nexus-Task-Token": token})
    assert json.loads(body)["status"] == "cancelled"


def test_streaming_capability_needs_a_stream_request(served):
    base, *_ = served
    status, _, body = post(base + "/invoke", envelope("demo.count", {"to": 1}))
    assert status == 406 and json.loads(body)["error"]["code"] == "stream_required"
    status, _, body = post(base + "/invoke", envelope("demo.echo", {}), headers={"Accept": "text/event-stream"})
    assert status == 406 and json.loads(body)["error"]["code"] == "stream_not_supported"


def test_caller_hang_up_cancels_a_sync_handler(served):
    base, _, _, cancelled = served
    import socket
    port = int(base.rsplit(":", 1)[1])
    body = json.dumps(envelope("demo.slow", {})).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"POST /invoke HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(body)).encode() + b"\r\n\r\n" + body)
    # Hang up as the router does when it cancels; whether this lands before
    # or while the handler runs, its context must see it.
    s.close()
    assert cancelled.wait(10), "the handler never saw the caller hang up"


def test_deadline_header_reaches_the_context(served):
    base, seen, *_ = served
    post(base + "/invoke", envelope("demo.echo", {}, version=2), headers={"X-Agentd-Deadline-Ms": "1500"})
    assert 0.0 < seen["deadline"] <= 1.5
    post(base + "/invoke", envelope("demo.echo", {}, version=2))
    assert seen["deadline"] is None


def test_start_refuses_loopback_advertise_without_opt_in():
    agent = Agent(router="http://127.0.0.1:9", tenant="lab", agent_id="x")

    @agent.capability("demo.echo")
    def echo(p):
        return p

    with pytest.raises(ValueError, match="loopback"):
        agent.start()


def test_declaration_errors():
    agent = Agent(router="http://192.0.2.1:7446", tenant="lab", agent_id="x")
    with pytest.raises(ValueError):
        agent.capability("demo.x", version=0)
    with pytest.raises(ValueError):
        agent.capability("demo.x", effect="delete")
    with pytest.raises(ValueError):
        Agent(router="http://192.0.2.1:7446", tenant="bad tenant")

    @agent.capability("demo.x")
    def x(p):
        return p

    with pytest.raises(ValueError, match="already declared"):
        agent.capability("demo.x")(x)
