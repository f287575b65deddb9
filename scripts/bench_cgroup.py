#!/usr/bin/env python3
"""`make bench` (cgroup part, issue 25): the smallest memory cgroup the
router runs a realistic load in. JSON in target/bench/cgroup.json, a table
on stdout.

The router under test (router-a) is agentd + agent-gw of the router build
(the multi-call binary and its links) in a network namespace, with:

- two peers over mTLS: router-b and router-c, each in its own namespace
  and linked to router-a by a veth, all three of one domain (certificates
  from one domain CA made with `agentctl pki`, unpinned peer sections, as
  scripts/bench_peer.py sets up its routers; ARPX sessions and the h2 peer
  data plane both over mutual TLS);
- discovery on (`config discovery`: mDNS announce and browse on both
  links, admission 'manual' as the shipped config has it), on all three;
  the run waits until router-a lists both peers as candidates;
- 1k routes (BENCH_CGROUP_ROUTES) registered at router-a over its LAN SDK
  API, each its own origin, hour-long leases (advertised to both peers);
- a bounded load: BENCH_CGROUP_CALLS calls (2000), 16 at a time, each an
  8 KiB envelope POSTed to router-a's SDK listener (/agent/v1/invoke) and
  alternating between capability cg.b, served only behind router-b, and
  cg.c, served only behind router-c: router-a's gateway forwards every
  call over h2+mTLS to a peer, whose gateway calls its echo handler.
  No echo share is registered at router-a itself.

Only router-a's two daemons are in the cgroup; the peers, the echo
handlers (tests/harness/backend.py, on the peers' LAN side), the load
generator (Python threads, one keep-alive connection each) and every
agentctl call run outside it. A daemon joins the cgroup before it execs
(a `sh -c 'echo $$ > cgroup.procs; exec ...'` wrapper around `ip netns
exec`), and each trial runs a fresh copy of the binary (new inode, its
pages dropped from the page cache after the copy) so the executable's
pages are first touched, and charged, inside the cgroup.

A trial passes when every call answers 200 with its payload echoed, the
cgroup saw no OOM kill and both daemons are still running, all within
~60 s. One unlimited trial gives the peak; then the limit is bisected in
1 MiB steps between a failing and a passing bound (the high bound starts
at the unlimited peak + 4 MiB and is checked), and the smallest passing
limit is run once more to confirm it. Every trial records the limit, the
outcome and why, the cgroup's peak, memory.stat at the end and failcnt.

cgroup v1 (/sys/fs/cgroup/memory) or v2 (/sys/fs/cgroup with the memory
controller), detected. Needs root. Knobs: BENCH_CGROUP_BIN_DIR (default
target/router-openwrt, as scripts/router_build.py leaves it; nothing is
built here), BENCH_CGROUP_CALLS (2000), BENCH_CGROUP_ROUTES (1000),
BENCH_CGROUP_SMAPS_DIR (unset: where to copy the daemons' smaps after
each trial's load). The cgroup itself (v1/v2, limits, counters, the
kernel-memory calibration) is `memcg.py`.
Processes are ours, stopped by PID; namespaces and cgroups made here are
removed on every exit path.
"""

from __future__ import annotations

import hashlib
import http.client
import itertools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from harness.backend import Backend  # noqa: E402
from harness.mesh import MeshNet, MeshRouter  # noqa: E402
from harness.poll import wait_for  # noqa: E402
from harness.procs import Binaries  # noqa: E402
from memcg import MemCgroup, detect_cgroup, in_cgroup, kmem_calibration  # noqa: E402

