#!/usr/bin/env python3
"""`make bench-local`: direct HTTP to a backend vs the same backend through
an nginx reverse proxy vs through agent-gw, measured in one run on this
machine.

For 128 B, 1 KiB, 8 KiB and 64 KiB request bodies (a Nexus envelope padded to the
size): p50/p99 latency at concurrency 1 and throughput at concurrency 16.
Every path uses the same Rust echo backend and the same Rust load generator
(`agent-gw/examples/bench_local.rs`), so the difference is the hop.

Trustworthy on a noisy shared machine: the paths are measured interleaved
(direct, nginx, gw, ... in a rotating order) for BENCH_ROUNDS rounds and the
JSON reports the median over rounds, so background noise hits every path
alike. nginx (one worker, upstream keep-alive, like agent-gw's one thread
and pool) shows what one extra loopback proxy hop costs at all; agent-gw's
ratio to nginx is what is left to optimise.

agent-gw runs in the router build (`release`: opt-level "z" with every
dependency at "s", LTO, panic=abort) -- the headline -- and, when
BENCH_PROFILES names it, the `bench-release` build (same, all opt-level
3) for comparison. RSS
(VmRSS/VmHWM) of agentd, agent-gw and nginx idle and after the load.
Output: target/bench/local.json and a table on stdout.

`--callgrind`: instead of timing, count the instructions agent-gw executes
per request (valgrind callgrind, c=1, every size and profile) -- the
deterministic figure for before/after comparisons of the hot path; JSON in
target/bench/local-callgrind.json.

`BENCH_COMPARE_BIN_DIR=<dir>` (and `BENCH_COMPARE_NAME`): the agentd and
agent-gw in <dir>, another build such as an earlier commit's, measured as
one more interleaved gateway path (and in `--callgrind`), with the
headline's ratio to it: a before/after from one run.

`hyper1` row: agent-gw/examples/bench_proxy.rs of the headline build, the
local path's floor -- hyper's HTTP/1.1 server and client on one
current-thread runtime with the gateway's allocator, forwarding each
request as it came over a kept connection, and nothing else. hyper1/nginx
is what the design's HTTP stack costs; gw/hyper1 is what the gateway adds.
`hyper1e` row: the same proxy doing, in addition, the envelope work every
call needs (read whole, validated and decoded by the gateway's own
decoder, the handler body rebuilt): the floor of the design's per-call
work that costs the most.

`split_handler` row: a Python `http.server` handler (scripts/split_handler.py,
head and body in two writes with Nagle on, as the nexilume SDK's handler
server) at c=1, called directly and through each gateway (p50 ratio).

Bounded: fixed request counts (BENCH_N1 at c=1, BENCH_N16 at c=16) and a
timeout on every load run. Loopback only; everything started here is
stopped by PID on exit. nginx is installed with apt-get when missing (root
only; otherwise the nginx column is left out and the JSON says why).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
# The first profile is the headline (what routers run).
PROFILES = os.environ.get("BENCH_PROFILES", "release bench-release").split()
# BENCH_COMPARE_BIN_DIR: agentd and agent-gw of another build (an earlier
# commit, say), measured in the same run as one more gateway path,
# gw[BENCH_COMPARE_NAME] -- a before/after on this noisy machine is only
# worth anything interleaved. Not built here.
COMPARE: Dict[str, Path] = {}
if os.environ.get("BENCH_COMPARE_BIN_DIR"):
    COMPARE[os.environ.get("BENCH_COMPARE_NAME", "compare")] = Path(os.environ["BENCH_COMPARE_BIN_DIR"])
    PROFILES += list(COMPARE)
N1 = int(os.environ.get("BENCH_N1", "2000"))
N16 = int(os.environ.get("BENCH_N16", "8000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))
SIZES = [int(x) for x in os.environ.get("BENCH_SIZES", "128 1024 8192 65536").split()]
# Issue 21's goal for gateway memory: RSS after the load at most idle + 2 MiB.
RSS_GROWTH_GOAL_KIB = 2048
# Issue 25's: once the load is over, back within 1 MiB of idle. "Over" is
# QUIET_S after the last call: the gateway keeps handler connections for
# reuse up to 10 s (forward::pool), then closes them and gives the
# allocator's free pages back on its next quiet tick (core::relief).
RSS_RETURN_GOAL_KIB = 1024
QUIET_S = float(os.environ.get("BENCH_QUIET_S", "15"))
# The floor rows (agent-gw/examples/bench_proxy.rs): hyper alone, and
# hyper with the envelope work DESIGN asks of every call.
FLOORS = ["hyper1", "hyper1e"]
INTENT = "b.e"
# The split_handler row: a Python http.server handler (head and body in
# two writes, Nagle on, as nexilume's), c=1 only: each direct call waits
# for the client's delayed ACK, so few calls tell.
SPLIT_INTENT = "b.s"
SPLIT_N = int(os.environ.get("BENCH_SPLIT_N", "200"))
# Short names so that a whole envelope fits in the smallest body size.
TENANT = "b"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def target_dir(profile: str) -> Path:
    return COMPARE.get(profile, REPO / "target" / profile)


def build(profile: str) -> None:
    argv = ["cargo", "build", "--quiet", "-p", "agentd", "-p", "agent-gw", "--bins", "--example", "bench_local",
            "--example", "bench_proxy"]
    argv += ["--release"] if profile == "release" else ["--profile", profile]
    log(f"$ {' '.join(argv)}")
    subprocess.run(argv, cwd=REPO, check=True, stdin=subprocess.DEVNULL)


class Proc:
    def __init__(self, name: str, argv: List[str], log_path: Path, stdout=None) -> None:
        self.name = name
        self.log_path = log_path
        self.log_file = open(log_path, "ab")
        self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout or self.log_file, stderr=self.log_file)

    def rss(self) -> Dict[str, int]:
        out: Dict[str, int] = {}
        with open(f"/proc/{self.p.pid}/status", encoding="ascii") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                    out[key + "_kib"] = int(value.split()[0])
        return out

    def cpu_ns(self) -> int:
        """CPU time used so far (ns, /proc/PID/schedstat)."""
        with open(f"/proc/{self.p.pid}/schedstat", encoding="ascii") as f:
            return int(f.read().split()[0])

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=5)
        self.log_file.close()


def wait_for(what: str, check, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001
            last = exc
        time.sleep(0.05)
    raise SystemExit(f"bench: timed out waiting for {what} ({last!r})")


def http_json(url: str, body: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"}, method="POST" if data else "GET")
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())


def envelope_of_size(size: int, intent: str = INTENT) -> bytes:
    env = {
        "version": "1.0",
        "intent": intent,
        "intent_version": 1,
        "task_id": "t",
        "source_agent": "c",  # a bare name is allowed
        "tenant": TENANT,
        "hop_limit": 8,
        "payload": "",
    }
    base = len(json.dumps(env, separators=(",", ":")).encode())
    if base > size:
        raise SystemExit(f"bench: envelope alone is {base} bytes > {size}")
    env["payload"] = "x" * (size - base)
    raw = json.dumps(env, separators=(",", ":")).encode()
    assert len(raw) == size
    return raw


def load(tool: Path, url: str, body_file: Path, concurrency: int, requests: int,
         watch: Optional[Dict[str, "Proc"]] = None) -> Dict[str, Any]:
    """One load run; with `watch`, also the CPU time each watched process
    spent per request (warm-up requests included in the count)."""
    warmup = max(20, requests // (10 * concurrency))
    watch = watch or {}
    before = {k: p.cpu_ns() for k, p in watch.items()}
    argv = [str(tool), "load", url, str(body_file), str(concurrency), str(requests), str(warmup)]
    p = subprocess.run(argv, capture_output=True, timeout=300, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise SystemExit(f"bench: load generator failed on {url} (c={concurrency}): {p.stderr.decode(errors='replace')}")
    result = json.loads(p.stdout)
    if result["errors"]:
        raise SystemExit(f"bench: {result['errors']} errors on {url}: {result['first_error']}")
    sent = concurrency * (warmup + -(-requests // concurrency))
    result["cpu_us_per_request"] = {k: (p.cpu_ns() - before[k]) / 1000 / sent for k, p in watch.items()}
    return result


def ensure_nginx() -> Tuple[Optional[str], str]:
    """The nginx binary, installing Debian's package when missing."""
    found = shutil.which("nginx") or (os.path.exists("/usr/sbin/nginx") and "/usr/sbin/nginx") or None
    if found:
        return found, "installed"
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return None, "nginx missing and cannot install it (needs root and apt-get)"
    log("$ apt-get install -y nginx")
    p = subprocess.run(["apt-get", "install", "-y", "nginx"], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
    if p.returncode != 0:
        return None, "apt-get install nginx failed: " + p.stderr.decode(errors="replace")[-300:]
    found = shutil.which("nginx") or (os.path.exists("/usr/sbin/nginx") and "/usr/sbin/nginx") or None
    return found, "installed by bench_local" if found else "nginx not found after install"


def start_nginx(binary: str, work: Path, backend: str,
                wrap: Optional[List[str]] = None) -> Tuple["Proc", str]:
    """One nginx worker, in the foreground, proxying to `backend` over
    upstream keep-alive connections: the comparison point for one proxy
    hop on one core. `wrap` runs it under another program (callgrind)."""
    root = work / "nginx"
    root.mkdir()
    port = free_port()
    conf = root / "nginx.conf"
    temp = "\n".join(f"  {k}_temp_path {root}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf.write_text(f"""daemon off;
master_process off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
{temp}
  # keepalive_requests: nginx closes a keep-alive connection after 1000
  # requests by default; the load generator keeps one per worker.
  upstream backend {{ server {backend}; keepalive 64; keepalive_requests 1000000; }}
  server {{
    listen 127.0.0.1:{port};
    keepalive_requests 1000000;
    tcp_nodelay on;
    # Bodies up to the largest size stay in memory (nginx would spill
    # larger ones to a temp file, and then waits for delayed ACKs).
    client_body_buffer_size 128k;
    client_max_body_size 1m;
    proxy_buffer_size 16k;
    proxy_buffers 8 16k;
    location / {{
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }}
  }}
}}
""")
    proc = Proc("nginx", (wrap or []) + [binary, "-p", str(root), "-e", str(root / "error.log"), "-c", str(conf)],
                work / "nginx.log")
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True

    wait_for("nginx", up, timeout=60.0 if wrap else 15.0)
    return proc, url


def start_gateway(profile: str, work: Path, backend_url: str, procs: List[Proc],
                  wrap: Optional[List[str]] = None, split_url: Optional[str] = None) -> Tuple[Proc, Proc, str]:
    """agentd + agent-gw of `profile` (own config, socket and port), with
    the backend registered as the handler of INTENT (and `split_url` as
    that of SPLIT_INTENT)."""
    bins = target_dir(profile)
    d = work / profile
    d.mkdir()
    port = free_port()
    sock = d / "agentd.sock"
    (d / "agentd.conf").write_text(
        "\n".join(
            [
                "config agentd 'main'",
                f"\toption router_id 'bench-{profile}'",
                f"\toption identity '{d}/identity.key'",
                f"\toption ipc_socket '{sock}'",
                f"\toption state_dir '{d}'",
                "\toption health_check 'off'",
                "\toption log_level 'warn'",
                "# LAB MODE: the benchmark's handlers listen on 127.0.0.1.",
                "\toption allow_loopback_endpoints '1'",
                "",
                "# LAB MODE: auth 'none' so the benchmark measures forwarding, not JWT checks.",
                "config gateway 'gateway'",
                f"\toption sdk_listen '127.0.0.1:{port}'",
                "\toption public_listen 'off'",
                "\toption admin_listen 'off'",
                "\toption peer_listen 'off'",
                "\toption auth 'none'",
                "\toption rate_per_second '1000000'",
                "\toption rate_burst '1000000'",
                "",
                f"config tenant '{TENANT}'",
                f"\toption name '{TENANT}'",
                "\toption rate_per_second '1000000'",
                "\toption rate_burst '1000000'",
                "",
                "config arpx 'arpx'",
                "\toption listen 'off'",
                "",
                "config discovery 'discovery'",
                "\toption enabled '0'",
                "",
            ]
        )
    )
    conf = str(d / "agentd.conf")
    agentd = Proc(f"agentd[{profile}]", [str(bins / "agentd"), "--config", conf, "-f"], d / "agentd.log")
    procs.append(agentd)
    wait_for("agentd socket", lambda: sock.exists())
    gw = Proc(f"agent-gw[{profile}]", (wrap or []) + [str(bins / "agent-gw"), "--config", conf, "-f"], d / "agent-gw.log")
    procs.append(gw)
    gw_url = f"http://127.0.0.1:{port}"
    wait_for("agent-gw /healthz", lambda: http_json(gw_url + "/healthz").get("control_plane") == "up",
             timeout=60.0 if wrap else 15.0)
    handlers = [(INTENT, "echo", backend_url)] + ([(SPLIT_INTENT, "split", split_url)] if split_url else [])
    for intent, name, url in handlers:
        http_json(
            gw_url + "/agent/v1/register",
            {
                "intent": intent,
                "origin": f"agent://{TENANT}/{name}",
                "endpoint": url,
                "tenant": TENANT,
                "lease_seconds": 3600,
            },
        )
    probe = {
        "version": "1.0", "intent": INTENT, "intent_version": 1, "task_id": "probe",
        "source_agent": f"agent://{TENANT}/c", "tenant": TENANT, "hop_limit": 8, "payload": {},
    }
    wait_for("route on agent-gw", lambda: http_json(gw_url + "/agent/v1/route", probe))
    return agentd, gw, gw_url + "/agent/v1/invoke"


def start_floor(work: Path, backend_addr: str, procs: List[Proc],
                wrap: Optional[List[str]] = None, envelope: bool = False) -> Tuple[Proc, str]:
    """The `hyper1` row: `bench_proxy` of the headline build -- the local
    path's floor, hyper's HTTP/1.1 server and client on one current-thread
    runtime with the gateway's allocator and nothing else
    (agent-gw/examples/bench_proxy.rs). With `envelope`, the `hyper1e`
    row: the same plus the envelope read whole, validated and decoded and
    the handler body rebuilt by the gateway's own code."""
    name = "hyper1e" if envelope else "hyper1"
    port = free_port()
    proc = Proc(name, (wrap or []) + [str(target_dir(PROFILES[0]) / "examples" / "bench_proxy"),
                                       f"127.0.0.1:{port}", backend_addr] + (["envelope"] if envelope else []),
                work / f"{name}.log", stdout=subprocess.PIPE)
    procs.append(proc)
    line = proc.p.stdout.readline().decode().strip()
    if not line.startswith("listening "):
        raise SystemExit(f"bench: bench_proxy did not start: {line!r}")
    return proc, f"http://127.0.0.1:{port}/invoke"


