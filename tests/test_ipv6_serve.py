"""Agents at their own IPv6 addresses (issue 23, DESIGN §7 "IPv6 /128"):
agent-gw serves each address agentd binds with TLS on :7443, every call
pinned to that address's agent — never another one, never in plaintext,
no fallback once it is gone — under the public listener's auth (a token,
or a client certificate of `gateway.client_ca`).

Each topology is built of network namespaces: the router; an upstream
that routes a 2001:db8::/56 to it (`routed-prefix`) or shares an on-link
/64 with it (`ndp-proxy`); a caller behind the upstream. Addresses only
of 2001:db8::/32 and the harness's TEST-NETs. The agents' handlers sit
on the router's LAN (the test host's side of its management link)."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.x509.oid import NameOID

from harness.agentproc import AgentProcess
from harness.backend import Backend, registration
from harness.config import Section
from harness.jwt import TenantKey, bearer
from harness.pki import DOMAIN, domain_ca, issue, use_ca
from harness.poll import wait_for

AGENTS = Path(__file__).resolve().parent / "agents"
UPLINK_ROUTER, UPLINK_UP = "2001:db8:ff::2", "2001:db8:ff::1"
CALLER_NET, CALLER, CALLER_GW = "2001:db8:fe::/64", "2001:db8:fe::2", "2001:db8:fe::1"


def ip(netns: str, *argv: str) -> str:
    p = subprocess.run(["ip", "-n", netns, *argv], capture_output=True, text=True, timeout=20,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, f"ip -n {netns} {' '.join(argv)}: {p.stderr}"
    return p.stdout


def sysctl(netns: str, key: str, value: str) -> None:
    subprocess.run(["ip", "netns", "exec", netns, "sysctl", "-qw", f"{key}={value}"], check=True,
                   capture_output=True, timeout=10, stdin=subprocess.DEVNULL)


def lo_addrs(netns: str) -> List[str]:
    """The addresses on the router's loopback, read over rtnetlink."""
    out = ip(netns, "-6", "-o", "addr", "show", "dev", "lo")
    return [line.split()[3].split("/")[0] for line in out.splitlines() if " inet6 " in line]


@dataclass
class V6Router:
    """The router, its upstream and caller namespaces, the lab tenant's
    key and the CA the router's certificate chains to."""

    r: Any
    up: Any
    caller_ns: str
    lab: TenantKey
    ca: Path
    aud: str = ""
    backends: List[Backend] = field(default_factory=list)

    def token(self, sub: str, *scopes: str) -> str:
        return self.lab.mint(tenant="lab", sub=sub, scopes=scopes, aud=self.aud)

    def backend(self) -> Backend:
        b = self.r.lan_backend()
        self.backends.append(b)
        return b

    def register(self, name: str, backend: Backend, lease: int = 60, **extra: Any) -> Dict[str, Any]:
        body = registration("v6.echo", backend.endpoint, name=name, lease_seconds=lease, **extra)
        tok = self.token(f"agent://lab/{name}", "agent.register")
        return self.r.stack.register(body, headers=bearer(tok))

    def close(self) -> None:
        for b in self.backends:
            b.close()


