#!/usr/bin/env python3
"""`make demo`, part 3: two routers peered over ARPX.

router-a and router-b run agentd on loopback ports, each with its own
identity key (created at first start). Their fingerprints come from
`agentctl pki show`, each pins the other in a `peer` section, and a reload
(SIGHUP) brings the TLS 1.3 session up. router-a has a static route; at
router-b it shows up as a peer route with path [router-a]: `agentctl
peers`, `routes` and `lookup --explain` there. Everything started is
stopped by PID on exit and the temp dir removed.

Environment: BIN_DIR (default target/debug) holds agentd and agentctl.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict

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

config arpx 'arpx'
\toption listen '127.0.0.1:{arpx}'

config discovery 'discovery'
\toption enabled '0'
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

PEER = """
config peer '{name}'
\toption router_id '{rid}'
\toption address '127.0.0.1'
\toption port '{arpx}'
\toption key_fingerprint '{fp}'
"""


class Router:
    def __init__(self, rid: str, work: Path) -> None:
        self.rid = rid
        self.dir = work / rid
        self.dir.mkdir()
        self.arpx = free_port()
        self.conf = self.dir / "agentd.conf"
        self.body = BASE.format(rid=rid, dir=self.dir, arpx=self.arpx)
        self.conf.write_text(self.body)
        self.log = self.dir / "agentd.log"
        self.proc: Any = None

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([str(BIN_DIR / "agentd"), "--config", str(self.conf), "-f"],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        say(f"   started agentd {self.rid} (pid {self.proc.pid}, ARPX on 127.0.0.1:{self.arpx})")
        wait_for(f"{self.rid} to answer", lambda: self.ctl("status", quiet=True).returncode == 0)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)

    def ctl(self, *args: str, quiet: bool = False) -> subprocess.CompletedProcess:
        argv = [str(BIN_DIR / "agentctl"), "--config", str(self.conf), *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=15, stdin=subprocess.DEVNULL)

    def show(self, *args: str) -> str:
        say(f"\n   [{self.rid}] $ agentctl {' '.join(args)}")
        p = self.ctl(*args)
        for line in (p.stdout + p.stderr).splitlines():
            say(f"   {line}")
        return p.stdout

    def fingerprint(self) -> str:
        p = self.ctl("--json", "pki", "show")
        return json.loads(p.stdout)["identity"]["fingerprint"]

    def peer_with(self, other: "Router") -> None:
        self.body += PEER.format(name=other.rid.replace("-", "_"), rid=other.rid, arpx=other.arpx,
                                 fp=other.fingerprint())
        self.conf.write_text(self.body)

    def peer_state(self, rid: str) -> Dict[str, Any]:
        peers = json.loads(self.ctl("--json", "peers").stdout)["peers"]
        return next((p for p in peers if p["router_id"] == rid), {})


def main() -> int:
    for b in ("agentd", "agentctl"):
        if not (BIN_DIR / b).is_file():
            say(f"demo: {BIN_DIR / b} is not built (run: cargo build -p agentd --bins)")
            return 1
    work = Path(tempfile.mkdtemp(prefix="agentd-demo-mesh."))
    a, b = Router("router-a", work), Router("router-b", work)
    a.body += PRINTER
    a.conf.write_text(a.body)
    try:
        say()
        say("== two routers peered over ARPX (TLS 1.3, pinned keys) on loopback")
        a.start()
        b.start()
        say("   each created its identity key on first start; their fingerprints:")
        a.show("pki", "show")
        say()
        say("   each router pins the other (a peer section), then reloads (SIGHUP):")
        a.peer_with(b)
        b.peer_with(a)
        say(PEER.format(name="router_a", rid="router-a", arpx=a.arpx, fp=a.fingerprint()).rstrip()
            .replace("\n", "\n   "))
        a.ctl("reload")
        b.ctl("reload")
        wait_for("the session", lambda: b.peer_state("router-a").get("state") == "established")
        wait_for("router-a's route at router-b",
                 lambda: any(r["source"] == "peer" for r in json.loads(b.ctl("--json", "routes").stdout)["routes"]))
        b.show("peers")
        a.show("routes")
        b.show("routes")
        b.show("lookup", "office.print", "--tenant", "lab", "--explain")
        say()
        say("== router-a's route is withdrawn (its section removed, reload): gone at router-b")
        a.body = a.body.replace(PRINTER, "")
        a.conf.write_text(a.body)
        a.ctl("reload")
        wait_for("the withdraw at router-b",
                 lambda: not any(r["source"] == "peer" for r in json.loads(b.ctl("--json", "routes").stdout)["routes"]))
        b.show("lookup", "office.print", "--tenant", "lab")
        say()
        say("mesh demo finished")
        return 0
    except BaseException:
        for r in (a, b):
            say(f"---- {r.rid} log")
            say(r.log.read_bytes()[-3000:].decode(errors="replace") if r.log.exists() else "")
        raise
    finally:
        b.stop()
        a.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
