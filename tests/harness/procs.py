"""The daemons under test as subprocesses: started in the foreground (`-f`,
logging to a file), ready when they answer, stopped by PID."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from .config import Config
from .http import Http
from .poll import Fatal, wait_for

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Binaries:
    agentd: Path
    agentctl: Path
    agent_gw: Path


def locate_binaries(build: bool = True) -> Binaries:
    """The debug binaries of this checkout, built first unless
    `AGENTD_TEST_NO_BUILD=1` (then they must exist in `AGENTD_BIN_DIR` or
    `target/debug`). A no-op build costs well under a second."""
    bin_dir = Path(os.environ.get("AGENTD_BIN_DIR", REPO / "target" / "debug"))
    if build and os.environ.get("AGENTD_TEST_NO_BUILD") != "1":
        subprocess.run(
            ["cargo", "build", "--quiet", "-p", "agentd", "-p", "agent-gw", "--bins"],
            cwd=REPO,
            check=True,
            stdin=subprocess.DEVNULL,
        )
    bins = Binaries(bin_dir / "agentd", bin_dir / "agentctl", bin_dir / "agent-gw")
    for path in (bins.agentd, bins.agentctl, bins.agent_gw):
        if not path.is_file():
            raise FileNotFoundError(f"{path} was not built")
    return bins


class Daemon:
    """One subprocess, its log file and its PID."""

    def __init__(self, name: str, argv: List[str], log: Path, env: Optional[Dict[str, str]] = None) -> None:
        self.name = name
        self.argv = argv
        self.log = log
        self.env = env
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None, f"{self.name} already running"
        with open(self.log, "ab") as log:
            log.write(f"==== start {' '.join(self.argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
            )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        """SIGKILL by PID and reap."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    def stop(self, timeout: float = 5.0) -> Optional[int]:
        """SIGTERM, then SIGKILL if it does not exit in time. Returns the
        exit status (None if it was never started)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode

    def log_text(self, tail: int = 6000) -> str:
        try:
            data = self.log.read_bytes()
        except OSError:
            return ""
        return data[-tail:].decode("utf-8", "replace")

    def rss_kib(self) -> Dict[str, int]:
        """VmRSS and VmHWM from /proc/PID/status."""
        out: Dict[str, int] = {}
        with open(f"/proc/{self.pid}/status", encoding="ascii") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name in ("VmRSS", "VmHWM"):
                    out[name] = int(value.split()[0])
        return out


class Stack:
    """agentd + agent-gw on one config, as a test uses them."""

    def __init__(self, bins: Binaries, cfg: Config, cli_overrides: bool = True) -> None:
        self.bins = bins
        self.cfg = cfg
        cfg.write()
        # The config names the socket and listener; the command-line
        # overrides say the same (both daemons accept them). Without them
        # the daemons find both in the file only, as on a router.
        sock = ["--socket", str(cfg.socket)] if cli_overrides else []
        listen = ["--listen", f"{cfg.sdk_host}:{cfg.sdk_port}"] if cli_overrides else []
        self.agentd = Daemon("agentd", [str(bins.agentd), "--config", str(cfg.path), "-f", *sock], cfg.dir / "agentd.log")
        self.gw = Daemon(
            "agent-gw",
            [str(bins.agent_gw), "--config", str(cfg.path), "-f", *sock, *listen],
            cfg.dir / "agent-gw.log",
        )
        self.http = Http(cfg.sdk_host, cfg.sdk_port)

    # ---- lifecycle -------------------------------------------------------
    def start(self) -> "Stack":
        self.start_agentd()
        self.start_gw()
        return self

    def start_agentd(self, timeout: float = 15.0) -> None:
        self.agentd.start()

        def ready() -> bool:
            if not self.agentd.alive():
                raise Fatal(f"agentd exited ({self.agentd.proc.returncode}):\n{self.agentd.log_text()}")
            return self.cfg.socket.exists() and self.ctl_ok("status")

        wait_for("agentd to answer agentctl status", ready, timeout=timeout, interval=0.05)

    def start_gw(self, timeout: float = 15.0) -> None:
        self.gw.start()
        self.wait_gw_ready(timeout)

    def wait_gw_ready(self, timeout: float = 15.0, control_plane: str = "up") -> Dict[str, Any]:
        def ready() -> Optional[Dict[str, Any]]:
            if not self.gw.alive():
                raise Fatal(f"agent-gw exited ({self.gw.proc.returncode}):\n{self.gw.log_text()}")
            h = self.http.healthz()
            return h if h.get("control_plane") == control_plane else None

        return wait_for(f"agent-gw /healthz with control_plane {control_plane}", ready, timeout=timeout, interval=0.05)

    def stop(self) -> None:
        self.gw.stop()
        self.agentd.stop()

    def logs(self) -> str:
        return f"---- agentd log\n{self.agentd.log_text()}\n---- agent-gw log\n{self.gw.log_text()}"

    # ---- agentctl ---------------------------------------------------------
    def ctl(self, *args: str, timeout: float = 10.0) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.bins.agentctl), "--socket", str(self.cfg.socket), "--json", *args],
            capture_output=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def ctl_ok(self, *args: str) -> bool:
        return self.ctl(*args).returncode == 0

    def ctl_json(self, *args: str) -> Any:
        p = self.ctl(*args)
        if p.returncode != 0:
            raise AssertionError(f"agentctl {' '.join(args)} exited {p.returncode}: {p.stderr.decode(errors='replace')}")
        return json.loads(p.stdout)

    def routes(self) -> List[Dict[str, Any]]:
        """`agentctl routes --json` as a list of route objects (accepts a
        bare list or an object holding one under `routes`)."""
        value = self.ctl_json("routes")
        if isinstance(value, dict):
            value = value.get("routes", [])
        if not isinstance(value, list):
            raise AssertionError(f"agentctl routes --json: unexpected shape {value!r}")
        return value

    def route_ids(self) -> List[str]:
        return [str(r.get("route_id") or r.get("id")) for r in self.routes()]

    # ---- SDK API shortcuts -----------------------------------------------
    def register(self, body: Dict[str, Any], headers: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        r = self.http.post("/agent/v1/register", body, headers=headers)
        if r.status != 200:
            raise AssertionError(f"register {body.get('intent')}: {r.describe()}")
        return r.json()

    def wait_routable(self, envelope: Dict[str, Any], timeout: float = 10.0, headers: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        """Poll the gateway's route lookup until the capability resolves
        (the FIB replica has caught up with agentd)."""

        def check() -> Optional[Dict[str, Any]]:
            r = self.http.post("/agent/v1/route", envelope, headers=headers)
            return r.json() if r.status == 200 else None

        return wait_for(f"route for {envelope['intent']} on agent-gw", check, timeout=timeout)
