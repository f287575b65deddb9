"""Handlers that write their answer in two pieces (issue 21, part 4).

Python's `http.server`, which the nexilume SDK's handler server is built
on, writes the response head and then the body, without TCP_NODELAY. On
a kept connection Nagle holds the body until the head is acknowledged,
and Linux delays that ACK on a request/response connection: ~40 ms per
call. The harness's LAN backend writes exactly like that server.

What is asserted is the mechanism, not a time: the router's network
namespace counts every ACK its kernel sent late because the delayed-ACK
timer fired (`TcpExt: DelayedACKs` in /proc/net/netstat, per namespace).
The gateway's handler connections ACK at once, so calls through such a
handler leave that counter (almost) where it was; before, every call on
the kept connection added one."""

from __future__ import annotations

import subprocess
from typing import Dict

from harness.http import envelope

#: Calls measured, after a warm-up that takes the kept handler connection
#: past the kernel's initial quick-ACK phase.
WARM = 20
CALLS = 60


def tcp_ext(netns: str) -> Dict[str, int]:
    """The TcpExt counters of `netns`."""
    out = subprocess.run(["ip", "netns", "exec", netns, "cat", "/proc/net/netstat"],
                         check=True, capture_output=True, text=True, timeout=10).stdout
    lines = [line.split() for line in out.splitlines() if line.startswith("TcpExt:")]
    names, values = lines[0][1:], lines[1][1:]
    return dict(zip(names, map(int, values)))


def test_a_handler_writing_head_and_body_apart_is_acked_at_once(mesh):
    """Proves that N sequential calls through the gateway to a handler that
    writes head and body in two segments (kept connection, Nagle on) make
    the router's kernel send at most N/10 delayed ACKs, and that every
    call is answered by the handler."""
    a = mesh.router("router-a", agentd={"health_check": "off"}).start()
    backend = a.lan_backend()
    try:
        a.serve(backend, "demo.echo")
        env = envelope("demo.echo", {"n": 0})
        a.stack.wait_routable(env)
        for i in range(WARM):
            assert a.stack.http.post("/agent/v1/invoke", envelope("demo.echo", {"n": i})).status == 200
        before = tcp_ext(a.ns.netns)["DelayedACKs"]
        for i in range(CALLS):
            resp = a.stack.http.post("/agent/v1/invoke", envelope("demo.echo", {"n": i}))
            assert resp.status == 200, resp.describe()
        delayed = tcp_ext(a.ns.netns)["DelayedACKs"] - before
        assert len(backend.calls("demo.echo")) >= WARM + CALLS
        assert delayed <= CALLS // 10, f"{delayed} delayed ACKs over {CALLS} calls"
    finally:
        backend.close()
