#!/usr/bin/env python3
"""`make demo`, part 3: two routers find each other by DNS-SD, and a call
crosses them.

router-a and router-b each run agentd and agent-gw on loopback ports, with
their own identity key (created at first start), discovery in `manual`
admission and unicast DNS-SD in the zone lab.example through a resolver:
Debian's NSD on a loopback port, serving the lines `agentctl discovery
records` prints for each router (PTR, SRV, TXT, A). Each finds the other
as a `pending` candidate (`agentctl candidates`: source unicast, key
fingerprint, record version); `agentctl approve ROUTER_ID VERSION` on
both sides writes a `discovered` peer section pinning that key and
reloads, and the ARPX session comes up; router-b's gateway then holds one
warm h2 + mTLS connection to router-a's. A static route of router-a shows
up at router-b as a peer route with path [router-a].

Then an agent written with our SDK registers `demo.echo` and `demo.count`
(a stream) at router-a, and a caller on router-b's SDK API calls both: the
answer names the route `…@router-a`; the stream is dropped after three
events and resumed with `Last-Event-ID`, getting only the later ones from
the history on router-a — the agent counts its calls to show the handler
ran once. `agentctl stats` shows the peer connection and handshake
counters. Gateway auth is 'none' (LAB MODE, this demo only). Everything
started is stopped by PID on exit and the temp dir removed; any step that
does not work ends the demo with a non-zero exit and its reason.

Environment: BIN_DIR (default target/debug) holds agentd, agentctl and
agent-gw.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

from demo_util import free_port, say, wait_for  # noqa: E402

BIN_DIR = Path(os.environ.get("BIN_DIR", REPO / "target" / "debug"))
if not BIN_DIR.is_absolute():
    BIN_DIR = REPO / BIN_DIR

BASE = """\
config agentd 'main'
\toption router_id '{rid}'
\toption domain 'lab.example'
\toption identity '{dir}/identity.key'
\toption ipc_socket '{dir}/agentd.sock'
\toption state_dir '{dir}'
\toption health_check 'off'
# !!! LAB MODE: the demo agent listens on 127.0.0.1 (never on a real router).
\toption allow_loopback_endpoints '1'

# !!! LAB MODE: auth 'none' (no bearer tokens), for this local demo only.
config gateway 'gateway'
\toption sdk_listen '127.0.0.1:{sdk}'
\toption public_listen 'off'
\toption admin_listen 'off'
\toption peer_listen '127.0.0.1:{peer}'
\toption auth 'none'

config arpx 'arpx'
\toption listen '127.0.0.1:{arpx}'

# Unicast DNS-SD only (mDNS on no interface): NSD on a loopback port.
# Loopback addresses from the zone are accepted because of
# allow_loopback_endpoints above (LAB MODE).
config discovery 'discovery'
\toption enabled '1'
\toption admission 'manual'
\toption resolver '127.0.0.1:{dns}'
\tlist search_domain 'lab.example'
\toption refresh_min_s '1'
\toption refresh_max_s '2'
"""

NSD_CONF = """server:
  ip-address: 127.0.0.1@{port}
  username: ""
  chroot: ""
  zonesdir: "{dir}"
  pidfile: "{dir}/nsd.pid"
  database: ""
  xfrdfile: "{dir}/xfrd.state"
  zonelistfile: "{dir}/zone.list"
  logfile: "{dir}/nsd.log"
  server-count: 1
remote-control:
  control-enable: no
zone:
  name: "lab.example"
  zonefile: "{dir}/lab.example.zone"
