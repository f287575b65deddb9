"""Bearer-token authentication (EdDSA JWTs signed by tenant keys from the
UCI `tenant` sections), with tokens minted independently in Python."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.agentproc import AgentProcess
from harness.backend import registration
from harness.http import envelope
from harness.jwt import TenantKey, bearer, sign, tamper_payload

AGENTS = Path(__file__).resolve().parent / "agents"


@pytest.fixture
def auth_env(make_stack, backend):
    lab, other, stranger = TenantKey.generate(), TenantKey.generate(), TenantKey.generate()
    stack = make_stack(
        auth="jwt",
        tenants=[
            ("lab", {"name": "lab", "jwt_key": [lab.uci_value]}),
            ("other", {"name": "other", "jwt_key": [other.uci_value]}),
        ],
    )
    disc = stack.http.get("/agent/v1/authentication")
    assert disc.status == 200, disc.describe()
    meta = disc.json()
    assert meta["authentication"]["required"] is True, meta
    aud = meta["authentication"]["audience"]

    def token(key=lab, tenant="lab", sub="agent://lab/echo", scopes=("agent.register", "agent.route", "agent.invoke"), **kw):
        return key.mint(tenant=tenant, sub=sub, scopes=scopes, aud=aud, **kw)

    agent_tok = token()
    info = stack.register(registration("auth.echo", backend.endpoint, lease_seconds=60), headers=bearer(agent_tok))
    caller_tok = token(sub="agent://lab/caller", scopes=("agent.invoke", "agent.route"))
    stack.wait_routable(envelope("auth.echo", {}), headers=bearer(caller_tok))
    return stack, backend, token, caller_tok, info, stranger, aud, other


def _unauth(r, reasons=("token_required",)):
    """401 `unauthenticated` whose `reason` is one of `reasons`."""
    assert r.status == 401, r.describe()
    assert r.error_code() == "unauthenticated", r.describe()
    assert r.json()["error"].get("reason") in reasons, r.describe()


def _forbidden_scope(r):
    assert r.status == 403, r.describe()
    assert r.error_code() == "forbidden", r.describe()
    assert r.json()["error"].get("reason") == "insufficient_scope", r.describe()


def test_valid_token_identity_overwrites_body_claims(auth_env):
    """Proves that with auth `jwt` a valid tenant token is accepted and the
    verified identity wins: the body claims tenant `other` and source
    `agent://other/evil`, the handler receives tenant `lab` and source
    `agent://lab/caller` from the token."""
    stack, backend, token, caller_tok, info, *_ = auth_env
    body = envelope("auth.echo", {"n": 1}, tenant="other", source_agent="agent://other/evil")
    r = stack.http.post("/agent/v1/invoke", body, headers=bearer(caller_tok))
    assert r.status == 200, r.describe()
    got = backend.calls("auth.echo")[-1].json()
    assert got["tenant"] == "lab" and got["source_agent"] == "agent://lab/caller", got


def test_expired_and_forged_tokens_get_401(auth_env):
    """Proves that missing, expired (beyond the clock-skew bound), forged
    (claims changed under the old signature, signed by a key no tenant
    has, `alg: none`), wrong-audience and garbage tokens all get 401 on
    invoke and register, that the handler sees none of
    those calls and no route is created, and that the valid token still
    works afterwards. Each refusal is code `unauthenticated` with the
    `reason` that says why (`token_required`, `token_expired`,
    `token_bad_signature`, …)."""
    stack, backend, token, caller_tok, info, stranger, aud, _ = auth_env
    now = int(time.time())
    expired = token(sub="agent://lab/caller", iat=now - 4000, lifetime=600)  # exp = now - 3400
    forged_claims = tamper_payload(caller_tok, tenant="other")
    forged_scope = tamper_payload(token(scopes=("agent.route",)), scope="agent.register agent.invoke")
    strange = token(key=stranger)
    alg_none = sign(stranger.private, {"sub": "agent://lab/caller", "tenant": "lab", "aud": aud,
                                       "scope": "agent.invoke", "iat": now, "exp": now + 60},
                    header={"alg": "none", "typ": "JWT"})
    alg_none = alg_none.rsplit(".", 1)[0] + "."
    wrong_aud = token(sub="agent://lab/caller", extra={"aud": "agentd:someone-else"})
    # token -> the 401 reasons of docs/sdk-api.md that say why. A token signed
    # by a key no tenant has, naming tenant `lab`, is either "no such key"
    # or "signature does not verify" depending on how keys are looked up.
    bad_tokens = {
        "expired": (expired, ("token_expired",)),
        "forged claims": (forged_claims, ("token_bad_signature",)),
        "forged scope": (forged_scope, ("token_bad_signature",)),
        "unknown key": (strange, ("token_bad_signature", "token_unknown_key")),
        "alg none": (alg_none, ("token_bad_algorithm",)),
        "wrong audience": (wrong_aud, ("token_wrong_audience",)),
        "garbage": ("not.a.jwt", ("token_malformed",)),
    }
    routes_before = sorted(stack.route_ids())
    calls_before = len(backend.calls())
    _unauth(stack.http.post("/agent/v1/invoke", envelope("auth.echo", {})))
    for name, (tok, reasons) in bad_tokens.items():
        r = stack.http.post("/agent/v1/invoke", envelope("auth.echo", {"bad": name}), headers=bearer(tok))
        _unauth(r, reasons)
        r = stack.http.post(
            "/agent/v1/register",
            registration("auth.evil", "http://127.0.0.1:9/invoke", lease_seconds=60),
            headers=bearer(tok),
        )
        _unauth(r, reasons)
    assert len(backend.calls()) == calls_before
    assert sorted(stack.route_ids()) == routes_before
    ok = stack.http.post("/agent/v1/invoke", envelope("auth.echo", {"still": "ok"}), headers=bearer(caller_tok))
    assert ok.status == 200 and ok.json()["echo"] == {"still": "ok"}, ok.describe()


def test_scope_and_origin_are_enforced(auth_env):
    """Proves that a valid token without `agent.register` gets 403
    `forbidden` (reason `insufficient_scope`) on register, one without
    `agent.invoke` the same on invoke, that registering an origin other than the
    token's subject gets 403 `origin_mismatch` (nobody registers routes for
    someone else's agent), and that another tenant's valid token cannot
    reach `lab`'s route (no_route)."""
    stack, backend, token, caller_tok, info, *_ = auth_env
    r = stack.http.post("/agent/v1/register", registration("auth.x", "http://127.0.0.1:9/x", lease_seconds=60),
                        headers=bearer(caller_tok))
    _forbidden_scope(r)
    route_only = token(sub="agent://lab/caller", scopes=("agent.route",))
    r = stack.http.post("/agent/v1/invoke", envelope("auth.echo", {}), headers=bearer(route_only))
    _forbidden_scope(r)
    r = stack.http.post("/agent/v1/register",
                        registration("auth.x", "http://127.0.0.1:9/x", lease_seconds=60, name="victim"),
                        headers=bearer(token()))
    assert r.status == 403 and r.error_code() == "origin_mismatch", r.describe()
    other_key = auth_env[7]
    other_tok = token(key=other_key, tenant="other", sub="agent://other/c", scopes=("agent.invoke",))
    r = stack.http.post("/agent/v1/invoke", envelope("auth.echo", {}, tenant="lab", source_agent="agent://lab/c"),
                        headers=bearer(other_tok))
    assert r.status == 404 and r.error_code() == "no_route", r.describe()
    assert r.json()["error"].get("reason") == "tenant_access", r.describe()


