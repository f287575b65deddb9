#!/usr/bin/env python3
"""`make bench` (footprint part, issue 25): what the suite costs a router.
JSON in target/bench/footprint.json, a table on stdout.

- Binary sizes: the multi-call binary of the `router-openwrt` profile
  (what the feed installs; `scripts/router_build.py` builds it and its
  links) and the `release` profile's three binaries, plus the binary
  compressed as a package carries it (gzip -9, what an .ipk's data.tar.gz
  does; apk's is the same deflate).
- Memory: agentd + agent-gw of the router build (the links), on loopback,
  with 0, 1k, 10k and 50k local routes (registered over the LAN API, each
  its own origin, long leases): RSS, PSS (the two processes share the
  binary's pages: PSS splits them) and anonymous memory of each from
  /proc/PID/smaps_rollup, and the bytes of anonymous memory per route,
  summed over both daemons, against the 0-route baseline.

Knobs: BENCH_FOOTPRINT_ROUTES ("1000 10000 50000"), --no-build (use what
target/router-openwrt holds), BENCH_FOOTPRINT_ENDPOINTS: "shared" (every
route's endpoint on 127.0.0.1:9, one probed endpoint: the figures of
earlier runs) or "distinct" (each route on a port of its own, as agents
each listening on their own host:port are; one probed endpoint per
route). Processes are ours, stopped by PID.
"""

from __future__ import annotations

import gzip
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from harness.config import base_config  # noqa: E402
from harness.procs import Binaries, Stack  # noqa: E402

ROUTER_DIR = REPO / "target" / "router-openwrt"
# The daemons measured: the router build's links, or — for a comparison —
# another directory's agentd/agentctl/agent-gw (BENCH_FOOTPRINT_BIN_DIR).
BIN_DIR = Path(os.environ.get("BENCH_FOOTPRINT_BIN_DIR", ROUTER_DIR))
# Route counts to measure at; 0 routes (idle) is always measured, so it is
# not a count of its own (and has no bytes per route).
COUNTS = sorted({int(x) for x in os.environ.get("BENCH_FOOTPRINT_ROUTES", "1000 10000 50000").split()} - {0})
THREADS = 4
ENDPOINTS = os.environ.get("BENCH_FOOTPRINT_ENDPOINTS", "shared")
if ENDPOINTS not in ("shared", "distinct"):
    raise SystemExit(f"bench_footprint: BENCH_FOOTPRINT_ENDPOINTS must be shared or distinct, not {ENDPOINTS!r}")


def endpoint(i: int) -> str:
    """Route `i`'s handler URL (loopback; nothing needs to listen)."""
    if ENDPOINTS == "shared":
        return f"http://127.0.0.1:9/a{i}"
    return f"http://127.0.0.{1 + i // 60000}:{1024 + i % 60000}/a{i}"


def log(msg: str) -> None:
    print(f"[bench_footprint] {msg}", file=sys.stderr, flush=True)


def sizes(build: bool) -> Dict[str, Any]:
    if build:
        subprocess.run([sys.executable, str(REPO / "scripts" / "router_build.py")], check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "agentd", "-p", "agent-gw", "--bins"],
                       cwd=REPO, check=True, stdin=subprocess.DEVNULL)
    suite = ROUTER_DIR / "agentd-suite"
    out: Dict[str, Any] = {"router_openwrt": {"agentd-suite": suite.stat().st_size,
                                              "gzip_9": len(gzip.compress(suite.read_bytes(), 9))}}
    release = REPO / "target" / "release"
    out["release"] = {n: (release / n).stat().st_size for n in ("agentd", "agent-gw", "agentctl")
                      if (release / n).is_file()}
    return out


def rollup(pid: int) -> Dict[str, int]:
    out: Dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("Rss", "Pss", "Anonymous"):
                out[key.lower() + "_kib"] = int(value.split()[0])
    return out