def v6_router(mesh, *, mode: str = "routed-prefix", prefix: str = "2001:db8:55::/56", ipv6: Optional[Dict] = None,
              gateway: Optional[Dict] = None, configure: Any = None) -> V6Router:
    """router-a (auth jwt, its certificate issued by a domain CA) with
    the address service in `mode`; an upstream that routes `prefix` to it
    (`routed-prefix`) or shares the /64 `prefix` with it (`ndp-proxy`);
    a caller namespace behind the upstream."""
    lab = TenantKey.generate()
    gw = {"auth": "jwt"}
    gw.update(gateway or {})
    r = mesh.router("router-a", gateway=gw, tenants=[("lab", {"name": "lab", "jwt_key": [lab.uci_value]})])
    up = mesh.router("a-upstream")
    caller = mesh.router("a-caller")
    uplink = mesh.net.link(r.name, up.name)
    callerlink = mesh.net.link(up.name, caller.name)
    rns, upns, cns = r.ns.netns, up.ns.netns, caller.ns.netns
    sysctl(upns, "net.ipv6.conf.all.forwarding", "1")
    ip(upns, "-6", "addr", "add", f"{CALLER_GW}/64", "dev", callerlink.a_if, "nodad")
    ip(cns, "-6", "addr", "add", f"{CALLER}/64", "dev", callerlink.b_if, "nodad")
    ip(cns, "-6", "route", "add", "default", "via", CALLER_GW)
    if mode == "routed-prefix":
        ip(rns, "-6", "addr", "add", f"{UPLINK_ROUTER}/64", "dev", uplink.a_if, "nodad")
        ip(upns, "-6", "addr", "add", f"{UPLINK_UP}/64", "dev", uplink.b_if, "nodad")
        ip(upns, "-6", "route", "add", prefix, "via", UPLINK_ROUTER)
        ip(rns, "-6", "route", "add", CALLER_NET, "via", UPLINK_UP)
    else:
        # One /64 on the upstream link: the router holds ::2 of it, and
        # answers for its agents' addresses by proxy NDP (a router
        # forwards; the kernel answers proxy entries only on a link that
        # does).
        net = prefix.split("::/")[0]
        ip(rns, "-6", "addr", "add", f"{net}::2/64", "dev", uplink.a_if, "nodad")
        ip(upns, "-6", "addr", "add", f"{net}::1/64", "dev", uplink.b_if, "nodad")
        ip(rns, "-6", "route", "add", CALLER_NET, "via", f"{net}::1")
        sysctl(rns, "net.ipv6.conf.all.forwarding", "1")
    ca = domain_ca(mesh.bins, mesh.workdir / "ca", DOMAIN)
    use_ca(r, ca, issue(mesh.bins, ca, r, "router-a", DOMAIN))
    opts = {"mode": mode, "prefix": prefix, "interface": "lo", "upstream_interface": uplink.a_if,
            "max_addresses": "8"}
    opts.update(ipv6 or {})
    r.cfg.sections.append(Section("ipv6", "ipv6", opts))
    if configure is not None:
        configure(r)
    if "sdk_listen" in gw:
        argv = r.stack.gw.argv
        argv[argv.index("--listen") + 1] = gw["sdk_listen"]
    r.start()
    env = V6Router(r, up, cns, lab, ca / "domain-ca.pem")
    env.aud = r.stack.http.get("/agent/v1/authentication").json()["authentication"]["audience"]
    return env


class Caller:
    """tests/agents/v6_caller.py in the caller's namespace."""

    def __init__(self, netns: str, log: Path) -> None:
        self.p = AgentProcess(["ip", "netns", "exec", netns, sys.executable, str(AGENTS / "v6_caller.py")], log)
        self.p.wait_message("ready", timeout=20)

    def __call__(self, **cmd: Any) -> Dict[str, Any]:
        assert self.p.proc.stdin is not None
        self.p.proc.stdin.write(json.dumps(cmd).encode() + b"\n")
        self.p.proc.stdin.flush()
        return self.p.wait_message("result", timeout=30)["result"]

    def close(self) -> None:
        self.p.stop()


def envelope(payload: Any, **kw: Any) -> Dict[str, Any]:
    env = {"version": "1.0", "intent": "v6.echo", "intent_version": 1, "task_id": "t-1",
           "source_agent": "agent://lab/caller", "tenant": "lab", "hop_limit": 8, "constraints": {},
           "payload": payload}
    env.update(kw)
    return env


