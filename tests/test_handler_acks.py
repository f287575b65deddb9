"""Handlers as the nexilume SDK's handler server (Python `http.server`)
behaves: it writes its answer in two pieces (issue 21, part 4), and it
listens with socketserver's backlog of 5.

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
import threading
from typing import Dict, List

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


#: Calls sent at once to a handler the gateway has no connection to yet.
BURST = 48


def test_a_burst_of_calls_opens_no_more_handler_connections_than_a_backlog_of_5_takes(mesh):
    """Proves that BURST calls arriving at once for a handler that listens
    with a backlog of 5 and accepts on one thread (Python's http.server,
    as nexilume's agents do) all reach it with (almost) none of the
    router's SYNs dropped: the gateway opens at most a few connections to
    one handler before the handler has answered on them. Before, it opened
    one per call at once; the handler's kernel dropped the SYNs its full
    accept queue could not take, and each of those calls waited out the
    1 s SYN retransmission (`TcpExt: TCPSynRetrans` of the router's
    namespace, which counts them; nothing else there opens connections).
    """
    a = mesh.router("router-a", agentd={"health_check": "off"}).start()
    backend = a.lan_backend(backlog=5)
    try:
        a.serve(backend, "demo.echo")
        a.stack.wait_routable(envelope("demo.echo", {"n": -1}))
        before = tcp_ext(a.ns.netns)["TCPSynRetrans"]
        go = threading.Barrier(BURST)
        statuses: List[int] = []

        def call(i: int) -> None:
            go.wait(timeout=30)
            statuses.append(a.stack.http.post("/agent/v1/invoke", envelope("demo.echo", {"n": i}), timeout=60).status)

        threads = [threading.Thread(target=call, args=(i,)) for i in range(BURST)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=90)
        assert not any(t.is_alive() for t in threads), "a call did not end"
        assert sorted(statuses) == [200] * BURST, statuses
        retrans = tcp_ext(a.ns.netns)["TCPSynRetrans"] - before
        # 0 measured; before the pacing, 27 of the 48. A few are allowed:
        # a call waits at most 20 ms for the right to open a connection,
        # and a loaded machine can keep this handler from answering that
        # fast, after which the rest open unpaced (by design: a slow
        # handler must still get every call).
        assert retrans <= 4, f"{retrans} SYNs of the router were retransmitted"
    finally:
        backend.close()
