"""An echo agent written with our Python SDK (`agentd_sdk`).

usage: sdk_agent.py ROUTER_URL TENANT AGENT_ID LEASE_SECONDS [PUBLIC_IPV6]
ROUTER_URL may be "auto" (the SDK finds its router). PUBLIC_IPV6 "1" asks
for an address of the agent's own.
Prints `{"ready": true, "router": URL, "source": HOW, "endpoint": URL,
"leases": [...]}`
once registered, runs until stdin closes,
then stops (withdrawing its routes) and prints `{"closed": true}`.
"""

import json
import sys

from agentd_sdk import Agent

router, tenant, agent_id, lease = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
public_ipv6 = len(sys.argv) > 5 and sys.argv[5] == "1"

# Runs inside a network namespace: listens there, advertises the address
# the kernel uses to reach the router (a veth address, not loopback).
agent = Agent(router=router, tenant=tenant, agent_id=agent_id, lease_seconds=lease)


@agent.capability("sdk.echo", version=1, idempotent=True, public_ipv6=public_ipv6)
def echo(payload):
    """Echo the payload back."""
    return {"echo": payload, "via": "agentd_sdk"}


handle = agent.start()
print(json.dumps({"ready": True, "router": agent.client.router_url, "source": agent.client.router_source,
                  "endpoint": handle.endpoint, "leases": handle.leases()}), flush=True)
sys.stdin.read()
handle.close()
print(json.dumps({"closed": True}), flush=True)
