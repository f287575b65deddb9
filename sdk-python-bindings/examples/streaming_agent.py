"""A streaming agent: `demo.count` v1 yields one event per number.

    AGENTD_ROUTER_URL=http://192.0.2.1:7446 python streaming_agent.py

A generator handler is a streaming capability: every yielded value becomes
one SSE event (numbered by the SDK), `Event(data, event=name)` names it. If
the caller goes away the generator is closed (GeneratorExit) and
`ctx.cancelled` turns true.
"""

import os
import time

from agentd_sdk import Agent, Event

agent = Agent(
    router=os.environ.get("AGENTD_ROUTER_URL", "auto"),
    tenant=os.environ.get("AGENTD_TENANT", "lab"),
    agent_id="counter",
    allow_loopback=os.environ.get("AGENTD_ALLOW_LOOPBACK") == "1",
)


@agent.capability("demo.count", version=1, schema={"type": "object", "properties": {"to": {"type": "integer"}}})
def count(payload, ctx):
    """Counts from 1 to payload["to"], one event every payload["every"] seconds."""
    every = float(payload.get("every", 0.1))
    for n in range(1, int(payload.get("to", 5)) + 1):
        if ctx.cancelled:
            return
        yield {"n": n}
        time.sleep(every)
    yield Event({"total": int(payload.get("to", 5))}, event="done")


if __name__ == "__main__":
    agent.run()