def test_routed_prefix_callers_reach_exactly_the_agent_at_its_address(mesh, workdir):
    """Proves binding-only forwarding in `routed-prefix` mode, with the
    public listener off (so agent-gw binds each address itself): an
    agent's registration reply names its address in the nexilume shape
    (public_ipv6, public_endpoint with the router's TLS name and CA
    bundle, the flat fields); a caller behind the upstream reaches that
    agent over TLS verified against the router's domain CA — raw, with
    nexilume's `DirectIPv6Agent` unchanged, and with our SDK's
    `DirectAgent` — while another agent of the same capability on the
    same router is never called; the capability of another agent, the
    route listing, MCP and plaintext on the LAN port are refused at the
    address; the authentication document says direct IPv6 is offered;
    one host's handshake slots are counted over every agent address."""
    # The LAN listener on every address: the acceptor, not the bind,
    # keeps the agents' addresses off it.
    env = v6_router(mesh, gateway={"sdk_listen": "[::]:7446"})
    caller = Caller(env.caller_ns, workdir / "v6-caller.log")
    try:
        one, two = env.backend(), env.backend()
        got = env.register("one", one, public_ipv6="auto")
        addr = got["public_ipv6"]
        assert addr and addr.startswith("2001:db8:55:"), got
        ep = got["public_endpoint"]
        assert ep["address"] == addr and ep["port"] == 7443 and ep["scheme"] == "https", got
        assert ep["tls_server_name"] == "router-a" and ep["ca_bundle_id"].startswith("agentd-ca-"), got
        assert (got["public_port"], got["tls_server_name"], got["ca_bundle_id"]) == (
            7443, "router-a", ep["ca_bundle_id"]), got
        got2 = env.register("two", two, public_ipv6="auto")
        addr2 = got2["public_ipv6"]
        assert addr2 and addr2 != addr, got2

        tok = env.token("agent://lab/caller", "agent.invoke", "agent.route")
        at = {"addr": addr, "port": 7443, "server_name": "router-a", "ca": str(env.ca), "token": tok}
        r = caller(op="raw", path="/agent/v1/invoke", body=envelope({"n": 1}), **at)
        assert r.get("status") == 200, r
        assert r["body"]["echo"] == {"n": 1} and r["body"]["source_agent"] == "agent://lab/caller", r
        assert len(one.calls("v6.echo")) == 1 and two.calls("v6.echo") == []

        nx = caller(op="nexilume", intent="v6.echo", payload={"via": "nexilume"}, tenant="lab",
                    source_agent="agent://lab/caller", **at)
        assert nx.get("status") == 200 and nx["body"]["echo"] == {"via": "nexilume"}, nx
        ours = caller(op="sdk", intent="v6.echo", payload={"via": "sdk"}, tenant="lab",
                      source_agent="agent://lab/caller", **at)
        assert ours.get("status") == 200 and ours["body"]["echo"] == {"via": "sdk"}, ours
        assert len(one.calls("v6.echo")) == 3 and two.calls("v6.echo") == [], "a call went to another agent"

        # The other agent is the other address's, and only its.
        r2 = caller(op="raw", path="/agent/v1/invoke", body=envelope({"n": 2}), **{**at, "addr": addr2})
        assert r2.get("status") == 200 and len(two.calls("v6.echo")) == 1, r2

        # What the address does not serve.
        other = caller(op="raw", path="/agent/v1/invoke", body=envelope({}, intent="v6.other"), **at)
        assert other.get("status") == 404 and other["body"]["error"]["code"] == "no_route", other
        aimed = caller(op="raw", path="/agent/v1/invoke", body=envelope({}, target_agent="agent://lab/two"), **at)
        assert aimed.get("status") == 404 and aimed["body"]["error"]["code"] == "no_route", aimed
        for path, body in [("/agent/v1/route", envelope({})), ("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"})]:
            refused = caller(op="raw", path=path, body=body, **at)
            assert refused.get("status") == 404, (path, refused)
        plain = caller(op="raw", path="/agent/v1/invoke", body=envelope({}), tls=False,
                       **{**at, "port": 7446})
        assert "error" in plain, plain
        assert len(one.calls("v6.echo")) == 3 and len(two.calls("v6.echo")) == 1

        doc = env.r.stack.http.get("/agent/v1/authentication").json()
        assert doc["cloud"]["transports"]["direct_ipv6"] is True, doc

        # One host holding its share of handshake slots at one address
        # holds them at every agent address (one pool for all of them):
        # the next handshake, at the other address, is refused at accept.
        # Let go, that address answers again.
        assert caller(op="hold", n=8, **at) == {"held": 8}
        held_out = caller(op="raw", path="/agent/v1/invoke", body=envelope({}), **{**at, "addr": addr2})
        assert "error" in held_out, held_out
        assert caller(op="drop") == {"dropped": 8}
        again = wait_for("the other address to answer again", lambda: (lambda r: r if r.get("status") == 200 else None)(
            caller(op="raw", path="/agent/v1/invoke", body=envelope({"n": 3}), **{**at, "addr": addr2})), timeout=10)
        assert again["body"]["echo"] == {"n": 3}, again
    finally:
        caller.close()
        env.close()


