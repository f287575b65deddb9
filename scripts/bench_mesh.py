#!/usr/bin/env python3
"""`make bench` (mesh part): ARPX convergence and liveness figures from real
routers in network namespaces, written to target/bench/mesh.json.

Scenarios (router build `release` unless BENCH_MESH_BIN_DIR says otherwise):

1. convergence — A holds N routes (1k, 10k); B learns of A by a reload
   that adds the peer section (B dials at once). Measured from the reload
   to B's gateway FIB holding N more routes (agent-gw /healthz, polled
   every 2 ms), then the exact set is checked in B's RIB. Also B's agentd
   RSS growth per 1k peer routes, and the sender A's RSS before, its
   peak (VmHWM) and RSS after its snapshot. BENCH_MESH_CERTS=1: A and B are
   routers of one domain CA, so every route carries A's certificate.
2. reflector reconvergence — chain A–B–C, B reflector, A with 1k routes:
   B is stopped, then started again (new boot epoch); measured from B's
   process start to C's FIB holding the exact set again. The competing
   implementation needs 1.3–1.6 s for this; the goal is ≤ 200 ms.
3. steady state — the same chain, A's 1k routes renewed every 18 s (lease
   30 s, as the SDK does) for BENCH_MESH_STEADY_S (60) seconds: ARPX
   update and withdraw messages sent by A and received by C in that time
   (goal: zero).
4. lease end — a route at A with a 3 s lease that is not renewed: time
   from its deadline at A to the first refused route lookup at C's
   gateway, two hops away (goal ≤ 100 ms), BENCH_MESH_LEASE_RUNS times.

CLOCK_MONOTONIC is system-wide, so times taken here and instants reported
by the daemons are on one clock. Everything runs inside namespaces this
script creates (TEST-NET addresses) and is stopped by PID on exit; every
loop is bounded in count and time.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from harness.http import envelope  # noqa: E402
from harness.mesh import MeshNet, MeshRouter  # noqa: E402
from harness.pki import DOMAIN, domain_ca, issue, use_ca  # noqa: E402
from harness.poll import wait_for  # noqa: E402
from harness.procs import Binaries  # noqa: E402

SIZES = [int(x) for x in os.environ.get("BENCH_MESH_SIZES", "1000 10000").split()]
STEADY_S = float(os.environ.get("BENCH_MESH_STEADY_S", "60"))
LEASE_RUNS = int(os.environ.get("BENCH_MESH_LEASE_RUNS", "5"))
# Convergence between routers of one domain CA, whose advertisements
# carry the origin router's certificate (BENCH_MESH_CERTS=1), or with
# pinned keys only (the default, the figures of earlier runs).
CERTS = os.environ.get("BENCH_MESH_CERTS", "0") == "1"
REGISTER_THREADS = 4


def binaries() -> Binaries:
    bin_dir = Path(os.environ.get("BENCH_MESH_BIN_DIR", REPO / "target" / "release"))
    if "BENCH_MESH_BIN_DIR" not in os.environ:
        subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "agentd", "-p", "agent-gw", "--bins"],
                       cwd=REPO, check=True, stdin=subprocess.DEVNULL)
    return Binaries(bin_dir / "agentd", bin_dir / "agentctl", bin_dir / "agent-gw")


class Bench:
    def __init__(self, bins: Binaries, dir: Path) -> None:
        self.bins = bins
        self.dir = dir
        self.net = MeshNet()
        self.routers: Dict[str, MeshRouter] = {}

    def router(self, name: str, **kw: Any) -> MeshRouter:
        limits = {"max_routes": 100000, "log_level": "warn"}
        limits.update(kw.pop("agentd", {}))
        # All of A's routes have one origin router: let B hold them all
        # (the default, 2 500 per origin router and neighbour, dropped
        # 7 500 of the 10k scenario's).
        arpx = {"max_routes_per_origin": 100000, **kw.pop("arpx", {})}
        r = MeshRouter(self.bins, self.net, self.net.add_router(name), self.dir / name, agentd=limits, arpx=arpx,
                       **kw)
        self.routers[name] = r
        return r

    def link(self, a: str, b: str, peer_b_at_a: bool = True, peer_a_at_b: bool = True) -> None:
        self.net.link(a, b)
        ra, rb = self.routers[a], self.routers[b]
        if peer_b_at_a:
            ra.peer_with(rb, max_routes=100000)
        if peer_a_at_b:
            rb.peer_with(ra, max_routes=100000)

    def close(self) -> None:
        for r in self.routers.values():
            r.stop()
        self.net.close()


def fib_routes(r: MeshRouter) -> int:
    return int(r.stack.http.healthz()["fib"]["routes"])


def register_many(r: MeshRouter, n: int, prefix: str, lease: int = 3600) -> List[str]:
    ids: List[Optional[str]] = [None] * n

    def work(k: int) -> None:
        for i in range(k, n, REGISTER_THREADS):
            for attempt in range(3):
                try:
                    ids[i] = r.register(f"{prefix}{i}", lease=lease)["route_id"]
                    break
                except (ConnectionError, OSError):
                    # A keep-alive connection the gateway closed as idle
                    # just as it was reused: register is an upsert, retry.
                    if attempt == 2:
                        raise

    threads = [threading.Thread(target=work, args=(k,)) for k in range(REGISTER_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [i for i in ids if i]


def wait_converged(r: MeshRouter, peer: str, n: int, fib_want: int, timeout: float) -> float:
    """Monotonic time at which `r` first held `n` eligible paths from
    `peer` (its session established, i.e. the snapshot complete, with
    routes_in = n) and its gateway's FIB `fib_want` routes. Polled every
    2 ms; the RIB check is one small `agentctl peers`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p = r.peer(peer) or {}
        if p.get("state") == "established" and p.get("routes_in", 0) >= n and fib_routes(r) >= fib_want:
            return time.monotonic()
        time.sleep(0.002)
    raise TimeoutError(f"{r.name}: {n} paths from {peer} not eligible within {timeout}s ({r.peer(peer)})")


