"""An agent written for the Nexus Python SDK (`nexilume` 0.51.1), unchanged
in style from its README: NexusAgent + decorators + start(). Run inside a
network namespace (the SDK refuses loopback advertise addresses).

usage: nexilume_agent.py ROUTER_URL TENANT AGENT_ID LEASE_SECONDS [CLOUD_PUBLISH [AUTH]]

CLOUD_PUBLISH (default 1, the SDK's default) makes nexilume keep its lease
by re-registering with its route_id (an upsert); 0 makes it use
/agent/v1/renew and re-register only after a 404. AUTH (default "none")
is nexilume's `auth=` argument: "auto" discovers the router's auth and uses
its trusted-LAN bootstrap.
Prints one JSON line `{"ready": true, "route_ids": [...], "public_urls":
{capability: url or null}, "endpoint": ...}`
once registered, runs until stdin closes, then stops (unregistering) and
prints `{"closed": true}`.
"""

import json
import sys

from nexus_agent import NexusAgent

router, tenant, agent_id, lease = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
cloud_publish = (sys.argv[5] if len(sys.argv) > 5 else "1") == "1"
auth = sys.argv[6] if len(sys.argv) > 6 else "none"

agent = NexusAgent(
    router=router,
    auth=auth,
    tenant=tenant,
    agent_id=agent_id,
    lease_seconds=lease,
    cloud_publish=cloud_publish,
)


@agent.capability("nx.echo")
def echo(payload):
    """Echo the payload back."""
    return {"echo": payload, "via": "nexilume"}


@agent.stream_capability("nx.count")
def count(payload):
    """Yield `payload["n"]` numbered chunks."""
    for i in range(int(payload["n"])):
        yield {"i": i}


handle = agent.start(announce=False)
print(
    json.dumps(
        {
            "ready": True,
            "route_ids": [p.route_id for p in handle.published],
            "public_urls": {p.intent: p.public_url for p in handle.published},
            "endpoint": agent.backend_endpoint,
        }
    ),
    flush=True,
)
sys.stdin.read()
handle.close()
print(json.dumps({"closed": True}), flush=True)
