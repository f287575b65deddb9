"""The per-agent address service as it comes up (issue 23, DESIGN §7
"IPv6 /128"): agentd resolves `ipv6.prefix 'auto'` from the upstream
link's own addresses, turns proxy NDP on there, removes the addresses
and proxy entries an earlier run left in its prefix (and nothing else),
and says up front in `agentctl status` why it cannot bind addresses —
no prefix upstream, a link it cannot make, no CAP_NET_ADMIN.

Each router in a namespace of its own; addresses only of 2001:db8::/32.
The link holding the /128s is the namespace's loopback where the kernel
has no dummy driver (this machine's has none: the test says which case
it met)."""

from __future__ import annotations

import subprocess
from typing import List

from harness.backend import registration
from harness.config import Section
from harness.poll import wait_for


def ip(netns: str, *argv: str) -> str:
    p = subprocess.run(["ip", "-n", netns, *argv], capture_output=True, text=True, timeout=20,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, f"ip -n {netns} {' '.join(argv)}: {p.stderr}"
    return p.stdout


def addrs(netns: str, dev: str) -> List[str]:
    out = ip(netns, "-6", "-o", "addr", "show", "dev", dev)
    return [line.split()[3] for line in out.splitlines() if " inet6 " in line]


def proxies(netns: str, dev: str) -> List[str]:
    return [line.split()[0] for line in ip(netns, "-6", "neigh", "show", "proxy", "dev", dev).splitlines() if line]


def ipv6_status(r):
    return r.stack.ctl_json("status")["ipv6"]


def upstream(mesh, r):
    """A veth from `r` to a namespace of its own (the upstream); `r`'s
    end of it."""
    mesh.router(f"{r.name}-up")
    return mesh.net.link(r.name, f"{r.name}-up").a_if


def test_auto_prefix_proxy_ndp_and_what_an_earlier_run_left(mesh):
    """Proves the service's start in `ndp-proxy` mode: with
    2001:db8:88:1::1/64 on the upstream link, `auto` resolves to
    2001:db8:88:1::/64; proxy_ndp is on for the upstream; a /128 of that
    prefix left on the address link and a proxy entry of it left
    upstream are removed, while an address outside the prefix stays;
    status says ready, 0 of max_addresses bound, and how many it
    removed."""
    a = mesh.router("router-a")
    up = upstream(mesh, a)
    ns = a.ns.netns
    ip(ns, "-6", "addr", "add", "2001:db8:88:1::1/64", "dev", up, "nodad")
    ip(ns, "-6", "addr", "add", "2001:db8:88:1::dead/128", "dev", "lo")
    ip(ns, "-6", "addr", "add", "2001:db8:99::1/128", "dev", "lo")
    ip(ns, "-6", "neigh", "add", "proxy", "2001:db8:88:1::beef", "dev", up)
    a.cfg.sections.append(Section("ipv6", "ipv6", {
        "mode": "ndp-proxy", "prefix": "auto", "interface": "lo", "upstream_interface": up, "max_addresses": "16"}))
    a.start()
    v = ipv6_status(a)
    assert v["ready"] and v["problems"] == [], v
    assert v["prefix"] == "2001:db8:88:1::/64" and v["configured_prefix"] == "auto", v
    assert (v["bound"], v["max_addresses"], v["stale_removed"]) == (0, 16, 2), v
    left = addrs(ns, "lo")
    assert "2001:db8:88:1::dead/128" not in left and "2001:db8:99::1/128" in left, left
    assert proxies(ns, up) == [], proxies(ns, up)
    on = subprocess.run(["ip", "netns", "exec", ns, "cat", f"/proc/sys/net/ipv6/conf/{up}/proxy_ndp"],
                        capture_output=True, text=True, timeout=10).stdout.strip()
    assert on == "1"
    text = subprocess.run([str(a.stack.bins.agentctl), "--socket", str(a.stack.cfg.socket), "status"],
                          capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL).stdout
    assert "ndp-proxy: 2001:db8:88:1::/64 (auto) on lo, 0 of 16 bound" in text, text


def test_what_keeps_addresses_from_being_bound_is_in_status_up_front(mesh):
    """Proves misconfiguration is reported at start, not at the first
    request: `auto` with no global prefix upstream names the upstream
    link; a link that does not exist is made as a dummy link or — on a
    kernel without the dummy driver — refused naming kmod-dummy; after a
    reload that fixes both the service is ready; and agentd started
    without CAP_NET_ADMIN says it holds none."""
    a = mesh.router("router-a")
    up = upstream(mesh, a)
    sec = Section("ipv6", "ipv6", {"mode": "routed-prefix", "prefix": "auto", "interface": "agent7",
                                   "upstream_interface": up})
    a.cfg.sections.append(sec)
    a.start()
    v = ipv6_status(a)
    assert not v["ready"] and v["prefix"] is None, v
    assert any(f"{up} has no global IPv6 prefix" in p for p in v["problems"]), v

    sec.options["prefix"] = "2001:db8:77::/56"
    a.reload()
    v = wait_for("the reloaded service", lambda: (lambda s: s if s["prefix"] else None)(ipv6_status(a)), timeout=10)
    assert v["prefix"] == "2001:db8:77::/56", v
    if v["ready"]:
        print("this kernel has the dummy driver: agentd made agent7")
        assert "dummy" in ip(a.ns.netns, "-d", "link", "show", "agent7"), "ready without its link"
    else:
        print("this kernel has no dummy driver: agentd says so")
        assert any("agent7" in p and "kmod-dummy" in p for p in v["problems"]), v

    sec.options["interface"] = "lo"
    a.reload()
    v = wait_for("the service on lo", lambda: (lambda s: s if s["interface"] == "lo" else None)(ipv6_status(a)),
                 timeout=10)
    assert v["ready"] and v["problems"] == [], v

    b = mesh.router("router-b")
    b.cfg.sections.append(Section("ipv6", "ipv6", {"mode": "routed-prefix", "prefix": "2001:db8:78::/64",
                                                   "interface": "lo"}))
    inner = b.stack.agentd.argv[4:]  # after `ip netns exec NS`
    b.stack.agentd.argv = b.ns.exec_argv(["setpriv", "--bounding-set", "-net_admin", "--", *inner])
    b.start()
    v = ipv6_status(b)
    assert not v["ready"], v
    assert any("CAP_NET_ADMIN" in p for p in v["problems"]), v


def test_an_agent_that_asks_holds_its_address_for_as_long_as_its_route_lives(mesh):
    """Proves binding in `ndp-proxy` mode: a nexilume-shaped registration
    (`public_ipv6: "auto"`) gets an address of the prefix, added to the
    address link with a proxy entry upstream (read back from the kernel),
    and the reply says so — offering no `public_endpoint` while agent-gw
    does not serve it; with `max_addresses 1` a second agent's
    registration still succeeds and its reply names the limit; when the
    first route is unregistered the address and its proxy entry go, the
    second agent then gets one when it registers again, and the first
    agent registering again gets its old address back, and again after
    agentd is stopped and started (its lease restored); a route whose
    lease ends loses its address without anyone asking."""
    a = mesh.router("router-a", agentd={"min_lease": "1"})
    up = upstream(mesh, a)
    ns = a.ns.netns
    a.cfg.sections.append(Section("ipv6", "ipv6", {
        "mode": "ndp-proxy", "prefix": "2001:db8:66:1::/64", "interface": "lo", "upstream_interface": up,
        "max_addresses": "1"}))
    a.start()
    backend = a.lan_backend()
    try:
        first = registration("v6.one", backend.endpoint, name="one", lease_seconds=60, public_ipv6="auto")
        got = a.stack.register(first)
        addr = got["public_ipv6_status"]["address"]
        assert addr and addr.startswith("2001:db8:66:1:"), got
        assert "public_endpoint" not in got and "public_ipv6" not in got, got
        assert f"{addr}/128" in addrs(ns, "lo") and proxies(ns, up) == [addr], (addrs(ns, "lo"), proxies(ns, up))
        assert ipv6_status(a)["bound"] == 1

        second = registration("v6.two", backend.endpoint, name="two", lease_seconds=60, public_ipv6="auto")
        got2 = a.stack.register(second)
        assert got2["public_ipv6_status"]["address"] is None, got2
        assert "max_addresses" in got2["public_ipv6_status"]["reason"], got2

        r = a.stack.http.post("/agent/v1/unregister", {"route_id": got["route_id"]})
        assert r.status == 200, r.describe()
        wait_for("the first address to go", lambda: f"{addr}/128" not in addrs(ns, "lo"), timeout=10)
        assert proxies(ns, up) != [addr]
        again2 = a.stack.register(second)
        addr2 = again2["public_ipv6_status"]["address"]
        assert addr2 and addr2 != addr, again2
        assert f"{addr2}/128" in addrs(ns, "lo")

        a.stack.http.post("/agent/v1/unregister", {"route_id": again2["route_id"]})
        wait_for("the second address to go", lambda: f"{addr2}/128" not in addrs(ns, "lo"), timeout=10)
        back = a.stack.register(first)
        assert back["public_ipv6_status"]["address"] == addr, (back, addr)

        # agentd stopped (it writes its leases on the way out) and started
        # again within the boot: the lease comes back from its state file
        # with its request, and so does the address (removed as stale at
        # start, bound again with the restored route).
        a.stack.agentd.stop()
        a.stack.start_agentd()
        wait_for("the restored route's address", lambda: ipv6_status(a)["bound"] == 1, timeout=10)
        assert f"{addr}/128" in addrs(ns, "lo") and proxies(ns, up) == [addr], addrs(ns, "lo")
        a.stack.wait_gw_ready()

        short = registration("v6.one", backend.endpoint, name="one", lease_seconds=1, public_ipv6="auto")
        a.stack.register(short)
        wait_for("the address of the ended lease to go", lambda: f"{addr}/128" not in addrs(ns, "lo"), timeout=15)
        wait_for("status to count none bound", lambda: ipv6_status(a)["bound"] == 0, timeout=5)
    finally:
        backend.close()
