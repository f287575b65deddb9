#!/usr/bin/env python3
"""`make bench` (memory part): does agentd give memory back after a
transient table? Prints JSON (and writes target/bench/memory.json).

One router R in a network namespace with a pinned neighbour `rogue`
(played by tests/harness/arpx_wire.py over a real ARPX session: TLS 1.3,
signed advertisements). The neighbour sends a snapshot of N routes
(BENCH_MEMORY_ROUTES, 10,000), then withdraws them all, then leaves.
R's agentd VmRSS is read from /proc at each step: baseline (session up,
no routes), peak (all N held), after the withdraw, after the session
ended.

Binaries: target/release unless BENCH_MEMORY_BIN_DIR names another
directory (e.g. target/debug). Everything runs in namespaces this script
creates (TEST-NET addresses) and is stopped by PID on exit; every wait is
bounded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

from harness import arpx_wire as w  # noqa: E402
from harness.mesh import ARPX_PORT, MeshNet, MeshRouter, PeerSpec  # noqa: E402
from harness.poll import wait_for  # noqa: E402
from harness.procs import Binaries  # noqa: E402

ROUTES = int(os.environ.get("BENCH_MEMORY_ROUTES", "10000"))
PER_FRAME = 200
WITHDRAW_PER_FRAME = 1000
WAIT_S = 300.0


def binaries() -> Binaries:
    bin_dir = Path(os.environ.get("BENCH_MEMORY_BIN_DIR", REPO / "target" / "release"))
    if "BENCH_MEMORY_BIN_DIR" not in os.environ:
        subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "agentd", "-p", "agent-gw", "--bins"],
                       cwd=REPO, check=True, stdin=subprocess.DEVNULL)
    return Binaries(bin_dir / "agentd", bin_dir / "agentctl", bin_dir / "agent-gw")


def rss_kib(r: MeshRouter) -> int:
    return r.stack.agentd.rss_kib()["VmRSS"]


def settled_rss(r: MeshRouter) -> int:
    """VmRSS once two reads 0.5 s apart agree within 64 KiB (at most 10 s):
    what the daemon holds, not a moment inside a burst."""
    last = rss_kib(r)
    for _ in range(20):
        time.sleep(0.5)
        now = rss_kib(r)
        if abs(now - last) <= 64:
            return now
        last = now
    return last


def run(bins: Binaries, dir: Path) -> Dict[str, Any]:
    net = MeshNet()
    try:
        r = MeshRouter(bins, net, net.add_router("router-r"), dir / "router-r",
                       agentd={"max_routes": 100000, "log_level": "warn"},
                       arpx={"max_routes_per_origin": ROUTES + 100})
        key = Ed25519PrivateKey.generate()
        r.peers.append(PeerSpec("rogue", "192.0.2.1", {
            "router_id": "rogue", "address": "192.0.2.1", "port": ARPX_PORT,
            "key_fingerprint": w.fingerprint_of(key), "max_routes": ROUTES + 100,
        }))
        r._write_peers()
        r.start()
        wait_for("R to listen", lambda: r.peer("rogue") is not None, timeout=20)

        ads = [w.RouteAd(f"mem-{i}", "rogue", ["rogue"], capability="mem.cap").sign(key) for i in range(ROUTES)]
        peer = w.RoguePeer(key, "rogue", dir)
        peer.connect(r.ns.mgmt_addr, ARPX_PORT, source=r.ns.mgmt_host_addr, timeout=WAIT_S)
        peer.send(w.open_msg("rogue", boot_epoch=int(time.time())))
        assert (peer.recv() or {}).get("type") == "open"
        lock = threading.Lock()
        stop = threading.Event()

        def heartbeats() -> None:
            while not stop.wait(0.5):
                with lock:
                    peer.send(w.heartbeat())

        beat = threading.Thread(target=heartbeats, daemon=True)
        beat.start()
        wait_for("the session", lambda: (r.peer("rogue") or {}).get("state") == "snapshot", timeout=10)
        baseline = settled_rss(r)

        seq = 0
        with lock:
            peer.send(w.snapshot_begin(1))
            for i in range(0, ROUTES, PER_FRAME):
                seq += 1
                peer.send(w.update(seq, ads[i:i + PER_FRAME]))
            peer.send(w.snapshot_end(1))
        t0 = time.monotonic()
        wait_for(f"R to hold {ROUTES} routes",
                 lambda: (r.peer("rogue") or {}).get("routes_in") == ROUTES, timeout=WAIT_S, interval=0.2)
        learn_s = time.monotonic() - t0
        peak = settled_rss(r)

        with lock:
            for i in range(0, ROUTES, WITHDRAW_PER_FRAME):
                seq += 1
                peer.send(w.withdraw(seq, [f"mem-{k}" for k in range(i, min(i + WITHDRAW_PER_FRAME, ROUTES))]))
        wait_for("R to hold none", lambda: (r.peer("rogue") or {}).get("routes_in") == 0, timeout=WAIT_S, interval=0.2)
        after_withdraw = settled_rss(r)

        stop.set()
        beat.join(timeout=5)
        peer.close()
        wait_for("the session to end", lambda: not (r.peer("rogue") or {}).get("established"), timeout=20)
        after_close = settled_rss(r)
        r.stop()
        return {
            "routes": ROUTES,
            "binaries": str(bins.agentd.parent),
            "learn_s": round(learn_s, 2),
            "rss_kib": {
                "baseline": baseline,
                "peak": peak,
                "after_withdraw": after_withdraw,
                "after_session_end": after_close,
            },
            "kept_after_withdraw_kib": after_withdraw - baseline,
        }
    finally:
        net.close()


def main() -> int:
    bins = binaries()
    with tempfile.TemporaryDirectory(prefix="bm-", dir="/tmp") as d:
        result = run(bins, Path(d))
    out = REPO / "target" / "bench" / "memory.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