def peer_ids(r: MeshRouter) -> set:
    return {x["route_id"] for x in r.peer_routes() if x.get("eligible", True)}


def rss_kib(r: MeshRouter) -> int:
    return r.stack.agentd.rss_kib()["VmRSS"]


def convergence(bins: Binaries, n: int) -> Dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bm-", dir="/tmp") as d:
        b = Bench(bins, Path(d))
        try:
            a, rb = b.router("router-a"), b.router("router-b")
            b.link("router-a", "router-b", peer_a_at_b=False)
            if CERTS:
                # Routers of one domain CA: every advertisement carries
                # its origin router's certificate (DESIGN §3).
                ca = domain_ca(bins, Path(d) / "ca", DOMAIN)
                for r in (a, rb):
                    use_ca(r, ca, issue(bins, ca, r, r.name, DOMAIN))
            a.start()
            rb.start()
            ids = set(register_many(a, n, "c"))
            base = fib_routes(rb)
            rss0 = rss_kib(rb)
            sender0 = a.stack.agentd.rss_kib()
            rb.peer_with(a, max_routes=100000)
            t0 = time.monotonic()
            rb.reload()
            t1 = wait_converged(rb, "router-a", n, base + n, timeout=120)
            exact = peer_ids(rb) == ids
            rss1 = rss_kib(rb)
            sender1 = a.stack.agentd.rss_kib()
            return {"routes": n, "certificates": CERTS,
                    # The sender's snapshot: its peak (VmHWM) over its
                    # RSS before, and what stays after.
                    "sender_rss_kib_before": sender0["VmRSS"],
                    "sender_peak_kib_before": sender0["VmHWM"],
                    "sender_peak_kib_during": sender1["VmHWM"],
                    "sender_rss_kib_after": sender1["VmRSS"],
                    "reload_to_eligible_ms": round((t1 - t0) * 1000, 1), "exact_set": exact,
                    "agentd_rss_kib_before": rss0, "agentd_rss_kib_after": rss1,
                    "agentd_rss_kib_per_1k_peer_routes": round((rss1 - rss0) * 1000 / n, 1)}
        finally:
            b.close()


def chain(b: Bench, n: int):
    a, rb, c = b.router("router-a"), b.router("router-b", reflector=True), b.router("router-c")
    b.link("router-a", "router-b")
    b.link("router-b", "router-c")
    for r in (a, rb, c):
        r.start()
    rb.wait_established("router-a")
    rb.wait_established("router-c")
    ids = register_many(a, n, "s", lease=30)
    wait_for("C to hold A's routes", lambda: peer_ids(c) >= set(ids), timeout=60)
    return a, rb, c, ids


def arpx_counters(r: MeshRouter) -> Dict[str, int]:
    """agentd's `arpx.*` counters (`agentctl stats --json`)."""
    counters = r.stack.ctl_json("stats").get("counters", {})
    return {k: int(v) for k, v in counters.items() if k.startswith("arpx.")}


def message_count(counters: Dict[str, int], direction: str) -> int:
    """Update and Withdraw messages sent (`out`) or received (`in`)."""
    return counters.get(f"arpx.updates_{direction}", 0) + counters.get(f"arpx.withdraws_{direction}", 0)


