"""Registrations that point into the mesh, and bootstrap for tenants the
operator did not list (issue 20 items 6 and 3), between routers B and C
linked in namespaces.

A host on C's LAN (the test host, on C's management veth) holds only what
trusted-LAN bootstrap gives it. Before: it registered endpoints on B's
side of the B–C link (`:7446`, `:7444`, `:7447`, `:7443`, `:22`) and on
C's own link address, and invoking them made C's gateway connect into the
mesh; it also bootstrapped a token for any tenant (`lab`). Now each is
refused typed (400 `endpoint_refused` / `endpoint_not_lan`, 403
`forbidden` / `tenant_not_bootstrappable`), what the operator explicitly
allows works, and the B–C session and an honest caller at B calling C's
LAN agent are unaffected throughout (sampled after every attempt). A host
name that resolves into the mesh only after it was registered (DNS
rebinding) is refused when the gateway connects."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

from harness.backend import registration
from harness.http import envelope
from harness.jwt import bearer
from harness.poll import wait_for

# What the attacker aims at on B: the SDK API, ARPX, the peer data plane,
# the public ingress, ssh.
MESH_PORTS = (7446, 7444, 7447, 7443, 22)


class Scene:
    def __init__(self, mesh: Any, before_start: Optional[Callable[["Scene"], None]] = None) -> None:
        self.b = mesh.router("router-b")
        # C: JWT auth with trusted-LAN bootstrap for its LAN (the test
        # host's management network); bootstrap_tenant left at its default.
        self.c = mesh.router("router-c", gateway={"auth": "jwt", "bootstrap_networks": ["203.0.113.0/24"]})
        mesh.link("router-b", "router-c")
        self.link = mesh.net.find_link("router-b", "router-c")
        if before_start is not None:
            before_start(self)
        self.b.start()
        self.c.start()
        self.b.wait_established("router-c")
        self.c.wait_established("router-b")
        self.session_since = self._uptimes()
        self.samples = 0
        self.honest_ok = 0
        self.honest_total = 0

    def _uptimes(self) -> Tuple[int, int]:
        pb, pc = self.b.peer("router-c"), self.c.peer("router-b")
        assert pb and pb["state"] == "established", pb
        assert pc and pc["state"] == "established", pc
        return (int(pb["state_ms"]), int(pc["state_ms"]))

    def sample(self) -> None:
        """Both ends of B–C still established and never re-established
        (their uptimes only grow), and one honest call at B of C's LAN
        agent."""
        now = self._uptimes()
        assert now[0] >= self.session_since[0] and now[1] >= self.session_since[1], (self.session_since, now)
        self.session_since = now
        self.samples += 1
        r = self.honest_call({"n": self.honest_total})
        self.honest_total += 1
        if r.status == 200:
            self.honest_ok += 1

    def honest_call(self, payload: Any) -> Any:
        return self.b.stack.http.post("/agent/v1/invoke", envelope("scope.echo", payload, tenant="default",
                                                                   source_agent="agent://default/caller"))

    def wait_honest(self) -> None:
        """Until the honest call at B of C's agent succeeds (the route
        reached B and the B→C data plane is up)."""
        wait_for("router-b: a call of scope.echo on C's LAN to succeed",
                 lambda: self.honest_call({"warm": 1}).status == 200, timeout=30, interval=0.1)

    def bootstrap(self, tenant: str, name: str) -> Any:
        return self.c.stack.http.post("/agent/v1/bootstrap", {"tenant": tenant, "origin": f"agent://{tenant}/{name}"})

    def token(self, tenant: str, name: str) -> Dict[str, str]:
        r = self.bootstrap(tenant, name)
        assert r.status == 200, r.describe()
        return bearer(r.json()["access_token"])


@pytest.fixture
def scene(mesh):
    s = Scene(mesh)
    backend = s.c.lan_backend()
    try:
        # The honest agent on C's LAN, in the bootstrappable tenant.
        honest = registration("scope.echo", backend.endpoint, tenant="default", name="echo", lease_seconds=120)
        s.c.stack.register(honest, headers=s.token("default", "echo"))
        s.wait_honest()
        yield s, backend
    finally:
        backend.close()


def _refused_not_lan(r: Any, address: str) -> None:
    assert r.status == 400, r.describe()
    err = r.json()["error"]
    assert err["code"] == "endpoint_refused", r.describe()
    assert err["reason"] == "endpoint_not_lan", r.describe()
    assert address in err["message"], r.describe()


def test_lan_registrations_cannot_point_into_the_mesh(scene):
    """Proves that from C's LAN, registrations naming B's side of the B–C
    link (every suite port and ssh, also spelled as IPv4-mapped IPv6) or
    C's own link address are refused 400 `endpoint_refused`, reason
    `endpoint_not_lan`, naming the address — although C runs in lab mode
    with loopback/own-address endpoints allowed — and none reaches C's
    RIB; that a LAN endpoint registers; that after the operator lists the
    link's prefix in `agentd.endpoint_allow_prefix` (and reloads) the same
    endpoint on B's side registers; and that, sampled after every
    attempt, the B–C session stays established (never re-established)
    and every honest call at B of C's LAN agent succeeds."""
    s, backend = scene
    headers = s.token("default", "attacker")
    b_addr, c_addr = s.link.addr_of("router-b"), s.link.addr_of("router-c")
    attempts: List[Tuple[str, str]] = [(f"http://{b_addr}:{port}/", b_addr) for port in MESH_PORTS]
    attempts.append((f"http://[::ffff:{b_addr}]:7444/", b_addr))
    attempts.append((f"http://{c_addr}:8080/", c_addr))
    for url, address in attempts:
        r = s.c.stack.http.post("/agent/v1/register",
                                registration("scope.scan", url, tenant="default", name="attacker"), headers=headers)
        _refused_not_lan(r, address)
        s.sample()
    # A renewal cannot move a LAN route into the mesh either.
    lan = s.c.stack.register(registration("scope.lan", f"http://{s.c.ns.mgmt_host_addr}:9/x", tenant="default",
                                          name="attacker"), headers=headers)
    r = s.c.stack.http.post("/agent/v1/renew", {"route_id": lan["route_id"], "endpoint": f"http://{b_addr}:7444/"},
                            headers=headers)
    _refused_not_lan(r, b_addr)
    s.sample()
    endpoints = {x["endpoint"] for x in s.c.stack.routes() if x.get("source") == "local"}
    assert not any(b_addr in e or c_addr in e for e in endpoints), endpoints

    # The operator allows the link's prefix explicitly: now it is theirs.
    s.c.cfg.section("agentd").options["endpoint_allow_prefix"] = [f"{b_addr}/32"]
    s.c.reload()
    info = s.c.stack.register(registration("scope.allowed", f"http://{b_addr}:8080/", tenant="default",
                                           name="attacker"), headers=headers)
    assert info["route_id"], info
    # Only that prefix: C's own link address is still not LAN.
    r = s.c.stack.http.post("/agent/v1/register",
                            registration("scope.scan", f"http://{c_addr}:8080/", tenant="default", name="attacker"),
                            headers=headers)
    _refused_not_lan(r, c_addr)
    s.sample()
    assert s.samples == len(attempts) + 2
    assert s.honest_ok == s.honest_total, f"honest calls: {s.honest_ok}/{s.honest_total}"
    assert len(backend.calls("scope.echo")) >= s.honest_total


