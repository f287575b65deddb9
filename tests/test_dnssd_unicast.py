"""Cross-domain discovery by unicast DNS-SD (DESIGN §6, RFC 6763) with real
binaries in network namespaces and a real DNS server: Debian's NSD serves
zones the test writes from `agentctl discovery records` (so the lines an
operator is told to add are the ones tested), on a LAN segment shared with
the routers; `discovery.resolver` points at it, `discovery.search_domain`
lists the zones. mDNS runs on no interface, so every candidate here comes
from the zones.

Covered: routers of our domain and of a foreign one found through the
chain PTR → SRV/TXT → A, under each admission mode (manual, same-domain,
allowlist, off); manual approval brings the ARPX session and the remote
routes; a changed record needs a new approval; `require_dnssec` refuses
answers without the AD bit (NSD directly) and accepts them from a
validating resolver (Unbound with the zones signed and their DS as trust
anchors). The test of manual mode also measures, and prints as JSON (and
writes to target/figures/dnssd_unicast.json), the time from publication
to candidate and from approval to the first eligible remote route."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

import pytest

from harness.discovery import LIFETIME_S, candidate_rows, peer_sections
from harness.dns import VALIDATOR_PORT, DnsServer
from harness.mesh import MeshRouter
from harness.poll import wait_for

REPO = Path(__file__).resolve().parent.parent
LAB, OTHER = "lab.example", "other.example"


def unicast_router(mesh: Any, name: str, admission: str, search: Sequence[str], domain: str = LAB,
                   **disc: Any) -> MeshRouter:
    """A router with discovery on in `admission` mode, mDNS on no
    interface, unicast DNS-SD in `search` (the resolver is set once the
    DNS server has its address), lookups every second."""
    r = mesh.router(name, agentd={"domain": domain})
    opts: Dict[str, Any] = {
        "enabled": 1,
        "admission": admission,
        "candidate_lifetime_s": LIFETIME_S,
        "interface": [],
        "search_domain": list(search),
        "refresh_min_s": 1,
        "refresh_max_s": 1,
        "query_timeout_ms": 500,
    }
    opts.update(disc)
    r.cfg.section("discovery").options = opts
    return r


@pytest.fixture
def servers() -> Iterator[List[DnsServer]]:
    """DNS servers a test starts, stopped by PID at teardown (before the
    mesh deletes their namespace)."""
    started: List[DnsServer] = []
    yield started
    for s in started:
        s.close()


def dns_lan(mesh: Any, workdir: Path, servers: List[DnsServer], routers: Sequence[MeshRouter],
            signed: bool = False) -> tuple:
    """A DNS namespace and one LAN segment with `routers`; NSD serves both
    zones (empty). Returns the server and router name → LAN address."""
    mesh.net.add_router("dns")
    seg = mesh.net.segment(["dns", *[r.name for r in routers]])
    dns = DnsServer(mesh.net.routers["dns"], seg["dns"][1], workdir / "dns", [LAB, OTHER], signed=signed,
                    started=servers)
    addr = {name: a for name, (_, a) in seg.items()}
    for r in routers:
        r.cfg.section("discovery").options.setdefault("resolver", addr["dns"])
    return dns, addr


def records(mesh: Any, r: MeshRouter, zone: str, address: str) -> List[str]:
    """`agentctl discovery records ZONE --address IP` for r (from its
    config file and identity key)."""
    r.cfg.write()
    p = subprocess.run([str(mesh.bins.agentctl), "--config", str(r.cfg.path), "--json", "discovery", "records", zone,
                        "--address", address], capture_output=True, stdin=subprocess.DEVNULL, timeout=10)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["fingerprint"] == r.key.fingerprint, out
    return list(out["records"])


def rows(r: MeshRouter) -> Dict[str, Dict[str, Any]]:
    """Unicast candidates of r by router_id."""
    return {c["id"]: c for c in candidate_rows(r) if c["source"] == "unicast"}


def wait_row(r: MeshRouter, rid: str, version: Optional[int] = None, timeout: float = 15.0) -> Dict[str, Any]:
    def check() -> Optional[Dict[str, Any]]:
        c = rows(r).get(rid)
        return c if c and (version is None or c["version"] == version) else None

    return wait_for(f"{r.name}: {rid} found by unicast DNS-SD", check, timeout=timeout)


def domains(r: MeshRouter) -> Dict[str, Dict[str, Any]]:
    return {d["domain"]: d for d in r.stack.ctl_json("candidates")["unicast"]}


def _ctl(r: MeshRouter, *args: str) -> tuple:
    p = r.stack.ctl(*args)
    return p.returncode, json.loads(p.stdout or b"null")


def write_figures(figures: Dict[str, Any]) -> None:
    out = REPO / "target" / "figures"
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(figures, indent=2, sort_keys=True)
    (out / "dnssd_unicast.json").write_text(text + "\n", encoding="utf-8")
    print(text)


def test_manual_admission_of_routers_found_in_our_and_a_foreign_domain(mesh, workdir, servers):
    """Proves the unicast chain and manual admission end to end: A browses
    lab.example and other.example, B browses lab.example. With A and B
    published in lab.example (records from `agentctl discovery records`),
    each sees the other as a `pending` candidate of source `unicast` with
    the real key fingerprint, the published address and ports, and holds
    no session; C, published later in other.example (a foreign domain),
    shows up at A `pending` too, with its domain. Approving the announced
    versions on both sides writes `discovered` peer sections and brings
    the ARPX session up, and B's route becomes an eligible remote route at
    A. When B's record changes (another data-plane port, a new record
    version), A shows it `pending` again: the old version's approval is
    refused as a mismatch, the new one is accepted. Each search domain's
    row shows its last success."""
    a = unicast_router(mesh, "router-a", "manual", [LAB, OTHER])
    b = unicast_router(mesh, "router-b", "manual", [LAB])
    c = unicast_router(mesh, "router-c", "manual", [OTHER], domain=OTHER)
    dns, addr = dns_lan(mesh, workdir, servers, [a, b])
    dns.publish(LAB, records(mesh, a, LAB, addr["router-a"]) + records(mesh, b, LAB, addr["router-b"]))
    a.start()
    b.start()

    cb = wait_row(a, "router-b")
    ca = wait_row(b, "router-a")
    assert cb["fingerprint"] == b.key.fingerprint and ca["fingerprint"] == a.key.fingerprint, (cb, ca)
    assert (cb["state"], cb["domain"], cb["address"], cb["port"], cb["data_port"]) == \
        ("pending", LAB, addr["router-b"], 7444, 7447), cb
    assert cb["instance"] == "router-b._arpx._tcp.lab.example", cb
    assert "router-a" not in rows(a), "a router never lists itself"
    assert a.peers_status() == [] and b.peers_status() == []
    d = domains(a)
    # Both published routers are found in the zone (A itself too; the
    # candidate table ignores its own record).
    assert d[LAB]["last_success_ago_ms"] is not None and d[LAB]["instances"] == 2, d
    assert d[OTHER]["last_success_ago_ms"] is not None and d[OTHER]["instances"] == 0, d

    # A foreign-domain router published now: from publication to candidate.
    dns.publish(OTHER, records(mesh, c, OTHER, "192.0.2.99"))
    t0 = time.monotonic()
    cc = wait_row(a, "router-c")
    publish_to_candidate_ms = (time.monotonic() - t0) * 1000
    assert (cc["state"], cc["domain"], cc["fingerprint"]) == ("pending", OTHER, c.key.fingerprint), cc

    # Approval on both sides: the session, then B's route at A.
    b.register("r-b", capability="demo.echo")
    rc, out = _ctl(a, "approve", "router-b", str(cb["version"]))
    assert rc == 0, out
    t1 = time.monotonic()
    rc, out = _ctl(b, "approve", "router-a", str(ca["version"]))
    assert rc == 0, out
    a.wait_established("router-b", timeout=20)
    wait_for("A: B's route eligible", lambda: a.remote_set() or None, timeout=20, interval=0.01)
    approval_to_route_ms = (time.monotonic() - t1) * 1000
    sec = peer_sections(a)["router-b"]
    assert (sec["discovered"], sec["record_version"], sec["key_fingerprint"], sec["address"]) == \
        ("1", str(cb["version"]), b.key.fingerprint, addr["router-b"]), sec
    assert rows(a)["router-b"]["state"] == "approved"

    # B's record changes (its data-plane port): a new version to approve.
    b.cfg.section("gateway").options["peer_listen"] = "0.0.0.0:7448"
    b.reload()
    dns.publish(LAB, records(mesh, a, LAB, addr["router-a"]) + records(mesh, b, LAB, addr["router-b"]))
    new = wait_for("A: B's new record version", lambda: (lambda c: c if c and c["version"] != cb["version"]
                                                          else None)(rows(a).get("router-b")), timeout=15)
    assert (new["state"], new["data_port"]) == ("pending", 7448), new
    rc, out = _ctl(a, "approve", "router-b", str(cb["version"]))
    assert rc == 1 and out["error"]["code"] == "version_mismatch", out
    rc, out = _ctl(a, "approve", "router-b", str(new["version"]))
    assert rc == 0, out
    assert peer_sections(a)["router-b"]["record_version"] == str(new["version"])
    assert rows(a)["router-b"]["state"] == "approved"

    write_figures({
        "what": "unicast DNS-SD (NSD in a namespace, discovery.refresh_min_s = refresh_max_s = 1, records TTL 120)",
        "publication_to_candidate_ms": round(publish_to_candidate_ms, 1),
        "publication_to_candidate_note": "from NSD serving the new zone serial to router-c listed by agentctl "
                                         "candidates at router-a (bounded by the lookup interval, 1 s here)",
        "approval_to_first_eligible_remote_route_ms": round(approval_to_route_ms, 1),
        "approval_to_first_eligible_remote_route_note": "from the second agentctl approve (router-b approving "
                                                        "router-a) to router-b's route eligible at router-a",
    })


@pytest.mark.parametrize("mode", ["same-domain", "allowlist", "off"])
def test_automatic_modes_decide_on_our_and_foreign_domain_routers(mesh, workdir, servers, mode):
    """Proves the automatic admission modes treat unicast candidates as mDNS
    ones: B (lab.example, our domain) and C (other.example) are published
    (neither runs). same-domain admits B (A then runs a peer for it) and
    rejects C; allowlist with C's fingerprint admits C and rejects B; off
    rejects both. Nothing is written to A's file."""
    a = unicast_router(mesh, "router-a", mode, [LAB, OTHER])
    b = unicast_router(mesh, "router-b", mode, [LAB])
    c = unicast_router(mesh, "router-c", mode, [OTHER], domain=OTHER)
    if mode == "allowlist":
        a.cfg.section("discovery").options["allow_fingerprint"] = [c.key.fingerprint]
    dns, _ = dns_lan(mesh, workdir, servers, [a])
    dns.publish(LAB, records(mesh, b, LAB, "192.0.2.98"))
    dns.publish(OTHER, records(mesh, c, OTHER, "192.0.2.99"))
    a.start()

    want = {"same-domain": ("admitted", "rejected"), "allowlist": ("rejected", "admitted"),
            "off": ("rejected", "rejected")}[mode]
    got = (wait_row(a, "router-b")["state"], wait_row(a, "router-c")["state"])
    assert got == want, got
    for rid, state in zip(("router-b", "router-c"), want):
        if state == "admitted":
            wait_for(f"A: a peer for admitted {rid}", lambda rid=rid: a.peer(rid), timeout=10)
        else:
            assert a.peer(rid) is None, a.peers_status()
    assert peer_sections(a) == {}


