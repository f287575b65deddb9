"""Route ownership on the LAN (docs/trust-model.md), with two LAN hosts in
their own network namespaces: the victim registers an origin, the attacker
tries to take it over. Every request of a host leaves from its own
address (tests/agents/lan_host.py runs inside the namespace)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.agentproc import AgentProcess
from harness.config import Section
from harness.http import envelope
from harness.jwt import TenantKey, bearer

LAN_HOST = str(Path(__file__).resolve().parent / "agents" / "lan_host.py")
PORT = 18080


def ns_post(ns, url, body, token=""):
    p = subprocess.run(
        ns.exec_argv([sys.executable, LAN_HOST, "post", url, json.dumps(body), token]),
        capture_output=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return json.loads(p.stdout)


def serve(ns, workdir, tag):
    agent = AgentProcess(ns.exec_argv([sys.executable, LAN_HOST, "serve", str(PORT), tag]), workdir / f"{tag}.log")
    agent.wait_message("ready", timeout=20)
    return agent, f"http://{ns.ns_addr}:{PORT}/invoke"


def reg(origin, endpoint, **extra):
    return {"intent": "office.print", "origin": origin, "endpoint": endpoint, "tenant": "lab",
            "version": 1, "lease_seconds": 60, **extra}


def refused(answer, status, reason):
    err = answer["body"].get("error", {}) if isinstance(answer["body"], dict) else {}
    assert (answer["status"], err.get("code"), err.get("reason")) == (status, "forbidden", reason), answer


def two_host_stack(make_stack, victim, attacker, auth, lab=None, extra_sections=()):
    kw = {}
    if lab is not None:
        kw["tenants"] = [("lab", {"name": "lab", "jwt_key": [lab.uci_value]})]
    stack = make_stack(
        start=False,
        auth=auth,
        sdk_host=victim.host_addr,
        gateway={"bootstrap_networks": [f"{victim.ns_addr}/32", f"{attacker.ns_addr}/32"],
                 "bootstrap_tenant": ["lab"]},
        **kw,
    )
    stack.cfg.sections.extend(extra_sections)
    stack.cfg.write()
    stack.start()
    attacker.reach(victim.host_addr)
    return stack


def endpoint_of(stack, route_id):
    return next(str(r["endpoint"]) for r in stack.routes() if r["route_id"] == route_id)


def test_bootstrap_mode_binds_an_origin_to_its_host_and_token(make_stack, netns, netns2, workdir):
    """Proves, with trusted-LAN bootstrap on for both hosts: once the victim
    host registered `agent://lab/printer`, the attacker host gets no
    bootstrap token for that origin (403 `forbidden`, reason
    `origin_owned`); with a token for its own origin it can neither renew
    the victim's route to point at itself nor unregister it (403, reason
    `not_owner`); naming the victim's route_id in its own registration
    gets it an id of its own; the route still points at the victim and an
    invocation targeting the victim's agent reaches the victim's handler;
    the victim renews with a fresh token."""
    victim, attacker = netns, netns2
    lab = TenantKey.generate()
    stack = two_host_stack(make_stack, victim, attacker, "jwt", lab)
    base = stack.http.base_url
    v_srv, v_ep = serve(victim, workdir, "victim")
    a_srv, a_ep = serve(attacker, workdir, "attacker")
    try:
        v_tok = ns_post(victim, base + "/agent/v1/bootstrap", {"tenant": "lab", "origin": "agent://lab/printer"})
        assert v_tok["status"] == 200, v_tok
        v_tok = v_tok["body"]["access_token"]
        got = ns_post(victim, base + "/agent/v1/register", reg("agent://lab/printer", v_ep), v_tok)
        assert got["status"] == 200, got
        rid = got["body"]["route_id"]

        # No token as the victim's origin for another host.
        refused(ns_post(attacker, base + "/agent/v1/bootstrap", {"tenant": "lab", "origin": "agent://lab/printer"}),
                403, "origin_owned")
        # With a token of its own origin: no renew, no unregister.
        a_tok = ns_post(attacker, base + "/agent/v1/bootstrap", {"tenant": "lab", "origin": "agent://lab/evil"})
        assert a_tok["status"] == 200, a_tok
        a_tok = a_tok["body"]["access_token"]
        refused(ns_post(attacker, base + "/agent/v1/renew", {"route_id": rid, "endpoint": a_ep}, a_tok), 403, "not_owner")
        refused(ns_post(attacker, base + "/agent/v1/unregister", {"route_id": rid}, a_tok), 403, "not_owner")
        # Pre-claiming the victim's id: the attacker's route gets its own.
        claim = ns_post(attacker, base + "/agent/v1/register", reg("agent://lab/evil", a_ep, route_id=rid), a_tok)
        assert claim["status"] == 200 and claim["body"]["route_id"] != rid, claim

        assert endpoint_of(stack, rid) == v_ep
        aud = stack.http.get("/agent/v1/authentication").json()["authentication"]["audience"]
        caller = lab.mint(tenant="lab", sub="agent://lab/caller", scopes=["agent.invoke"], aud=aud)
        r = stack.http.post("/agent/v1/invoke", envelope("office.print", {}, target_agent="agent://lab/printer"),
                            headers=bearer(caller))
        assert r.status == 200 and r.json() == {"tag": "victim"}, r.describe()
        assert r.header("x-agentd-route-id") == rid
        # The owner itself keeps renewing (fresh token, same host).
        fresh = ns_post(victim, base + "/agent/v1/bootstrap", {"tenant": "lab", "origin": "agent://lab/printer"})
        assert fresh["status"] == 200, fresh
        renewed = ns_post(victim, base + "/agent/v1/renew", {"route_id": rid}, fresh["body"]["access_token"])
        assert renewed["status"] == 200, renewed
    finally:
        v_srv.stop()
        a_srv.stop()


def test_auth_none_binds_an_origin_to_its_source_address(make_stack, netns, netns2, workdir):
    """Proves that in lab mode (auth `none`) an origin is bound to the
    source address that registered it: another host's register of that
    origin, renew of its route (to point at itself) and unregister are
    refused with 403 `forbidden`, reason `origin_owned`; a route_id the
    attacker claims first does not make the victim's registration of the
    same id fail (each gets an id of its own scope); calls still reach the
    victim."""
    victim, attacker = netns, netns2
    stack = two_host_stack(make_stack, victim, attacker, "none")
    base = stack.http.base_url
    v_srv, v_ep = serve(victim, workdir, "victim")
    a_srv, a_ep = serve(attacker, workdir, "attacker")
    try:
        # The attacker claims a name first ...
        pre = ns_post(attacker, base + "/agent/v1/register", reg("agent://lab/evil", a_ep, route_id="printer-1"))
        assert pre["status"] == 200, pre
        # ... and the victim's registration naming it still succeeds.
        got = ns_post(victim, base + "/agent/v1/register", reg("agent://lab/printer", v_ep, route_id="printer-1"))
        assert got["status"] == 200, got
        rid = got["body"]["route_id"]
        assert rid != pre["body"]["route_id"], (rid, pre)

        refused(ns_post(attacker, base + "/agent/v1/register", reg("agent://lab/printer", a_ep)), 403, "origin_owned")
        refused(ns_post(attacker, base + "/agent/v1/renew", {"route_id": rid, "endpoint": a_ep}), 403, "origin_owned")
        refused(ns_post(attacker, base + "/agent/v1/unregister", {"route_id": rid}), 403, "origin_owned")
        assert endpoint_of(stack, rid) == v_ep
        r = stack.http.post("/agent/v1/invoke", envelope("office.print", {}, target_agent="agent://lab/printer"))
        assert r.status == 200 and r.json() == {"tag": "victim"}, r.describe()
        # The victim re-registers with the reply's id (nexilume's upsert).
        again = ns_post(victim, base + "/agent/v1/register", reg("agent://lab/printer", v_ep, route_id=rid))
        assert again["status"] == 200 and again["body"]["route_id"] == rid, again
    finally:
        v_srv.stop()
        a_srv.stop()


def test_agent_section_pins_an_origin_to_its_source(make_stack, netns, netns2, workdir):
    """Proves that `config agent` with `list source` pins an origin: a
    host outside the pinned prefix gets no bootstrap token for it (403,
    reason `origin_pinned_source`) even though nobody holds the origin,
    while the pinned host bootstraps and registers it."""
    victim, attacker = netns, netns2
    lab = TenantKey.generate()
    pin = Section("agent", "pinned", {"origin": "agent://lab/pinned", "source": [f"{victim.ns_addr}/32"]})
    stack = two_host_stack(make_stack, victim, attacker, "jwt", lab, extra_sections=[pin])
    base = stack.http.base_url
    ask = {"tenant": "lab", "origin": "agent://lab/pinned"}
    refused(ns_post(attacker, base + "/agent/v1/bootstrap", ask), 403, "origin_pinned_source")
    tok = ns_post(victim, base + "/agent/v1/bootstrap", ask)
    assert tok["status"] == 200, tok
    got = ns_post(victim, base + "/agent/v1/register",
                  reg("agent://lab/pinned", f"http://{victim.ns_addr}:{PORT}/invoke"), tok["body"]["access_token"])
    assert got["status"] == 200, got
