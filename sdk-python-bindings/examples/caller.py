"""A caller: invokes `demo.echo`, runs it as an async task, and streams
`demo.count`.

    AGENTD_ROUTER_URL=http://192.0.2.1:7446 python caller.py
"""

import os
import sys

from agentd_sdk import AgentdError, Client, NoRouteError

client = Client(
    router=os.environ.get("AGENTD_ROUTER_URL", "auto"),
    tenant=os.environ.get("AGENTD_TENANT", "lab"),
    agent_id="caller",
)

try:
    print("invoke:", client.invoke("demo.echo", {"text": "hello"}, timeout=5, idempotency_key="example-1"))

    task = client.invoke_async("demo.echo", {"text": "later"})
    print("task:", task, "->", task.result(timeout=10))

    stream = client.stream("demo.count", {"to": 5, "every": 0.05})
    for event in stream:
        print(f"event {event.id} {event.event or 'message'}: {event.data}")
    print(f"stream done (resumed {stream.reconnects} times)")
except NoRouteError as e:
    sys.exit(f"nothing serves that capability: {e.message} (reason: {e.reason})")
except AgentdError as e:
    sys.exit(f"call failed: {e.code}: {e.message}")
