"""Latency of the served handler endpoint, as the router sees it.

Starts an Agent (no router; register=False) with an echo capability on
loopback and sends N synchronous envelopes over one keep-alive connection
(like the router's pool), then prints JSON with p50/p99 in microseconds.

    python sdk-python-bindings/bench/endpoint_latency.py [N] [payload_bytes]
"""

import http.client
import json
import sys
import time

from agentd_sdk import Agent

n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
size = int(sys.argv[2]) if len(sys.argv) > 2 else 128

agent = Agent(router="http://192.0.2.1:7446", tenant="lab", agent_id="bench", host="127.0.0.1", allow_loopback=True)


@agent.capability("bench.echo")
def echo(payload):
    return payload


with agent.start(register=False) as handle:
    env = {"version": "1.0", "intent": "bench.echo", "intent_version": 1, "task_id": "t", "source_agent": "b",
           "tenant": "lab", "hop_limit": 8, "constraints": {}, "payload": "x" * size}
    body = json.dumps(env).encode()
    conn = http.client.HTTPConnection("127.0.0.1", handle.port, timeout=10)
    samples = []
    for i in range(n + 100):
        t0 = time.perf_counter_ns()
        conn.request("POST", "/invoke", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            sys.exit(f"status {resp.status}")
        if i >= 100:  # warm-up
            samples.append((time.perf_counter_ns() - t0) / 1000)
    samples.sort()
    print(json.dumps({
        "requests": n,
        "payload_bytes": size,
        "p50_us": round(samples[len(samples) // 2], 1),
        "p99_us": round(samples[int(len(samples) * 0.99)], 1),
    }))
