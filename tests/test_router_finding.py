"""Agents find their router with no configuration at all (issue 24, parts
2 and 3; DESIGN §6, §9). A router namespace and a LAN host namespace share
one link; the host has no router URL in its environment and, unless a
step says otherwise, no default route.

* Our SDK, `router="auto"`: `AGENTD_ROUTER_URL`, then a bounded
  `_agentd._tcp` browse, then the IPv4 default gateway on :7446 — each
  step reached in turn.
* An unmodified nexilume agent (`router="auto"`) resolves
  `nexus-router.local` with getaddrinfo; the host resolves `.local` the
  Debian way (libnss-mdns → avahi-daemon), and agentd answers the name.
* A device that already holds `nexus-router.local` keeps it: agentd looks
  it up before probing, defers, and `agentctl status` says so.

The host's resolver setup never touches the machine's own files:
`ip netns exec` bind-mounts /etc/netns/<ns>/nsswitch.conf over
/etc/nsswitch.conf for the processes it starts (the file is removed at
the end), and avahi-daemon's socket directory is a tmpfs inside that
private mount namespace."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from harness.agentproc import AgentProcess
from harness.mesh import Link, MeshRouter, RouterNs
from harness.poll import wait_for

AGENTS = Path(__file__).resolve().parent / "agents"

_AVAHI_CONF = """[server]
{server}
use-ipv4=yes
use-ipv6=no
allow-interfaces={ifname}
enable-dbus=no
disallow-other-stacks=no
[wide-area]
enable-wide-area=no
[publish]
{publish}
"""

# Resolve `.local` through avahi (nss-mdns), everything else from files.
_NSSWITCH = """passwd: files
group: files
shadow: files
hosts: files mdns4_minimal [NOTFOUND=return] dns
networks: files
protocols: files
services: files
"""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, stdin=subprocess.DEVNULL)


def _lan(mesh: Any, *, announce: bool = True) -> Tuple[MeshRouter, RouterNs, Link]:
    """router-a (SDK API on every address, discovery on the LAN link in
    observe-only mode) and a LAN host namespace on that link."""
    r = mesh.router("router-a", gateway={"sdk_listen": "0.0.0.0:7446"})
    # The file's listener, not the harness's management-only override.
    argv = r.stack.gw.argv
    i = argv.index("--listen")
    del argv[i:i + 2]
    host = mesh.net.add_router("lan-host")
    link = mesh.net.link("router-a", "lan-host")
    _ip("-n", r.ns.netns, "link", "set", link.a_if, "multicast", "on")
    _ip("-n", host.netns, "link", "set", link.b_if, "multicast", "on")
    r.cfg.section("discovery").options = {
        "enabled": 1 if announce else 0,
        "admission": "off",
        "interface": [link.a_if],
    }
    return r, host, link


def _clean_env(**extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTD_ROUTER_URL", "NEXUS_ROUTER_URL")}
    env.update(extra)
    return env


def _routes_of(r: MeshRouter, capability: str, endpoint_host: str) -> List[Dict[str, Any]]:
    return [x for x in r.stack.routes()
            if x.get("capability") == capability and str(x.get("endpoint", "")).startswith(f"http://{endpoint_host}:")]


def _sdk_agent(host: RouterNs, workdir: Path, name: str, env: Dict[str, str]) -> AgentProcess:
    argv = host.exec_argv([sys.executable, str(AGENTS / "sdk_agent.py"), "auto", "lab", name, "30"])
    return AgentProcess(argv, workdir / f"{name}.log", env=env)


def test_sdk_auto_takes_the_environment_then_dns_sd_then_the_default_gateway(mesh, workdir):
    """Proves the order of `router="auto"` in our SDK, each step reached
    in turn on a host with nothing configured but what the step needs,
    and each ending in a registration at the router (its endpoint is the
    host's LAN address):

    1. `AGENTD_ROUTER_URL` set: used (source `environment`) although the
       router announces itself and is the default gateway;
    2. no variable, the router announces `_agentd._tcp`, and the host's
       default gateway is another machine that runs no router: the
       browse finds the router (source `dns-sd`, its LAN address and SDK
       port), so it comes before the gateway;
    3. announcements off (a reload: goodbyes) and the router as the
       default gateway: `default-gateway`, `http://<gateway>:7446`."""
    r, host, link = _lan(mesh)
    r.start()
    router_url = f"http://{link.a_addr}:7446"
    # mDNS probes before it announces (RFC 6762 §8.1): the alias, claimed
    # after a lookup of its own, is the last of the router's records out.
    wait_for("router-a's announcements out", lambda: _alias(r)["state"] == "answering", timeout=20)

    _ip("-n", host.netns, "route", "add", "default", "via", link.a_addr)
    agent = _sdk_agent(host, workdir, "by-env", _clean_env(AGENTD_ROUTER_URL=router_url))
    try:
        ready = agent.wait_message("ready", timeout=30)
        assert (ready["source"], ready["router"]) == ("environment", router_url), ready
        wait_for("by-env registered", lambda: _routes_of(r, "sdk.echo", link.b_addr), timeout=10)
    finally:
        assert agent.stop() == 0, agent.log_text()
    wait_for("by-env withdrawn", lambda: not _routes_of(r, "sdk.echo", link.b_addr), timeout=10)

    # The default gateway is now the test host's end of the lan-host's
    # management veth: on-link, running no router.
    _ip("-n", host.netns, "route", "replace", "default", "via", host.mgmt_host_addr)
    agent = _sdk_agent(host, workdir, "by-dnssd", _clean_env())
    try:
        ready = agent.wait_message("ready", timeout=30)
        assert (ready["source"], ready["router"]) == ("dns-sd", router_url), ready
        wait_for("by-dnssd registered", lambda: _routes_of(r, "sdk.echo", link.b_addr), timeout=10)
    finally:
        assert agent.stop() == 0, agent.log_text()
    wait_for("by-dnssd withdrawn", lambda: not _routes_of(r, "sdk.echo", link.b_addr), timeout=10)

    r.cfg.section("discovery").options["enabled"] = 0
    r.reload()
    _ip("-n", host.netns, "route", "replace", "default", "via", link.a_addr)
    agent = _sdk_agent(host, workdir, "by-gateway", _clean_env())
    try:
        ready = agent.wait_message("ready", timeout=30)
        assert (ready["source"], ready["router"]) == ("default-gateway", router_url), ready
        wait_for("by-gateway registered", lambda: _routes_of(r, "sdk.echo", link.b_addr), timeout=10)
    finally:
        assert agent.stop() == 0, agent.log_text()


def _segment_router(mesh: Any, name: str) -> MeshRouter:
    r = mesh.router(name, gateway={"sdk_listen": "0.0.0.0:7446"})
    argv = r.stack.gw.argv
    i = argv.index("--listen")
    del argv[i:i + 2]
    return r


def test_sdk_auto_picks_the_default_gateways_router_else_the_lowest_address(mesh, workdir):
    """Proves the documented choice among several announcing routers,
    and two agentd routers sharing a LAN over `nexus-router.local`:
    router-a (192.0.2.10) and router-b (192.0.2.11) announce
    `_agentd._tcp` on one LAN with the host (192.0.2.12). router-a,
    started first, answers `nexus-router.local`; router-b finds it taken
    and defers (status names router-a's address). With no default route
    the SDK picks the lowest address (router-a) and registers there;
    with router-b as its default gateway it picks router-b although
    router-a's address is lower, and registers there."""
    a = _segment_router(mesh, "router-a")
    b = _segment_router(mesh, "router-b")
    host = mesh.net.add_router("lan-host")
    seg = mesh.net.segment(["router-a", "router-b", "lan-host"])
    for r in (a, b):
        r.cfg.section("discovery").options = {"enabled": 1, "admission": "off", "interface": [seg[r.name][0]]}
    addr_a, addr_b, addr_host = seg["router-a"][1], seg["router-b"][1], seg["lan-host"][1]
    assert addr_a < addr_b, seg
    a.start()
    wait_for("router-a answers nexus-router.local", lambda: _alias(a)["state"] == "answering", timeout=20)
    b.start()
    alias_b = wait_for("router-b defers nexus-router.local",
                       lambda: (lambda x: x if x["state"] == "deferred" else None)(_alias(b)), timeout=20)
    assert alias_b["detail"].startswith(f"{addr_a}"), alias_b
    assert _alias(a)["state"] == "answering", _alias(a)

    for gateway, chosen, name in ((None, a, "lowest"), (addr_b, b, "gateway")):
        if gateway:
            _ip("-n", host.netns, "route", "add", "default", "via", gateway)
        agent = _sdk_agent(host, workdir, f"by-{name}", _clean_env())
        try:
            ready = agent.wait_message("ready", timeout=30)
            url = f"http://{seg[chosen.name][1]}:7446"
            assert (ready["source"], ready["router"]) == ("dns-sd", url), (name, ready)
            wait_for(f"by-{name} registered at {chosen.name}", lambda: _routes_of(chosen, "sdk.echo", addr_host),
                     timeout=10)
        finally:
            assert agent.stop() == 0, agent.log_text()


# ---- nexus-router.local ------------------------------------------------------


def _need(*tools: str) -> None:
    for tool in tools:
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} not installed (make test-python installs avahi-daemon and libnss-mdns)")
    if not any(Path(d, "libnss_mdns4_minimal.so.2").exists()
               for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib",
                         "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu")):
        pytest.fail("libnss-mdns not installed (make test-python installs it)")


