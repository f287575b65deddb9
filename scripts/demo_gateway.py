#!/usr/bin/env python3
"""`make demo`, part 2: one router end to end.

Starts agentd and agent-gw on a demo config (auth 'none' — LAB MODE, for
this demo only), a Python echo agent written with our SDK that registers
`demo.echo` and `demo.count`, then a caller that invokes `demo.echo`,
streams `demo.count` and starts an async task, and the official MCP client
listing and calling the `echo` tool, printing what comes back.
Everything it started is stopped by PID on exit, and its temp dir removed.

Environment: BIN_DIR (default target/debug) holds agentd, agentctl,
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
import urllib.request
from pathlib import Path
from typing import Any, List

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

from demo_util import free_port, say, wait_for  # noqa: E402

BIN_DIR = Path(os.environ.get("BIN_DIR", REPO / "target" / "debug"))
if not BIN_DIR.is_absolute():
    BIN_DIR = REPO / BIN_DIR

CONFIG = """\
config agentd 'main'
\toption router_id 'demo'
\toption domain 'lab.example'
\toption identity '{work}/identity.key'
\toption ipc_socket '{work}/agentd.sock'
\toption state_dir '{work}'
\toption health_check 'off'
# !!! LAB MODE: the demo agent listens on 127.0.0.1; registrations may name
# !!! loopback only with this (never on a real router: SSRF to its services).
\toption allow_loopback_endpoints '1'

# !!! LAB MODE: auth 'none' — no bearer tokens. For this local demo only;
# !!! the default (and the only sane setting on a real LAN) is auth 'jwt'.
config gateway 'gateway'
\toption sdk_listen '127.0.0.1:{port}'
\toption public_listen 'off'
\toption admin_listen 'off'
\toption peer_listen 'off'
\toption auth 'none'
# Unauthenticated MCP/A2A callers act for this tenant (the demo agent's).
\toption protocol_tenant 'lab'

config arpx 'arpx'
\toption listen 'off'

config discovery 'discovery'
\toption enabled '0'

# The echo capability as an MCP tool (and an A2A skill): mapping is explicit.
config mapping 'echo'
\toption protocol 'mcp'
\toption capability 'demo.echo'
\toption title 'Echo'
\toption description 'Echo back the arguments'
\toption input_schema '{{"type":"object","properties":{{"text":{{"type":"string"}}}}}}'
"""


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=3) as r:
        return json.loads(r.read())


class Proc:
    def __init__(self, name: str, argv: List[str], log: Path) -> None:
        self.name, self.log = name, log
        self._f = open(log, "ab")
        self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._f, stderr=self._f)
        say(f"   started {name} (pid {self.p.pid})")

    def alive(self) -> bool:
        return self.p.poll() is None

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=5)
        self._f.close()


def main() -> int:
    import agentd_sdk  # installed by `make demo` (make venv)

    for b in ("agentd", "agentctl", "agent-gw"):
        if not (BIN_DIR / b).is_file():
            say(f"demo: {BIN_DIR / b} is not built (run: cargo build -p agentd -p agent-gw --bins)")
            return 1
    work = Path(tempfile.mkdtemp(prefix="agentd-demo-gw."))
    port = free_port()
    conf = work / "agentd.conf"
    conf.write_text(CONFIG.format(work=work, port=port))
    router = f"http://127.0.0.1:{port}"
    procs: List[Proc] = []
    try:
        say()
        say("== one router end to end: agentd + agent-gw + an SDK agent + a caller")
        say("   !!! gateway auth is 'none' (LAB MODE, demo only) — see the config below")
        say()
        say(conf.read_text())
        agentd = Proc("agentd", [str(BIN_DIR / "agentd"), "--config", str(conf), "-f"], work / "agentd.log")
        procs.append(agentd)
        wait_for("agentd's socket", lambda: (work / "agentd.sock").exists())
        gw = Proc("agent-gw", [str(BIN_DIR / "agent-gw"), "--config", str(conf), "-f"], work / "agent-gw.log")
        procs.append(gw)
        health = wait_for("agent-gw", lambda: (h := get_json(router + "/healthz")) and h.get("control_plane") == "up" and h)
        say(f"   agent-gw on {router}: /healthz {json.dumps(health)}")

        say()
        say("== the echo agent (scripts/demo_echo_agent.py, agentd_sdk) registers")
        agent = Proc(
            "echo agent",
            [sys.executable, str(REPO / "scripts" / "demo_echo_agent.py"), router],
            work / "agent.log",
        )
        procs.append(agent)
        caller = agentd_sdk.Client(router=router, tenant="lab", agent_id="demo-caller")
        route = wait_for("demo.echo to be routable", lambda: caller.route("demo.echo"))
        wait_for("demo.count to be routable", lambda: caller.route("demo.count"))
        say(f"   route for demo.echo: {json.dumps(route['route'])}")
        out = subprocess.run(
            [str(BIN_DIR / "agentctl"), "--socket", str(work / "agentd.sock"), "routes"],
            capture_output=True, text=True, timeout=10,
        )
        say("   $ agentctl routes")
        for line in out.stdout.splitlines():
            say(f"   {line}")

        say()
        say("== the caller invokes demo.echo")
        result = caller.invoke("demo.echo", {"text": "hello, router"})
        say(f"   invoke demo.echo {{'text': 'hello, router'}} -> {json.dumps(result)}")

        say()
        say("== the caller streams demo.count (SSE through agent-gw)")
        for ev in caller.stream("demo.count", {"to": 5}):
            say(f"   event id={ev.id} data={ev.data}")

        say()
        say("== the caller runs demo.echo as an async task")
        task = caller.invoke_async("demo.echo", {"job": 42})
        say(f"   started {task!r}; result -> {json.dumps(task.result(timeout=10))}")

        say()
        say("== an MCP client (the official `mcp` Python SDK, unmodified) lists the tools and calls echo")
        for mode in ([], ["--legacy"]):
            argv = [sys.executable, str(REPO / "scripts" / "mcp_client_example.py"), router + "/mcp",
                    "echo", json.dumps({"text": "hello over MCP"}), *mode]
            say(f"   $ mcp_client_example.py {router}/mcp echo '{{\"text\": \"hello over MCP\"}}' {' '.join(mode)}".rstrip())
            out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            if out.returncode != 0:
                raise RuntimeError(f"MCP client failed ({out.returncode}): {out.stderr[-2000:]}")
            say(f"   -> {out.stdout.strip()}")

        say()
        say("== a capability nobody serves is refused at once, with the reason")
        try:
            caller.invoke("demo.nothing", {})
        except agentd_sdk.AgentdError as exc:
            say(f"   invoke demo.nothing -> {type(exc).__name__}: {exc}")

        say()
        say("== stopping the agent withdraws its routes")
        agent.stop()
        gone = wait_for("demo.echo to be withdrawn", lambda: _refused(caller))
        say(f"   invoke demo.echo now -> {gone}")
        say()
        say("demo finished")
        return 0
    except BaseException:
        for p in procs:
            say(f"---- {p.name} log")
            say(p.log.read_bytes()[-3000:].decode(errors="replace"))
        raise
    finally:
        for p in reversed(procs):
            p.stop()
        shutil.rmtree(work, ignore_errors=True)


def _refused(caller: Any) -> str:
    import agentd_sdk

    try:
        caller.invoke("demo.echo", {})
    except agentd_sdk.NoRouteError as exc:
        return f"NoRouteError: {exc}"
    return ""


if __name__ == "__main__":
    sys.exit(main())