"""

ZONE_HEAD = """$ORIGIN lab.example.
$TTL 60
@ IN SOA ns.lab.example. admin.lab.example. 1 3600 900 604800 60
@ IN NS ns.lab.example.
ns IN A 127.0.0.1
"""

PRINTER = """
config route 'printer'
\toption capability 'office.print'
\toption version '1'
\toption origin 'agent://lab/printer'
\toption endpoint 'http://192.0.2.10:8080/invoke'
\toption tenant 'lab'
\toption latency_ms '5'
\toption trust '90'
"""

PEER_COUNTERS = ("peer_conns", "peer_handshakes_out", "peer_handshakes_in", "peer_streams_refused")


class DemoFailed(Exception):
    pass


def check(ok: Any, what: str) -> None:
    if not ok:
        raise DemoFailed(what)


class Router:
    def __init__(self, rid: str, work: Path, dns_port: int) -> None:
        self.rid = rid
        self.dir = work / rid
        self.dir.mkdir()
        self.arpx, self.sdk, self.peer = free_port(), free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.sdk}"
        self.conf = self.dir / "agentd.conf"
        self.body = BASE.format(rid=rid, dir=self.dir, arpx=self.arpx, sdk=self.sdk, peer=self.peer, dns=dns_port)
        self.conf.write_text(self.body)
        self.procs: List[subprocess.Popen] = []

    def _spawn(self, name: str) -> None:
        with open(self.dir / f"{name}.log", "ab") as log:
            p = subprocess.Popen([str(BIN_DIR / name), "--config", str(self.conf), "-f"],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self.procs.append(p)
        say(f"   started {name} {self.rid} (pid {p.pid})")

    def start(self) -> None:
        self._spawn("agentd")
        wait_for(f"{self.rid}'s agentd to answer", lambda: self.ctl("status").returncode == 0)
        self._spawn("agent-gw")  # after agentd: it made the identity key the gateway loads
        wait_for(f"{self.rid}'s agent-gw", lambda: self.gateway() is not None)
        say(f"   {self.rid}: ARPX 127.0.0.1:{self.arpx}, SDK API {self.url}, peer data plane 127.0.0.1:{self.peer}")

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)

    def logs(self) -> None:
        for name in ("agentd", "agent-gw"):
            log = self.dir / f"{name}.log"
            say(f"---- {self.rid} {name} log (tail)")
            say(log.read_bytes()[-3000:].decode(errors="replace") if log.exists() else "(none)")

    def ctl(self, *args: str) -> subprocess.CompletedProcess:
        argv = [str(BIN_DIR / "agentctl"), "--config", str(self.conf), *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=15, stdin=subprocess.DEVNULL)

    def ctl_json(self, *args: str) -> Any:
        p = self.ctl("--json", *args)
        check(p.returncode == 0, f"{self.rid}: agentctl {' '.join(args)} failed: {p.stderr.strip()}")
        return json.loads(p.stdout)

    def show(self, *args: str, only: str = "") -> str:
        say(f"\n   [{self.rid}] $ agentctl {' '.join(args)}" + (f" | grep '{only}'" if only else ""))
        p = self.ctl(*args)
        check(p.returncode == 0, f"{self.rid}: agentctl {' '.join(args)} failed: {p.stderr.strip()}")
        for line in p.stdout.splitlines():
            if only in line:
                say(f"   {line}")
        return p.stdout

    def fingerprint(self) -> str:
        return self.ctl_json("pki", "show")["identity"]["fingerprint"]

    def peer_state(self, rid: str) -> Dict[str, Any]:
        return next((p for p in self.ctl_json("peers")["peers"] if p["router_id"] == rid), {})

    def has_peer_route(self) -> bool:
        return any(r["source"] == "peer" for r in self.ctl_json("routes")["routes"])

    def gateway(self, after: float = 0.0) -> Any:
        """The gateway's counters in `agentctl stats`, from a report it
        made after `after` (a time.monotonic() value), or None."""
        gw = self.ctl_json("stats").get("gateway")
        if not isinstance(gw, dict) or time.monotonic() - gw.get("age_ms", 0) / 1000.0 < after:
            return None
        return gw


class Nsd:
    """Debian's NSD serving lab.example on a loopback port; stopped by PID."""

    def __init__(self, work: Path) -> None:
        self.dir = work / "dns"
        self.dir.mkdir()
        self.port = free_port()
        self.proc: Any = None

    def serve(self, lines: List[str]) -> None:
        (self.dir / "lab.example.zone").write_text(ZONE_HEAD + "".join(f"{l}\n" for l in lines))
        (self.dir / "nsd.conf").write_text(NSD_CONF.format(port=self.port, dir=self.dir))
        with open(self.dir / "nsd.out", "ab") as log:
            self.proc = subprocess.Popen(["nsd", "-d", "-c", str(self.dir / "nsd.conf")], stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log)
        say(f"   started nsd (pid {self.proc.pid}) on 127.0.0.1:{self.port} serving lab.example")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def candidate(r: Router, rid: str) -> Dict[str, Any]:
    return next((c for c in r.ctl_json("candidates")["candidates"] if c["id"] == rid), {})


