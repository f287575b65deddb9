"""Per-source connection and in-flight caps (issue 6 item 4d): one host
flooding the gateway with half-open connections or slow calls cannot lock
another host out. Each flood runs from one network-namespace host
(tests/agents/flood_client.py) while a second host's calls keep
succeeding; both reach the gateway on the first host's veth address."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict

import pytest

from harness.backend import registration
from harness.http import envelope
from harness.netns import NetNs
from harness.poll import wait_for

FLOOD = Path(__file__).resolve().parent / "agents" / "flood_client.py"
# Measuring mode: AGENTD_FLOOD_CONNS=3000 AGENTD_FLOOD_B_CALLS=64 pytest -s
# tests/test_source_caps.py prints host B's success rate under a bigger flood.
HALF_OPEN = int(os.environ.get("AGENTD_FLOOD_CONNS", "1500"))
B_CALLS = int(os.environ.get("AGENTD_FLOOD_B_CALLS", "16"))
PER_SOURCE = 128


@pytest.fixture
def two_hosts():
    """Hosts A and B; B also reaches A's router-side address (the
    gateway's listener) through its own veth."""
    a = NetNs()
    try:
        b = NetNs()
    except BaseException:
        a.close()
        raise
    try:
        subprocess.run(
            ["ip", "-n", b.name, "route", "add", f"{a.host_addr}/32", "via", b.host_addr],
            check=True,
            capture_output=True,
            stdin=subprocess.DEVNULL,
        )
        yield a, b
    finally:
        b.close()
        a.close()


def _client(ns: NetNs, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        ns.exec_argv([sys.executable, str(FLOOD), *args]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def _summary(p: subprocess.Popen, timeout: float) -> Dict[str, Any]:
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate(timeout=5)
        raise AssertionError("flood client did not finish in time")
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_half_open_flood_from_one_host_does_not_lock_out_another(make_stack, backend, two_hosts):
    """Proves that while host A holds HALF_OPEN (1500) half-open
    connections (a partial request head each), A never holds more than
    `max_conns_per_source` (128) of them — its excess is closed at accept —
    and host B's B_CALLS (16) calls all succeed during the flood; the
    refusals are logged, rate-limited to a few lines."""
    a, b = two_hosts
    stack = make_stack(sdk_host=a.host_addr, gateway={"max_conns_per_source": PER_SOURCE})
    stack.register(registration("flood.echo", backend.endpoint, lease_seconds=120))
    stack.wait_routable(envelope("flood.echo", {}))
    port = str(stack.cfg.sdk_port)

    flood = _client(a, "halfopen", a.host_addr, port, "--conns", str(HALF_OPEN), "--hold", "8")
    try:
        assert flood.stdout is not None
        line = flood.stdout.readline()
        assert line.strip() == "holding", line
        conns_seen = stack.http.healthz()["connections"]
        t0 = time.monotonic()
        calls = _summary(_client(b, "calls", a.host_addr, port, "--n", str(B_CALLS), "--concurrency", "4"), 60)
        t1 = time.monotonic()
        conns_after = stack.http.healthz()["connections"]
    finally:
        result = _summary(flood, 60)
    rate = calls["ok"] / calls["n"]
    print(
        f"\nhalf-open flood: A attempted {result['attempted']}, connected {result['connected']}, "
        f"closed by the gateway {result['closed_by_server']}, open at end {result['open_at_end']}; "
        f"gateway connections during the flood {conns_seen}/{conns_after}; "
        f"B {calls['ok']}/{calls['n']} calls ok ({rate:.0%}) in {t1 - t0:.2f}s"
    )
    assert calls["ok"] == B_CALLS, calls["results"]
    assert result["connected"] >= HALF_OPEN - 100, result
    # A's share and nothing more (+ our own /healthz connection).
    assert conns_seen <= PER_SOURCE + 1 and conns_after <= PER_SOURCE + 1, (conns_seen, conns_after)
    assert result["open_at_end"] <= PER_SOURCE, result
    log = stack.gw.log_text(tail=200_000)
    lines = [l for l in log.splitlines() if f"source {a.ns_addr} already holds {PER_SOURCE} connections" in l]
    assert 1 <= len(lines) <= 4, lines
    # After the flood, A is a normal client again.
    wait_for("A's connections to be gone", lambda: stack.http.healthz()["connections"] <= 1, timeout=20)
    after = _summary(_client(a, "calls", a.host_addr, port, "--n", "2"), 30)
    assert after["ok"] == 2, after


def test_slow_calls_from_one_host_cannot_starve_another(make_stack, backend, two_hosts):
    """Proves that with `max_inflight 32` and `max_inflight_per_source 8`,
    host A holding 40 slow calls at once gets 8 in flight and the rest
    refused with 503 `overloaded`, reason `source_inflight`, while host B's
    16 calls all succeed; A's held calls finish normally."""
    a, b = two_hosts
    stack = make_stack(sdk_host=a.host_addr, gateway={"max_inflight": 32, "max_inflight_per_source": 8})
    stack.register(registration("flood.echo", backend.endpoint, lease_seconds=120))
    stack.register(registration("flood.slow", backend.endpoint, lease_seconds=120))
    stack.wait_routable(envelope("flood.slow", {}))
    port = str(stack.cfg.sdk_port)

    slow = _client(
        a, "calls", a.host_addr, port, "--n", "40", "--concurrency", "40", "--intent", "flood.slow",
        "--payload", json.dumps({"max_s": 15}),
    )
    try:
        wait_for("A's 8 slow calls inside the handler", lambda: len(backend.calls("flood.slow")) >= 8, timeout=20)
        calls = _summary(_client(b, "calls", a.host_addr, port, "--n", str(B_CALLS), "--concurrency", "4"), 60)
        in_handler = len(backend.calls("flood.slow"))
    finally:
        backend.release()
        held = _summary(slow, 60)
    statuses = [r.get("status") for r in held["results"]]
    refused = [r for r in held["results"] if r.get("status") == 503]
    print(
        f"\nslow-call flood: A {statuses.count(200)} in flight and served, {len(refused)} refused; "
        f"B {calls['ok']}/{calls['n']} calls ok ({calls['ok'] / calls['n']:.0%})"
    )
    assert calls["ok"] == B_CALLS, calls["results"]
    assert in_handler == 8, in_handler
    assert statuses.count(200) == 8, held["results"]
    assert len(refused) == 32 and all(
        r.get("code") == "overloaded" and r.get("reason") == "source_inflight" for r in refused
    ), held["results"]
