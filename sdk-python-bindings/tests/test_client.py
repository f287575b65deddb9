"""The caller side against the recording peer: envelopes, headers, error
mapping, async task handles and stream resume without duplicates."""

import pytest

from agentd_sdk import Client, NoRouteError, RateLimitedError, StreamEvent, TaskResultReleasedError
from agentd_sdk.client import Task


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


def test_task_result_collects_with_result_then_answers_from_the_handle(client, recorder):
    """`result()` fetches `GET …/result` once the status says completed
    (the router releases the task), keeps the value, and a second call
    answers from the handle without a request; another handle for the same
    task then gets the typed `TaskResultReleasedError`, while `status()`
    keeps working."""
    task = client.invoke_async("demo.release", {})
    assert task.task_id == "task-2"
    assert task.result(timeout=10) == {"kept": True}
    assert task.result(timeout=10) == {"kept": True}
    results = [r for r in _drain(recorder) if r["path"] == "/agent/v1/tasks/task-2/result"]
    assert len(results) == 1 and results[0]["headers"]["x-nexus-task-token"] == "tok-456"
    st = task.status()
    assert (st["status"], st["result_released"]) == ("completed", True) and "result" not in st
    other = Task(client, "task-2", "tok-456")
    with pytest.raises(TaskResultReleasedError) as info:
        other.result(timeout=10)
    assert info.value.code == "result_released" and "task-2" in info.value.message


def test_task_result_falls_back_to_the_status_on_an_older_router(client, recorder):
    """A router whose `…/result` answers something unexpected (the recorder
    answers 404 for task-1's): `result()` returns the status's result."""
    task = client.invoke_async("demo.slow", {})
    assert task.result(timeout=10) == {"done": True}
    assert any(r["path"] == "/agent/v1/tasks/task-1/result" for r in _drain(recorder))


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