def split_handler_row(tool: Path, work: Path, split_url: str, gateways: List[Tuple[str, str]]) -> Dict[str, Any]:
    """c=1 latency of the split handler called directly and through each
    gateway, interleaved for ROUNDS rounds (medians)."""
    body = work / "body-split.json"
    body.write_bytes(envelope_of_size(128, SPLIT_INTENT))
    paths = [("direct", split_url)] + gateways
    runs: Dict[str, List[Dict[str, Any]]] = {n: [] for n, _ in paths}
    for rnd in range(ROUNDS):
        k = rnd % len(paths)
        for name, url in paths[k:] + paths[:k]:
            runs[name].append(load(tool, url, body, 1, SPLIT_N))
        log(f"split handler round {rnd + 1}/{ROUNDS}: "
            + "  ".join(f"{n} {runs[n][-1]['p50_us']:.0f}us" for n, _ in paths))
    row: Dict[str, Any] = {"body_bytes": 128, "requests_per_run": SPLIT_N, "paths": [n for n, _ in paths]}
    for name, _ in paths:
        row[name] = {key: median([r[key] for r in runs[name]]) for key in ("p50_us", "p99_us")}
    row["ratios"] = {f"{n}/direct p50": row[n]["p50_us"] / row["direct"]["p50_us"] for n, _ in gateways}
    return row


