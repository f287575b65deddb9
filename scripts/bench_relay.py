#!/usr/bin/env python3
"""`make bench` (relay part): what the relay costs over the same number of
hops without one, measured in one run: JSON in target/bench/relay.json, a
table on stdout (issue 22, docs/relay.md).

Routers in network namespaces, all of one domain (certificates from one
domain CA, as bench_peer.py): C peered with A; B behind a NAT router
(nftables masquerade, nothing gets in, harness/relay.py) with A as its
relay; D behind a plain forwarding router (no NAT, no firewall: the
same namespaces and veths) peered with A (A a reflector). Each router runs agentd +
agent-gw of the router build (`release`). One Rust echo backend
(`agent-gw/examples/bench_local.rs backend`) runs in B's namespace and one
in D's, registered there with the same intent under two tenants' routes
(`relay.echo` at B, `peer.echo` at D). The load generator runs in this
script's namespace and reaches C over its management veth. Rows:

  direct  load generator → backend at B
  relay   → C's gateway → A's gateway → tunnel (h2, roles reversed) →
          B's gateway → backend (C → relay → B)
  relay_nonat → the relay path to E, a relay client behind the same
          plain router as D: the tunnel without a NAT in its way (what
          the relay itself costs, apart from the NAT's conntrack)
  samehop → C's gateway → A's gateway → h2+mTLS to D through the
          forwarding router → D's gateway → backend (the same hops, no
          NAT, no relay)

Bodies BENCH_RELAY_SIZES (1 KiB, 64 KiB, 1 MiB): p50/p99 at concurrency
1 and throughput at concurrency 16, rows interleaved in rotating order
for BENCH_RELAY_ROUNDS rounds, medians over rounds; each gateway's RSS
before and after. Goals: the relay row's p50 within 10 % of samehop's and
its throughput at least 90 % of samehop's, every size; no size fails (any
error ends the run with the reason).

Big bodies (BENCH_RELAY_BIG, 16 MiB; rows relay and samehop, concurrency
1 and 4, BENCH_RELAY_BIG_ROUNDS rounds): p50 and throughput, and each
gateway's peak RSS during the load above its RSS when the load began
(sampled every 5 ms). C, where the calls enter, reads each body whole
(it decides the call on the envelope): its growth is the baseline. A,
the relay, passes bodies on as they arrive (data-plane.md, "Passing a
call through"): goal, A's growth at c4 below a quarter of C's.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "scripts"))

import bench_local as bl  # noqa: E402
import bench_peer as bp  # noqa: E402
from harness.config import Section  # noqa: E402
from harness.mesh import ARPX_PORT, PEER_PORT, SDK_PORT, MeshNet, PeerSpec  # noqa: E402
from harness.relay import nat_box  # noqa: E402

ROWS = ["direct", "relay", "relay_nonat", "samehop"]
ROUNDS = int(os.environ.get("BENCH_RELAY_ROUNDS", "7"))
SIZES = [int(x) for x in os.environ.get("BENCH_RELAY_SIZES", "1024 65536 1048576").split()]
P50_GOAL = 1.10
RPS_GOAL = 0.90
MIB = 1024 * 1024
BIG = int(os.environ.get("BENCH_RELAY_BIG", str(16 * MIB)))
BIG_ROUNDS = int(os.environ.get("BENCH_RELAY_BIG_ROUNDS", "3"))
BIG_ROWS = ["relay", "samehop"]
# (concurrency, requests) of the big-body loads: bounded in time.
BIG_LOADS = ((1, 8), (4, 16))


def requests_for(size: int) -> Tuple[int, int]:
    """(c1, c16) request counts: fewer for big bodies, bounded in time."""
    n1 = int(os.environ.get("BENCH_RELAY_N1", "500"))
    n16 = int(os.environ.get("BENCH_RELAY_N16", "2000"))
    if size >= MIB:
        return max(50, n1 // 10), max(160, n16 // 10)
    return n1, n16


def forwarder(fwd, d, d_in, a, d_wan, via: str = "router-d") -> None:
    """`fwd` routes between the router `d` (named `via`) and A, nothing
    else."""
    for argv in (["ip", "-n", d.ns.netns, "route", "add", "default", "via", d_in.addr_of("fwd")],
                 ["ip", "-n", a.ns.netns, "route", "add", f"{ipaddress.ip_interface(d_in.addr_of(via) + '/30').network}",
                  "via", d_wan.addr_of("fwd")],
                 ["ip", "netns", "exec", fwd.netns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]):
        subprocess.run(argv, check=True, capture_output=True, stdin=subprocess.DEVNULL, timeout=20)


def register(r, intent: str, endpoint: str) -> None:
    r.stack.register({"route_id": f"{intent.replace('.', '-')}", "intent": intent, "version": 1,
                      "origin": f"agent://{bl.TENANT}/{intent.replace('.', '-')}", "endpoint": endpoint,
                      "tenant": bl.TENANT, "lease_seconds": 3600})


def body_of(intent: str, size: int) -> bytes:
    env = json.loads(bl.envelope_of_size(size))
    env["intent"] = intent
    return json.dumps(env).encode()


class PeakRss:
    """Samples the RSS of some processes every 5 ms while a load runs:
    the peak above what each held when it started."""

    def __init__(self, pids: Dict[str, int]) -> None:
        self.pids = pids
        self.start = {k: bp.rss_of(pid)["VmRSS_kib"] for k, pid in pids.items()}
        self.peak = dict(self.start)
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        deadline = time.monotonic() + bp.LOAD_TIMEOUT_S
        while not self.stop.is_set() and time.monotonic() < deadline:
            for k, pid in self.pids.items():
                self.peak[k] = max(self.peak[k], bp.rss_of(pid)["VmRSS_kib"])
            time.sleep(0.005)

    def __enter__(self) -> "PeakRss":
        self.t.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.stop.set()
        self.t.join(timeout=10)

    def growth(self) -> Dict[str, int]:
        return {k: self.peak[k] - self.start[k] for k in self.pids}


def big_bodies(tool: Path, urls: Dict[str, str], intents: Dict[str, str], work: Path,
               gws: Dict[str, int], watch: Dict[str, Dict[str, int]]) -> Dict[str, Any]:
    """The big-body rows: latency, throughput and each gateway's peak RSS
    growth, medians over rounds, rows interleaved."""
    files = {}
    for row in BIG_ROWS:
        files[row] = work / f"body-{row}-big.json"
        files[row].write_bytes(body_of(intents[row], BIG))
    runs: Dict[str, Dict[int, List[Tuple[Dict[str, Any], Dict[str, int]]]]] = {
        r: {c: [] for c, _ in BIG_LOADS} for r in BIG_ROWS}
    for rnd in range(BIG_ROUNDS):
        order = BIG_ROWS[rnd % 2:] + BIG_ROWS[:rnd % 2]
        for row in order:
            for conc, n in BIG_LOADS:
                with PeakRss(gws) as peak:
                    r = bp.load(tool, urls[row], files[row], conc, n, watch[row])
                runs[row][conc].append((r, peak.growth()))
        bp.log(f"{BIG >> 20} MiB round {rnd + 1}/{BIG_ROUNDS}: " + "  ".join(
            f"{row} c{c} {runs[row][c][-1][0]['p50_us'] / 1000:.1f}ms "
            f"A+{runs[row][c][-1][1]['gw[router-a]'] >> 10}MiB C+{runs[row][c][-1][1]['gw[router-c]'] >> 10}MiB"
            for row in BIG_ROWS for c, _ in BIG_LOADS))
    out: Dict[str, Any] = {"body_bytes": BIG, "rounds": BIG_ROUNDS,
                           "loads": [{"concurrency": c, "requests": n} for c, n in BIG_LOADS]}
    for row in BIG_ROWS:
        out[row] = {
            f"c{c}": {
                "p50_us": bp.med([r["p50_us"] for r, _ in runs[row][c]]),
                "throughput_rps": bp.med([r["throughput_rps"] for r, _ in runs[row][c]], 2),
                "peak_rss_growth_kib": {k: bp.med([g[k] for _, g in runs[row][c]], 0) for k in gws},
            }
            for c, _ in BIG_LOADS
        }
    rel = out["relay"][f"c{BIG_LOADS[-1][0]}"]["peak_rss_growth_kib"]
    out["relay_growth_a_to_c"] = round(rel["gw[router-a]"] / max(1, rel["gw[router-c]"]), 3)
    out["relay_to_samehop"] = {
        f"c{c}": {"p50": round(out["relay"][f"c{c}"]["p50_us"] / out["samehop"][f"c{c}"]["p50_us"], 3),
                  "throughput": round(out["relay"][f"c{c}"]["throughput_rps"]
                                      / out["samehop"][f"c{c}"]["throughput_rps"], 3)}
        for c, _ in BIG_LOADS}
    return out


def main() -> int:
    if os.geteuid() != 0:
        raise SystemExit("bench_relay: needs root (network namespaces)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if shutil.which("nft") is None:
        bp.log("installing nftables (the NAT router in front of B)")
        subprocess.run(["apt-get", "install", "-y", "-qq", "nftables"], check=False, stdin=subprocess.DEVNULL,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}, capture_output=True, timeout=600)
        if shutil.which("nft") is None:
            raise SystemExit("bench_relay: needs nftables (apt-get install nftables)")
    bins, tool = bp.binaries()
    work = Path(tempfile.mkdtemp(prefix="agentd-bench-relay-", dir="/tmp"))
    net = MeshNet()
    routers: Dict[str, Any] = {}
    procs: List[bp.Proc] = []
    try:
        ca = work / "ca"
        ca.mkdir()
        bp.pki(bins, "init-domain", "--domain", bp.DOMAIN, "--out", str(ca))
        for n in ("router-a", "router-b", "router-c", "router-d", "router-e"):
            # A reflects D's routes to C (samehop); a relay passes its
            # clients' routes on by itself.
            routers[n] = bp.make_router(bins, net, work, n, ca, reflector=n == "router-a")
        a, b, c, d, e = (routers[n] for n in ("router-a", "router-b", "router-c", "router-d", "router-e"))
        for r in routers.values():
            r.cfg.section("gateway").options["max_request_bytes"] = max(4 * MIB, BIG + MIB)
        nat = net.add_router("nat")
        inside = net.link("router-b", "nat")
        wan = net.link("nat", "router-a")
        net.link("router-a", "router-c")
        a.peer_with(c, pin=False)
        c.peer_with(a, pin=False)
        nat_box(nat, [(b.ns, inside)], [(a.ns, wan)])
        # D sits behind a plain router (forwarding, no NAT, no firewall):
        # the same namespaces and veths as B behind its NAT.
        fwd = net.add_router("fwd")
        d_in = net.link("router-d", "fwd")
        d_wan = net.link("fwd", "router-a")
        forwarder(fwd, d, d_in, a, d_wan)
        # E: a relay client of A behind the same plain router (the tunnel
        # without a NAT in its way).
        e_in = net.link("router-e", "fwd")
        forwarder(fwd, e, e_in, a, d_wan, via="router-e")
        a.peers.append(PeerSpec("router-d", d_in.addr_of("router-d"),
                                {"router_id": "router-d", "address": d_in.addr_of("router-d"), "port": ARPX_PORT}))
        a._write_peers()
        d.peers.append(PeerSpec("router-a", d_wan.addr_of("router-a"),
                                {"router_id": "router-a", "address": d_wan.addr_of("router-a"), "port": ARPX_PORT}))
        d._write_peers()
        a.cfg.sections.append(Section("relay", "relay", {"mode": "server"}))
        b.cfg.sections.append(Section("relay", "relay", {
            "mode": "client", "server": [f"{wan.addr_of('router-a')}:{ARPX_PORT}"], "data_port": PEER_PORT}))
        e.cfg.sections.append(Section("relay", "relay", {
            "mode": "client", "server": [f"{d_wan.addr_of('router-a')}:{ARPX_PORT}"], "data_port": PEER_PORT}))
        for r in routers.values():
            r.start()
        a.wait_established("router-b", timeout=30)
        a.wait_established("router-c")
        a.wait_established("router-d")
        a.wait_established("router-e", timeout=30)

        backends = {}
        for r in (b, d, e):
            p = bp.Proc(f"backend[{r.name}]", r.ns.exec_argv([str(tool), "backend", r.ns.mgmt_addr]),
                        work / f"backend-{r.name}.log", stdout=subprocess.PIPE)
            procs.append(p)
            line = p.p.stdout.readline().decode().strip()
            if not line.startswith("listening "):
                raise SystemExit(f"bench_relay: backend in {r.name} did not start: {line!r}")
            backends[r.name] = (p, f"http://{line.split()[1]}/invoke")
        register(b, "relay.echo", backends["router-b"][1])
        register(d, "peer.echo", backends["router-d"][1])
        register(e, "nonat.echo", backends["router-e"][1])
        c_url = f"http://{c.ns.mgmt_addr}:{SDK_PORT}/agent/v1/invoke"
        urls = {"direct": backends["router-b"][1], "relay": c_url, "relay_nonat": c_url, "samehop": c_url}
        intents = {"direct": "relay.echo", "relay": "relay.echo", "relay_nonat": "nonat.echo", "samehop": "peer.echo"}
        for intent in ("relay.echo", "nonat.echo", "peer.echo"):
            c.stack.wait_routable(json.loads(body_of(intent, 256)), timeout=30)
        gw = {n: r.stack.gw.pid for n, r in routers.items()}
        watch = {
            "direct": {"backend": backends["router-b"][0].pid},
            "relay": {"backend": backends["router-b"][0].pid,
                      **{f"gw[{n}]": gw[n] for n in ("router-c", "router-a", "router-b")}},
            "relay_nonat": {"backend": backends["router-e"][0].pid,
                            **{f"gw[{n}]": gw[n] for n in ("router-c", "router-a", "router-e")}},
            "samehop": {"backend": backends["router-d"][0].pid,
                      **{f"gw[{n}]": gw[n] for n in ("router-c", "router-a", "router-d")}},
        }
        # Every row works, over the path it names, before anything is
        # measured.
        for row in ROWS:
            why = bp.check_row(row, urls[row], body_of(intents[row], 1024), routers)
            if why:
                raise SystemExit(f"bench_relay: row {row} does not work: {why}")
        for row, hop in (("relay", "router-a"), ("relay_nonat", "router-a"), ("samehop", "router-a")):
            resp = c.stack.http.post("/agent/v1/route", json.loads(body_of(intents[row], 256)))
            rid = resp.json()["route"]["route_id"] if resp.status == 200 else None
            if not rid or not str(rid).endswith("@" + hop):
                raise SystemExit(f"bench_relay: row {row}: C does not route via {hop}: {resp.describe()}")
        relay_route = [r for r in a.stack.routes() if r.get("capability") == "relay.echo"]
        if not relay_route or relay_route[0].get("source") != "relay":
            raise SystemExit(f"bench_relay: A does not hold B's route as a relay route: {relay_route}")
        bp.log("rows working: " + ", ".join(ROWS))

        daemons = {f"agent_gw[{n}]": r.stack.gw.pid for n, r in routers.items()}
        rss_before = {k: bp.rss_of(pid) for k, pid in daemons.items()}
        results: List[Dict[str, Any]] = []
        for size in SIZES:
            n1, n16 = requests_for(size)
            files = {}
            for row in ROWS:
                f = work / f"body-{row}-{size}.json"
                f.write_bytes(body_of(intents[row], size))
                files[row] = f
            runs: Dict[str, List[Tuple[Dict[str, Any], Dict[str, Any]]]] = {r: [] for r in ROWS}
            for rnd in range(ROUNDS):
                k = rnd % len(ROWS)
                for name in ROWS[k:] + ROWS[:k]:
                    r1 = bp.load(tool, urls[name], files[name], 1, n1, watch[name])
                    r16 = bp.load(tool, urls[name], files[name], 16, n16, watch[name])
                    runs[name].append((r1, r16))
                bp.log(f"{size:>8} B round {rnd + 1}/{ROUNDS}: " + "  ".join(
                    f"{n} {runs[n][-1][0]['p50_us']:.0f}us/{runs[n][-1][1]['throughput_rps']:.0f}rps" for n in ROWS))
            res: Dict[str, Any] = {"body_bytes": size, "requests": {"c1": n1, "c16": n16}}
            for name in ROWS:
                res[name] = bp.summarise(runs[name])
            res["ratios_to_direct"] = {n: bp.ratio(res[n], res["direct"]) for n in ROWS if n != "direct"}
            res["relay_to_samehop"] = bp.ratio(res["relay"], res["samehop"])
            res["relay_nonat_to_samehop"] = bp.ratio(res["relay_nonat"], res["samehop"])
            results.append(res)
        rss_after = {k: bp.rss_of(pid) for k, pid in daemons.items()}
        big = big_bodies(tool, urls, intents, work,
                         {f"gw[{n}]": gw[n] for n in ("router-c", "router-a", "router-b", "router-d")}, watch)
        goals = {
            str(r["body_bytes"]): {
                "p50_within_10pct_of_samehop": r["relay_to_samehop"]["p50_c1"] <= P50_GOAL,
                "rps_at_least_90pct_of_samehop": r["relay_to_samehop"]["throughput_c16"] >= RPS_GOAL,
            }
            for r in results
        }
        goals["big"] = {"relay_growth_below_quarter_of_ingress": big["relay_growth_a_to_c"] < 0.25}
        out = {
            "benchmark": "bench_relay",
            "rows": ROWS,
            "topology": {
                "direct": "load generator -> backend in router-b's namespace (mgmt veth)",
                "relay": "-> router-c agent-gw -> router-a agent-gw (relay) -> tunnel to router-b behind nftables "
                         "NAT (h2, roles reversed) -> router-b agent-gw -> backend",
                "relay_nonat": "-> router-c agent-gw -> router-a agent-gw (relay) -> tunnel to router-e behind the "
                               "plain forwarding router -> router-e agent-gw -> backend",
                "samehop": "-> router-c agent-gw -> router-a agent-gw -> h2+mTLS through a plain forwarding "
                           "router -> router-d agent-gw -> backend (same hops, no NAT, no relay)",
            },
            "binaries": str(bins.agent_gw.parent),
            "machine": {"cpus": os.cpu_count(), "kernel": os.uname().release, "loadavg_at_end": os.getloadavg()},
            "rounds": ROUNDS,
            "statistic": "median over rounds; rows interleaved in rotating order every round",
            "results": results,
            "big_bodies": big,
            "goals": goals,
            "rss_kib": {"before_load": rss_before, "after_load": rss_after},
        }
        dest = REPO / "target" / "bench" / "relay.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(out, indent=2) + "\n")
        print(f"{'body':>8} | " + " | ".join(f"{n:>22}" for n in ROWS) + " | relay/samehop p50, rps")
        for r in results:
            cells = [f"{r[n]['c1']['p50_us']:>7.0f}us p99 {r[n]['c1']['p99_us']:>6.0f} {r[n]['c16']['throughput_rps']:>5.0f}/s"
                     for n in ROWS]
            q = r["relay_to_samehop"]
            print(f"{r['body_bytes']:>8} | " + " | ".join(cells) + f" | {q['p50_c1']:.2f}x, {q['throughput_c16']:.2f}x")
        for row in BIG_ROWS:
            print(f"{BIG >> 20} MiB {row:>8}: " + "  ".join(
                f"c{c} p50 {big[row][f'c{c}']['p50_us'] / 1000:.1f} ms {big[row][f'c{c}']['throughput_rps']:.2f}/s "
                f"peak RSS growth A {big[row][f'c{c}']['peak_rss_growth_kib']['gw[router-a]']} KiB "
                f"C {big[row][f'c{c}']['peak_rss_growth_kib']['gw[router-c]']} KiB" for c, _ in BIG_LOADS))
        print(f"{BIG >> 20} MiB relay/samehop: " + ", ".join(
            f"{c} p50 {v['p50']:.2f}x rps {v['throughput']:.2f}x" for c, v in big["relay_to_samehop"].items())
            + f"; relay growth A/C at c{BIG_LOADS[-1][0]} {big['relay_growth_a_to_c']:.2f}")
        print("RSS KiB before -> after load: " + ", ".join(
            f"{k} {rss_before[k]['VmRSS_kib']}->{rss_after[k]['VmRSS_kib']}" for k in daemons))
        missed = [f"{size} B {g}" for size, gs in goals.items() for g, ok in gs.items() if not ok]
        print("goals: " + ("all met" if not missed else "missed: " + "; ".join(missed)))
        print(f"wrote {dest.relative_to(REPO)}")
        return 0
    except BaseException:
        for r in routers.values():
            bp.log(f"---- {r.name}\n{r.stack.logs()[-2500:]}")
        raise
    finally:
        for p in reversed(procs):
            p.stop()
        for r in routers.values():
            r.stop()
        net.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
