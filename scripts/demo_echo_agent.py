#!/usr/bin/env python3
"""The demo's echo agent, written with our Python SDK (`agentd_sdk`).

usage: demo_echo_agent.py ROUTER_URL

Serves `demo.echo` v1 (returns what it gets) and `demo.count` v1 (streams
`payload["to"]` numbered chunks), registers both with the router and keeps
the leases until SIGINT/SIGTERM, then withdraws them.
"""

import sys
import time

from agentd_sdk import Agent

router = sys.argv[1]
# The demo router runs on this host, so loopback is the right address here.
agent = Agent(router=router, tenant="lab", agent_id="echo", host="127.0.0.1", allow_loopback=True)


@agent.capability("demo.echo", version=1, idempotent=True, description="Echo back the input")
def echo(payload):
    return {"echo": payload}


@agent.capability("demo.count", version=1, description="Count up to payload.to, one event per number")
def count(payload):
    for n in range(1, int(payload.get("to", 3)) + 1):
        time.sleep(0.05)  # pacing, so the caller sees events arrive one by one
        yield {"n": n, "text": f"chunk {n}"}


agent.run()