class _HostResolver:
    """The LAN host resolves `.local` like a Debian desktop: nsswitch's
    `mdns4_minimal` asks avahi-daemon. The nsswitch.conf exists for this
    namespace only (/etc/netns/<ns>/, removed by `close`)."""

    def __init__(self, host: RouterNs, dir: Path, ifname: str) -> None:
        self.host = host
        self.dir = dir
        self.etc = Path("/etc/netns") / host.netns
        self.etc.mkdir(parents=True, exist_ok=False)
        (self.etc / "nsswitch.conf").write_text(_NSSWITCH, encoding="utf-8")
        dir.mkdir(parents=True, exist_ok=True)
        (dir / "avahi.conf").write_text(
            _AVAHI_CONF.format(server="", publish="disable-publishing=yes", ifname=ifname), encoding="utf-8")
        self.pidfile = dir / "avahi.pid"

    def run(self, argv: List[str], log: Path, env: Dict[str, str]) -> AgentProcess:
        """`argv` in the host namespace, in one mount namespace with an
        avahi-daemon of its own (started first, ready when its socket
        is; stopped by `close` by PID)."""
        script = (
            "set -e; mkdir -p /run/avahi-daemon; mount -t tmpfs tmpfs /run/avahi-daemon; "
            f"avahi-daemon -f {self.dir / 'avahi.conf'} --no-drop-root --no-chroot --no-rlimits "
            f">>{self.dir / 'avahi.log'} 2>&1 & echo $! >{self.pidfile}; "
            "i=0; until [ -S /run/avahi-daemon/socket ]; do i=$((i+1)); "
            "[ $i -le 100 ] || { echo 'avahi-daemon did not start' >&2; exit 1; }; sleep 0.1; done; "
            'exec "$@"'
        )
        return AgentProcess(self.host.exec_argv(["sh", "-c", script, "sh", *argv]), log, env=env)

    def close(self) -> None:
        try:
            pid = int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            pid = 0
        if pid > 0:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.etc, ignore_errors=True)


