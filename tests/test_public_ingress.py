"""The public HTTPS listener (`gateway.public_listen`): TLS with the
operator's certificate or the router's own, HTTP/1.1 and HTTP/2 by ALPN,
tokens required, registration and bootstrap LAN-only."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from harness.backend import registration
from harness.config import free_port
from harness.http import Http, envelope
from harness.jwt import TenantKey, bearer
from harness.poll import wait_for


def server_cert(dir: Path) -> tuple[Path, Path]:
    """A self-signed ECDSA P-256 certificate for 127.0.0.1, as an
    operator's (ACME-style) certificate would be."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "router.lab.example")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    c, k = dir / "public.crt", dir / "public.key"
    c.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    k.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return c, k


def client_tls(cafile: Path, alpn: list[str] | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(cafile))
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


@dataclass
class PublicStack:
    """A router with auth 'jwt', tenant `lab` and the public listener on
    127.0.0.1 presenting an operator's certificate."""

    stack: object
    cert: Path
    port: int
    lab: TenantKey
    aud: str

    def token(self, sub: str, scopes: tuple[str, ...]) -> str:
        return self.lab.mint(tenant="lab", sub=sub, scopes=scopes, aud=self.aud)


def public_stack(make_stack, tmp_path: Path, extra_sections=()) -> PublicStack:
    lab = TenantKey.generate()
    cert, key = server_cert(tmp_path)
    port = free_port()
    stack = make_stack(
        auth="jwt",
        tenants=[("lab", {"name": "lab", "jwt_key": [lab.uci_value]})],
        gateway={"public_listen": f"127.0.0.1:{port}", "public_cert": str(cert), "public_key": str(key)},
        extra_sections=list(extra_sections),
    )
    aud = stack.http.get("/agent/v1/authentication").json()["authentication"]["audience"]
    return PublicStack(stack, cert, port, lab, aud)


@pytest.fixture
def public_env(make_stack, backend, tmp_path):
    p = public_stack(make_stack, tmp_path)
    stack, cert, port = p.stack, p.cert, p.port
    agent_tok = p.token("agent://lab/echo", ("agent.register",))
    caller_tok = p.token("agent://lab/caller", ("agent.invoke", "agent.route"))
    stack.register(registration("pub.echo", backend.endpoint, lease_seconds=60), headers=bearer(agent_tok))
    stack.wait_routable(envelope("pub.echo", {}), headers=bearer(caller_tok))
    public = Http("127.0.0.1", port, tls=client_tls(cert))
    return stack, backend, public, port, cert, agent_tok, caller_tok


def test_invoke_over_https_with_the_operators_certificate(public_env):
    """Proves that a caller verifying the operator's certificate (hostname
    checked) invokes over HTTPS with its token, and the handler sees the
    token's identity."""
    stack, backend, public, *_, caller_tok = public_env
    r = public.post("/agent/v1/invoke", envelope("pub.echo", {"n": 7}, tenant="other"), headers=bearer(caller_tok))
    assert r.status == 200, r.describe()
    got = backend.calls("pub.echo")[-1].json()
    assert got["tenant"] == "lab" and got["source_agent"] == "agent://lab/caller", got
    assert got["payload"] == {"n": 7}, got


def test_public_listener_requires_a_token(public_env):
    """Proves that an invocation without a token is refused 401 on the
    public listener and never reaches the handler."""
    stack, backend, public, *_ = public_env
    before = len(backend.calls("pub.echo"))
    r = public.post("/agent/v1/invoke", envelope("pub.echo", {}))
    assert r.status == 401 and r.error_code() == "unauthenticated", r.describe()
    assert len(backend.calls("pub.echo")) == before


def test_registration_and_bootstrap_are_lan_only(public_env, backend):
    """Proves that a valid agent token cannot register, renew or
    unregister through the public listener, nor get a bootstrap token:
    each is 404 naming the LAN listener, and no route appears."""
    stack, _, public, port, cert, agent_tok, _ = public_env
    routes_before = len(stack.routes())
    reg = registration("pub.other", backend.endpoint, lease_seconds=60)
    for path, body in [
        ("/agent/v1/register", reg),
        ("/agent/v1/renew", {"route_id": "r-x"}),
        ("/agent/v1/unregister", {"route_id": "r-x"}),
        ("/agent/v1/bootstrap", {"origin": "agent://lab/x"}),
    ]:
        r = public.post(path, body, headers=bearer(agent_tok))
        assert r.status == 404 and r.error_code() == "not_found", (path, r.describe())
        assert "LAN" in r.json()["error"]["message"], r.describe()
    assert len(stack.routes()) == routes_before


