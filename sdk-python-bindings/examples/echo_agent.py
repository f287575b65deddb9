"""An echo agent: serves `demo.echo` v1 until SIGINT/SIGTERM.

    AGENTD_ROUTER_URL=http://192.0.2.1:7446 python echo_agent.py

Options come from the environment: AGENTD_ROUTER_URL (else the default
gateway on :7446), AGENTD_TOKEN, AGENTD_TENANT (default "lab"),
AGENTD_AGENT_ADDRESS (the LAN address to advertise; default: the address
used to reach the router). For a router on this very host pass
AGENTD_ALLOW_LOOPBACK=1.
"""

import os

from agentd_sdk import Agent

agent = Agent(
    router=os.environ.get("AGENTD_ROUTER_URL", "auto"),
    tenant=os.environ.get("AGENTD_TENANT", "lab"),
    agent_id="echo",
    allow_loopback=os.environ.get("AGENTD_ALLOW_LOOPBACK") == "1",
)


@agent.capability("demo.echo", version=1, idempotent=True, effect="read",
                  schema={"type": "object"})
def echo(payload, ctx):
    """Returns the payload, with who asked."""
    return {"echo": payload, "from": ctx.source_agent, "task_id": ctx.task_id}


if __name__ == "__main__":
    agent.run()