BIN_DIR = Path(os.environ.get("BENCH_CGROUP_BIN_DIR", REPO / "target" / "router-openwrt"))
CALLS = int(os.environ.get("BENCH_CGROUP_CALLS", "2000"))
ROUTES = int(os.environ.get("BENCH_CGROUP_ROUTES", "1000"))
#: Where to copy each daemon's /proc/PID/smaps after the load of every
#: trial (trial<N>-<daemon>.smaps), to see what the charge is made of.
#: The pages' referenced bits are cleared just before the load, so each
#: mapping's `Referenced:` is what the load itself touched.
SMAPS_DIR = os.environ.get("BENCH_CGROUP_SMAPS_DIR")
CONCURRENCY = 16
BODY_BYTES = 8192
MIB = 1 << 20
TRIAL_S = 60.0  # one trial, start to verdict
CALL_TIMEOUT_S = 10.0  # one HTTP exchange with router-a
RUN_S = 15 * 60.0  # the whole script
MAX_TRIALS = 20
HEADROOM_MIB = 4  # first high bound: unlimited peak + this
DOMAIN = "bench.example"
TENANT = "cg"
DUT = "router-a"
# The capability each peer serves: the load alternates between them, so
# both mTLS links carry half of it.
SERVED = {"router-b": "cg.b", "router-c": "cg.c"}
LIFTED = {"rate_per_second": 1_000_000, "rate_burst": 1_000_000}


def log(msg: str) -> None:
    print(f"[bench_cgroup] {msg}", file=sys.stderr, flush=True)


# ---- binaries ---------------------------------------------------------------


def drop_cached(path: Path) -> None:
    """Write back and drop `path`'s pages from the page cache: pages we
    wrote while copying would stay charged to our own cgroup."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def resident_bytes(path: Path) -> Optional[int]:
    """Bytes of `path` in the page cache (util-linux fincore), if known."""
    if not shutil.which("fincore"):
        return None
    p = subprocess.run(["fincore", "--json", "--bytes", str(path)], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=10)
    try:
        return int(json.loads(p.stdout)["fincore"][0]["res"])
    except (ValueError, KeyError, IndexError):
        return None


def fresh_daemons(dest: Path) -> Tuple[Path, Path, List[Path]]:
    """agentd and agent-gw of BIN_DIR copied into `dest` (links kept as
    links: the multi-call binary is copied once), uncached. Returns the
    two paths and the regular files copied."""
    dest.mkdir(parents=True)
    files: List[Path] = []
    for name in ("agentd", "agent-gw"):
        src = BIN_DIR / name
        if src.is_symlink():
            target = os.readlink(src)
            real = (src.parent / target).resolve()
            copy = dest / real.name
            if not copy.exists():
                shutil.copy2(real, copy)
                files.append(copy)
            os.symlink(real.name, dest / name)
        else:
            shutil.copy2(src, dest / name)
            files.append(dest / name)
    for f in files:
        drop_cached(f)
    return dest / "agentd", dest / "agent-gw", files


# ---- routers ------------------------------------------------------------


def pki(bins: Binaries, *args: str) -> None:
    p = subprocess.run([str(bins.agentctl), "pki", *args], capture_output=True, stdin=subprocess.DEVNULL, timeout=30)
    if p.returncode != 0:
        raise RuntimeError(f"agentctl pki {' '.join(args)}: {p.stderr.decode(errors='replace')}")


def make_router(bins: Binaries, net: MeshNet, work: Path, name: str, ca: Path) -> MeshRouter:
    """A router of the domain with its peer data plane on (the harness's
    :7447), discovery on, rate limits lifted (the load is the point) and
    room for the routes the run registers."""
    room = ROUTES + 1000
    r = MeshRouter(bins, net, net.add_router(name), work / name,
                   agentd={"log_level": "warn", "max_routes": room},
                   arpx={"max_routes_per_origin": room},
                   gateway=dict(LIFTED), tenants=[(TENANT, {"name": TENANT, **LIFTED})])
    cert = r.dir / "router.pem"
    pki(bins, "issue-router", "--ca-key", str(ca / "domain-ca.key"), "--ca-cert", str(ca / "domain-ca.pem"),
        "--router-id", name, "--domain", DOMAIN, "--key", str(r.dir / "identity.key"), "--out", str(cert))
    r.cfg.section("agentd").options.update({"domain": DOMAIN, "domain_ca": str(ca / "domain-ca.pem"),
                                            "router_cert": str(cert)})
    r.cfg.section("discovery").options = {"enabled": 1, "admission": "manual", "interface": []}
    return r


def link(net: MeshNet, a: MeshRouter, b: MeshRouter) -> None:
    """A veth a–b with multicast on, each end a discovery interface, and
    the peer sections of both sides (unpinned: the domain CA vouches)."""
    ln = net.link(a.name, b.name)
    for r, ifname in ((a, ln.a_if), (b, ln.b_if)):
        subprocess.run(["ip", "-n", r.ns.netns, "link", "set", ifname, "multicast", "on"], check=True,
                       capture_output=True, stdin=subprocess.DEVNULL)
        r.cfg.section("discovery").options["interface"].append(ifname)
    a.peer_with(b, pin=False, max_routes=ROUTES + 1000)
    b.peer_with(a, pin=False, max_routes=ROUTES + 1000)


def envelope(intent: str) -> Tuple[bytes, str]:
    """A BODY_BYTES-long invocation envelope for `intent`, and its
    payload."""
    env = {"version": "1.0", "intent": intent, "intent_version": 1, "task_id": "t", "source_agent": "c",
           "tenant": TENANT, "hop_limit": 8, "payload": ""}
    base = len(json.dumps(env, separators=(",", ":")).encode())
    env["payload"] = "x" * (BODY_BYTES - base)
    raw = json.dumps(env, separators=(",", ":")).encode()
    assert len(raw) == BODY_BYTES
    return raw, env["payload"]


def route_at(r: MeshRouter, intent: str, target: Optional[str] = None) -> Optional[str]:
    """The route id r's gateway would call first for `intent`."""
    env = json.loads(envelope(intent)[0])
    if target:
        env["target_agent"] = target
    resp = r.stack.http.post("/agent/v1/route", env)
    return str(resp.json()["route"]["route_id"]) if resp.status == 200 else None


