"""A real DNS server for unicast DNS-SD tests: Debian's NSD (authoritative)
serving zones the test writes, in a namespace of its own on a LAN segment
shared with the routers (192.0.2.0/24), and optionally Unbound as a
validating resolver in front of it, with the zones signed by ldns-signzone
and their DS as Unbound's trust anchor (so Unbound sets the AD bit). Both
stopped by PID; the namespace goes with the mesh."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from harness.poll import wait_for

#: Where NSD listens inside the DNS namespace for Unbound (loopback).
_NSD_LOCAL_PORT = 5300
#: Unbound's port on the segment address.
VALIDATOR_PORT = 5353

_NSD_CONF = """server:
  ip-address: {addr}@53
  ip-address: 127.0.0.1@{local_port}
  username: ""
  chroot: ""
  zonesdir: "{dir}"
  pidfile: "{dir}/nsd.pid"
  database: ""
  xfrdfile: "{dir}/xfrd.state"
  zonelistfile: "{dir}/zone.list"
  logfile: "{dir}/nsd.log"
  server-count: 1
  verbosity: 1
remote-control:
  control-enable: no
"""

_UNBOUND_CONF = """server:
  interface: {addr}@{port}
  username: ""
  chroot: ""
  directory: "{dir}"
  pidfile: "{dir}/unbound.pid"
  use-syslog: no
  logfile: "{dir}/unbound.log"
  verbosity: 1
  num-threads: 1
  do-ip6: no
  do-not-query-localhost: no
  access-control: 0.0.0.0/0 allow
  module-config: "validator iterator"
  cache-max-ttl: 1
  cache-max-negative-ttl: 1
"""


def _run(argv: List[str], cwd: Optional[Path] = None) -> str:
    p = subprocess.run(argv, capture_output=True, cwd=cwd, stdin=subprocess.DEVNULL, timeout=30)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {p.stderr.decode(errors='replace').strip()}")
    return p.stdout.decode()


class DnsServer:
    """NSD at `addr`:53 in namespace `ns` (a `RouterNs` of the mesh),
    serving `zones` (name → record lines); `signed` also signs them and
    runs Unbound at `addr`:VALIDATOR_PORT with their DS as trust
    anchors."""

    def __init__(self, ns: Any, addr: str, dir: Path, zones: Sequence[str], signed: bool = False,
                 started: Optional[List["DnsServer"]] = None) -> None:
        self.ns = ns
        self.addr = addr
        self.dir = dir
        self.signed = signed
        self.dir.mkdir(parents=True, exist_ok=True)
        self.lines: Dict[str, List[str]] = {z: [] for z in zones}
        self.serial = 1
        self.keys: Dict[str, str] = {}
        self.procs: List[subprocess.Popen] = []
        self.nsd: Optional[subprocess.Popen] = None
        # Registered before anything starts: a failure below still stops
        # what did start.
        if started is not None:
            started.append(self)
        conf = _NSD_CONF.format(addr=addr, dir=dir, local_port=_NSD_LOCAL_PORT)
        for z in zones:
            conf += f'zone:\n  name: "{z}"\n  zonefile: "{self._zonefile(z)}"\n'
        (dir / "nsd.conf").write_text(conf, encoding="utf-8")
        if signed:
            for z in zones:
                self.keys[z] = _run(["ldns-keygen", "-a", "ED25519", "-k", z], cwd=dir).strip()
        self._write()
        with open(dir / "nsd.out", "ab") as log:
            self.nsd = subprocess.Popen(ns.exec_argv(["nsd", "-d", "-c", str(dir / "nsd.conf")]), stdout=log,
                                        stderr=log, stdin=subprocess.DEVNULL)
        self.procs.append(self.nsd)
        self._wait_serial()
        if signed:
            self._start_unbound(zones)

    def _zonefile(self, zone: str) -> Path:
        return self.dir / (f"{zone}.zone.signed" if self.signed else f"{zone}.zone")

    def _write(self) -> None:
        for z, lines in self.lines.items():
            text = (f"$ORIGIN {z}.\n$TTL 1\n"
                    f"@ IN SOA ns.{z}. admin.{z}. {self.serial} 3600 900 604800 1\n"
                    f"@ IN NS ns.{z}.\nns IN A {self.addr}\n" + "".join(f"{l}\n" for l in lines))
            (self.dir / f"{z}.zone").write_text(text, encoding="utf-8")
            if self.signed:
                _run(["ldns-signzone", "-f", str(self._zonefile(z)), f"{z}.zone", self.keys[z]], cwd=self.dir)

    def _wait_serial(self) -> None:
        for z in self.lines:
            def current(z: str = z) -> Optional[bool]:
                p = subprocess.run(self.ns.exec_argv(["kdig", f"@{self.addr}", "SOA", z, "+short", "+time=1"]),
                                   capture_output=True, stdin=subprocess.DEVNULL, timeout=10)
                words = p.stdout.decode().split()
                return True if len(words) >= 3 and words[2] == str(self.serial) else None

            wait_for(f"NSD serving {z} serial {self.serial}", current, timeout=10, interval=0.05)

    def _start_unbound(self, zones: Sequence[str]) -> None:
        conf = _UNBOUND_CONF.format(addr=self.addr, port=VALIDATOR_PORT, dir=self.dir)
        for z in zones:
            ds = (self.dir / f"{self.keys[z]}.ds").read_text(encoding="utf-8").split()
            conf += f'  trust-anchor: "{" ".join(ds)}"\n'
        for z in zones:
            conf += f'stub-zone:\n  name: "{z}"\n  stub-addr: 127.0.0.1@{_NSD_LOCAL_PORT}\n'
        (self.dir / "unbound.conf").write_text(conf, encoding="utf-8")
        with open(self.dir / "unbound.out", "ab") as log:
            self.procs.append(subprocess.Popen(
                self.ns.exec_argv(["unbound", "-d", "-c", str(self.dir / "unbound.conf")]), stdout=log, stderr=log,
                stdin=subprocess.DEVNULL))

        def validated() -> Optional[bool]:
            z = next(iter(self.lines))
            p = subprocess.run(self.ns.exec_argv(["kdig", f"@{self.addr}", "-p", str(VALIDATOR_PORT), "SOA", z,
                                                  "+time=1"]), capture_output=True, stdin=subprocess.DEVNULL,
                               timeout=10)
            return True if " ad;" in p.stdout.decode() or " ad " in p.stdout.decode() else None

        wait_for("Unbound answering with AD", validated, timeout=15, interval=0.1)

    def publish(self, zone: str, lines: Sequence[str]) -> None:
        """Replaces the records of `zone` (SOA and NS stay) and waits until
        NSD serves the new serial."""
        self.lines[zone] = [l for l in lines if l and not l.startswith(";")]
        self.serial += 1
        self._write()
        assert self.nsd is not None
        self.nsd.send_signal(1)  # SIGHUP: NSD reads its zone files again
        self._wait_serial()

    def close(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)