def test_sdk_agents_get_their_public_url_and_are_called_there(mesh, workdir):
    """Proves both SDKs end to end: an unmodified nexilume agent (auth
    "auto": it reads `cloud.transports.direct_ipv6` and bootstraps on the
    LAN) and an agent of our SDK (`public_ipv6=True`) each learn a
    `public_url` https://[addr]:7443 of the router's prefix (one per
    capability); a nexilume
    caller behind the upstream invokes the nexilume agent at its address
    and our SDK's caller ours at its own, each answer from that agent."""

    def lan_bootstrap(r: Any) -> None:
        # The agents run on the router's LAN: the test host's side of its
        # management link.
        r.cfg.section("gateway").options.update(bootstrap_networks=[f"{r.ns.mgmt_host_addr}/32"],
                                                 bootstrap_tenant=["lab"])

    env = v6_router(mesh, configure=lan_bootstrap)
    nx = AgentProcess([sys.executable, str(AGENTS / "nexilume_agent.py"), env.r.sdk_url, "lab", "nx-echo", "30", "0",
                       "auto"], workdir / "nexilume-agent.log")
    ours = AgentProcess([sys.executable, str(AGENTS / "sdk_agent.py"), env.r.sdk_url, "lab", "sdk-echo", "30", "1"],
                        workdir / "sdk-agent.log")
    caller = Caller(env.caller_ns, workdir / "v6-caller.log")
    try:
        nx_ready = nx.wait_message("ready", timeout=30)
        urls = nx_ready["public_urls"]
        assert all(u and u.startswith("https://[2001:db8:55:") and u.endswith("]:7443") for u in urls.values()), urls
        # An address per capability of the agent.
        assert set(urls) == {"nx.echo", "nx.count"} and len(set(urls.values())) == 2, urls
        nx_addr = urls["nx.echo"][len("https://["):-len("]:7443")]
        ours_ready = ours.wait_message("ready", timeout=30)
        lease = ours_ready["leases"][0]
        assert lease["public_url"] == f"https://[{lease['public_ipv6']}]:7443", lease
        assert lease["public_endpoint"]["tls_server_name"] == "router-a", lease
        assert lease["public_ipv6"] != nx_addr and lease["public_ipv6"].startswith("2001:db8:55:"), lease

        tok = env.token("agent://lab/caller", "agent.invoke")
        common = {"port": 7443, "server_name": "router-a", "ca": str(env.ca), "token": tok, "tenant": "lab",
                  "source_agent": "agent://lab/caller"}
        a = caller(op="nexilume", addr=nx_addr, intent="nx.echo", payload={"to": "nexilume"}, **common)
        assert a.get("body") == {"echo": {"to": "nexilume"}, "via": "nexilume"}, a
        b = caller(op="sdk", addr=lease["public_ipv6"], intent="sdk.echo", payload={"to": "ours"}, **common)
        assert b.get("body") == {"echo": {"to": "ours"}, "via": "agentd_sdk"}, b
        # Each address is its agent's: the other capability is refused.
        c = caller(op="sdk", addr=lease["public_ipv6"], intent="nx.echo", payload={}, **common)
        assert c.get("code") == "no_route", c
    finally:
        caller.close()
        ours.stop()
        nx.stop()
        env.close()