def h2_invoke(port: int, cafile: Path, token: str, body: bytes) -> tuple[int, bytes, str]:
    """One POST /agent/v1/invoke over HTTP/2 (ALPN h2), independent of the
    gateway's own h2 stack."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    with client_tls(cafile, ["h2"]).wrap_socket(raw, server_hostname="127.0.0.1") as s:
        alpn = s.selected_alpn_protocol()
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        conn.initiate_connection()
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, [
            (":method", "POST"), (":path", "/agent/v1/invoke"), (":scheme", "https"), (":authority", f"127.0.0.1:{port}"),
            ("content-type", "application/json"), ("authorization", f"Bearer {token}"), ("content-length", str(len(body))),
        ])
        conn.send_data(sid, body, end_stream=True)
        s.sendall(conn.data_to_send())
        status, data, done = 0, b"", False
        while not done:
            chunk = s.recv(65536)
            if not chunk:
                break
            for ev in conn.receive_data(chunk):
                if isinstance(ev, h2.events.ResponseReceived):
                    status = int(dict(ev.headers)[":status"])
                elif isinstance(ev, h2.events.DataReceived):
                    data += ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, sid)
                elif isinstance(ev, h2.events.StreamEnded):
                    done = True
            s.sendall(conn.data_to_send())
        return status, data, alpn or ""


def test_http2_by_alpn(public_env):
    """Proves that a client offering ALPN h2 gets HTTP/2 and its call is
    served like an HTTP/1.1 one."""
    import json

    stack, backend, public, port, cert, _, caller_tok = public_env
    body = json.dumps(envelope("pub.echo", {"h2": True})).encode()
    status, data, alpn = h2_invoke(port, cert, caller_tok, body)
    assert alpn == "h2"
    assert status == 200, data
    assert backend.calls("pub.echo")[-1].json()["payload"] == {"h2": True}


def test_router_certificate_by_default(make_stack, tmp_path):
    """Proves that without `public_cert` the listener presents the
    router's own certificate: its key is the identity key agentd created
    (so a client can pin it like a peer does)."""
    port = free_port()
    stack = make_stack(auth="jwt", gateway={"public_listen": f"127.0.0.1:{port}"})
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # what is presented is the point here
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    with ctx.wrap_socket(raw) as s:
        der = s.getpeercert(binary_form=True)
    presented = x509.load_der_x509_certificate(der).public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    ident = serialization.load_pem_private_key(Path(stack.cfg.dir / "identity.key").read_bytes(), None)
    assert presented == ident.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def test_no_public_listener_without_authentication(make_stack):
    """Proves that with auth 'none' the public listener is not served
    (nothing listens on its port) and the gateway says why in its log,
    while the LAN listener works."""
    port = free_port()
    stack = make_stack(auth="none", gateway={"public_listen": f"127.0.0.1:{port}"})
    assert stack.http.healthz()["status"] in ("ok", "degraded")
    wait_for("the log line about the public listener", lambda: "not served: gateway.auth is 'none'" in stack.gw.log_text(), timeout=10)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_a_bad_certificate_file_stops_the_gateway_with_its_name(make_stack, tmp_path):
    """Proves that a public_key that does not belong to public_cert keeps
    the gateway from starting, with a message naming the file."""
    cert, _ = server_cert(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    _, wrong_key = server_cert(other)
    stack = make_stack(
        auth="jwt", start=False,
        gateway={"public_listen": f"127.0.0.1:{free_port()}", "public_cert": str(cert), "public_key": str(wrong_key)},
    )
    stack.start_agentd()
    stack.gw.start()
    wait_for("agent-gw to exit", lambda: not stack.gw.alive(), timeout=15)
    log = stack.gw.log_text()
    assert "does not belong to certificate" in log and str(wrong_key) in log, log


def test_official_mcp_client_over_https_with_a_token(make_stack, backend, tmp_path):
    """Proves that the official MCP client (mcp 2.3.0, unmodified, both its
    default and its legacy mode) lists and calls a tool over the public
    HTTPS listener, verifying the operator's certificate and sending a
    tenant token, and that the call acts for the token's identity; without
    the token the client is refused."""
    import asyncio

    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from harness.config import Section

    p = public_stack(make_stack, tmp_path, [Section("mapping", "echo", {"capability": "pub.echo", "description": "Echo."})])
    stack, cert, port = p.stack, p.cert, p.port
    agent_tok = p.token("agent://lab/echo", ("agent.register",))
    caller_tok = p.token("agent://lab/mcp-user", ("agent.invoke", "agent.route"))
    stack.register(registration("pub.echo", backend.endpoint, lease_seconds=60), headers=bearer(agent_tok))
    stack.wait_routable(envelope("pub.echo", {}), headers=bearer(caller_tok))
    url = f"https://127.0.0.1:{port}/mcp"

    async def go(mode: str, token: str | None):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        http = httpx2.AsyncClient(headers=headers, verify=client_tls(cert))
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as c:
            tools = await c.list_tools()
            result = await c.call_tool("echo", {"over": "https"})
            return c.protocol_version, [t.name for t in tools.tools], result

    for mode, revision in (("auto", "2026-07-28"), ("legacy", "2025-11-25")):
        version, names, result = asyncio.run(asyncio.wait_for(go(mode, caller_tok), 60))
        assert (version, names) == (revision, ["echo"]), (mode, version, names)
        assert not result.is_error, result
        got = backend.calls("pub.echo")[-1].json()
        assert got["payload"] == {"over": "https"} and got["source_agent"] == "agent://lab/mcp-user", got
    calls = len(backend.calls("pub.echo"))
    with pytest.raises(Exception) as refused:
        asyncio.run(asyncio.wait_for(go("auto", None), 60))
    # Refused (401), not left hanging until the test's own deadline.
    assert not isinstance(refused.value, (asyncio.TimeoutError, TimeoutError)), refused.value
    assert len(backend.calls("pub.echo")) == calls


def test_a2a_card_over_https_names_the_https_url(make_stack, tmp_path):
    """Proves that the A2A agent card fetched over the public listener
    names an https JSON-RPC URL the caller can reach."""
    from harness.config import Section

    p = public_stack(make_stack, tmp_path, [Section("mapping", "echo", {"protocol": "a2a", "capability": "pub.echo", "description": "Echo."})])
    cert, port = p.cert, p.port
    tok = p.token("agent://lab/a2a-user", ("agent.invoke", "agent.route"))
    public = Http("127.0.0.1", port, tls=client_tls(cert))
    r = public.get("/.well-known/agent-card.json", headers=bearer(tok))
    assert r.status == 200, r.describe()
    urls = [i["url"] for i in r.json()["supportedInterfaces"]]
    assert urls and all(u.startswith(f"https://127.0.0.1:{port}/") for u in urls), urls