def peer_part(a: Router, b: Router, dns: Nsd) -> None:
    say()
    say("== two routers (agentd + agent-gw each) find each other by unicast DNS-SD and peer over ARPX")
    say("   !!! gateway auth is 'none' and loopback endpoints are allowed (LAB MODE, demo only)")
    a.start()
    b.start()
    say("   each created its identity key on first start and browses _arpx._tcp.lab.example through"
        f" the resolver 127.0.0.1:{dns.port}")
    say()
    say("   the zone lines that publish router-a (what an operator adds to lab.example):")
    lines = []
    for r in (a, b):
        out = r.show("discovery", "records") if r is a else r.ctl("discovery", "records").stdout
        lines += [l for l in out.splitlines() if l and not l.startswith(";")]
    say()
    say("   both routers' lines go into lab.example, served by NSD:")
    t0 = time.monotonic()
    dns.serve(lines)
    cb = wait_for("router-a to find router-b", lambda: candidate(a, "router-b").get("version") and candidate(a, "router-b"))
    ca = wait_for("router-b to find router-a", lambda: candidate(b, "router-a").get("version") and candidate(b, "router-a"))
    say(f"   found in {(time.monotonic() - t0) * 1000:.0f} ms (lookups every 1-2 s here: refresh_min_s/refresh_max_s)")
    check(cb["source"] == "unicast" and cb["state"] == "pending", f"unexpected candidate {cb}")
    check(cb["fingerprint"] == b.fingerprint(), "router-b's announced key is not its identity key")
    b.show("candidates")
    say()
    say("   nothing peers by itself (manual admission). Each operator checks the fingerprint against the other")
    say("   router's `agentctl pki show`, then approves exactly the record version it saw:")
    b.show("approve", "router-a", str(ca["version"]))
    a.show("approve", "router-b", str(cb["version"]))
    wait_for("the ARPX session", lambda: b.peer_state("router-a").get("state") == "established")
    b.show("candidates")
    wait_for("router-a's route at router-b", b.has_peer_route)
    b.show("peers")
    b.show("routes")
    b.show("lookup", "office.print", "--tenant", "lab", "--explain")
    gw = wait_for("the warm peer connections",
                  lambda: (g := b.gateway()) and g["peer_handshakes_out"] >= 1 and g["peer_conns"] >= 2 and g)
    say("\n   each gateway dialed the other's peer listener once (h2 over TLS 1.3, both keys pinned); router-b:"
        f" handshakes out/in {gw['peer_handshakes_out']}/{gw['peer_handshakes_in']}, peer_conns"
        f" {gw['peer_conns']} (its own to router-a, which carries its calls, and router-a's to it)")