def goals(results: List[Dict[str, Any]], split_row: Dict[str, Any], rss_idle: Dict[str, Dict[str, int]],
          rss_loaded: Dict[str, Dict[str, int]], rss_quiet: Dict[str, Dict[str, int]],
          headline: str) -> Dict[str, Any]:
    """Issue 21's goals for the local path, per body size, for the router
    build: against nginx one hop, p50 at most 1.0x, c16 throughput at
    least 1.0x and the proxy CPU per request (c16) at most nginx's; the
    split handler's p50 through the gateway at most its direct p50; the
    gateway's RSS after the load at most idle + 2 MiB; and issue 25's:
    QUIET_S later, back within 1 MiB of idle."""
    out: Dict[str, Any] = {}
    for row in results:
        if "nginx" not in row:
            break
        g, n = row[headline], row["nginx"]
        out[str(row["body_bytes"])] = {
            "p50_at_most_nginx": g["c1"]["p50_us"] <= n["c1"]["p50_us"],
            "throughput_at_least_nginx": g["c16"]["throughput_rps"] >= n["c16"]["throughput_rps"],
            "cpu_per_request_at_most_nginx":
                g["cpu_us_per_request"]["proxy"]["c16"] <= n["cpu_us_per_request"]["proxy"]["c16"],
        }
    gw = "agent_gw" + headline[2:]
    out["split_handler"] = {"p50_at_most_direct": split_row[headline]["p50_us"] <= split_row["direct"]["p50_us"]}
    out["memory"] = {"rss_after_load_within_2mib_of_idle":
                     rss_loaded[gw]["VmRSS_kib"] <= rss_idle[gw]["VmRSS_kib"] + RSS_GROWTH_GOAL_KIB,
                     "rss_when_quiet_within_1mib_of_idle":
                     rss_quiet[gw]["VmRSS_kib"] <= rss_idle[gw]["VmRSS_kib"] + RSS_RETURN_GOAL_KIB}
    return out


