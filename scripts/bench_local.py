#!/usr/bin/env python3
"""`make bench-local`: direct HTTP to a backend vs the same backend through
agent-gw, measured in one run on this machine.

For 128 B, 1 KiB and 8 KiB request bodies (a Nexus envelope padded to the
size): p50/p99 latency at concurrency 1 and throughput at concurrency 16,
for both paths, with the same Rust backend and the same Rust load generator
(`agent-gw/examples/bench_local.rs`) so the difference is the gateway. Also
the RSS (VmRSS/VmHWM from /proc/PID/status) of agentd and agent-gw idle and
after the load. Output: target/bench/local.json and a table on stdout.

Bounded: fixed request counts (BENCH_N1 at c=1, BENCH_N16 at c=16) and a
timeout on every load run. Loopback only; everything started here is
stopped by PID on exit.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional

REPO = Path(__file__).resolve().parent.parent
# release: the router build (opt-level z, LTO); bench: opt-level 3.
PROFILE = os.environ.get("BENCH_PROFILE", "release")
N1 = int(os.environ.get("BENCH_N1", "3000"))
N16 = int(os.environ.get("BENCH_N16", "16000"))
# Rounds per cell; direct and gateway alternate within a round so that
# machine noise hits both alike, and each figure is the median of rounds.
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
SIZES = [128, 1024, 8192]
INTENT = "b.e"
# Short names so that a whole envelope fits in the smallest body size.
TENANT = "b"


def median(values: List[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def target_dir() -> Path:
    # cargo puts the built-in `bench` profile's output in target/release too.
    return REPO / "target" / ("release" if PROFILE in ("release", "bench") else PROFILE)


def build() -> None:
    argv = ["cargo", "build", "--quiet", "-p", "agentd", "-p", "agent-gw", "--bins", "--example", "bench_local"]
    argv += ["--release"] if PROFILE == "release" else ["--profile", PROFILE]
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
                if key in ("VmRSS", "VmHWM"):
                    out[key + "_kib"] = int(value.split()[0])
        return out

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


def envelope_of_size(size: int) -> bytes:
    env = {
        "version": "1.0",
        "intent": INTENT,
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


def load(tool: Path, url: str, body_file: Path, concurrency: int, requests: int) -> Dict[str, Any]:
    warmup = max(20, requests // (10 * concurrency))
    argv = [str(tool), "load", url, str(body_file), str(concurrency), str(requests), str(warmup)]
    p = subprocess.run(argv, capture_output=True, timeout=300, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise SystemExit(f"bench: load generator failed: {p.stderr.decode(errors='replace')}")
    result = json.loads(p.stdout)
    if result["errors"]:
        raise SystemExit(f"bench: {result['errors']} errors on {url}: {result['first_error']}")
    return result


def main() -> int:
    build()
    bins = target_dir()
    tool = bins / "examples" / "bench_local"
    work = Path(tempfile.mkdtemp(prefix="agentd-bench-"))
    procs: List[Proc] = []
    try:
        port = free_port()
        sock = work / "agentd.sock"
        (work / "agentd.conf").write_text(
            "\n".join(
                [
                    "config agentd 'main'",
                    "\toption router_id 'bench'",
                    f"\toption identity '{work}/identity.key'",
                    f"\toption ipc_socket '{sock}'",
                    f"\toption state_dir '{work}'",
                    "\toption health_check 'off'",
                    "\toption log_level 'warn'",
                    "",
                    "# LAB MODE: auth 'none' so the benchmark measures forwarding, not JWT checks.",
                    "config gateway 'gateway'",
                    f"\toption sdk_listen '127.0.0.1:{port}'",
                    "\toption public_listen ''",
                    "\toption peer_listen ''",
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
                    "\toption listen ''",
                    "",
                    "config discovery 'discovery'",
                    "\toption enabled '0'",
                    "",
                ]
            )
        )
        conf = str(work / "agentd.conf")
        agentd = Proc("agentd", [str(bins / "agentd"), "--config", conf, "-f"], work / "agentd.log")
        procs.append(agentd)
        wait_for("agentd socket", lambda: sock.exists())
        gw = Proc("agent-gw", [str(bins / "agent-gw"), "--config", conf, "-f"], work / "agent-gw.log")
        procs.append(gw)
        gw_url = f"http://127.0.0.1:{port}"
        wait_for("agent-gw /healthz", lambda: http_json(gw_url + "/healthz").get("control_plane") == "up")

        backend = Proc("backend", [str(tool), "backend"], work / "backend.log", stdout=subprocess.PIPE)
        procs.append(backend)
        line = backend.p.stdout.readline().decode().strip()
        if not line.startswith("listening "):
            raise SystemExit(f"bench: backend did not start: {line!r}")
        backend_url = f"http://{line.split()[1]}/invoke"

        http_json(
            gw_url + "/agent/v1/register",
            {
                "intent": INTENT,
                "origin": f"agent://{TENANT}/echo",
                "endpoint": backend_url,
                "tenant": TENANT,
                "lease_seconds": 3600,
            },
        )
        probe = {
            "version": "1.0", "intent": INTENT, "intent_version": 1, "task_id": "probe",
            "source_agent": f"agent://{TENANT}/c", "tenant": TENANT, "hop_limit": 8, "payload": {},
        }
        wait_for("route on agent-gw", lambda: http_json(gw_url + "/agent/v1/route", probe))

        rss_idle = {"agentd": agentd.rss(), "agent_gw": gw.rss()}
        results: List[Dict[str, Any]] = []
        for size in SIZES:
            body_file = work / f"body-{size}.json"
            body_file.write_bytes(envelope_of_size(size))
            row: Dict[str, Any] = {"body_bytes": size}
            paths = (("direct", backend_url), ("gateway", gw_url + "/agent/v1/invoke"))
            runs: Dict[str, Dict[str, List[Dict[str, Any]]]] = {n: {"c1": [], "c16": []} for n, _ in paths}
            for _ in range(ROUNDS):
                for name, url in paths:
                    runs[name]["c1"].append(load(tool, url, body_file, 1, N1))
                    runs[name]["c16"].append(load(tool, url, body_file, 16, N16))
            for name, _ in paths:
                c1 = {k: median([r[k] for r in runs[name]["c1"]]) for k in ("p50_us", "p90_us", "p99_us", "max_us")}
                c16 = {k: median([r[k] for r in runs[name]["c16"]]) for k in ("p50_us", "p99_us", "throughput_rps")}
                c1["requests_per_round"], c16["requests_per_round"] = N1, N16
                c1["p50_us_rounds"] = [round(r["p50_us"], 1) for r in runs[name]["c1"]]
                c16["throughput_rps_rounds"] = [round(r["throughput_rps"]) for r in runs[name]["c16"]]
                row[name] = {"c1": c1, "c16": c16}
                log(f"{size:>5} B {name:<8} c1 p50 {c1['p50_us']:8.1f} us  p99 {c1['p99_us']:8.1f} us   "
                    f"c16 {c16['throughput_rps']:9.0f} req/s   (median of {ROUNDS})")
            d, g = row["direct"], row["gateway"]
            row["ratio_gateway_over_direct"] = {
                "p50_c1": round(g["c1"]["p50_us"] / d["c1"]["p50_us"], 3),
                "p99_c1": round(g["c1"]["p99_us"] / d["c1"]["p99_us"], 3),
                "throughput_c16": round(g["c16"]["throughput_rps"] / d["c16"]["throughput_rps"], 3),
            }
            results.append(row)
        rss_loaded = {"agentd": agentd.rss(), "agent_gw": gw.rss()}

        out = {
            "benchmark": "bench_local",
            "profile": PROFILE,
            "machine": {"cpus": os.cpu_count(), "kernel": os.uname().release},
            "requests": {"c1": N1, "c16": N16, "rounds": ROUNDS, "figures": "median of rounds"},
            "load_average_after": os.getloadavg(),
            "method": "same Rust hyper echo backend and Rust load generator (one keep-alive connection per worker) "
                      "for both paths; gateway path = POST /agent/v1/invoke with auth 'none'",
            "results": results,
            "rss_kib": {"idle": rss_idle, "after_load": rss_loaded},
        }
        dest = REPO / "target" / "bench" / "local.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(out, indent=2) + "\n")

        print(f"{'body':>6} | {'direct p50/p99 us (c1)':>24} | {'gateway p50/p99 us (c1)':>24} | "
              f"{'p50 ratio':>9} | {'direct req/s (c16)':>18} | {'gateway req/s (c16)':>19} | {'tput ratio':>10}")
        for row in results:
            d, g, r = row["direct"], row["gateway"], row["ratio_gateway_over_direct"]
            print(f"{row['body_bytes']:>6} | {d['c1']['p50_us']:>11.1f}/{d['c1']['p99_us']:<12.1f} | "
                  f"{g['c1']['p50_us']:>11.1f}/{g['c1']['p99_us']:<12.1f} | {r['p50_c1']:>9.2f} | "
                  f"{d['c16']['throughput_rps']:>18.0f} | {g['c16']['throughput_rps']:>19.0f} | {r['throughput_c16']:>10.2f}")
        print(f"RSS KiB idle: {json.dumps(rss_idle)}")
        print(f"RSS KiB after load: {json.dumps(rss_loaded)}")
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
