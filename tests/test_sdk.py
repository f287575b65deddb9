"""Our Python SDK (`agentd_sdk`) against the real gateway: an agent
registers a capability, a caller invokes it synchronously, asynchronously
(task handle) and as a stream."""

from __future__ import annotations

import agentd_sdk

from harness.http import envelope
from harness.poll import wait_for


def test_sdk_agent_registers_and_is_invoked(stack):
    """Proves that an `agentd_sdk.Agent` started against agent-gw registers
    its capability (visible in agentctl routes with the agent's origin),
    that `invoke` through the gateway returns the handler's answer, that a
    plain HTTP caller gets the same answer with X-Agentd-Route-Id, that
    `invoke_async` returns a task handle whose result is the handler's
    answer, and that closing the agent withdraws the route."""
    agent = agentd_sdk.Agent(router=stack.http.base_url, tenant="lab", agent_id="sdk-echo")

    @agent.capability("sdk.echo", version=1, idempotent=True)
    def echo(payload):
        return {"echo": payload, "via": "agentd_sdk"}

    handle = agent.start()
    try:
        wait_for(
            "the SDK agent's route in agentd",
            lambda: any(str(r.get("origin")) == "agent://lab/sdk-echo" for r in stack.routes()),
        )
        stack.wait_routable(envelope("sdk.echo", {}))
        assert agent.invoke("sdk.echo", {"a": 1}) == {"echo": {"a": 1}, "via": "agentd_sdk"}

        r = stack.http.post("/agent/v1/invoke", envelope("sdk.echo", {"b": 2}))
        assert r.status == 200, r.describe()
        assert r.json() == {"echo": {"b": 2}, "via": "agentd_sdk"}
        assert r.header("x-agentd-route-id"), r.headers

        task = agent.invoke_async("sdk.echo", {"c": 3})
        assert task.result(timeout=10) == {"echo": {"c": 3}, "via": "agentd_sdk"}
    finally:
        handle.close()
    gone = stack.http.post("/agent/v1/route", envelope("sdk.echo", {}))
    assert gone.status == 404 and gone.error_code() == "no_route", gone.describe()