def route_count(counters: Dict[str, int], direction: str) -> int:
    """Routes advertised plus route ids withdrawn in those messages."""
    return counters.get(f"arpx.routes_{direction}", 0) + counters.get(f"arpx.withdrawn_{direction}", 0)


def reflector_and_steady(bins: Binaries) -> Dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bm-", dir="/tmp") as d:
        b = Bench(bins, Path(d))
        try:
            a, rb, c, ids = chain(b, 1000)
            renew_stop = threading.Event()
            renewals = [0]

            def renewer() -> None:
                # Renew every route every 18 s (0.6 × 30 s), spread evenly.
                deadline = time.monotonic() + STEADY_S + 120
                i = 0
                while not renew_stop.is_set() and time.monotonic() < deadline:
                    a.stack.http.post("/agent/v1/renew", {"route_id": ids[i % len(ids)], "lease_seconds": 30})
                    renewals[0] += 1
                    i += 1
                    renew_stop.wait(18.0 / len(ids))

            t = threading.Thread(target=renewer, daemon=True)
            t.start()
            # Reflector reconvergence: B restarts with a new boot epoch.
            base = fib_routes(c) - len(peer_ids(c))
            rb.stop()
            wait_for("C to lose B's routes", lambda: not peer_ids(c), timeout=30)
            t0 = time.monotonic()
            rb.stack.agentd.start()
            t1 = wait_converged(c, "router-b", len(ids), base + len(ids), timeout=60)
            rb.stack.wait_gw_ready() if rb.stack.gw.alive() else rb.stack.start_gw()
            exact = peer_ids(c) == set(ids)
            reflector = {"routes": len(ids), "restart_to_eligible_ms": round((t1 - t0) * 1000, 1), "exact_set": exact}

            # Steady state under renewals.
            time.sleep(2)
            a0, c0, r0 = arpx_counters(a), arpx_counters(c), renewals[0]
            t_s = time.monotonic()
            renew_stop.wait(STEADY_S)
            a1, c1, r1 = arpx_counters(a), arpx_counters(c), renewals[0]
            elapsed = time.monotonic() - t_s
            renew_stop.set()
            t.join(timeout=5)
            sent = message_count(a1, "out") - message_count(a0, "out")
            got = message_count(c1, "in") - message_count(c0, "in")
            routes_sent = route_count(a1, "out") - route_count(a0, "out")
            steady = {"routes": len(ids), "seconds": round(elapsed, 1), "renewals": r1 - r0,
                      "a_messages_sent_per_min": round(sent * 60 / elapsed, 2),
                      "a_route_entries_sent_per_min": round(routes_sent * 60 / elapsed, 2),
                      "c_messages_received_per_min": round(got * 60 / elapsed, 2)}

            # Lease end two hops away.
            lags = []
            for k in range(LEASE_RUNS):
                t_sent = time.monotonic()
                rid = a.register(f"lease{k}", capability=f"lease.end{k}", lease=3)["route_id"]
                t_ans = time.monotonic()
                env = envelope(f"lease.end{k}", {})
                wait_for("C to route it", lambda: c.stack.http.post("/agent/v1/route", env).status == 200, timeout=10)
                deadline_lo, deadline_hi = t_sent + 3, t_ans + 3
                while time.monotonic() < deadline_lo - 0.2:
                    time.sleep(0.01)
                end = deadline_hi + 5
                t_ref = None
                while time.monotonic() < end:
                    if c.stack.http.post("/agent/v1/route", env).status != 200:
                        t_ref = time.monotonic()
                        break
                if t_ref is None:
                    raise TimeoutError(f"{rid} still routable at C 5 s after its deadline")
                lags.append({"upper_ms": round((t_ref - deadline_lo) * 1000, 1),
                             "lower_ms": round((t_ref - deadline_hi) * 1000, 1)})
            ups = [x["upper_ms"] for x in lags]
            lease = {"runs": lags, "median_upper_ms": statistics.median(ups), "max_upper_ms": max(ups)}
            return {"reflector_reconvergence": reflector, "steady_state": steady, "lease_end_two_hops": lease}
        finally:
            b.close()


def main() -> int:
    bins = binaries()
    out: Dict[str, Any] = {"binaries": str(bins.agentd.parent), "convergence": []}
    for n in SIZES:
        out["convergence"].append(convergence(bins, n))
        print(json.dumps(out["convergence"][-1]), flush=True)
    out.update(reflector_and_steady(bins))
    path = REPO / "target" / "bench" / "mesh.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