# Runs inside the namespace: one JSON POST (a GET when the body is
# null), prints {"status", "body"}.
_NS_POST = r"""
import json, sys, urllib.request, urllib.error
url, body, token = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
headers = {"Content-Type": "application/json"}
if token:
    headers["Authorization"] = "Bearer " + token
get = body == b"null"
req = urllib.request.Request(url, data=None if get else body, headers=headers, method="GET" if get else "POST")
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        print(json.dumps({"status": r.status, "body": json.loads(r.read())}))
except urllib.error.HTTPError as e:
    print(json.dumps({"status": e.code, "body": json.loads(e.read())}))
"""


def _ns_post(netns, url, body, token=""):
    p = subprocess.run(
        netns.exec_argv([sys.executable, "-c", _NS_POST, url, json.dumps(body), token]),
        capture_output=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return json.loads(p.stdout)


def _claims(token):
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def test_trusted_lan_bootstrap_token_is_short_lived_and_bound(make_stack, netns, backend):
    """Proves trusted-LAN bootstrap: a LAN host (in a network namespace)
    gets a Bearer token for its tenant and origin that lives at most 300 s
    (`expires_in` and exp - iat), has the origin as subject and the tenant
    claim; with it that host registers its origin; the same token presented
    from another source address is refused with 401 `unauthenticated`,
    reason `token_source_mismatch`
    (a token lifted off one host is useless from another); an origin
    outside the tenant is refused with 400 `invalid_field`."""
    lab = TenantKey.generate()
    stack = make_stack(
        auth="jwt",
        sdk_host=netns.host_addr,
        gateway={"bootstrap_networks": [f"{netns.ns_addr}/32"], "bootstrap_tenant": ["lab"]},
        tenants=[("lab", {"name": "lab", "jwt_key": [lab.uci_value]})],
    )
    base = stack.http.base_url
    # Bootstrap is announced only to a source that may use it.
    meta = _ns_post(netns, base + "/agent/v1/authentication", None)["body"]
    assert meta["bootstrap"]["endpoint"] == "/agent/v1/bootstrap", meta
    outside_meta = stack.http.get("/agent/v1/authentication").json()
    assert "bootstrap" not in outside_meta and outside_meta["authentication"]["required"], outside_meta
    ask = {"tenant": "lab", "origin": "agent://lab/boot", "scopes": ["agent.register", "agent.invoke"]}
    got = _ns_post(netns, base + "/agent/v1/bootstrap", ask)
    assert got["status"] == 200, got
    tok = got["body"]["access_token"]
    assert got["body"]["token_type"] == "Bearer" and 0 < got["body"]["expires_in"] <= 300, got
    claims = _claims(tok)
    assert claims["sub"] == "agent://lab/boot" and claims["tenant"] == "lab", claims
    assert 0 < claims["exp"] - claims["iat"] <= 300, claims

    reg = registration("boot.echo", backend.endpoint, name="boot", lease_seconds=60)
    inside = _ns_post(netns, base + "/agent/v1/register", reg, tok)
    assert inside["status"] == 200 and inside["body"]["route_id"], inside

    outside = stack.http.post("/agent/v1/register", reg, headers=bearer(tok))
    _unauth(outside, ("token_source_mismatch",))

    bad = _ns_post(netns, base + "/agent/v1/bootstrap", {**ask, "origin": "agent://other/boot"})
    assert bad["status"] == 400 and bad["body"]["error"]["code"] == "invalid_field", bad


def test_nexilume_agent_with_auto_auth_registers_through_bootstrap(make_stack, netns, workdir):
    """Proves that an unmodified nexilume agent with its default-style
    `auth="auto"` discovers the gateway's JWT auth, obtains a trusted-LAN
    bootstrap token and registers with it, and that a caller holding a
    tenant-key token invokes it through the gateway."""
    lab = TenantKey.generate()
    stack = make_stack(
        auth="jwt",
        sdk_host=netns.host_addr,
        gateway={"bootstrap_networks": [f"{netns.ns_addr}/32"], "bootstrap_tenant": ["lab"]},
        tenants=[("lab", {"name": "lab", "jwt_key": [lab.uci_value]})],
    )
    aud = stack.http.get("/agent/v1/authentication").json()["authentication"]["audience"]
    argv = netns.exec_argv(
        [sys.executable, str(AGENTS / "nexilume_agent.py"), stack.http.base_url, "lab", "nx-auto", "30", "0", "auto"]
    )
    agent = AgentProcess(argv, workdir / "nexilume-auto.log")
    try:
        ready = agent.wait_message("ready", timeout=30)
        assert len(ready["route_ids"]) == 2, ready
        caller = lab.mint(tenant="lab", sub="agent://lab/caller", scopes=["agent.invoke", "agent.route"], aud=aud)
        stack.wait_routable(envelope("nx.echo", {}), headers=bearer(caller))
        r = stack.http.post("/agent/v1/invoke", envelope("nx.echo", {"auth": "auto"}), headers=bearer(caller))
        assert r.status == 200 and r.json() == {"echo": {"auth": "auto"}, "via": "nexilume"}, r.describe()
    finally:
        agent.stop()