def test_an_ended_lease_leaves_a_refusal_never_another_agent(mesh, workdir):
    """Proves that when the agent's route ends its address goes from the
    link (read over rtnetlink); a connection kept open from before is
    closed, and a new one is refused at once (ICMPv6 unreachable from the
    prefix's reject route), while another agent of the same capability is
    never called; the same agent registering again gets the same address
    back and is reached there again."""
    env = v6_router(mesh)
    caller = Caller(env.caller_ns, workdir / "v6-caller.log")
    try:
        one, two = env.backend(), env.backend()
        got = env.register("one", one, public_ipv6=True)
        addr = got["public_ipv6"]
        env.register("two", two, public_ipv6="auto")
        tok = env.token("agent://lab/caller", "agent.invoke")
        at = {"addr": addr, "port": 7443, "server_name": "router-a", "ca": str(env.ca), "token": tok}
        first = caller(op="raw", path="/agent/v1/invoke", body=envelope({"n": 1}), keep=True, **at)
        assert first.get("status") == 200, first

        unreg = env.r.stack.http.post("/agent/v1/unregister", {"route_id": got["route_id"]},
                                      headers=bearer(env.token("agent://lab/one", "agent.register")))
        assert unreg.status == 200, unreg.describe()
        wait_for("the address to leave the link", lambda: addr not in lo_addrs(env.r.ns.netns), timeout=10)

        # The connection kept from before was closed with the address; a
        # new one is refused at once (the prefix's unreachable route).
        kept = caller(op="raw", path="/agent/v1/invoke", body=envelope({"n": 2}), keep=True, **at)
        assert "error" in kept, kept
        # The error names the ICMPv6 unreachable (a connect that waited
        # out its timeout would say "timed out").
        fresh = caller(op="raw", path="/agent/v1/invoke", body=envelope({"n": 3}), **at)
        assert "unreachable" in fresh.get("error", "").lower(), fresh
        assert len(one.calls("v6.echo")) == 1 and two.calls("v6.echo") == [], "a call went to another agent"

        again = env.register("one", one, public_ipv6=True)
        assert again["public_ipv6"] == addr, (again, addr)
        back = caller(op="raw", path="/agent/v1/invoke", body=envelope({"n": 4}), **at)
        assert back.get("status") == 200 and back["body"]["echo"] == {"n": 4}, back
    finally:
        caller.close()
        env.close()


def test_ndp_proxy_upstream_finds_the_address_and_the_caller_reaches_it(mesh, workdir):
    """Proves `ndp-proxy` mode with the public listener on `[::]:7443`
    (which takes the agents' addresses too): the upstream's neighbour
    solicitation for the agent's /128 is answered with the router's
    link-layer address, and the caller reaches the agent there."""
    env = v6_router(mesh, mode="ndp-proxy", prefix="2001:db8:44:1::/64",
                    gateway={"public_listen": "[::]:7443"})
    caller = Caller(env.caller_ns, workdir / "v6-caller.log")
    try:
        one = env.backend()
        got = env.register("one", one, public_ipv6="auto")
        addr = got["public_ipv6"]
        assert addr and addr.startswith("2001:db8:44:1:"), got
        tok = env.token("agent://lab/caller", "agent.invoke")
        at = {"addr": addr, "port": 7443, "server_name": "router-a", "ca": str(env.ca), "token": tok}
        r = caller(op="raw", path="/agent/v1/invoke", body=envelope({"n": 1}), **at)
        assert r.get("status") == 200 and r["body"]["echo"] == {"n": 1}, r
        uplink = env.r.net.find_link("router-a", "a-upstream")
        mac = ip(env.r.ns.netns, "link", "show", uplink.a_if).split("link/ether ")[1].split()[0]
        neigh = ip(env.up.ns.netns, "-6", "neigh", "show", addr)
        assert f"lladdr {mac}" in neigh, (neigh, mac)
        # The public listener itself still serves ordinary calls.
        status = env.r.stack.ctl_json("status")["ipv6"]
        assert status["bound"] == 1 and status["ready"], status
    finally:
        caller.close()
        env.close()