def register_all(stack: Stack, n: int, start: int) -> None:
    """`n` registrations, each its own origin, over a few kept
    connections."""
    host, port = stack.cfg.sdk_host, stack.cfg.sdk_port
    errors: List[str] = []

    def worker(lo: int, hi: int) -> None:
        conn = http.client.HTTPConnection(host, port, timeout=30)
        for i in range(lo, hi):
            body = json.dumps({"intent": f"fp.c{i % 50}", "version": 1, "origin": f"agent://fp/a{i}",
                               "endpoint": endpoint(i), "tenant": "fp", "lease_seconds": 3600})
            conn.request("POST", "/agent/v1/register", body=body, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            raw = r.read()
            if r.status != 200 and not errors:
                errors.append(f"{r.status} {raw[:200]!r}")
        conn.close()

    per = -(-n // THREADS)
    threads = [threading.Thread(target=worker, args=(start + k * per, min(start + n, start + (k + 1) * per)))
               for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    if errors:
        raise SystemExit(f"bench_footprint: registration failed: {errors[0]}")


def settle(stack: Stack, pids: Dict[str, int]) -> Dict[str, Dict[str, int]]:
    """Memory once it stops moving (the gateway's replica catches up,
    allocators settle), within 20 s."""
    last = None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        now = {k: rollup(pid) for k, pid in pids.items()}
        if last is not None and all(abs(now[k]["anonymous_kib"] - last[k]["anonymous_kib"]) <= 8 for k in now):
            return now
        last = now
        time.sleep(1.0)
    return last or {k: rollup(pid) for k, pid in pids.items()}


def memory() -> Dict[str, Any]:
    links = Binaries(BIN_DIR / "agentd", BIN_DIR / "agentctl", BIN_DIR / "agent-gw")
    work = Path(tempfile.mkdtemp(prefix="agentd-bench-footprint-", dir="/tmp"))
    top = max(COUNTS + [0])
    cfg = base_config(work / "r", agentd={"log_level": "warn", "max_routes": top + 1000,
                                          "allow_loopback_endpoints": 1},
                      gateway={"max_routes": top + 1000, "rate_per_second": 1_000_000,
                               "rate_burst": 1_000_000},
                      tenants=[("fp", {"name": "fp", "max_routes": top + 1000})])
    stack = Stack(links, cfg)
    try:
        stack.start()
        pids = {"agentd": stack.agentd.proc.pid, "agent-gw": stack.gw.proc.pid}
        rows: Dict[str, Any] = {"0": settle(stack, pids)}
        held = 0
        for n in sorted(COUNTS):
            log(f"registering up to {n} routes")
            register_all(stack, n - held, held)
            held = n
            rows[str(n)] = settle(stack, pids)
        base = rows["0"]
        per_route = {}
        for n in COUNTS:
            grew = sum(rows[str(n)][k]["anonymous_kib"] - base[k]["anonymous_kib"] for k in pids) * 1024
            per_route[str(n)] = {
                "both": round(grew / n),
                **{k: round((rows[str(n)][k]["anonymous_kib"] - base[k]["anonymous_kib"]) * 1024 / n)
                   for k in pids},
            }
        return {"endpoints": ENDPOINTS, "by_routes": rows, "anonymous_bytes_per_route": per_route}
    finally:
        stack.stop()


def issue_table(out: Dict[str, Any]) -> List[str]:
    """Issue 25's figures table, refilled: this run's sizes and memory, the
    peer benchmark's gateway RSS (target/bench/peer.json) and the smallest
    cgroup (target/bench/cgroup.json) when `make bench` wrote them."""
    mib = 1024 * 1024
    s, m = out["sizes"], out["memory"]
    rows = [f"| binary, router-openwrt (stripped) | {s['router_openwrt']['agentd-suite'] / mib:.2f} MiB "
            f"(gzip -9 {s['router_openwrt']['gzip_9'] / mib:.2f}) | ≤ 4 MiB |"]
    idle = m["by_routes"]["0"]
    rows.append("| RSS / PSS idle, 0 routes, both daemons | "
                f"{sum(idle[k]['rss_kib'] for k in idle) / 1024:.1f} / {sum(idle[k]['pss_kib'] for k in idle) / 1024:.1f}"
                " MiB | ≤ 6 MiB |")
    for n, b in m["anonymous_bytes_per_route"].items():
        rows.append(f"| anonymous bytes per route, both daemons, {int(n):,} routes | {b['both']} B "
                    f"(agentd {b['agentd']}, agent-gw {b['agent-gw']}) | ≤ 600 B at 10k |")
    peer = REPO / "target" / "bench" / "peer.json"
    if peer.is_file():
        rss = json.loads(peer.read_text()).get("rss_kib", {})
        if "quiet" in rss:
            gws = [k for k in rss["before_load"] if k.startswith("agent_gw[")]
            rows.append("| gateway RSS before → after the peer benchmark's load → "
                        f"{rss['quiet_after_s']:.0f} s later (MiB) | " + ", ".join(
                            f"{k[9:-1]} {rss['before_load'][k]['VmRSS_kib'] / 1024:.1f} → "
                            f"{rss['after_load'][k]['VmRSS_kib'] / 1024:.1f} → {rss['quiet'][k]['VmRSS_kib'] / 1024:.1f}"
                            for k in gws) + " | within 1 MiB of idle |")
    cg = REPO / "target" / "bench" / "cgroup.json"
    if cg.is_file():
        c = json.loads(cg.read_text())
        rows.append(f"| smallest memory cgroup (cgroup {c['cgroup']}), 2 mTLS peers, discovery, 1k routes, "
                    f"8 KiB echo c16 | {c['smallest_limit_mib']} MiB (unlimited peak "
                    f"{c['unlimited_peak_bytes'] / mib:.1f} MiB) | ≤ 8 MiB |")
    return ["| what | now | goal |", "|---|---|---|"] + rows


def main() -> int:
    build = "--no-build" not in sys.argv[1:]
    out = {"sizes": sizes(build)}
    out["memory"] = memory()
    dest = REPO / "target" / "bench" / "footprint.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=2) + "\n")
    s = out["sizes"]
    print(f"agentd-suite (router-openwrt): {s['router_openwrt']['agentd-suite']} B, "
          f"gzip -9 {s['router_openwrt']['gzip_9']} B; release: {s['release']}")
    print(f"{'routes':>7} {'agentd RSS':>11} {'PSS':>7} {'anon':>7} {'gw RSS':>8} {'PSS':>7} {'anon':>7}  (KiB)")
    for n, r in out["memory"]["by_routes"].items():
        a, g = r["agentd"], r["agent-gw"]
        print(f"{n:>7} {a['rss_kib']:>11} {a['pss_kib']:>7} {a['anonymous_kib']:>7} "
              f"{g['rss_kib']:>8} {g['pss_kib']:>7} {g['anonymous_kib']:>7}")
    for n, b in out["memory"]["anonymous_bytes_per_route"].items():
        print(f"anonymous bytes per route at {n} ({ENDPOINTS} endpoints): {b['both']} (agentd {b['agentd']}, agent-gw {b['agent-gw']})")
    print("\n".join(issue_table(out)))
    print(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