@pytest.fixture
def lan(mesh: Any) -> Iterator[Tuple[MeshRouter, RouterNs, Link]]:
    yield _lan(mesh)


def _alias(r: MeshRouter) -> Dict[str, Any]:
    return r.stack.ctl_json("status")["nexus_alias"]


def test_a_nexilume_agent_with_no_router_url_registers_through_nexus_router_local(lan, workdir):
    """Proves part 3 end to end: agentd answers `nexus-router.local`
    (`agentctl status`: `answering`, after its lookup and probe); an
    unmodified nexilume agent created with `router="auto"` on a LAN host
    with no `NEXUS_ROUTER_URL` and no default route (so the SDK's
    gateway fallback has nothing to use) resolves the name through
    libnss-mdns and avahi-daemon and registers both capabilities at our
    router, with its LAN address as endpoint."""
    _need("avahi-daemon")
    r, host, link = lan
    r.start()
    wait_for("router-a answers nexus-router.local",
             lambda: (lambda a: a if a["state"] == "answering" else None)(_alias(r)), timeout=20)
    resolver = _HostResolver(host, workdir / "lan-host", link.b_if)
    agent = None
    try:
        agent = resolver.run([sys.executable, str(AGENTS / "nexilume_agent.py"), "auto", "lab", "nx-auto", "30"],
                             workdir / "nexilume-auto.log", env=_clean_env())
        ready = agent.wait_message("ready", timeout=40)
        assert ready["endpoint"].startswith(f"http://{link.b_addr}:"), ready
        routes = wait_for("both nexilume routes at router-a",
                          lambda: (lambda rs: rs if len(rs) == 2 else None)(
                              [x for x in r.stack.routes() if str(x.get("route_id")) in ready["route_ids"]]))
        assert {x["endpoint"] for x in routes} == {ready["endpoint"]}, routes
    finally:
        if agent is not None:
            agent.stop()
        resolver.close()


