"""No SSRF through registration (issue 6 item 1) and no forwarding loops
through the gateway's own listeners (item 2): endpoints pointing at the
router itself are refused typed, in every spelling, in `none` and `jwt`
mode, and nothing reaches the RIB or a handler on the router."""

from __future__ import annotations

import pytest

from harness.backend import registration
from harness.http import envelope
from harness.jwt import TenantKey, bearer

# Every spelling of "the router's own loopback" an attacker may try; the
# port is a real handler on 127.0.0.1 (standing in for uhttpd's ubus).
LOOPBACK_FORMS = [
    ("http://127.0.0.1:{port}/ubus", "endpoint_loopback"),
    ("http://127.1:{port}/ubus", "endpoint_loopback"),
    ("http://2130706433:{port}/ubus", "endpoint_loopback"),
    ("http://0x7f.1:{port}/ubus", "endpoint_loopback"),
    ("http://0177.0.0.1:{port}/ubus", "endpoint_loopback"),
    ("http://127.0.0.1.:{port}/ubus", "endpoint_loopback"),
    ("http://[::1]:{port}/ubus", "endpoint_loopback"),
    ("http://[::ffff:127.0.0.1]:{port}/ubus", "endpoint_loopback"),
    ("http://localhost:{port}/ubus", "endpoint_loopback"),
    ("http://LocalHost.:{port}/ubus", "endpoint_loopback"),
    ("http://ubus.localhost:{port}/ubus", "endpoint_loopback"),
    ("http://0.0.0.0:{port}/ubus", "endpoint_unspecified"),
    ("http://[::]:{port}/ubus", "endpoint_unspecified"),
    ("http://169.254.169.254:{port}/latest", "endpoint_link_local"),
    ("http://224.0.0.1:{port}/", "endpoint_multicast"),
    ("http://255.255.255.255:{port}/", "endpoint_broadcast"),
]


def _refused(r, reason):
    assert r.status == 400, r.describe()
    err = r.json()["error"]
    assert err["code"] == "endpoint_refused", r.describe()
    assert err["reason"] == reason, r.describe()
    assert err["message"], r.describe()


@pytest.fixture(params=["none", "jwt"])
def router(request, make_stack):
    """A router with the default endpoint rules (no loopback leave), in
    both auth modes; yields (stack, headers-for-the-agent)."""
    if request.param == "none":
        yield make_stack(auth="none", loopback_endpoints=False), {}
        return
    lab = TenantKey.generate()
    stack = make_stack(
        auth="jwt",
        loopback_endpoints=False,
        tenants=[("lab", {"name": "lab", "jwt_key": [lab.uci_value]})],
    )
    aud = stack.http.get("/agent/v1/authentication").json()["authentication"]["audience"]
    tok = lab.mint(tenant="lab", sub="agent://lab/echo", scopes=["agent.register", "agent.invoke", "agent.route"], aud=aud)
    yield stack, bearer(tok)


def test_every_loopback_spelling_is_refused_and_nothing_reaches_the_rib(router, backend):
    """Proves that registering any spelling of loopback (decimal, hex,
    octal, short, trailing dot, IPv6, IPv4-mapped, `localhost` and
    `*.localhost` — the last resolved by the gateway), unspecified,
    link-local, multicast or broadcast is a 400 `endpoint_refused` naming
    the class, in lab auth and in JWT mode; that the RIB stays empty and
    the handler listening on that loopback port is never called; and that
    a LAN endpoint is still accepted right after."""
    stack, headers = router
    port = backend.port
    for form, reason in LOOPBACK_FORMS:
        url = form.format(port=port)
        r = stack.http.post("/agent/v1/register", registration("ssrf.ubus", url), headers=headers)
        _refused(r, reason)
    assert stack.routes() == []
    r = stack.http.post("/agent/v1/invoke", envelope("ssrf.ubus", {"method": "call"}), headers=headers)
    assert r.status == 404 and r.error_code() == "no_route", r.describe()
    assert backend.calls() == []
    # A renewal cannot move a LAN route onto the router either.
    info = stack.register(registration("ssrf.lan", "http://192.0.2.77:8080/invoke"), headers=headers)
    r = stack.http.post(
        "/agent/v1/renew",
        {"route_id": info["route_id"], "endpoint": f"http://127.0.0.1:{port}/ubus"},
        headers=headers,
    )
    _refused(r, "endpoint_loopback")
    assert [x["endpoint"] for x in stack.routes()] == ["http://192.0.2.77:8080/invoke"]


def test_https_endpoints_are_refused_in_one_place(router):
    """Proves that an `https://` endpoint (not supported: handlers are
    called over plain HTTP) is a 400 `invalid_field` naming the endpoint,
    not a route the gateway could never call."""
    stack, headers = router
    r = stack.http.post("/agent/v1/register", registration("ssrf.tls", "https://192.0.2.77:8443/x"), headers=headers)
    assert r.status == 400 and r.error_code() == "invalid_field", r.describe()
    assert "https" in r.json()["error"]["message"], r.describe()
    assert stack.routes() == []


def test_lab_mode_still_refuses_the_gateways_own_invoke_url(make_stack, backend):
    """Proves that with `allow_loopback_endpoints` (lab mode) a handler on
    127.0.0.1 registers and is called, but the gateway's own invoke URL —
    by address, by `localhost` and by the short form — is refused with
    `endpoint_own_listener` (a forwarding loop), and never enters the RIB."""
    stack = make_stack(auth="none")
    own = stack.cfg.sdk_port
    for url in (
        f"http://127.0.0.1:{own}/agent/v1/invoke",
        f"http://localhost:{own}/agent/v1/invoke",
        f"http://127.1:{own}/agent/v1/invoke",
        f"http://[::ffff:127.0.0.1]:{own}/agent/v1/invoke",
    ):
        r = stack.http.post("/agent/v1/register", registration("ssrf.loop", url))
        _refused(r, "endpoint_own_listener")
    assert stack.routes() == []
    stack.register(registration("ssrf.lab", backend.endpoint))
    stack.wait_routable(envelope("ssrf.lab", {}))
    r = stack.http.post("/agent/v1/invoke", envelope("ssrf.lab", {"n": 1}))
    assert r.status == 200, r.describe()
    assert len(backend.calls("ssrf.lab")) == 1


def test_one_set_of_rules_for_attributes_and_ports(router):
    """Proves that the register and renew decoders refuse what agentd and
    the forwarder refuse (one shared model): `load_permille` beyond the
    schema's 0–1000, `trust` beyond 100 and port 0 are 400 `invalid_field`
    naming the field; a URL without a port means port 80 everywhere."""
    stack, headers = router
    for extra, field in (({"load_permille": 5000}, "load_permille"), ({"trust": 101}, "trust")):
        r = stack.http.post("/agent/v1/register", {**registration("attr.x", "http://192.0.2.77:8080/x"), **extra}, headers=headers)
        assert r.status == 400 and r.error_code() == "invalid_field", r.describe()
        assert field in r.json()["error"]["message"], r.describe()
    r = stack.http.post("/agent/v1/register", registration("attr.x", "http://192.0.2.77:0/x"), headers=headers)
    assert r.status == 400 and r.error_code() == "invalid_field", r.describe()
    info = stack.register(registration("attr.x", "http://192.0.2.77/x"), headers=headers)
    r = stack.http.post("/agent/v1/renew", {"route_id": info["route_id"], "load_permille": 1001}, headers=headers)
    assert r.status == 400 and r.error_code() == "invalid_field", r.describe()
    assert [x["load"] for x in stack.routes()] == [0], stack.routes()
