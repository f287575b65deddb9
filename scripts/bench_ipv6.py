#!/usr/bin/env python3
"""`make bench` (IPv6 part): what calling an agent at its own /128 costs,
against the LAN gateway path and direct HTTP, measured in one run: JSON
in target/bench/ipv6.json, a table on stdout (issue 23, docs/ipv6.md).

A router (agentd + agent-gw of the `release` build, auth `jwt`, its
certificate from a domain CA) in a network namespace, with the address
service in `routed-prefix` mode on 2001:db8:55::/56 (addresses on the
router's loopback), and a client namespace on a veth to it that routes
the prefix to the router. The Rust echo backend
(`agent-gw/examples/bench_local.rs backend`) runs in the router's
namespace on its address of that veth and is registered with
`public_ipv6`. The load generator runs in the client namespace, one veth
hop from the router on every row:

  direct  → the backend, plain HTTP/1.1
  lan     → agent-gw's SDK listener (plain HTTP/1.1, the LAN API) → backend
  v6      → the agent's /128 on :7443 (TLS 1.3, HTTP/1.1, the router's
            certificate verified against the domain CA) → backend

Each keeps its connections (one per concurrent worker): p50/p99 at
concurrency 1 and 8 are per-call costs on kept connections. The TLS
handshake is measured apart (`bench_local handshake`: fresh connections
one after another, TCP connect and TLS handshake timed separately), and
so is the plain TCP connect of the LAN listener. Bodies BENCH_V6_SIZES
(1 KiB, 64 KiB); rows interleaved in rotating order for BENCH_V6_ROUNDS
rounds, medians over rounds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "scripts"))

import bench_local as bl  # noqa: E402
import bench_peer as bp  # noqa: E402
from harness.config import Section  # noqa: E402
from harness.jwt import TenantKey  # noqa: E402
from harness.mesh import MeshNet, MeshRouter  # noqa: E402

ROWS = ["direct", "lan", "v6"]
ROUNDS = int(os.environ.get("BENCH_V6_ROUNDS", "5"))
SIZES = [int(x) for x in os.environ.get("BENCH_V6_SIZES", "1024 65536").split()]
N1 = int(os.environ.get("BENCH_V6_N1", "1000"))
N8 = int(os.environ.get("BENCH_V6_N8", "4000"))
HANDSHAKES = int(os.environ.get("BENCH_V6_HANDSHAKES", "200"))
PREFIX = "2001:db8:55::/56"
ROUTER, CLIENT = "2001:db8:ff::2", "2001:db8:ff::1"
DOMAIN = "bench.example"


def ip(netns: str, *argv: str) -> None:
    subprocess.run(["ip", "-n", netns, *argv], check=True, capture_output=True, stdin=subprocess.DEVNULL, timeout=20)


def run_load(tool: Path, ns: str, env: Dict[str, str], url: str, body: Path, conc: int, n: int,
             watch: Dict[str, int]) -> Dict[str, Any]:
    warmup = max(20, n // (10 * conc))
    before = {k: bp.cpu_ns(pid) for k, pid in watch.items()}
    argv = ["ip", "netns", "exec", ns, "env", *[f"{k}={v}" for k, v in env.items()],
            str(tool), "load", url, str(body), str(conc), str(n), str(warmup)]
    p = subprocess.run(argv, capture_output=True, timeout=bp.LOAD_TIMEOUT_S, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise SystemExit(f"bench_ipv6: load failed on {url} (c={conc}): {p.stderr.decode(errors='replace')}")
    r = json.loads(p.stdout)
    if r["errors"]:
        raise SystemExit(f"bench_ipv6: {r['errors']} errors on {url} (c={conc}): {r['first_error']}")
    sent = conc * (warmup + -(-n // conc))
    r["cpu_us_per_request"] = {k: round((bp.cpu_ns(pid) - before[k]) / 1000 / sent, 2) for k, pid in watch.items()}
    return r


def handshakes(tool: Path, ns: str, env: Dict[str, str], url: str) -> Dict[str, Any]:
    argv = ["ip", "netns", "exec", ns, "env", *[f"{k}={v}" for k, v in env.items()],
            str(tool), "handshake", url, str(HANDSHAKES)]
    p = subprocess.run(argv, capture_output=True, timeout=bp.LOAD_TIMEOUT_S, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise SystemExit(f"bench_ipv6: handshakes to {url}: {p.stderr.decode(errors='replace')}")
    return json.loads(p.stdout)


def main() -> int:
    if os.geteuid() != 0:
        raise SystemExit("bench_ipv6: needs root (network namespaces)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    bins, tool = bp.binaries()
    work = Path(tempfile.mkdtemp(prefix="agentd-bench-ipv6-", dir="/tmp"))
    net = MeshNet()
    procs: List[bp.Proc] = []
    r = None
    try:
        ca = work / "ca"
        ca.mkdir()
        bp.pki(bins, "init-domain", "--domain", DOMAIN, "--out", str(ca))
        lab = TenantKey.generate()
        lifted = {"rate_per_second": 1_000_000, "rate_burst": 1_000_000}
        r = MeshRouter(bins, net, net.add_router("router-a"), work / "router-a", agentd={"log_level": "warn"},
                       gateway={"auth": "jwt", **lifted},
                       tenants=[(bl.TENANT, {"name": bl.TENANT, "jwt_key": [lab.uci_value], **lifted})])
        cert = r.dir / "router.pem"
        bp.pki(bins, "issue-router", "--ca-key", str(ca / "domain-ca.key"), "--ca-cert", str(ca / "domain-ca.pem"),
               "--router-id", "router-a", "--domain", DOMAIN, "--key", str(r.dir / "identity.key"), "--out", str(cert))
        r.cfg.section("agentd").options.update(domain=DOMAIN, domain_ca=str(ca / "domain-ca.pem"),
                                               router_cert=str(cert),
                                               # The backend sits on the client's link.
                                               endpoint_allow_prefix=["2001:db8:ff::/64"])
        client_ns = net.add_router("client")
        link = net.link("router-a", "client")
        ip(r.ns.netns, "-6", "addr", "add", f"{ROUTER}/64", "dev", link.a_if, "nodad")
        ip(client_ns.netns, "-6", "addr", "add", f"{CLIENT}/64", "dev", link.b_if, "nodad")
        ip(client_ns.netns, "-6", "route", "add", PREFIX, "via", ROUTER)
        r.cfg.sections.append(Section("ipv6", "ipv6", {"mode": "routed-prefix", "prefix": PREFIX,
                                                       "interface": "lo", "upstream_interface": link.a_if}))
        # The SDK listener on every address: the client reaches it over
        # the same veth as the agent's address.
        argv = r.stack.gw.argv
        argv[argv.index("--listen") + 1] = "[::]:7446"
        r.start()

        backend = bp.Proc("backend", r.ns.exec_argv([str(tool), "backend", ROUTER]), work / "backend.log",
                          stdout=subprocess.PIPE)
        procs.append(backend)
        line = backend.p.stdout.readline().decode().strip()
        if not line.startswith("listening "):
            raise SystemExit(f"bench_ipv6: backend did not start: {line} {backend.log_text()}")
        backend_addr = line.split()[1]
        aud = r.stack.http.get("/agent/v1/authentication").json()["authentication"]["audience"]
        token = lab.mint(tenant=bl.TENANT, sub=f"agent://{bl.TENANT}/echo",
                         scopes=("agent.register", "agent.invoke"), aud=aud, lifetime=3600)
        got = r.stack.register({"intent": bl.INTENT, "version": 1, "origin": f"agent://{bl.TENANT}/echo",
                                "endpoint": f"http://{backend_addr}/invoke", "tenant": bl.TENANT,
                                "lease_seconds": 3600, "public_ipv6": True},
                               headers={"Authorization": f"Bearer {token}"})
        addr = got.get("public_ipv6")
        if not addr:
            raise SystemExit(f"bench_ipv6: no address served: {got}")
        gw_pid = r.stack.gw.proc.pid
        watch = {"gw": gw_pid, "backend": backend.pid}
        plain = {"BENCH_BEARER": token}
        tls = {"BENCH_BEARER": token, "BENCH_TLS_NAME": "router-a", "BENCH_TLS_CA": str(ca / "domain-ca.pem")}
        urls = {
            "direct": (f"http://{backend_addr}/invoke", {}),
            "lan": (f"http://[{ROUTER}]:7446/agent/v1/invoke", plain),
            "v6": (f"https://[{addr}]:7443/agent/v1/invoke", tls),
        }
        rss_before = bp.rss_of(gw_pid)["VmRSS_kib"]
        out: Dict[str, Any] = {"rounds": ROUNDS, "address": addr, "sizes": {}}
        for size in SIZES:
            body = work / f"body-{size}.json"
            body.write_bytes(bl.envelope_of_size(size))
            runs: Dict[str, Dict[int, List[Dict[str, Any]]]] = {row: {1: [], 8: []} for row in ROWS}
            for rnd in range(ROUNDS):
                order = ROWS[rnd % len(ROWS):] + ROWS[:rnd % len(ROWS)]
                for row in order:
                    url, env = urls[row]
                    n1 = N1 if size < 65536 else N1 // 2
                    runs[row][1].append(run_load(tool, client_ns.netns, env, url, body, 1, n1, watch))
                    runs[row][8].append(run_load(tool, client_ns.netns, env, url, body, 8, N8, watch))
                bp.log(f"{size} B round {rnd + 1}/{ROUNDS}: " + "  ".join(
                    f"{row} {runs[row][1][-1]['p50_us']:.0f}us/{runs[row][8][-1]['throughput_rps']:.0f}rps"
                    for row in ROWS))
            rows = {}
            for row in ROWS:
                rows[row] = {
                    f"c{c}": {
                        "p50_us": bp.med([x["p50_us"] for x in runs[row][c]]),
                        "p99_us": bp.med([x["p99_us"] for x in runs[row][c]]),
                        "throughput_rps": bp.med([x["throughput_rps"] for x in runs[row][c]], 0),
                        "gw_cpu_us_per_request": bp.med([x["cpu_us_per_request"]["gw"] for x in runs[row][c]], 2),
                    }
                    for c in (1, 8)
                }
            rows["ratios"] = {
                f"{a}/{b}": {f"c{c}": {"p50": round(rows[a][f"c{c}"]["p50_us"] / rows[b][f"c{c}"]["p50_us"], 3),
                                       "throughput": round(rows[a][f"c{c}"]["throughput_rps"]
                                                           / rows[b][f"c{c}"]["throughput_rps"], 3)}
                             for c in (1, 8)}
                for a, b in (("v6", "lan"), ("v6", "direct"), ("lan", "direct"))
            }
            out["sizes"][str(size)] = rows
        hs_v6 = [handshakes(tool, client_ns.netns, tls, urls["v6"][0]) for _ in range(3)]
        hs_lan = [handshakes(tool, client_ns.netns, {}, urls["lan"][0]) for _ in range(3)]
        out["connect"] = {
            "v6_tcp_p50_us": bp.med([h["tcp_p50_us"] for h in hs_v6]),
            "v6_tls_handshake_p50_us": bp.med([h["tls_p50_us"] for h in hs_v6]),
            "v6_tls_handshake_p99_us": bp.med([h["tls_p99_us"] for h in hs_v6]),
            "lan_tcp_p50_us": bp.med([h["tcp_p50_us"] for h in hs_lan]),
            "connections_per_run": HANDSHAKES,
        }
        out["gw_rss_kib"] = {"before": rss_before, "after": bp.rss_of(gw_pid)["VmRSS_kib"]}
        dest = REPO / "target" / "bench" / "ipv6.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(out, indent=2) + "\n")
        print(f"\n{'size':>7} {'row':>7} {'c1 p50':>9} {'c1 p99':>9} {'c8 p50':>9} {'c8 p99':>9} {'c8 rps':>8}")
        for size, rows in out["sizes"].items():
            for row in ROWS:
                c1, c8 = rows[row]["c1"], rows[row]["c8"]
                print(f"{size:>7} {row:>7} {c1['p50_us']:>7.0f}us {c1['p99_us']:>7.0f}us "
                      f"{c8['p50_us']:>7.0f}us {c8['p99_us']:>7.0f}us {c8['throughput_rps']:>8.0f}")
            print(f"{'':>7} v6/lan p50 c1 {rows['ratios']['v6/lan']['c1']['p50']}, "
                  f"rps c8 {rows['ratios']['v6/lan']['c8']['throughput']}")
        c = out["connect"]
        print(f"TLS handshake at the /128: p50 {c['v6_tls_handshake_p50_us']:.0f}us, "
              f"p99 {c['v6_tls_handshake_p99_us']:.0f}us (TCP connect {c['v6_tcp_p50_us']:.0f}us; "
              f"LAN TCP connect {c['lan_tcp_p50_us']:.0f}us)")
        print(f"wrote {dest}")
        return 0
    finally:
        for p in procs:
            p.stop()
        if r is not None:
            r.stop()
        net.close()


if __name__ == "__main__":
    sys.exit(main())
