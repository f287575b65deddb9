"""Async invocation (`Prefer: respond-async`): task id + token, status,
result, cancel (DESIGN §8, docs/sdk-api.md "Tasks")."""

from __future__ import annotations

from harness.backend import registration
from harness.http import envelope
from harness.poll import wait_for

ASYNC = {"Prefer": "respond-async"}


def _start(stack, env):
    r = stack.http.post("/agent/v1/invoke", env, headers=ASYNC)
    assert r.status == 202, r.describe()
    task_id, token = r.header("x-nexus-task-id"), r.header("x-nexus-task-token")
    assert task_id and token, r.headers
    assert r.json()["task_id"] == task_id and r.json()["status"] == "running", r.describe()
    assert r.header("location") == f"/agent/v1/tasks/{task_id}", r.headers
    return task_id, {"X-Nexus-Task-Token": token}


def test_async_task_completes_with_status_and_result(stack, backend):
    """Proves that an async invocation answers 202 at once with task id,
    token and Location, that status polling reaches `completed`, and that
    the result endpoint returns the handler's answer."""
    stack.register(registration("task.echo", backend.endpoint, lease_seconds=60))
    stack.wait_routable(envelope("task.echo", {}))
    task_id, tok = _start(stack, envelope("task.echo", {"job": 7}))

    def done():
        r = stack.http.get(f"/agent/v1/tasks/{task_id}", headers=tok)
        assert r.status == 200, r.describe()
        return r.json() if r.json()["status"] != "running" else None

    status = wait_for("task to finish", done, timeout=10)
    assert status["status"] == "completed", status
    r = stack.http.get(f"/agent/v1/tasks/{task_id}/result", headers=tok)
    assert r.status == 200, r.describe()
    body = r.json()
    assert body["status"] == "completed" and body["result"]["echo"] == {"job": 7}, body
    assert len(backend.calls("task.echo")) == 1


def test_async_task_cancel(stack, backend):
    """Proves that a running task reports `running`, that its result is
    refused with 409 `task_not_finished` while it runs, that DELETE
    cancels it (200, `cancelled`), that the cancel propagates to the
    handler (the gateway closes the handler connection before it answered)
    and that the task then stays `cancelled`."""
    stack.register(registration("task.slow", backend.endpoint, lease_seconds=60))
    stack.wait_routable(envelope("task.slow", {}))
    task_id, tok = _start(stack, envelope("task.slow", {"max_s": 20}))
    wait_for("handler to receive the task", lambda: backend.calls("task.slow"), timeout=10)

    r = stack.http.get(f"/agent/v1/tasks/{task_id}", headers=tok)
    assert r.status == 200 and r.json()["status"] == "running", r.describe()
    r = stack.http.get(f"/agent/v1/tasks/{task_id}/result", headers=tok)
    assert r.status == 409 and r.error_code() == "task_not_finished", r.describe()

    r = stack.http.request("DELETE", f"/agent/v1/tasks/{task_id}", headers=tok)
    assert r.status == 200, r.describe()
    assert r.json()["status"] == "cancelled", r.describe()

    # The cancel reached the handler: the gateway closed its connection.
    wait_for("the handler's connection to be closed by the cancel", lambda: backend.peer_closed, timeout=5)
    assert backend.answered == []
    r = stack.http.get(f"/agent/v1/tasks/{task_id}", headers=tok)
    assert r.status == 200 and r.json()["status"] == "cancelled", r.describe()
    # Another call on the same route is unaffected.
    backend.release()
    ok = stack.http.post("/agent/v1/invoke", envelope("task.slow", {"max_s": 0}))
    assert ok.status == 200, ok.describe()