class _NameHolder:
    """avahi-daemon on the LAN host publishing its own addresses as
    `nexus-router.local` (a Nexus router, or any device that took the
    name first)."""

    def __init__(self, host: RouterNs, dir: Path, ifname: str) -> None:
        dir.mkdir(parents=True, exist_ok=True)
        conf = dir / "holder.conf"
        conf.write_text(_AVAHI_CONF.format(
            server="host-name=nexus-router\ndomain-name=local", ifname=ifname,
            publish="publish-addresses=yes\npublish-hinfo=no\npublish-workstation=no\npublish-domain=no"),
            encoding="utf-8")
        self.log = dir / "holder.log"
        script = ("mkdir -p /run/avahi-daemon && mount -t tmpfs tmpfs /run/avahi-daemon && "
                  f"exec avahi-daemon -f {conf} --no-drop-root --no-chroot --no-rlimits")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(host.exec_argv(["sh", "-c", script]), stdout=log, stderr=log,
                                         stdin=subprocess.DEVNULL)
        wait_for("avahi holds nexus-router.local",
                 lambda: b"Host name is nexus-router.local" in self.log.read_bytes(), timeout=15)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


def test_agentd_leaves_nexus_router_local_to_a_device_that_holds_it(lan, workdir):
    """Proves the conflict rule: with another device on the LAN already
    answering `nexus-router.local` (avahi-daemon publishing it for the
    LAN host's address), agentd gives the name up instead of taking it:
    `agentctl status` says `deferred`, names the holder's address, in
    JSON and in the text form; and the holder, which would have to
    rename itself had agentd announced the name, keeps it."""
    _need("avahi-daemon")
    r, host, link = lan
    holder = _NameHolder(host, workdir / "holder", link.b_if)
    try:
        r.start()
        alias = wait_for("router-a defers nexus-router.local",
                         lambda: (lambda a: a if a["state"] == "deferred" else None)(_alias(r)), timeout=20)
        # Found by the lookup before any probe: the holder's address.
        assert alias["detail"].startswith(f"{link.b_addr}, ") or alias["detail"].startswith(f"{link.b_addr} "), alias
        assert "nexus-router.local (looked up before claiming it)" in alias["detail"], alias
        text = subprocess.run([str(r.stack.bins.agentctl), "--socket", str(r.cfg.socket), "status"],
                              capture_output=True, check=True, stdin=subprocess.DEVNULL).stdout.decode()
        assert "nexus-router.local deferred" in text, text
        # The holder kept its name: no conflict reached it.
        assert b"Host name conflict" not in holder.log.read_bytes(), holder.log.read_text()
    finally:
        holder.close()