def test_bootstrap_issues_tokens_only_for_listed_tenants(scene):
    """Proves that a host on C's LAN is told which tenants it may
    bootstrap (`/agent/v1/authentication`: `default` only), that its
    request for a `lab` token is refused 403 `forbidden`, reason
    `tenant_not_bootstrappable`, naming the tenant, and that once the
    operator lists `lab` in `gateway.bootstrap_tenant` (gateway options
    apply on restart) the same request gets a token that registers a LAN
    agent; the B–C session and the honest caller at B are unaffected."""
    s, _backend = scene
    meta = s.c.stack.http.get("/agent/v1/authentication").json()
    assert meta["bootstrap"]["tenants"] == ["default"], meta
    assert meta["bootstrap_access"] == {"source": s.c.ns.mgmt_host_addr, "allowed": True,
                                        "tenants": ["default"]}, meta
    r = s.bootstrap("lab", "echo")
    assert r.status == 403, r.describe()
    err = r.json()["error"]
    assert (err["code"], err["reason"]) == ("forbidden", "tenant_not_bootstrappable"), r.describe()
    assert '"lab"' in err["message"], r.describe()
    s.sample()

    s.c.cfg.section("gateway").options["bootstrap_tenant"] = ["default", "lab"]
    s.c.cfg.write()
    s.c.stack.gw.stop()
    s.c.stack.start_gw()
    meta = s.c.stack.http.get("/agent/v1/authentication").json()
    assert meta["bootstrap"]["tenants"] == ["default", "lab"], meta
    headers = s.token("lab", "echo")
    info = s.c.stack.register(registration("scope.lab", f"http://{s.c.ns.mgmt_host_addr}:9/x", tenant="lab",
                                           name="echo"), headers=headers)
    assert info["route_id"], info
    # The restarted gateway dials B again before the honest call works.
    s.wait_honest()
    s.sample()
    assert s.honest_ok == s.honest_total, f"honest calls: {s.honest_ok}/{s.honest_total}"