def client_ca(dir: Path, uri: str) -> Dict[str, str]:
    """A CA and a caller certificate it issued naming `uri` (Ed25519)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ed25519.Ed25519PrivateKey.generate()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "callers CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, None))
    key = ed25519.Ed25519PrivateKey.generate()
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "caller")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(uri)]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, None))
    dir.mkdir(parents=True, exist_ok=True)
    paths = {"ca": dir / "callers-ca.pem", "cert": dir / "caller.pem", "key": dir / "caller.key"}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    return {k: str(v) for k, v in paths.items()}


def test_a_token_or_a_client_certificate_and_nothing_else(mesh, workdir):
    """Proves auth at the address: no token and no certificate is 401 and
    the agent is not called; a forged token is 401; a valid token is
    accepted; a certificate from `gateway.client_ca` naming
    agent://lab/certified is accepted without a token, and the agent sees
    that identity; a certificate of another CA fails the handshake."""
    certs = client_ca(workdir / "callers", "agent://lab/certified")
    env = v6_router(mesh, gateway={"client_ca": certs["ca"]})
    caller = Caller(env.caller_ns, workdir / "v6-caller.log")
    try:
        one = env.backend()
        addr = env.register("one", one, public_ipv6="auto")["public_ipv6"]
        at = {"addr": addr, "port": 7443, "server_name": "router-a", "ca": str(env.ca)}
        bare = caller(op="raw", path="/agent/v1/invoke", body=envelope({}), **at)
        assert bare.get("status") == 401 and bare["body"]["error"]["code"] == "unauthenticated", bare
        forged = TenantKey.generate().mint(tenant="lab", sub="agent://lab/caller", scopes=["agent.invoke"],
                                           aud=env.aud)
        bad = caller(op="raw", path="/agent/v1/invoke", body=envelope({}), token=forged, **at)
        assert bad.get("status") == 401, bad
        assert one.calls("v6.echo") == []
        good = caller(op="raw", path="/agent/v1/invoke", body=envelope({"t": 1}),
                      token=env.token("agent://lab/caller", "agent.invoke"), **at)
        assert good.get("status") == 200, good
        cert = caller(op="raw", path="/agent/v1/invoke", body=envelope({"c": 1}, source_agent="agent://lab/x"),
                      cert=certs["cert"], key=certs["key"], **at)
        assert cert.get("status") == 200 and cert["body"]["source_agent"] == "agent://lab/certified", cert
        stranger = client_ca(workdir / "strangers", "agent://lab/certified")
        other = caller(op="raw", path="/agent/v1/invoke", body=envelope({}), cert=stranger["cert"],
                       key=stranger["key"], **at)
        assert "error" in other, other
        assert len(one.calls("v6.echo")) == 2
    finally:
        caller.close()
        env.close()


def test_limits_and_binding_off_replies(mesh, workdir):
    """Proves the registration always succeeds: with `max_addresses 1`
    the second agent's reply names the limit (code `ipv6_max_addresses`)
    and offers no endpoint;
    with auth 'none' and no client CA the address is bound but not
    served, the reply says why, and the authentication document says
    direct IPv6 is not offered (so nexilume stops asking); a reload that
    turns binding off removes the bound address from the link, and the
    next reply says binding is off (`ipv6_off`)."""
    env = v6_router(mesh, ipv6={"max_addresses": "1"})
    try:
        a, b = env.backend(), env.backend()
        first = env.register("one", a, public_ipv6="auto")
        assert first["public_ipv6"], first
        second = env.register("two", b, public_ipv6="auto")
        assert "public_ipv6" not in second and "public_endpoint" not in second, second
        assert second["public_ipv6_status"]["served"] is False, second
        assert second["public_ipv6_status"]["code"] == "ipv6_max_addresses", second
        assert "max_addresses" in second["public_ipv6_status"]["reason"], second
    finally:
        env.close()

    lab = mesh.router("router-b", gateway={"auth": "none"})
    section = Section("ipv6", "ipv6", {"mode": "routed-prefix", "prefix": "2001:db8:56::/64", "interface": "lo"})
    lab.cfg.sections.append(section)
    lab.start()
    backend = lab.lan_backend()
    try:
        got = lab.stack.register(registration("v6.echo", backend.endpoint, name="one", lease_seconds=60,
                                              public_ipv6="auto"))
        status = got["public_ipv6_status"]
        assert status["address"] and status["served"] is False, got
        assert status["code"] == "ipv6_not_served" and "auth is 'none'" in status["reason"], got
        assert "public_ipv6" not in got and "public_endpoint" not in got, got
        doc = lab.stack.http.get("/agent/v1/authentication").json()
        assert doc["cloud"]["transports"]["direct_ipv6"] is False, doc

        # Turned off by a reload: the bound address leaves the link (it
        # would no longer be pinned to its agent), the next one asking is
        # told binding is off.
        assert status["address"] in lo_addrs(lab.ns.netns)
        section.options["mode"] = "off"
        lab.reload()
        wait_for("the address to leave the link", lambda: status["address"] not in lo_addrs(lab.ns.netns),
                 timeout=10)
        off = lab.stack.register(registration("v6.echo", backend.endpoint, name="three", lease_seconds=60,
                                              public_ipv6=True))
        assert off["public_ipv6_status"]["code"] == "ipv6_off", off
    finally:
        backend.close()
