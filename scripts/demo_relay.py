#!/usr/bin/env python3
"""`make demo`, part 4: a call reaches an agent behind a NAT through a relay
(docs/relay.md).

Three routers in network namespaces (needs root): router-a is a relay
(`relay.mode 'server'`), router-c a caller's router peered with it, and
router-b sits behind a NAT router (nftables masquerade; nothing gets in)
with `relay.mode 'client'` and router-a as its relay. The demo shows that
router-a cannot open a connection to router-b, that router-b's session
with its relay is up anyway (`agentctl status` on both ends, saying that
the relay sees payloads), registers an echo handler on router-b's LAN,
and calls it from router-c: the answer names the route `…@router-a`, and
router-c's route shows the path router-b → router-a. Keys are pinned
both ways (no domain CA). Gateway auth is 'none' (LAB MODE, this demo
only). Everything started is stopped by PID and the namespaces deleted
on exit.

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
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "scripts"))

from demo_util import say, wait_for  # noqa: E402
from harness.backend import Backend, registration  # noqa: E402
from harness.config import Section  # noqa: E402
from harness.http import envelope  # noqa: E402
from harness.mesh import ARPX_PORT, PEER_PORT, MeshNet, MeshRouter  # noqa: E402
from harness.procs import Binaries  # noqa: E402
from harness.relay import connect_from, nat_box  # noqa: E402

BIN_DIR = Path(os.environ.get("BIN_DIR", REPO / "target" / "debug"))
if not BIN_DIR.is_absolute():
    BIN_DIR = REPO / BIN_DIR


def show(r: MeshRouter, *args: str, only: str = "", first: bool = False) -> None:
    """`agentctl ARGS` at `r`, its lines containing `only` (`first`: the
    lines whose first word starts with it)."""
    say(f"\n   [{r.name}] $ agentctl {' '.join(args)}" + (f" | grep '{'^ *' if first else ''}{only}'" if only else ""))
    p = subprocess.run([str(BIN_DIR / "agentctl"), "--socket", str(r.stack.cfg.socket), *args],
                       capture_output=True, text=True, timeout=15, stdin=subprocess.DEVNULL)
    for line in p.stdout.splitlines():
        if (line.strip().startswith(only) if first else only in line):
            say(f"   {line}")


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if os.geteuid() != 0:
        say("relay demo: skipped, it needs root (a NAT router in network namespaces)")
        return 0
    bins = Binaries(BIN_DIR / "agentd", BIN_DIR / "agentctl", BIN_DIR / "agent-gw")
    work = Path(tempfile.mkdtemp(prefix="agentd-demo-relay."))
    net = MeshNet()
    routers = {}
    backend = None
    try:
        say("== relay: router-b behind a NAT reaches the mesh through relay router-a")
        for n in ("router-a", "router-b", "router-c"):
            routers[n] = MeshRouter(bins, net, net.add_router(n), work / n, agentd={"log_level": "info"})
        a, b, c = routers["router-a"], routers["router-b"], routers["router-c"]
        nat = net.add_router("nat")
        inside = net.link("router-b", "nat")
        wan = net.link("nat", "router-a")
        net.link("router-a", "router-c")
        a.peer_with(c)
        c.peer_with(a)
        nat_box(nat, [(b.ns, inside)], [(a.ns, wan)])
        a.cfg.sections.append(Section("relay", "relay", {"mode": "server",
                                                           "client_key_fingerprint": [b.key.fingerprint]}))
        relay_at = f"{wan.addr_of('router-a')}:{ARPX_PORT}"
        b.cfg.sections.append(Section("relay", "relay", {"mode": "client", "server": [relay_at],
                                                           "server_key_fingerprint": [a.key.fingerprint],
                                                           "data_port": PEER_PORT}))
        for r in (a, c, b):
            r.start()
        say(f"   router-b {inside.addr_of('router-b')} behind the NAT; relay router-a at {relay_at}")
        why = connect_from(a.ns.netns, inside.addr_of("router-b"), PEER_PORT)
        say(f"   router-a → router-b:{PEER_PORT} directly: {'OPEN (the NAT let it in!)' if why is None else f'blocked by the NAT ({why})'}")
        if why is None:
            raise RuntimeError("the NAT let a connection in")
        a.wait_established("router-b", timeout=30)
        show(b, "status", only="relay", first=True)
        show(a, "status", only="relay", first=True)

        backend = Backend(host=b.ns.mgmt_host_addr)
        rid = b.stack.register(registration("demo.echo", backend.endpoint, tenant="lab", name="echo"))["route_id"]
        say(f"\n== an echo handler on router-b's LAN registers demo.echo (route {rid})")
        wait_for("router-c to learn the route", lambda: [r for r in c.stack.routes() if r.get("route_id") == rid],
                 timeout=20)
        show(c, "routes", only="demo.echo")
        env = envelope("demo.echo", {"hello": "from router-c"})
        say("\n== a caller on router-c's LAN calls demo.echo")
        resp = wait_for("the call through the relay", lambda: (lambda r: r if r.status == 200 else None)(
            c.stack.http.post("/agent/v1/invoke", env)), timeout=20)
        say(f"   HTTP {resp.status}, served by route {resp.header('x-agentd-route-id')}")
        say(f"   answer: {json.dumps(resp.json()['echo'])}")
        if resp.json()["echo"] != env["payload"] or not str(resp.header("x-agentd-route-id")).endswith("@router-a"):
            raise RuntimeError(f"unexpected answer {resp.describe()}")
        say("\nrelay demo finished")
        return 0
    except Exception as exc:  # noqa: BLE001 - any failure ends the demo loudly, with the logs
        for r in routers.values():
            say(f"---- {r.name}\n{r.stack.logs()[-2500:]}")
        say(f"\nrelay demo FAILED: {type(exc).__name__}: {exc}")
        return 1
    finally:
        if backend is not None:
            backend.close()
        for r in routers.values():
            r.stop()
        net.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
