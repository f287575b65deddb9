"""The caller side against the recording peer: envelopes, headers, error
mapping, async task handles and stream resume without duplicates."""

import pytest

from agentd_sdk import Client, NoRouteError, RateLimitedError, StreamEvent


@pytest.fixture
def client(recorder):
    return Client(router=recorder.url, tenant="lab", agent_id="caller", timeout=5)


def test_invoke_sends_the_envelope_and_returns_the_reply(client, recorder):
    assert client.invoke("demo.echo", {"x": 1}, version=2, idempotency_key="k-1", timeout=3) == {"echo": {"x": 1}}
    rec = recorder.until(lambda r: r["path"] == "/agent/v1/invoke")[-1]
    env = rec["body"]
    assert env["version"] == "1.0" and env["intent"] == "demo.echo" and env["intent_version"] == 2
    assert env["source_agent"] == "agent://lab/caller" and env["tenant"] == "lab"
    assert env["hop_limit"] == 8 and env["constraints"] == {} and env["task_id"]
    assert rec["headers"]["idempotency-key"] == "k-1"
    assert rec["headers"]["x-agentd-timeout-ms"] == "3000"
    assert "authorization" not in rec["headers"]


def test_router_errors_map_to_exception_classes(client):
    with pytest.raises(NoRouteError) as info:
        client.invoke("missing", {})
    e = info.value
    assert (e.code, e.status, e.outcome, e.reason) == ("no_route", 404, "rejected", "tenant_access")
    assert "missing v1" in e.message
    with pytest.raises(RateLimitedError):
        client.invoke("limited", {})


def test_async_task_handle(client, recorder):
    task = client.invoke_async("demo.slow", {})
    assert task.task_id == "task-1" and "tok" not in repr(task)
    assert task.result(timeout=10) == {"done": True}
    assert task.cancel()["status"] == "cancelled"
    recs = _drain(recorder)
    start = [r for r in recs if r["path"] == "/agent/v1/invoke"][0]
    assert start["headers"]["prefer"] == "respond-async"
    polls = [r for r in recs if r["method"] == "GET" and r["path"] == "/agent/v1/tasks/task-1"]
    assert len(polls) == 2 and all(r["headers"]["x-nexus-task-token"] == "tok-123" for r in polls)
    assert [r["method"] for r in recs if r["path"] == "/agent/v1/tasks/task-1"][-1] == "DELETE"


def test_stream_resumes_with_its_cursor_and_never_repeats(client, recorder):
    stream = client.stream("demo.count", {"to": 4}, task_id="stream-1")
    events = list(stream)
    assert events == [
        StreamEvent(1, None, "one"),
        StreamEvent(2, "tick", "two"),
        StreamEvent(3, None, "three"),
        StreamEvent(4, None, "four"),
    ]
    assert stream.reconnects == 1 and stream.cursor == 4
    calls = [r for r in _drain(recorder) if r["path"] == "/agent/v1/invoke-stream"]
    assert len(calls) == 2
    first, second = calls
    assert "last-event-id" not in first["headers"] and "resume_from_event_id" not in first["body"]
    assert second["headers"]["last-event-id"] == "2"
    assert second["body"]["resume_from_event_id"] == 2
    assert second["body"]["task_id"] == first["body"]["task_id"] == "stream-1"
    assert second["headers"]["accept"] == "text/event-stream"


def _drain(recorder):
    out = []
    while True:
        try:
            out.append(recorder.next(timeout=0.5))
        except Exception:
            return out
