"""Health checks probe endpoints, not routes: many routes on one listener
cost one probe per interval, and the endpoint's verdict reaches every
route on it (issue 6 item 4c).

The handler listener is a counting TCP server in a network namespace host
(tests/agents/count_server.py); agentd probes it over the veth.

Measuring mode: `AGENTD_PROBE_ROUTES=10000 pytest -s tests/test_health_probes.py
-k one_probe_per_interval` registers that many routes (spread over origins so
per-origin quotas stay at their defaults) and prints the probe connections
per second the listener saw (`AGENTD_PROBE_INTERVAL=5` for the default
interval).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import List

from harness.backend import registration
from harness.http import envelope
from harness.poll import wait_for

COUNT_SERVER = Path(__file__).resolve().parent / "agents" / "count_server.py"
PORT = 18080
INTERVAL_S = int(os.environ.get("AGENTD_PROBE_INTERVAL", "1"))
ROUTES = int(os.environ.get("AGENTD_PROBE_ROUTES", "300"))
ROUTES_PER_ORIGIN = 10
# Counting window, in intervals.
WINDOW = 4


class CountServer:
    """count_server.py inside `ns`, stopped by PID."""

    def __init__(self, ns, port: int = PORT, max_seconds: float = 240.0) -> None:
        self.accepts: List[float] = []
        self.proc = subprocess.Popen(
            ns.exec_argv([sys.executable, str(COUNT_SERVER), ns.ns_addr, str(port), "--max-seconds", str(max_seconds)]),
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        self._ready = threading.Event()
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(10.0):
            self.stop()
            raise AssertionError("count server did not start")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("ready"):
                self._ready.set()
            elif line.startswith("accept "):
                with self._lock:
                    self.accepts.append(float(line.split()[1]))

    def count_between(self, t0: float, t1: float) -> int:
        with self._lock:
            return sum(1 for t in self.accepts if t0 <= t < t1)

    def total(self) -> int:
        with self._lock:
            return len(self.accepts)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5.0)


def _register_all(stack, endpoint: str, n: int) -> List[str]:
    """Registers `n` routes on one endpoint, `ROUTES_PER_ORIGIN` per
    origin; a rate-limit refusal is retried after its Retry-After
    (bounded)."""
    ids = []
    deadline = time.monotonic() + 60.0 + n * 0.02
    for i in range(n):
        body = registration(
            f"probe.c{i % ROUTES_PER_ORIGIN}",
            f"{endpoint}/r{i}",
            name=f"a{i // ROUTES_PER_ORIGIN}",
            lease_seconds=600,
        )
        while True:
            r = stack.http.post("/agent/v1/register", body)
            if r.status == 200:
                ids.append(r.json()["route_id"])
                break
            assert r.status == 429 and time.monotonic() < deadline, r.describe()
            time.sleep(min(float(r.header("retry-after") or 1), 2.0))
    return ids


def _stats(stack):
    return stack.ctl_json("stats")["counters"]


def _healthy_count(stack, ids) -> int:
    wanted = set(ids)
    return sum(1 for r in stack.routes() if r["route_id"] in wanted and r["healthy"])


def test_many_routes_on_one_listener_cost_one_probe_per_interval(make_stack, netns):
    """Proves that with `health_interval 1` and ROUTES (300) routes on one
    listener, the listener accepts about one probe connection per interval
    (at most WINDOW + 2 in a WINDOW-interval window, at least 2) — not one
    per route (the old behaviour: ~300 per interval) — and that agentd
    reports one watched endpoint for all the routes."""
    server = CountServer(netns)
    try:
        stack = make_stack(agentd={"health_check": "tcp", "health_interval": INTERVAL_S, "health_timeout_ms": 500})
        endpoint = f"http://{netns.ns_addr}:{PORT}"
        t_reg = time.monotonic()
        ids = _register_all(stack, endpoint, ROUTES)
        t_done = time.monotonic()
        assert len(set(ids)) == ROUTES

        wait_for(
            "agentd to watch one endpoint for every route",
            lambda: _stats(stack).get("health.endpoints") == 1,
            timeout=10.0,
        )
        probes_before = _stats(stack)["health.probes"]
        t0 = time.monotonic()
        wait_for("the counting window to pass", lambda: time.monotonic() >= t0 + WINDOW * INTERVAL_S, timeout=WINDOW * INTERVAL_S + 5)
        t1 = time.monotonic()
        # Accepts are logged as they happen; the last one may still be in
        # the pipe: wait until the server has reported everything up to t1.
        seen = server.count_between(t0, t1)
        probes = _stats(stack)["health.probes"] - probes_before
        per_s = seen / (t1 - t0)
        during_reg = server.count_between(t_reg, t_done)
        print(
            f"\n{ROUTES} routes on one endpoint: {seen} probe connections in {t1 - t0:.2f}s "
            f"= {per_s:.2f}/s (agentd started {probes} probes; {during_reg} while registering "
            f"for {t_done - t_reg:.1f}s)"
        )
        assert seen <= WINDOW + 2, f"{seen} probe connections in {WINDOW} intervals for one endpoint"
        assert seen >= 2, f"only {seen} probe connections in {WINDOW} intervals: is probing on?"
        assert probes <= WINDOW + 2, probes
        assert _healthy_count(stack, ids) == ROUTES
    finally:
        server.stop()


def test_an_endpoint_verdict_reaches_every_route_on_it(make_stack, netns):
    """Proves that the failure/recovery thresholds (3/2) apply per
    endpoint and the verdict fans out: with the listener gone, all 300
    routes on it become unhealthy (excluded, not removed: the gateway
    refuses with reason `unhealthy`) while a route on another endpoint
    stays healthy; a route registered on the down endpoint is down at once;
    with the listener back, every route recovers."""
    n = 300
    server = CountServer(netns)
    second = CountServer(netns, port=PORT + 1)
    stack = make_stack(agentd={"health_check": "tcp", "health_interval": INTERVAL_S, "health_timeout_ms": 500})
    try:
        endpoint = f"http://{netns.ns_addr}:{PORT}"
        ids = _register_all(stack, endpoint, n)
        other = stack.register(
            registration("probe.other", f"http://{netns.ns_addr}:{PORT + 1}/x", name="other", lease_seconds=600)
        )
        wait_for("agentd to watch two endpoints", lambda: _stats(stack).get("health.endpoints") == 2, timeout=10.0)
        assert _healthy_count(stack, ids) == n

        server.stop()
        wait_for("every route on the dead endpoint to be unhealthy", lambda: _healthy_count(stack, ids) == 0, timeout=20.0)
        assert len([r for r in stack.routes() if r["route_id"] in set(ids)]) == n, "excluded, not removed"
        assert _healthy_count(stack, [other["route_id"]]) == 1, "another endpoint is judged on its own"
        r = stack.http.post("/agent/v1/route", envelope("probe.c0", {}))
        assert r.status == 404 and r.json()["error"].get("reason") == "unhealthy", r.describe()
        late = _register_late(stack, endpoint)
        assert _healthy_count(stack, [late]) == 0, "a route joining a down endpoint is down at once"

        server = CountServer(netns)
        wait_for(
            "every route to recover with its endpoint",
            lambda: _healthy_count(stack, ids + [late]) == n + 1,
            timeout=20.0,
        )
        stack.wait_routable(envelope("probe.c0", {}))
    finally:
        server.stop()
        second.stop()


def _register_late(stack, endpoint: str) -> str:
    body = registration("probe.late", f"{endpoint}/late", name="late", lease_seconds=600)
    return stack.register(body)["route_id"]