def median(xs: List[float]) -> float:
    return round(statistics.median(xs), 1)


def summarise(runs: List[Tuple[Dict[str, Any], Dict[str, Any]]]) -> Dict[str, Any]:
    """Medians over rounds, plus every round's figures."""
    c1 = [r[0] for r in runs]
    c16 = [r[1] for r in runs]
    cpu = {
        k: {
            "c1": round(statistics.median([r["cpu_us_per_request"][k] for r in c1]), 2),
            "c16": round(statistics.median([r["cpu_us_per_request"][k] for r in c16]), 2),
        }
        for k in c1[0]["cpu_us_per_request"]
    }
    return {
        "cpu_us_per_request": cpu,
        "c1": {
            "p50_us": median([r["p50_us"] for r in c1]),
            "p90_us": median([r["p90_us"] for r in c1]),
            "p99_us": median([r["p99_us"] for r in c1]),
            "rounds_p50_us": [round(r["p50_us"], 1) for r in c1],
            "rounds_p99_us": [round(r["p99_us"], 1) for r in c1],
        },
        "c16": {
            "throughput_rps": median([r["throughput_rps"] for r in c16]),
            "p50_us": median([r["p50_us"] for r in c16]),
            "p99_us": median([r["p99_us"] for r in c16]),
            "rounds_throughput_rps": [round(r["throughput_rps"]) for r in c16],
        },
    }