def call_part(a: Router, b: Router) -> None:
    import agentd_sdk  # installed by `make demo` (make venv)

    say()
    say("== an SDK agent registers at router-a, a caller at router-b calls it")
    calls: Counter = Counter()  # handler runs, per capability
    produced: Counter = Counter()  # the stream handler's last event
    agent = agentd_sdk.Agent(router=a.url, tenant="lab", agent_id="demo-agent", host="127.0.0.1",
                             allow_loopback=True)

    @agent.capability("demo.echo", version=1, idempotent=True, description="Echo back the input")
    def echo(payload):
        calls["demo.echo"] += 1
        return {"echo": payload, "served_by": "router-a's agent"}

    @agent.capability("demo.count", version=1, description="Count up to payload.to, one event per number")
    def count(payload):
        calls["demo.count"] += 1
        for n in range(1, int(payload.get("to", 3)) + 1):
            time.sleep(0.3)  # pacing, so the caller sees events arrive one by one
            produced["demo.count"] = n
            yield {"n": n, "text": f"chunk {n}"}

    handle = agent.start()
    try:
        say(f"   agent 'demo-agent' (this process) serves {handle.endpoint}, registered at router-a")
        caller = agentd_sdk.Client(router=b.url, tenant="lab", agent_id="demo-caller")
        for cap in ("demo.echo", "demo.count"):
            route = wait_for(f"{cap} to be routable at router-b", lambda: caller.route(cap))
            say(f"   router-b picks for {cap}: {json.dumps(route['route'])}")

        say()
        say("== sync call at router-b (POST /agent/v1/invoke)")
        status, headers, body = caller.request("POST", "/agent/v1/invoke",
                                               caller.envelope("demo.echo", {"text": "hello from router-b"}))
        rid = headers.get("x-agentd-route-id", "")
        say(f"   {status} X-Agentd-Route-Id: {rid}")
        say(f"   -> {json.dumps(body)}")
        check(status == 200 and body.get("echo") == {"text": "hello from router-b"}, f"unexpected answer {body!r}")
        check(rid.endswith("@router-a"), f"the call did not take router-a's path (route id {rid!r})")

        say()
        say("== stream at router-b (POST /agent/v1/invoke-stream, SSE), dropped after 3 events")
        t0 = time.monotonic()
        first = caller.stream("demo.count", {"to": 6}, idle_timeout=10)
        task_id = first.task_id
        for ev in first:
            say(f"   +{time.monotonic() - t0:.2f}s event id={ev.id} data={ev.data}")
            if ev.id == 3:
                break
        cursor = first.cursor
        del first  # closes the connection
        check(cursor == 3, f"the stream's first part ended at event {cursor}, not 3")
        say(f"   (connection closed; task {task_id}, last event id {cursor})")
        wait_for("the handler on router-a to go on producing", lambda: produced["demo.count"] >= 5)
        say(f"   +{time.monotonic() - t0:.2f}s meanwhile the handler on router-a produced events 4 and 5,"
            " kept in the stream's history there")

        say()
        say(f"== resume at router-b: the same request with Last-Event-ID: {cursor}")
        again = caller.stream("demo.count", {"to": 6}, task_id=task_id, last_event_id=cursor, idle_timeout=10)
        later = []
        for ev in again:
            say(f"   +{time.monotonic() - t0:.2f}s event id={ev.id} data={ev.data}")
            later.append(json.loads(ev.data)["n"])
        check(later == [4, 5, 6], f"the resume gave {later}, not only the later events 4, 5, 6")
        say(f"   the agent was called: demo.echo {calls['demo.echo']}x, demo.count {calls['demo.count']}x "
            "(the resume got 4 and 5 from the history on router-a at once, then 6 live: the handler did not run"
            " again)")
        check(calls == Counter({"demo.echo": 1, "demo.count": 1}), f"unexpected handler calls {dict(calls)}")

        say()
        say("== peer data-plane counters (agentctl stats)")
        since = time.monotonic()
        after = {r.rid: wait_for(f"a fresh stats report of {r.rid}", lambda: r.gateway(after=since)) for r in (a, b)}
        for r in (a, b):
            r.show("stats", only="peer ")
        for rid, counter in (("router-b", "peer_handshakes_out"), ("router-a", "peer_handshakes_in")):
            check(after[rid][counter] == 1, f"{rid}: {counter} is {after[rid][counter]}, not 1")
        say("\n   one handshake from router-b to router-a in all: its one warm connection carried the sync"
            " call, the stream and its resume")
    finally:
        handle.close()


def without_section(text: str, ty: str, name: str) -> str:
    """The UCI text without `config TYPE 'NAME'` (the file as agentd wrote
    it after the approval, whatever its quoting)."""
    out, skip = [], False
    for line in text.splitlines(keepends=True):
        words = line.split()
        if words and words[0] == "config":
            skip = len(words) >= 3 and words[1] == ty and words[2].strip("'\"") == name
        if not skip:
            out.append(line)
    return "".join(out)


def withdraw_part(a: Router, b: Router) -> None:
    say()
    say("== router-a's static route is withdrawn (its section removed, reload): gone at router-b")
    a.conf.write_text(without_section(a.conf.read_text(), "route", "printer"))
    a.ctl("reload")
    wait_for("the withdraw at router-b",
             lambda: not any(r["capability"] == "office.print" for r in b.ctl_json("routes")["routes"]))
    b.show("lookup", "office.print", "--tenant", "lab")


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still stop everything (finally) on SIGTERM
    for name in ("agentd", "agentctl", "agent-gw"):
        if not (BIN_DIR / name).is_file():
            say(f"demo: {BIN_DIR / name} is not built (run: cargo build -p agentd -p agent-gw --bins)")
            return 1
    if shutil.which("nsd") is None:
        say("demo: nsd is not installed (the DNS server of the DNS-SD part): apt-get install nsd")
        return 1
    work = Path(tempfile.mkdtemp(prefix="agentd-demo-mesh."))
    dns = Nsd(work)
    a, b = Router("router-a", work, dns.port), Router("router-b", work, dns.port)
    a.body += PRINTER
    a.conf.write_text(a.body)
    try:
        peer_part(a, b, dns)
        call_part(a, b)
        withdraw_part(a, b)
        say()
        say("mesh demo finished")
        return 0
    except Exception as exc:  # noqa: BLE001 - any failure ends the demo loudly, with the logs
        for r in (a, b):
            r.logs()
        say(f"\nmesh demo FAILED: {type(exc).__name__}: {exc}")
        return 1
    finally:
        b.stop()
        a.stop()
        dns.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