@pytest.fixture
def rebinding(mesh) -> Iterator[Tuple[Scene, Path]]:
    """The scene with a hosts file of C's own (`ip netns exec` binds
    /etc/netns/<ns>/hosts over /etc/hosts for C's daemons): the test
    decides what a name resolves to for C's gateway, and when."""
    made: List[Path] = []

    def hosts_file(s: Scene) -> None:
        d = Path("/etc/netns") / s.c.ns.netns
        d.mkdir(parents=True, exist_ok=False)
        made.append(d)
        (d / "hosts").write_text("127.0.0.1 localhost\n")

    try:
        s = Scene(mesh, before_start=hosts_file)
        yield s, made[0] / "hosts"
    finally:
        for d in made:
            shutil.rmtree(d, ignore_errors=True)


def test_a_name_that_later_resolves_into_the_mesh_is_refused_at_connect_time(rebinding):
    """Proves the LAN scope holds against DNS rebinding: a LAN host
    registers `http://scope-agent.test:PORT/` while the name resolves to
    its own LAN address (accepted, and a call reaches its handler); once
    the name resolves to B's side of the B–C link instead, a call that
    needs a new connection is refused 400 `endpoint_refused`, reason
    `endpoint_not_lan`, outcome `rejected` (nothing sent), and a fresh
    registration naming it is refused the same way; the B–C session
    stays established throughout."""
    s, hosts = rebinding
    backend = s.c.lan_backend()
    try:
        lan_ip, b_addr = s.c.ns.mgmt_host_addr, s.link.addr_of("router-b")
        hosts.write_text(f"127.0.0.1 localhost\n{lan_ip} scope-agent.test\n")
        headers = s.token("default", "named")
        url = f"http://scope-agent.test:{backend.port}/invoke"
        s.c.stack.register(registration("scope.named", url, tenant="default", name="named"), headers=headers)
        call = envelope("scope.named", {"n": 1}, tenant="default", source_agent="agent://default/named")
        s.c.stack.wait_routable(call, headers=headers)
        r = s.c.stack.http.post("/agent/v1/invoke", call, headers=headers)
        assert r.status == 200, r.describe()
        assert len(backend.calls("scope.named")) == 1
        # The name now points into the mesh (the file keeps its inode, so
        # the bind mount shows the change). A restarted gateway has no
        # warm connection to reuse: the next call must connect anew.
        hosts.write_text(f"127.0.0.1 localhost\n{b_addr} scope-agent.test\n")
        s.c.stack.gw.stop()
        s.c.stack.start_gw()
        s.c.stack.wait_routable(call, headers=headers)
        r = s.c.stack.http.post("/agent/v1/invoke", call, headers=headers)
        assert r.status == 400, r.describe()
        err = r.json()["error"]
        assert (err["code"], err["reason"], err["outcome"]) == ("endpoint_refused", "endpoint_not_lan", "rejected"), \
            r.describe()
        assert len(backend.calls("scope.named")) == 1
        r = s.c.stack.http.post("/agent/v1/register",
                                registration("scope.named2", url, tenant="default", name="named"), headers=headers)
        _refused_not_lan(r, "scope-agent.test")
        pb, pc = s.b.peer("router-c"), s.c.peer("router-b")
        assert pb["state"] == "established" and pc["state"] == "established", (pb, pc)
    finally:
        backend.close()