def ratios(a: Dict[str, Any], b: Dict[str, Any]) -> Dict[str, float]:
    return {
        "p50_c1": round(a["c1"]["p50_us"] / b["c1"]["p50_us"], 3),
        "p99_c1": round(a["c1"]["p99_us"] / b["c1"]["p99_us"], 3),
        "throughput_c16": round(a["c16"]["throughput_rps"] / b["c16"]["throughput_rps"], 3),
    }


def callgrind(tool: Path) -> int:
    """`--callgrind`: instructions agent-gw executes per request (c=1),
    counted by valgrind's callgrind over BENCH_N1 requests after a
    warm-up -- deterministic where wall-clock latency on a shared machine
    is not -- and, as the baseline of the same run, the instructions
    nginx's one worker executes for the same requests on the same
    backend. Both count user space only (the kernel's share, the same
    syscalls on both paths, is not in either). Writes
    target/bench/local-callgrind.json."""
    if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        raise SystemExit("bench: --callgrind needs valgrind (apt-get install valgrind)")
    nginx_bin, nginx_note = ensure_nginx()
    work = Path(tempfile.mkdtemp(prefix="agentd-bench-cg-"))
    procs: List[Proc] = []
    out: Dict[str, Any] = {"benchmark": "bench_local --callgrind", "requests": N1, "ir_per_request": {},
                           "nginx": nginx_note}
    try:
        backend = Proc("backend", [str(tool), "backend"], work / "backend.log", stdout=subprocess.PIPE)
        procs.append(backend)
        backend_addr = backend.p.stdout.readline().decode().split()[1]
        backend_url = f"http://{backend_addr}/invoke"

        def count(name: str, proc: Proc, url: str, dump: Path) -> Dict[str, int]:
            pid = str(proc.p.pid)
            row: Dict[str, int] = {}
            for n, size in enumerate(SIZES, start=1):
                body_file = work / f"body-{size}.json"
                body_file.write_bytes(envelope_of_size(size))
                load(tool, url, body_file, 1, 200)
                subprocess.run(["callgrind_control", "-z", pid], check=True, capture_output=True)
                r = load(tool, url, body_file, 1, N1)
                subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
                part = Path(f"{dump}.{n}")
                wait_for(f"callgrind dump {part.name}", lambda: part.exists() and "totals:" in part.read_text())
                totals = next(int(line.split()[1]) for line in part.read_text().splitlines()
                              if line.startswith("totals:"))
                # Every request the load generator sent, warm-up included.
                sent = r["requests"] + max(20, N1 // 10)
                row[str(size)] = round(totals / sent)
                log(f"{name} {size:>5} B: {row[str(size)]} instructions/request")
            return row

        for profile in PROFILES:
            dump = work / f"cg-{profile}.out"
            wrap = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={dump}"]
            _, gw, url = start_gateway(profile, work, backend_url, procs, wrap)
            out["ir_per_request"][profile] = count(profile, gw, url, dump)
        for name in FLOORS:
            dump = work / f"cg-{name}.out"
            wrap = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={dump}"]
            floor, floor_url = start_floor(work, backend_addr, procs, wrap, envelope=name == "hyper1e")
            out["ir_per_request"][name] = count(name, floor, floor_url, dump)
        if nginx_bin:
            dump = work / "cg-nginx.out"
            wrap = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={dump}"]
            nginx, nginx_url = start_nginx(nginx_bin, work, backend_addr, wrap)
            procs.append(nginx)
            base = count("nginx", nginx, nginx_url + "/invoke", dump)
            out["ir_per_request"]["nginx"] = base
            out["ratio_to_nginx"] = {
                name: {size: round(n / base[size], 2) for size, n in out["ir_per_request"][name].items()}
                for name in PROFILES + FLOORS
            }
        dest = REPO / "target" / "bench" / "local-callgrind.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(out, indent=2) + "\n")
        print(json.dumps({k: out[k] for k in ("ir_per_request", "ratio_to_nginx") if k in out}))
        print(f"wrote {dest.relative_to(REPO)}")
        return 0
    finally:
        for p in reversed(procs):
            p.stop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    # SIGTERM (make interrupted) unwinds through the finally below, which
    # stops everything started here.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for profile in PROFILES:
        if profile not in COMPARE:
            build(profile)
    # One load generator and backend for every path: the optimised build
    # when there is one, so the tool itself adds as little as possible.
    tool_profile = "bench-release" if "bench-release" in PROFILES else PROFILES[0]
    tool = target_dir(tool_profile) / "examples" / "bench_local"
    if "--callgrind" in sys.argv[1:]:
        return callgrind(tool)
    nginx_bin, nginx_note = ensure_nginx()
    work = Path(tempfile.mkdtemp(prefix="agentd-bench-"))
    procs: List[Proc] = []
    try:
        backend = Proc("backend", [str(tool), "backend"], work / "backend.log", stdout=subprocess.PIPE)
        procs.append(backend)
        line = backend.p.stdout.readline().decode().strip()
        if not line.startswith("listening "):
            raise SystemExit(f"bench: backend did not start: {line!r}")
        backend_addr = line.split()[1]
        backend_url = f"http://{backend_addr}/invoke"
        split = Proc("split_handler", [sys.executable, str(REPO / "scripts" / "split_handler.py")],
                     work / "split.log", stdout=subprocess.PIPE)
        procs.append(split)
        line = split.p.stdout.readline().decode().strip()
        if not line.startswith("listening "):
            raise SystemExit(f"bench: split handler did not start: {line!r}")
        split_url = f"http://{line.split()[1]}/invoke"

        # name -> URL, in measuring order; daemons for the RSS report.
        paths: List[Tuple[str, str]] = [("direct", backend_url)]
        daemons: Dict[str, Proc] = {}
        # Whose CPU time is counted on each path: the backend always, plus the proxy.
        watch: Dict[str, Dict[str, Proc]] = {"direct": {"backend": backend}}
        if nginx_bin:
            nginx, nginx_url = start_nginx(nginx_bin, work, backend_addr)
            procs.append(nginx)
            daemons["nginx"] = nginx
            paths.append(("nginx", nginx_url + "/invoke"))
            watch["nginx"] = {"backend": backend, "proxy": nginx}
        for name in FLOORS:
            floor, floor_url = start_floor(work, backend_addr, procs, envelope=name == "hyper1e")
            daemons[name] = floor
            paths.append((name, floor_url))
            watch[name] = {"backend": backend, "proxy": floor}
        for profile in PROFILES:
            agentd, gw, url = start_gateway(profile, work, backend_url, procs, split_url=split_url)
            daemons[f"agentd[{profile}]"] = agentd
            daemons[f"agent_gw[{profile}]"] = gw
            paths.append((f"gw[{profile}]", url))
            watch[f"gw[{profile}]"] = {"backend": backend, "proxy": gw}

        rss_idle = {k: p.rss() for k, p in daemons.items()}
        results: List[Dict[str, Any]] = []
        for size in SIZES:
            body_file = work / f"body-{size}.json"
            body_file.write_bytes(envelope_of_size(size))
            runs: Dict[str, List[Tuple[Dict[str, Any], Dict[str, Any]]]] = {name: [] for name, _ in paths}
            for rnd in range(ROUNDS):
                # Rotate the order so no path always runs first or last.
                k = rnd % len(paths)
                for name, url in paths[k:] + paths[:k]:
                    c1 = load(tool, url, body_file, 1, N1, watch[name])
                    c16 = load(tool, url, body_file, 16, N16, watch[name])
                    runs[name].append((c1, c16))
                log(f"{size:>5} B round {rnd + 1}/{ROUNDS}: " + "  ".join(
                    f"{n} {runs[n][-1][0]['p50_us']:.1f}us" for n, _ in paths))
            row: Dict[str, Any] = {"body_bytes": size}
            for name, _ in paths:
                row[name] = summarise(runs[name])
            row["ratios"] = {}
            for profile in PROFILES:
                g = row[f"gw[{profile}]"]
                row["ratios"][f"gw[{profile}]/direct"] = ratios(g, row["direct"])
                if "nginx" in row:
                    row["ratios"][f"gw[{profile}]/nginx"] = ratios(g, row["nginx"])
            for other in COMPARE:
                row["ratios"][f"gw[{PROFILES[0]}]/gw[{other}]"] = ratios(row[f"gw[{PROFILES[0]}]"], row[f"gw[{other}]"])
            for name in FLOORS:
                row["ratios"][f"gw[{PROFILES[0]}]/{name}"] = ratios(row[f"gw[{PROFILES[0]}]"], row[name])
            if "nginx" in row:
                row["ratios"]["nginx/direct"] = ratios(row["nginx"], row["direct"])
                for name in FLOORS:
                    row["ratios"][f"{name}/nginx"] = ratios(row[name], row["nginx"])
            # Latency the hop adds on top of the direct call (c=1 p50).
            row["added_p50_us"] = {
                name: round(row[name]["c1"]["p50_us"] - row["direct"]["c1"]["p50_us"], 1)
                for name, _ in paths if name != "direct"
            }
            results.append(row)
        split_row = split_handler_row(tool, work, split_url, [(n, u) for n, u in paths if n.startswith("gw[")])
        rss_loaded = {k: p.rss() for k, p in daemons.items()}
        log(f"load over; RSS again in {QUIET_S:.0f} s")
        time.sleep(QUIET_S)
        rss_quiet = {k: p.rss() for k, p in daemons.items()}

        headline = f"gw[{PROFILES[0]}]"
        out = {
            "benchmark": "bench_local",
            "headline": f"{headline}: the router build (profile {PROFILES[0]})",
            "profiles": {p: ("router build: opt-level z (dependencies s), LTO, panic=abort" if p == "release"
                             else "release with opt-level 3" if p == "bench-release"
                             else f"binaries from {COMPARE[p]}" if p in COMPARE else p) for p in PROFILES},
            "machine": {"cpus": os.cpu_count(), "kernel": os.uname().release, "loadavg_at_end": os.getloadavg()},
            "requests_per_run": {"c1": N1, "c16": N16},
            "rounds": ROUNDS,
            "statistic": "median over rounds of each run's figure; paths interleaved in rotating order every round",
            "nginx": nginx_note,
            "method": "same Rust hyper echo backend and Rust load generator (one keep-alive connection per worker) "
                      "for every path; gateway path = POST /agent/v1/invoke with auth 'none'; nginx = one worker, "
                      "proxy_pass with upstream keepalive to the same backend",
            "reading": "c1 p50 is mostly wake-ups: each process on the path (load generator, proxy, backend) "
                       "sleeps in epoll between requests, and on an idle (virtual) CPU each wake-up costs tens of us; "
                       "a proxy adds two of them. nginx/direct is what one extra loopback proxy hop costs here at "
                       "all; gw/nginx is the part agent-gw itself can still shave. c16 throughput is CPU-bound: "
                       "all processes share the machine's cores.",
            "results": results,
            "split_handler": split_row,
            "rss_kib": {"idle": rss_idle, "after_load": rss_loaded, "quiet": rss_quiet, "quiet_after_s": QUIET_S},
            "goals": goals(results, split_row, rss_idle, rss_loaded, rss_quiet, headline),
        }
        dest = REPO / "target" / "bench" / "local.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(out, indent=2) + "\n")

        names = [n for n, _ in paths]
        print(f"medians of {ROUNDS} interleaved rounds; c1 = concurrency 1 ({N1} req), c16 = concurrency 16 ({N16} req)")
        print(f"{'body':>6} {'path':<20} {'p50 us':>8} {'p99 us':>8} {'c16 req/s':>10} {'p50/direct':>10} {'p50/nginx':>9} "
              f"{'proxy CPU us/req c1/c16':>24}")
        for row in results:
            for n in names:
                r = row[n]
                vs_d = r["c1"]["p50_us"] / row["direct"]["c1"]["p50_us"]
                vs_n = (f"{r['c1']['p50_us'] / row['nginx']['c1']['p50_us']:>9.2f}" if "nginx" in row else f"{'-':>9}")
                px = r["cpu_us_per_request"].get("proxy")
                px_s = f"{px['c1']:>11.1f}/{px['c16']:<12.1f}" if px else f"{'-':>24}"
                print(f"{row['body_bytes']:>6} {n:<20} {r['c1']['p50_us']:>8.1f} {r['c1']['p99_us']:>8.1f} "
                      f"{r['c16']['throughput_rps']:>10.0f} {vs_d:>10.2f} {vs_n} {px_s}")
        print(f"split handler (head and body in two writes, as Python http.server / nexilume), c1 p50 us: "
              + "  ".join(f"{n} {split_row[n]['p50_us']:.0f}" for n in split_row["paths"])
              + "  " + "  ".join(f"{k} {v:.3f}" for k, v in split_row["ratios"].items()))
        print(f"RSS KiB idle: {json.dumps(rss_idle)}")
        print(f"RSS KiB after load: {json.dumps(rss_loaded)}")
        print(f"RSS KiB {QUIET_S:.0f} s later: {json.dumps(rss_quiet)}")
        missed = [f"{k} {g}" for k, by in out["goals"].items() for g, ok in by.items() if not ok]
        print("goals: " + ("all met" if not missed else "missed: " + "; ".join(missed)))
        print(f"headline: {out['headline']}")
        print(f"wrote {dest.relative_to(REPO)}")
        return 0
    except BaseException:
        for p in procs:
            try:
                log(f"---- {p.name} log\n" + p.log_path.read_bytes()[-3000:].decode(errors="replace"))
            except OSError:
                pass
        raise
    finally:
        for p in reversed(procs):
            p.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