def register_routes(r: MeshRouter, n: int, deadline: float, threads: int = 4) -> None:
    """`n` registrations at r, each its own origin, hour-long leases, over
    a few kept connections; then waits until r's gateway resolves the last
    one of every connection (its route replica has them all)."""
    host, port = r.cfg.sdk_host, r.cfg.sdk_port
    errors: List[str] = []
    per = -(-n // threads)
    chunks = [(k * per, min(n, (k + 1) * per)) for k in range(threads) if k * per < n]

    def worker(lo: int, hi: int) -> None:
        conn = http.client.HTTPConnection(host, port, timeout=CALL_TIMEOUT_S)
        try:
            for i in range(lo, hi):
                if time.monotonic() > deadline - CALL_TIMEOUT_S:
                    errors.append("trial deadline during registration")
                    return
                body = json.dumps({"intent": f"cg.r{i % 50}", "version": 1, "origin": f"agent://{TENANT}/r{i}",
                                   "endpoint": f"http://127.0.0.1:9/r{i}", "tenant": TENANT,
                                   "lease_seconds": 3600})
                conn.request("POST", "/agent/v1/register", body=body, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                raw = resp.read()
                if resp.status != 200:
                    errors.append(f"register r{i}: {resp.status} {raw[:200]!r}")
                    return
        except (OSError, http.client.HTTPException) as exc:
            errors.append(f"register: {exc!r}")
        finally:
            conn.close()

    ts = [threading.Thread(target=worker, args=c, daemon=True) for c in chunks]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=max(0.0, deadline - time.monotonic()) + 2)
    if errors or any(t.is_alive() for t in ts):
        raise RuntimeError(errors[0] if errors else "registration did not finish in time")
    for _, hi in chunks:
        i = hi - 1
        wait_for(f"{r.name}'s gateway to resolve route r{i}",
                 lambda: route_at(r, f"cg.r{i % 50}", f"agent://{TENANT}/r{i}"),
                 timeout=max(1.0, deadline - time.monotonic()), interval=0.05)


# ---- the load -----------------------------------------------------------------


def run_load(host: str, port: int, deadline: float) -> Dict[str, Any]:
    """CALLS invocations, CONCURRENCY at a time, alternating between the
    capabilities of SERVED; every answer must be 200 with the payload
    echoed. A call is sent only while it can end (answer or timeout) by
    `deadline`; the calls left then count as failed."""
    last_send = deadline - CALL_TIMEOUT_S
    intents = list(SERVED.values())
    bodies = {i: envelope(i) for i in intents}
    counter = itertools.count()
    lock = threading.Lock()
    ok = {i: 0 for i in intents}
    failures: List[str] = []
    failed = [0]

    def fail(why: str) -> None:
        with lock:
            failed[0] += 1
            if len(failures) < 5:
                failures.append(why)

    def worker() -> None:
        conn = http.client.HTTPConnection(host, port, timeout=CALL_TIMEOUT_S)
        while True:
            k = next(counter)  # atomic under the GIL
            if k >= CALLS:
                break
            if time.monotonic() > last_send:
                fail(f"call {k}: not sent, trial deadline")
                continue
            intent = intents[k % len(intents)]
            body, payload = bodies[intent]
            try:
                conn.request("POST", "/agent/v1/invoke", body=body, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                data = resp.read()
            except (OSError, http.client.HTTPException) as exc:
                fail(f"call {k} ({intent}): {exc!r}")
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=CALL_TIMEOUT_S)
                continue
            if resp.status != 200:
                fail(f"call {k} ({intent}): HTTP {resp.status} {data[:200]!r}")
                continue
            try:
                echoed = json.loads(data).get("echo") == payload
            except (ValueError, AttributeError):
                echoed = False
            if not echoed:
                fail(f"call {k} ({intent}): 200 without our payload: {data[:200]!r}")
                continue
            with lock:
                ok[intent] += 1
        conn.close()

    started = time.monotonic()
    ts = [threading.Thread(target=worker, name=f"load{n}", daemon=True) for n in range(CONCURRENCY)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=max(0.0, deadline - time.monotonic()) + 2)
    wall = time.monotonic() - started
    stuck = sum(t.is_alive() for t in ts)
    if stuck:
        fail(f"{stuck} load threads still waiting for an answer")
    good = sum(ok.values())
    return {"calls": CALLS, "ok": good, "failed": CALLS - good, "ok_by_capability": ok,
            "first_failures": failures, "wall_s": round(wall, 2), "calls_per_s": round(good / wall, 1) if wall else 0}


# ---- one trial ------------------------------------------------------------


class Watch(threading.Thread):
    """Notes when each of the router's daemons ends (and how): which one
    the OOM killer took first."""

    def __init__(self, daemons: Dict[str, Any], t0: float) -> None:
        super().__init__(name="watch", daemon=True)
        self.daemons = daemons
        self.t0 = t0
        self.ended: Dict[str, Dict[str, Any]] = {}
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(0.02):
            for name, d in self.daemons.items():
                if name not in self.ended and d.proc is not None and d.proc.poll() is not None:
                    self.ended[name] = {"at_s": round(time.monotonic() - self.t0, 2),
                                        "returncode": d.proc.returncode}


def oom_lines(cgroup_name: str, pids: List[int]) -> List[str]:
    """The kernel's OOM report lines about our cgroup or our daemons."""
    p = subprocess.run(["dmesg"], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=10)
    keys = [cgroup_name] + [f"Killed process {pid} " for pid in pids]
    return [line.strip() for line in p.stdout.splitlines() if any(k in line for k in keys)][-6:]


def proc_status(pid: int) -> Dict[str, int]:
    out: Dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                    out[key + "_kib"] = int(value.split()[0])
    except OSError:
        pass
    return out


class Bench:
    def __init__(self, kind: str, root: Path, peer_bins: Binaries, work: Path) -> None:
        self.kind = kind
        self.root = root
        self.peer_bins = peer_bins
        self.work = work
        self.ca = work / "ca"
        self.ca.mkdir()
        pki(peer_bins, "init-domain", "--domain", DOMAIN, "--out", str(self.ca))
        self.count = 0
        self.trials: List[Dict[str, Any]] = []

    def trial(self, limit_mib: Optional[int]) -> Dict[str, Any]:
        self.count += 1
        n = self.count
        t0 = time.monotonic()
        deadline = t0 + TRIAL_S
        rec: Dict[str, Any] = {"n": n, "limit_mib": limit_mib, "pass": False, "reason": ""}
        log(f"trial {n}: limit {limit_mib if limit_mib is not None else 'none'} MiB")
        dir = self.work / f"t{n}"
        cg: Optional[MemCgroup] = None
        net: Optional[MeshNet] = None
        routers: Dict[str, MeshRouter] = {}
        backends: List[Backend] = []
        watch: Optional[Watch] = None
        pids: List[int] = []
        copies: List[Path] = []
        alive: Dict[str, bool] = {}
        try:
            agentd, agent_gw, copies = fresh_daemons(dir / "bin")
            rec["binary_cached_before_start_bytes"] = sum(resident_bytes(f) or 0 for f in copies)
            cg = MemCgroup(self.kind, self.root, f"agentd-bench-{os.getpid()}-{n}",
                           None if limit_mib is None else limit_mib * MIB)
            # agentctl of the router under test stays the original binary:
            # it runs here, outside the cgroup, and must not touch the copy.
            dut_bins = Binaries(agentd, self.peer_bins.agentctl, agent_gw)
            net = MeshNet()
            a = routers[DUT] = make_router(dut_bins, net, dir, DUT, self.ca)
            for name in SERVED:
                routers[name] = make_router(self.peer_bins, net, dir, name, self.ca)
                link(net, a, routers[name])
            a.stack.agentd.argv = in_cgroup(a.stack.agentd.argv, cg.procs)
            a.stack.gw.argv = in_cgroup(a.stack.gw.argv, cg.procs)
            for name in SERVED:
                routers[name].start()
            watch = Watch({"agentd": a.stack.agentd, "agent-gw": a.stack.gw}, t0)
            watch.start()
            a.start()
            pids = [a.stack.agentd.pid, a.stack.gw.pid]
            for pid in pids:
                exe = os.readlink(f"/proc/{pid}/exe")
                if not cg.holds(pid) or not exe.startswith(str(dir / "bin")):
                    raise RuntimeError(f"daemon {pid} ({exe}) is not the copy in our cgroup")
            left = lambda: max(1.0, deadline - time.monotonic())  # noqa: E731
            for name in SERVED:
                a.wait_established(name, timeout=left())
            wait_for(f"{DUT} to discover both peers (mDNS candidates)",
                     lambda: set(SERVED) <= {c.get("id") for c in a.stack.ctl_json("candidates")["candidates"]},
                     timeout=left(), interval=0.1)
            for name, intent in SERVED.items():
                b = routers[name].lan_backend()
                backends.append(b)
                routers[name].serve(b, intent, tenant=TENANT, name=f"echo-{name}", lease=3600)
                wait_for(f"{DUT}'s gateway to route {intent} via {name}",
                         lambda: (route_at(a, intent) or "").endswith("@" + name), timeout=left(), interval=0.05)
            rec["setup_s"] = round(time.monotonic() - t0, 2)
            register_routes(a, ROUTES, deadline)
            rec["routes_registered"] = ROUTES
            rec["registered_at_s"] = round(time.monotonic() - t0, 2)
            if SMAPS_DIR:
                for pid in pids:
                    Path(f"/proc/{pid}/clear_refs").write_text("1")
            load = run_load(a.ns.mgmt_addr, a.cfg.sdk_port, deadline)
            rec["load"] = load
            rec["handler_calls"] = {name: len(b.received) for name, b in zip(SERVED, backends)}
            problems = []
            if load["failed"]:
                problems.append(f"{load['failed']} of {CALLS} calls failed (first: {load['first_failures'][0]})")
            if time.monotonic() > deadline + 5:
                problems.append(f"trial took {time.monotonic() - t0:.0f} s (bound {TRIAL_S:.0f} s)")
            rec["reason"] = "; ".join(problems)
        except Exception as exc:  # noqa: BLE001 - a failed trial is a result
            rec["reason"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
        finally:
            if watch:
                watch.stop_event.set()
                watch.join(timeout=2)
            if cg:
                # After the load, before anything is stopped.
                if routers.get(DUT):
                    rec["daemons_kib"] = {k: proc_status(d.pid) for k, d in
                                          (("agentd", routers[DUT].stack.agentd), ("agent-gw", routers[DUT].stack.gw))
                                          if d.proc is not None and d.alive()}
                    if SMAPS_DIR:
                        for k, d in (("agentd", routers[DUT].stack.agentd), ("agent-gw", routers[DUT].stack.gw)):
                            try:
                                smaps = Path(f"/proc/{d.pid}/smaps").read_text()
                            except OSError:
                                continue
                            Path(SMAPS_DIR, f"trial{n}-{k}.smaps").write_text(smaps)
                try:
                    rec["cgroup"] = cg.snapshot()
                except OSError as exc:
                    rec["cgroup"] = {"error": repr(exc)}
            if copies:
                rec["binary_cached_at_end_bytes"] = sum(resident_bytes(f) or 0 for f in copies)
            dut = routers.get(DUT)
            if dut:
                alive = {k: d.alive() for k, d in (("agentd", dut.stack.agentd), ("agent-gw", dut.stack.gw))
                         if d.proc is not None}
            # Each step on its own: one that fails leaves the others to run.
            steps = [r.stop for r in reversed(list(routers.values()))] + [b.close for b in backends]
            steps += [net.close] if net else []
            steps += [cg.remove] if cg else []
            for step in steps:
                try:
                    step()
                except Exception as exc:  # noqa: BLE001 - reported, teardown goes on
                    log(f"teardown: {exc!r}")
            shutil.rmtree(dir, ignore_errors=True)
        # The verdict: every call good, no OOM kill, both daemons alive.
        problems = [rec["reason"]] if rec["reason"] else []
        oom = (rec.get("cgroup") or {}).get("oom_kill") or 0
        if oom:
            problems.insert(0, f"OOM kill x{oom}")
        dead = [k for k, up in alive.items() if not up]
        if dead and watch:
            rec["daemons_ended"] = watch.ended
            problems.insert(0, "died: " + ", ".join(
                f"{k} ({watch.ended[k]['returncode']} at {watch.ended[k]['at_s']} s)" if k in watch.ended else k
                for k in sorted(dead, key=lambda k: watch.ended.get(k, {}).get("at_s", 1e9))))
        if oom and cg:
            rec["kernel_oom_report"] = oom_lines(cg.path.name, pids)
        rec["pass"] = not problems and "load" in rec
        rec["reason"] = "; ".join(problems) if problems else "ok"
        rec["trial_s"] = round(time.monotonic() - t0, 2)
        self.trials.append(rec)
        c = rec.get("cgroup") or {}
        log(f"trial {n}: {'PASS' if rec['pass'] else 'FAIL'} ({rec['reason']}); peak {mib(c.get('peak'))} MiB, "
            f"{rec['trial_s']} s")
        return rec


def mib(v: Optional[int]) -> str:
    return f"{v / MIB:.1f}" if isinstance(v, int) else "-"


# ---- the search ---------------------------------------------------------------


def search(bench: Bench, run_deadline: float) -> Dict[str, Any]:
    """Unlimited trial, then bisection in 1 MiB steps between a failing
    low and a passing high bound; the smallest pass is run again."""
    def budget() -> bool:
        return bench.count < MAX_TRIALS and time.monotonic() + TRIAL_S + 30 < run_deadline

    free = bench.trial(None)
    if not free["pass"]:
        raise SystemExit(f"bench_cgroup: the unlimited trial failed: {free['reason']}")
    peak = free["cgroup"]["peak"]
    passed: Dict[int, int] = {}  # limit -> passes
    failed: set = set()

    def run(limit: int) -> bool:
        ok = bench.trial(limit)["pass"]
        if ok:
            passed[limit] = passed.get(limit, 0) + 1
        else:
            failed.add(limit)
        return ok

    high = math.ceil(peak / MIB) + HEADROOM_MIB
    while not run(high):
        if not budget() or high > 4 * math.ceil(peak / MIB):
            raise SystemExit(f"bench_cgroup: no passing limit found up to {high} MiB")
        high += 8
    # A first low bound: the anonymous and kernel memory held at the end
    # of the unlimited trial cannot be reclaimed; halved until it fails.
    c = free["cgroup"]
    low = max(1, ((c.get("rss") or 0) + (c.get("kmem") or 0)) // MIB)
    while low < high and budget() and run(low):
        high = low
        low = max(1, low // 2)
        if low == 1 and 1 in passed:
            break
    confirmed = False
    while budget():
        while high - low > 1 and budget():
            mid = (low + high) // 2
            if run(mid):
                high = mid
            else:
                low = mid
        if high - low > 1 or not budget():
            break
        if run(high):  # confirm the smallest pass
            confirmed = True
            break
        # It failed the second time: the bound lies above; bisect again up
        # to the next limit that passed.
        low = high
        above = [x for x in passed if x > low]
        if not above:
            break
        high = min(above)
    return {"unlimited_peak_bytes": peak, "smallest_limit_mib": high, "largest_failing_mib": low,
            "resolved_to_1mib": high - low <= 1, "confirmed": confirmed}


def charged_text(kind: str, unlimited: Dict[str, Any], calib: Dict[str, Any]) -> Tuple[str, Dict[str, Any]]:
    """How the cgroup's counter is made up, checked against the unlimited
    trial's figures at its end."""
    c = unlimited.get("cgroup") or {}
    usage, rss, cache, kmem = (c.get(k) or 0 for k in ("usage", "rss", "cache", "kmem"))
    check = {"calibration": calib,
             "unlimited_trial_end": {"usage": usage, "rss_plus_cache": rss + cache,
                                     "usage_minus_rss_cache": usage - rss - cache, "kmem": kmem,
                                     "kmem_tcp": c.get("kmem_tcp")}}
    kmem_counted = bool(calib.get("kmem_counts_toward_limit"))
    if kind == "v1":
        text = (
            "cgroup v1 memory controller: memory.limit_in_bytes bounds memory.usage_in_bytes, which holds "
            "anonymous memory (memory.stat rss: heaps, stacks), page cache (memory.stat cache: the binary's file "
            "pages - a fresh copy per trial, dropped from the cache after copying so the daemons' own page faults "
            "charge them here; a page is charged to the cgroup that first brings it into the cache - plus the "
            "lease/state files and logs the daemons write) and kernel memory (memory.kmem.usage_in_bytes: slab, "
            "page tables, kernel stacks). "
            + (f"kmem counts toward the limit on this kernel: {calib.get('files')} files made in a test cgroup "
               f"charged kmem {calib.get('kmem', 0) / MIB:.2f} MiB and usage - (rss + cache) = "
               f"{calib.get('usage_minus_rss_cache', 0) / MIB:.2f} MiB; "
               if kmem_counted else
               f"kmem did NOT add up to usage - (rss + cache) in a test cgroup ({calib}): it may not count toward "
               f"the limit here; ")
            + (f"at the end of the unlimited trial usage - (rss + cache) = {(usage - rss - cache) / MIB:.2f} MiB, "
               f"kmem {kmem / MIB:.2f} MiB (the rest is per-CPU charge batching). ")
            + "Socket buffers are not charged: v1 accounts TCP memory only in memory.kmem.tcp and only once "
              f"memory.kmem.tcp.limit_in_bytes is set (not done here; kmem.tcp.usage {c.get('kmem_tcp')}). "
              "Under the limit the kernel first reclaims page cache (clean file pages, re-read on the next fault: "
              "memory.stat pgmajfault) and OOM-kills only when anonymous and kernel memory leave no room; no swap "
              "(memory.memsw.limit_in_bytes = the limit when the machine has swap). memory.max_usage_in_bytes "
              "is the peak of all of it."
        )
    else:
        text = (
            "cgroup v2: memory.max bounds memory.current, which holds anonymous memory (memory.stat anon), page "
            "cache (file: the binary's pages - a fresh copy per trial, uncached after copying, so the daemons' "
            "faults charge them here - and files the daemons write), kernel memory (kernel: slab, page tables, "
            "stacks) and socket buffers (sock), all of it. Page cache is reclaimed before an OOM kill "
            "(memory.events oom_kill); memory.swap.max 0; memory.peak is the peak."
        )
    return text, check


def print_table(out: Dict[str, Any]) -> None:
    print(f"agentd + agent-gw of {out['binaries']} in a memory cgroup ({out['cgroup']}); {ROUTES} routes, "
          f"2 mTLS peers, discovery on; {CALLS} x {BODY_BYTES} B echo calls at c{CONCURRENCY} over the peers")
    print(f"{'#':>2} {'limit':>6} {'result':<5} {'peak':>6} {'rss':>6} {'cache':>6} {'mapped':>6} {'kmem':>6} "
          f"{'failcnt':>8} {'oom':>3} {'majflt':>7} {'calls/s':>8} {'s':>5}  reason   (MiB)")
    for t in out["trials"]:
        c = t.get("cgroup") or {}
        lim = "none" if t["limit_mib"] is None else str(t["limit_mib"])
        rps = (t.get("load") or {}).get("calls_per_s", "-")
        print(f"{t['n']:>2} {lim:>6} {'pass' if t['pass'] else 'FAIL':<5} {mib(c.get('peak')):>6} "
              f"{mib(c.get('rss')):>6} {mib(c.get('cache')):>6} {mib(c.get('mapped_file')):>6} "
              f"{mib(c.get('kmem')):>6} {str(c.get('failcnt', '-')):>8} {str(c.get('oom_kill', '-')):>3} "
              f"{str(c.get('pgmajfault', '-')):>7} {rps:>8} {t['trial_s']:>5.0f}  {t['reason'][:90]}")
    r = out["result"]
    print(f"unlimited peak {mib(r['unlimited_peak_bytes'])} MiB; smallest passing limit {r['smallest_limit_mib']} MiB "
          f"(largest failing {r['largest_failing_mib']} MiB, {'confirmed by a second pass' if r['confirmed'] else 'NOT confirmed'})")


def binary_identity() -> Dict[str, Any]:
    """Which build was measured: the file agentd resolves to, its size,
    mtime and SHA-256."""
    real = (BIN_DIR / "agentd").resolve()
    st = real.stat()
    return {"file": str(real), "bytes": st.st_size,
            "mtime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(st.st_mtime)),
            "sha256": hashlib.sha256(real.read_bytes()).hexdigest()}


def main() -> int:
    if os.geteuid() != 0:
        raise SystemExit("bench_cgroup: needs root (cgroups, network namespaces)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    kind, root = detect_cgroup()
    peer_bins = Binaries(BIN_DIR / "agentd", BIN_DIR / "agentctl", BIN_DIR / "agent-gw")
    for p in (peer_bins.agentd, peer_bins.agentctl, peer_bins.agent_gw):
        if not p.exists():
            raise SystemExit(f"bench_cgroup: {p} missing (make router-openwrt, or set BENCH_CGROUP_BIN_DIR)")
    log(f"cgroup {kind} at {root}; binaries {BIN_DIR}")
    work = Path(tempfile.mkdtemp(prefix="agentd-bench-cgroup-", dir="/tmp"))
    try:
        calib = kmem_calibration(kind, root, work)
        bench = Bench(kind, root, peer_bins, work)
        result = search(bench, started + RUN_S)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    charged, check = charged_text(kind, bench.trials[0], calib)
    out = {
        "benchmark": "bench_cgroup",
        "cgroup": kind,
        "charged": charged,
        "kmem_check": check,
        "unlimited_peak_bytes": result["unlimited_peak_bytes"],
        "smallest_limit_mib": result["smallest_limit_mib"],
        "result": result,
        "binaries": str(BIN_DIR),
        "binary": binary_identity(),
        "router_under_test": {
            "daemons_in_cgroup": ["agentd", "agent-gw"],
            "peers": "router-b and router-c over mTLS (ARPX :7444 and the h2 data plane :7447), one domain CA",
            "discovery": "on (mDNS on both links, admission manual), both peers seen as candidates",
            "routes": ROUTES,
            "outside_cgroup": "peers, echo handlers, load generator, agentctl",
        },
        "load": {
            "calls": CALLS, "concurrency": CONCURRENCY, "body_bytes": BODY_BYTES,
            "path": "load generator -> router-a SDK listener /agent/v1/invoke -> h2+mTLS -> router-b or router-c "
                    "gateway -> its echo handler (cg.b behind router-b, cg.c behind router-c, alternating); "
                    "no local echo share at router-a",
            "generator": f"Python http.client, {CONCURRENCY} threads, one keep-alive connection each",
            "pass": "every call 200 with its payload echoed, no OOM kill, both daemons alive, within the trial bound",
            "trial_bound_s": TRIAL_S,
        },
        "search": "one unlimited trial; high bound = ceil(peak) + 4 MiB (checked); low bound = rss + kmem at the end "
                  "of the unlimited trial, halved until it fails; bisection in 1 MiB steps; the smallest pass "
                  "is run again",
        "machine": {"cpus": os.cpu_count(), "kernel": os.uname().release},
        "trials": bench.trials,
    }
    dest = REPO / "target" / "bench" / "cgroup.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=2) + "\n")
    print_table(out)
    print(f"wrote {dest.relative_to(REPO)} ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