def test_require_dnssec_accepts_only_validated_answers(mesh, workdir, servers):
    """Proves `require_dnssec`: the zones are signed (ldns-signzone) and
    served by NSD, which as an authoritative server never sets AD. A asks
    NSD directly with require_dnssec 1: no candidate, and its search
    domain shows the typed error (answer not authenticated). Pointed at
    Unbound, which validates the zones against their DS (trust anchors)
    and sets AD, A finds B."""
    a = unicast_router(mesh, "router-a", "manual", [LAB], require_dnssec=1)
    b = unicast_router(mesh, "router-b", "manual", [LAB])
    dns, addr = dns_lan(mesh, workdir, servers, [a], signed=True)
    dns.publish(LAB, records(mesh, b, LAB, "192.0.2.98"))
    a.start()

    err = wait_for("A: the lookup refused", lambda: domains(a)[LAB]["last_error"], timeout=15)
    assert "not authenticated" in err and "require_dnssec" in err, err
    assert domains(a)[LAB]["last_success_ago_ms"] is None
    assert rows(a) == {}

    a.cfg.section("discovery").options["resolver"] = f"{addr['dns']}:{VALIDATOR_PORT}"
    a.reload()
    cb = wait_row(a, "router-b")
    assert (cb["state"], cb["fingerprint"]) == ("pending", b.key.fingerprint), cb
    assert domains(a)[LAB]["resolver"] == f"{addr['dns']}:{VALIDATOR_PORT}"
