"""``DirectAgent`` against a local HTTPS peer on ::1: the envelope, SNI and
certificate checks, the optional client certificate and token, error
mapping shared with ``Client``, bounded replies and address checks.

The peer's CA, server and client certificates are made with the
``cryptography`` package; the tests skip without it or without IPv6
loopback."""

import datetime
import json
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

from agentd_sdk import (  # noqa: E402
    DeadlineExceededError,
    DirectAgent,
    NoRouteError,
    ProtocolError,
    RateLimitedError,
    RouterUnavailableError,
    UnavailableError,
)
from agentd_sdk import direct  # noqa: E402
from agentd_sdk.errors import error_for  # noqa: E402


def _ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback")


# ----- a small PKI -----

def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject, key, issuer, issuer_key, *, ca=False, dns=None, client=False):
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder()
         .subject_name(_name(subject)).issuer_name(_name(issuer))
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=1))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                          content_commitment=False, key_encipherment=False,
                                          data_encipherment=False, key_agreement=False,
                                          encipher_only=False, decipher_only=False), critical=True)
        b = b.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                            critical=False)
        usage = x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH if client else x509.oid.ExtendedKeyUsageOID.SERVER_AUTH
        b = b.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if dns:
        b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName(dns)]), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _write(path, cert=None, key=None):
    data = b""
    if cert is not None:
        data += cert.public_bytes(serialization.Encoding.PEM)
    if key is not None:
        data += key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption())
    path.write_bytes(data)
    return str(path)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("agentd-ca-test", ca_key, "agentd-ca-test", ca_key, ca=True)
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = _cert("router-a", srv_key, "agentd-ca-test", ca_key, dns="router-a")
    cli_key = ec.generate_private_key(ec.SECP256R1())
    cli = _cert("agent://lab/caller", cli_key, "agentd-ca-test", ca_key, client=True)
    other_key = ec.generate_private_key(ec.SECP256R1())
    other = _cert("other-ca", other_key, "other-ca", other_key, ca=True)
    return {
        "ca": _write(d / "ca.pem", ca),
        "other_ca": _write(d / "other-ca.pem", other),
        "server": _write(d / "server.pem", srv, srv_key),
        "client_cert": _write(d / "client.pem", cli),
        "client_key": _write(d / "client.key", key=cli_key),
    }


# ----- the HTTPS peer -----

class _Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6
    daemon_threads = True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _send(self, status, body, raw=None):
        data = raw if raw is not None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        env = json.loads(self.rfile.read(length))
        peer = self.connection.getpeercert()
        self.server.seen.append({
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": env,
            "client_cn": dict(x[0] for x in peer["subject"])["commonName"] if peer else None,
        })
        intent = env.get("intent")
        if intent == "missing":
            return self._send(404, {"error": {"code": "no_route", "message": "no eligible route for missing v1",
                                              "outcome": "rejected", "reason": "tenant_access"}})
        if intent == "limited":
            return self._send(429, {"code": "rate_limited", "message": "flat form"})
        if intent == "busy":
            return self._send(503, None, raw=b"<html>busy</html>")
        if intent == "slow":
            threading.Event().wait(2.0)
        return self._send(200, {"echo": env.get("payload")})


@pytest.fixture
def peer(pki):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki["server"])
    ctx.load_verify_locations(pki["ca"])
    ctx.verify_mode = ssl.CERT_OPTIONAL
    sni = []
    ctx.sni_callback = lambda sock, name, c: sni.append(name)
    server = _Server(("::1", 0), _Handler)
    server.seen = []
    server.sni = sni
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield server
    server.shutdown()
    server.server_close()


def _agent(peer, pki, **kw):
    opts = {"port": peer.server_address[1], "server_name": "router-a", "ca_file": pki["ca"], **kw}
    return DirectAgent("::1", **opts)


# ----- tests -----

def test_invoke_sends_the_envelope_over_verified_tls_with_sni_and_token(peer, pki, monkeypatch):
    # Environment proxies are never used for the literal address.
    monkeypatch.setenv("HTTPS_PROXY", "http://[::1]:9")
    monkeypatch.setenv("https_proxy", "http://[::1]:9")
    agent = _agent(peer, pki, token="tok.en")
    assert "tok.en" not in repr(agent)
    got = agent.invoke("demo.echo", {"x": 1}, tenant="lab", source_agent="agent://lab/caller",
                       version=2, timeout_ms=1500)
    assert got == {"echo": {"x": 1}}
    rec = peer.seen[-1]
    assert rec["path"] == "/agent/v1/invoke"
    env = rec["body"]
    task_id = env.pop("task_id")
    assert len(task_id) == 36
    assert env == {"version": "1.0", "intent": "demo.echo", "intent_version": 2, "source_agent": "agent://lab/caller",
                   "tenant": "lab", "hop_limit": 8, "constraints": {}, "payload": {"x": 1}}
    assert rec["headers"]["authorization"] == "Bearer tok.en"
    assert rec["headers"]["x-agentd-timeout-ms"] == "1500"
    assert rec["headers"]["host"] == f"[::1]:{agent.port}"
    assert rec["client_cn"] is None
    assert peer.sni == ["router-a"]


