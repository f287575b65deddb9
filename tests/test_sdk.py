"""Our Python SDK (`agentd_sdk`) against the real gateway: an agent
registers capabilities, a caller invokes them synchronously, asynchronously
(task handle) and as a stream."""

from __future__ import annotations

import threading

import agentd_sdk

from harness.http import envelope
from harness.poll import wait_for


def _agent(stack, agent_id="sdk-echo", **kw):
    # The router runs on this host: the SDK refuses loopback unless told.
    return agentd_sdk.Agent(
        router=stack.http.base_url, tenant="lab", agent_id=agent_id, host="127.0.0.1", allow_loopback=True, **kw
    )


def test_sdk_agent_registers_invokes_streams_and_withdraws(stack):
    """Proves that an `agentd_sdk.Agent` started against agent-gw registers
    its capabilities (agentctl routes shows the agent's origin and handler
    endpoint), that `Client.invoke` through the gateway returns the
    handler's answer and a plain HTTP caller gets the same answer with
    X-Agentd-Route-Id, that a generator capability streams through the
    gateway as increasing numbered events (SDK `stream` and raw SSE with
    the completion marker), that `invoke_async` returns a task handle whose
    result is the handler's answer, and that closing the agent withdraws
    its routes (no_route within 5 s)."""
    agent = _agent(stack)

    @agent.capability("sdk.echo", version=1, idempotent=True)
    def echo(payload):
        return {"echo": payload, "via": "agentd_sdk"}

    @agent.capability("sdk.count")
    def count(payload):
        for i in range(int(payload["n"])):
            yield {"i": i}

    handle = agent.start()
    try:
        routes = wait_for(
            "the SDK agent's two routes in agentd",
            lambda: (lambda rs: rs if len(rs) == 2 else None)(
                [r for r in stack.routes() if str(r.get("origin")) == "agent://lab/sdk-echo"]
            ),
        )
        assert {str(r.get("endpoint")) for r in routes} == {handle.endpoint}, (routes, handle.endpoint)
        stack.wait_routable(envelope("sdk.echo", {}))
        caller = agentd_sdk.Client(router=stack.http.base_url, tenant="lab", agent_id="caller")
        assert caller.invoke("sdk.echo", {"a": 1}) == {"echo": {"a": 1}, "via": "agentd_sdk"}

        r = stack.http.post("/agent/v1/invoke", envelope("sdk.echo", {"b": 2}))
        assert r.status == 200, r.describe()
        assert r.json() == {"echo": {"b": 2}, "via": "agentd_sdk"}
        assert r.header("x-agentd-route-id") in {str(x.get("route_id")) for x in routes}, r.headers

        events = list(caller.stream("sdk.count", {"n": 5}))
        assert [e.json() for e in events] == [{"i": i} for i in range(5)]
        ids = [e.id for e in events]
        assert ids == sorted(set(ids)) and ids[0] >= 1, ids
        raw = stack.http.stream("/agent/v1/invoke-stream", envelope("sdk.count", {"n": 3}))
        assert raw.status == 200 and raw.complete, raw.error_body
        assert [e.json() for e in raw.events] == [{"i": 0}, {"i": 1}, {"i": 2}]

        task = caller.invoke_async("sdk.echo", {"c": 3})
        assert task.result(timeout=10) == {"echo": {"c": 3}, "via": "agentd_sdk"}
        assert task.status()["status"] == "completed"
    finally:
        handle.close()
    # (That the refusal is immediate is test_lease.py::test_unregister_stops_eligibility_immediately.)
    gone = wait_for(
        "sdk.echo to be withdrawn",
        lambda: (lambda r: r if r.status == 404 else None)(stack.http.post("/agent/v1/route", envelope("sdk.echo", {}))),
        timeout=5,
    )
    assert gone.error_code() == "no_route", gone.describe()


def test_sdk_async_task_cancel_reaches_the_handler(stack):
    """Proves SDK task control end to end: `invoke_async` on a handler that
    waits for cancellation reports `running`, `Task.cancel()` answers
    `cancelled`, and the cancellation reaches the Python handler (its
    Context reports cancelled within the deadline)."""
    agent = _agent(stack, agent_id="sdk-slow")
    saw_cancel = threading.Event()
    started = threading.Event()

    @agent.capability("sdk.slow")
    def slow(payload, ctx):
        started.set()
        if ctx.wait_cancelled(timeout=20):
            saw_cancel.set()
        return {"done": True}

    handle = agent.start()
    try:
        stack.wait_routable(envelope("sdk.slow", {}))
        caller = agentd_sdk.Client(router=stack.http.base_url, tenant="lab", agent_id="caller")
        task = caller.invoke_async("sdk.slow", {})
        assert started.wait(10), "handler did not start"
        assert task.status()["status"] == "running"
        assert task.cancel()["status"] == "cancelled"
        assert saw_cancel.wait(10), "cancellation did not reach the handler"
        assert task.status()["status"] == "cancelled"
    finally:
        handle.close()


def test_sdk_task_result_releases_the_router_slot_and_is_kept(stack):
    """Proves that `Task.result()` collects a finished task with `GET
    …/result`, which releases it on agent-gw (the task's status then says
    `result_released: true`, `agentctl stats` counts the release), that a
    second `result()` returns the same value from the handle (the router
    would now answer 410), that another handle for the same task gets the
    typed `TaskResultReleasedError`, and that `status()` keeps working."""
    agent = _agent(stack, agent_id="sdk-res")

    @agent.capability("sdk.res")
    def res(payload):
        return {"got": payload}

    handle = agent.start()
    try:
        stack.wait_routable(envelope("sdk.res", {}))
        caller = agentd_sdk.Client(router=stack.http.base_url, tenant="lab", agent_id="caller")
        task = caller.invoke_async("sdk.res", {"n": 1})
        assert task.result(timeout=10) == {"got": {"n": 1}}
        st = task.status()
        assert (st["status"], st.get("result_released")) == ("completed", True), st
        assert "result" not in st, st
        # The router no longer has it: the handle answers from what it kept.
        raw = stack.http.get(f"/agent/v1/tasks/{task.task_id}/result", headers={"X-Nexus-Task-Token": task._token})
        assert (raw.status, raw.error_code()) == (410, "result_released"), raw.describe()
        assert task.result(timeout=10) == {"got": {"n": 1}}
        other = agentd_sdk.client.Task(caller, task.task_id, task._token)
        try:
            other.result(timeout=10)
            raise AssertionError("a second handle got a released task's result")
        except agentd_sdk.TaskResultReleasedError as e:
            assert e.code == "result_released" and task.task_id in e.message, e
        wait_for(
            "the release in agentctl stats",
            lambda: (stack.ctl_json("stats").get("gateway") or {}).get("results_released", 0) >= 1,
            timeout=15,
        )
    finally:
        handle.close()