def test_client_certificate_is_presented_when_given(peer, pki):
    agent = _agent(peer, pki, cert_file=pki["client_cert"], key_file=pki["client_key"])
    agent.invoke("demo.echo", {}, tenant="lab", source_agent="agent://lab/caller")
    assert peer.seen[-1]["client_cn"] == "agent://lab/caller"
    assert "authorization" not in peer.seen[-1]["headers"]


def test_error_bodies_map_to_the_classes_the_router_client_raises(peer, pki):
    agent = _agent(peer, pki)
    with pytest.raises(NoRouteError) as info:
        agent.invoke("missing", {}, tenant="lab", source_agent="agent://lab/caller")
    e = info.value
    assert (e.code, e.status, e.outcome, e.reason) == ("no_route", 404, "rejected", "tenant_access")
    assert type(e) is type(error_for(404, "no_route", "", "rejected", "tenant_access"))
    with pytest.raises(RateLimitedError):
        agent.invoke("limited", {}, tenant="lab", source_agent="agent://lab/caller")
    with pytest.raises(UnavailableError) as info:
        agent.invoke("busy", {}, tenant="lab", source_agent="agent://lab/caller")
    assert info.value.status == 503


def test_the_certificate_must_match_server_name_and_ca(peer, pki):
    for agent in (_agent(peer, pki, server_name="router-b"), _agent(peer, pki, ca_file=pki["other_ca"])):
        with pytest.raises(RouterUnavailableError) as info:
            agent.invoke("demo.echo", {}, tenant="lab", source_agent="agent://lab/caller")
        assert info.value.not_delivered and info.value.code == "tls_failed"
    assert peer.seen == []


def test_replies_are_bounded_and_slow_ones_time_out(peer, pki, monkeypatch):
    agent = _agent(peer, pki)
    monkeypatch.setattr(direct, "MAX_REPLY_BODY", 8)
    with pytest.raises(ProtocolError):
        agent.invoke("demo.echo", {"text": "more than eight bytes"}, tenant="lab",
                     source_agent="agent://lab/caller")
    monkeypatch.undo()
    with pytest.raises(DeadlineExceededError):
        _agent(peer, pki, timeout=0.3).invoke("slow", {}, tenant="lab", source_agent="agent://lab/caller")


def test_unreachable_endpoint_is_not_delivered(pki):
    s = socket.socket(socket.AF_INET6)
    s.bind(("::1", 0))
    port = s.getsockname()[1]
    s.close()
    agent = DirectAgent("::1", port=port, server_name="router-a", ca_file=pki["ca"])
    with pytest.raises(RouterUnavailableError) as info:
        agent.invoke("demo.echo", {}, tenant="lab", source_agent="agent://lab/caller")
    assert info.value.not_delivered


def test_only_unscoped_ipv6_literals_are_accepted(pki):
    ok = DirectAgent("[2001:DB8::7]", server_name="router-a", ca_file=pki["ca"])
    assert (ok.address, ok.url) == ("2001:db8::7", "https://[2001:db8::7]:7443")
    for bad in ("fe80::1%eth0", "2001:db8::7%1", "192.0.2.1", "router-a", "fe80::1", "ff02::1", "::",
                "::ffff:192.0.2.1", ""):
        with pytest.raises(ValueError):
            DirectAgent(bad, server_name="router-a", ca_file=pki["ca"])
    for kw in ({"port": 0}, {"port": 65536}, {"server_name": ""}, {"server_name": "a b"},
               {"token": "a b"}, {"key_file": pki["client_key"]}):
        args = {"server_name": "router-a", "ca_file": pki["ca"], **kw}
        with pytest.raises(ValueError):
            DirectAgent("2001:db8::7", **args)
    with pytest.raises(ValueError):
        ok.invoke("demo.echo", None, tenant="lab", source_agent="agent://lab/caller")
    with pytest.raises(ValueError):
        ok.invoke("demo.echo", {}, tenant="lab", source_agent="agent://lab/caller", timeout_ms=0)


def test_from_lease_uses_the_public_endpoint(pki):
    lease = {
        "route_id": "r1",
        "public_ipv6": "2001:db8:66::7",
        "public_url": "https://[2001:db8:66::7]:7443",
        "public_endpoint": {"address": "2001:db8:66::7", "port": 7443, "scheme": "https",
                            "tls_server_name": "router-a", "ca_bundle_id": "agentd-ca-0011223344556677"},
        "public_ipv6_status": {"address": "2001:db8:66::7", "served": True},
    }
    agent = DirectAgent.from_lease(lease, ca_file=pki["ca"], token="t")
    assert agent.url == lease["public_url"]
    assert (agent.server_name, agent.ca_bundle_id) == ("router-a", "agentd-ca-0011223344556677")
    unserved = {"public_endpoint": None,
                "public_ipv6_status": {"address": None, "served": False, "reason": "ipv6.mode 'off'"}}
    with pytest.raises(ValueError, match="ipv6.mode 'off'"):
        DirectAgent.from_lease(unserved, ca_file=pki["ca"])
    plain = {"public_endpoint": dict(lease["public_endpoint"], scheme="http")}
    with pytest.raises(ValueError, match="not https"):
        DirectAgent.from_lease(plain, ca_file=pki["ca"])
    with pytest.raises(TypeError):
        DirectAgent.from_lease(lease, ca_file=pki["ca"], port=1)
