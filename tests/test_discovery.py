"""Router discovery and admission (DESIGN §6) with real binaries in network
namespaces: routers announce `_arpx._tcp` over mDNS on the link named in
`discovery.interface` and browse for each other; a discovered router is a
candidate (its fingerprint and record version as announced), never a peer
by itself. Manual mode peers only after `agentctl approve` of exactly the
announced record version (persisted as a `peer` section with
`discovered '1'`), revoke removes it and the session ends; allowlist mode
admits only the listed fingerprint and same-domain mode only routers of
our domain (in memory, nothing written); a candidate goes away
`candidate_lifetime_s` after its router stops; a second host announcing
an approved router_id with another key is a visible `conflict`, never
admitted, while the approved session goes on."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

import pytest

from harness.discovery import (LIFETIME_S, candidate_rows, candidates, discovery_link, discovery_router,
                               discovery_segment, linked_pair, peer_sections, wait_candidate)
from harness.mesh import MeshRouter
from harness.poll import Fatal, wait_for

def _ctl(r: MeshRouter, *args: str) -> tuple:
    p = r.stack.ctl(*args)
    return p.returncode, json.loads(p.stdout or b"null"), p.stderr.decode(errors="replace")


def _session(r: MeshRouter, other: str) -> Optional[Dict[str, Any]]:
    return r.peer(other)


def test_manual_mode_peers_only_after_approval_of_the_announced_version(mesh):
    """Proves manual admission end to end: A and B (manual) see each other
    as pending candidates with the announcer's real key fingerprint and
    the record version it announces, and hold no session; approve with a
    wrong version is refused (`version_mismatch`, naming the current
    version) and writes nothing; approving the announced version on both
    sides writes a `peer` section with `discovered '1'`, the pinned key
    and that `record_version`, and the ARPX session comes up; revoke of
    a wrong version is refused, of the right one removes the section and
    the session ends (B sees it go down). When B stops (goodbye), A's
    candidate stops being announced and is gone within its lifetime."""
    a, b = linked_pair(mesh, "manual")

    cb = wait_candidate(a, b)
    ca = wait_candidate(b, a)
    assert cb["fingerprint"] == b.key.fingerprint, cb
    assert ca["fingerprint"] == a.key.fingerprint, ca
    assert cb["state"] == "pending" and ca["state"] == "pending", (cb, ca)
    assert cb["domain"] == "lab.example" and cb["port"] == 7444 and cb["data_port"] == 7447, cb
    assert cb["address"] == mesh.net.find_link("router-a", "router-b").addr_of("router-b"), cb
    assert cb["announced"] is True and isinstance(cb["version"], int) and cb["version"] >= 1, cb
    # A router never lists itself.
    assert "router-a" not in candidates(a)
    # Nothing peers by itself.
    assert a.peers_status() == [] and b.peers_status() == []
    assert peer_sections(a) == {}

    before = a.cfg.path.read_text(encoding="utf-8")
    wrong = cb["version"] + 1
    rc, out, err = _ctl(a, "approve", "router-b", str(wrong))
    assert rc == 1, (rc, out, err)
    assert out["error"]["code"] == "version_mismatch", out
    assert str(cb["version"]) in out["error"]["message"], out
    assert a.cfg.path.read_text(encoding="utf-8") == before, "a refused approval writes nothing"
    rc, out, _ = _ctl(a, "approve", "router-x", "1")
    assert rc == 1 and out["error"]["code"] == "candidate_not_found", out

    rc, out, err = _ctl(a, "approve", "router-b", str(cb["version"]))
    assert rc == 0, (out, err)
    assert out["ok"] is True and out["version"] == cb["version"], out
    rc, out, err = _ctl(b, "approve", "router-a", str(ca["version"]))
    assert rc == 0, (out, err)

    sec = peer_sections(a)["router-b"]
    assert sec["discovered"] == "1", sec
    assert sec["key_fingerprint"] == b.key.fingerprint, sec
    assert sec["record_version"] == str(cb["version"]), sec
    assert sec["address"] == cb["address"] and sec["port"] == "7444", sec
    # The written file is a valid agentd config.
    chk = subprocess.run([str(mesh.bins.agentd), "--check-config", str(a.cfg.path)], capture_output=True,
                         stdin=subprocess.DEVNULL)
    assert chk.returncode == 0, chk.stderr
    a.wait_established("router-b", timeout=20)
    b.wait_established("router-a", timeout=20)
    assert candidates(a)["router-b"]["state"] == "approved"

    rc, out, _ = _ctl(a, "revoke", "router-b", str(wrong))
    assert rc == 1 and out["error"]["code"] == "version_mismatch", out
    rc, out, err = _ctl(a, "revoke", "router-b", str(cb["version"]))
    assert rc == 0 and out["ok"] is True, (out, err)
    assert "router-b" not in peer_sections(a)
    assert _session(a, "router-b") is None, "A no longer has the peer"
    wait_for("B: session with router-a down", lambda: (_session(b, "router-a") or {}).get("state") != "established",
             timeout=20)
    assert candidates(a)["router-b"]["state"] == "pending"

    b.stop()
    gone = wait_for("A: router-b's announcement withdrawn",
                    lambda: (lambda c: c if c and not c["announced"] else None)(candidates(a).get("router-b"))
                    or ("gone" if "router-b" not in candidates(a) else None), timeout=10)
    if gone != "gone":
        assert gone["expires_in_ms"] <= LIFETIME_S * 1000, gone
    wait_for("A: candidate router-b expired", lambda: "router-b" not in candidates(a), timeout=LIFETIME_S + 5)
    stats = a.stack.ctl_json("stats")["counters"]
    assert stats["discovery.expired"] >= 1, stats


def test_allowlist_admits_only_the_listed_fingerprint(mesh):
    """Proves allowlist admission: A, linked to B and to C, lists only B's
    key; both B and C list A's. A shows B `admitted` and C `rejected`,
    runs an ARPX session with B (published to the data plane as a link,
    like a configured peer's) and none with C (C's dials are refused by
    A's handshake), and writes nothing into its file (an automatic
    admission lives in memory while the candidate lives)."""
    a = discovery_router(mesh, "router-a", "allowlist")
    b = discovery_router(mesh, "router-b", "allowlist")
    c = discovery_router(mesh, "router-c", "allowlist")
    a.cfg.section("discovery").options["allow_fingerprint"] = [b.key.fingerprint]
    for r in (b, c):
        r.cfg.section("discovery").options["allow_fingerprint"] = [a.key.fingerprint]
    discovery_link(mesh, a, b)
    discovery_link(mesh, a, c)
    for r in (a, b, c):
        r.start()

    assert wait_candidate(a, b)["state"] == "admitted"
    assert wait_candidate(a, c)["state"] == "rejected"
    assert wait_candidate(c, a)["state"] == "admitted"
    a.wait_established("router-b", timeout=20)
    b.wait_established("router-a", timeout=20)
    assert _session(a, "router-c") is None, a.peers_status()
    # The admitted peer is a data-plane link too (agent-gw may forward to it).
    wait_for("A: a data-plane link to router-b",
             lambda: a.stack.ctl_json("stats")["counters"].get("links.up", 0) >= 1, timeout=10)
    # C tries (A is admitted there) and keeps failing at A's handshake.
    wait_for("C: a refused dial to router-a",
             lambda: (_session(c, "router-a") or {}).get("dial_failures", 0) >= 1, timeout=20)
    assert (_session(c, "router-a") or {}).get("state") != "established"
    assert peer_sections(a) == {}, "automatic admission writes nothing"


def test_same_domain_admits_routers_of_our_domain_only(mesh):
    """Proves same-domain admission: A and B announce `lab.example`, C
    `other.example` (no domain CA anywhere, so the announced key is
    pinned). A shows B `admitted` and C `rejected` (and C shows A
    `rejected`); the session A–B comes up without any approval or file
    change, and A holds no session with C."""
    a = discovery_router(mesh, "router-a", "same-domain")
    b = discovery_router(mesh, "router-b", "same-domain")
    c = discovery_router(mesh, "router-c", "same-domain")
    c.cfg.section("agentd").options["domain"] = "other.example"
    discovery_link(mesh, a, b)
    discovery_link(mesh, a, c)
    for r in (a, b, c):
        r.start()

    cb = wait_candidate(a, b)
    assert (cb["state"], cb["domain"]) == ("admitted", "lab.example"), cb
    cc = wait_candidate(a, c)
    assert (cc["state"], cc["domain"]) == ("rejected", "other.example"), cc
    assert wait_candidate(c, a)["state"] == "rejected"
    a.wait_established("router-b", timeout=20)
    b.wait_established("router-a", timeout=20)
    assert _session(a, "router-c") is None and c.peers_status() == [], (a.peers_status(), c.peers_status())
    assert peer_sections(a) == {} and peer_sections(b) == {}


# ---- avahi next to agentd ---------------------------------------------------

_BUS_CONF = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={bus}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"""

_AVAHI_CONF = """[server]
use-ipv4=yes
use-ipv6=no
allow-interfaces={ifname}
enable-dbus=yes
disallow-other-stacks=no
[wide-area]
enable-wide-area=no
[publish]
disable-publishing=yes
"""


class _Avahi:
    """avahi-daemon in a router's namespace with a private system bus (a
    dbus-daemon of its own; `ip netns exec` gives the daemon a private
    mount namespace, where its pid directory is a fresh tmpfs). Both
    stopped by PID."""

    def __init__(self, r: MeshRouter, ifname: str) -> None:
        d = r.dir / "avahi"
        d.mkdir(parents=True, exist_ok=True)
        self.ns = r.ns
        self.bus = d / "bus"
        (d / "bus.conf").write_text(_BUS_CONF.format(bus=self.bus), encoding="utf-8")
        (d / "avahi.conf").write_text(_AVAHI_CONF.format(ifname=ifname), encoding="utf-8")
        self.procs: list = []
        self.log = d / "log"
        with open(self.log, "wb") as log:
            self.procs.append(subprocess.Popen(
                self.ns.exec_argv(["dbus-daemon", f"--config-file={d / 'bus.conf'}", "--nofork", "--nopidfile"]),
                stdout=log, stderr=log, stdin=subprocess.DEVNULL))
            wait_for("private dbus socket", lambda: self.bus.exists(), timeout=10)
            script = (f"mkdir -p /run/avahi-daemon && mount -t tmpfs tmpfs /run/avahi-daemon && "
                      f"exec env DBUS_SYSTEM_BUS_ADDRESS=unix:path={self.bus} avahi-daemon -f {d / 'avahi.conf'} "
                      f"--no-drop-root --no-chroot --no-rlimits")
            self.procs.append(subprocess.Popen(self.ns.exec_argv(["sh", "-c", script]), stdout=log, stderr=log,
                                               stdin=subprocess.DEVNULL))
        wait_for("avahi-daemon started", lambda: b"Server startup complete" in self.log.read_bytes(), timeout=10)

    def browse(self, service: str) -> List[List[str]]:
        """`avahi-browse -rpt SERVICE`: the resolved (`=`) rows, split."""
        p = subprocess.run(self.ns.exec_argv(["env", f"DBUS_SYSTEM_BUS_ADDRESS=unix:path={self.bus}",
                                              "avahi-browse", "-rpt", service]),
                           capture_output=True, timeout=15, stdin=subprocess.DEVNULL)
        return [line.split(";") for line in p.stdout.decode(errors="replace").splitlines() if line.startswith("=")]

    def close(self) -> None:
        for p in reversed(self.procs):
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)


def test_avahi_sees_the_sdk_announcement_and_coexists(mesh):
    """Proves our `_agentd._tcp` and `_arpx._tcp` announcements are real
    DNS-SD an independent implementation reads: avahi-browse in B's
    namespace resolves A's `_agentd._tcp` instance `router-a` at A's link
    address and the SDK port, and A's `_arpx._tcp` TXT record with A's
    fingerprint. avahi-daemon runs on port 5353 next to B's agentd (the
    umdns situation on OpenWrt), and B still discovers A."""
    for tool in ("avahi-daemon", "avahi-browse", "dbus-daemon"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed (make test-python installs avahi-daemon, avahi-utils, dbus)")
    a = discovery_router(mesh, "router-a", "manual")
    b = discovery_router(mesh, "router-b", "manual")
    discovery_link(mesh, a, b)
    link = mesh.net.find_link("router-a", "router-b")
    avahi = _Avahi(b, link.b_if)
    try:
        a.start()
        b.start()
        row = wait_for("avahi-browse: router-a's _agentd._tcp",
                       lambda: next((r for r in avahi.browse("_agentd._tcp") if r[3] == "router-a"), None), timeout=20)
        # =;iface;proto;name;type;domain;host;address;port;txt
        assert row[4] == "_agentd._tcp" and row[6] == "router-a.local", row
        assert (row[7], row[8]) == (link.addr_of("router-a"), "7446"), row
        arpx = wait_for("avahi-browse: router-a's _arpx._tcp",
                        lambda: next((r for r in avahi.browse("_arpx._tcp") if r[3] == "router-a"), None), timeout=20)
        assert arpx[8] == "7444" and f'"fp={a.key.fingerprint}"' in arpx[9], arpx
        assert wait_candidate(b, a)["fingerprint"] == a.key.fingerprint
    finally:
        avahi.close()


def test_a_router_gone_without_goodbye_stops_being_a_candidate_after_its_session_is_lost(mesh):
    """Proves a crashed peer is noticed without waiting for its mDNS
    records' TTL (120 s): B (admitted by A's allowlist, session up) is
    killed with SIGKILL, so no goodbye is sent; when A's session with B
    ends (hold timer), A verifies B's records (RFC 6762 §10.4), nobody
    answers, the announcement ends and the candidate is gone after its
    lifetime — well within the TTL."""
    a = discovery_router(mesh, "router-a", "allowlist")
    b = discovery_router(mesh, "router-b", "allowlist")
    a.cfg.section("discovery").options["allow_fingerprint"] = [b.key.fingerprint]
    b.cfg.section("discovery").options["allow_fingerprint"] = [a.key.fingerprint]
    discovery_link(mesh, a, b)
    a.start()
    b.start()
    assert wait_candidate(a, b)["state"] == "admitted"
    a.wait_established("router-b", timeout=20)
    b.stack.agentd.kill9()
    b.stack.gw.stop()
    wait_for("A: candidate router-b gone", lambda: "router-b" not in candidates(a), timeout=40)
    assert a.stack.ctl_json("stats")["counters"]["discovery.verifies"] >= 1
    assert _session(a, "router-b") is None, "the in-memory admission ended with the candidate"


def test_an_approved_router_id_announced_with_another_key_is_a_conflict(mesh):
    """Proves issue 20 item 9: A and B (manual) share a LAN and approve
    each other; then M, a third router configured with router_id
    `router-b` and a key of its own, comes up on the same LAN. mDNS
    renames M's instance (`router-b (2)`), and A lists it beside B: B's
    row stays `approved`, M's is `conflict` with a reason naming B's
    approved fingerprint and M's announced one (JSON and text; it used
    to be dropped as an invalid record), and the A–B session stays
    established throughout (sampled from before M starts until the
    conflict has been shown for a while). Approving exactly M's record
    (the fresh approval) is what moves the pin: M's row is then
    `approved` and B's becomes the conflict."""
    a = discovery_router(mesh, "router-a", "manual")
    b = discovery_router(mesh, "router-b", "manual")
    m = discovery_router(mesh, "router-m", "manual", agentd={"router_id": "router-b"})
    addr = discovery_segment(mesh, [a, b, m])
    a.start()
    b.start()
    cb = wait_candidate(a, b)
    ca = wait_candidate(b, a)
    assert cb["fingerprint"] == b.key.fingerprint and cb["address"] == addr["router-b"], cb
    assert _ctl(a, "approve", "router-b", str(cb["version"]))[0] == 0
    assert _ctl(b, "approve", "router-a", str(ca["version"]))[0] == 0
    a.wait_established("router-b", timeout=20)
    b.wait_established("router-a", timeout=20)
    established = {"A": 0, "B": 0}

    def sample() -> None:
        # Fatal: wait_for below must not take a lost session for "not yet".
        pa, pb = _session(a, "router-b") or {}, _session(b, "router-a") or {}
        if pa.get("state") != "established" or pb.get("state") != "established":
            raise Fatal(f"the A-B session is not established: A {pa}, B {pb}")
        established["A"] += 1
        established["B"] += 1

    m.start()

    def conflict_row() -> Optional[Dict[str, Any]]:
        sample()
        return next((c for c in candidate_rows(a)
                     if c["id"] == "router-b" and c["fingerprint"] == m.key.fingerprint), None)

    row = wait_for("A: M's announcement of router-b listed", conflict_row, timeout=30, interval=0.2)
    assert row["state"] == "conflict", row
    assert row["instance"] != "router-b", "mDNS renamed the second announcement of the name"
    assert row["address"] == addr["router-m"], row
    reason = row["reason"]
    assert reason.startswith(f"router-b is approved with key {b.key.fingerprint} (record version {cb['version']})"), reason
    assert f"this announcement carries key {m.key.fingerprint}" in reason, reason
    genuine = next(c for c in candidate_rows(a) if c["fingerprint"] == b.key.fingerprint)
    assert (genuine["state"], genuine["reason"], genuine["instance"]) == ("approved", None, "router-b"), genuine
    text = subprocess.run([str(mesh.bins.agentctl), "--socket", str(a.cfg.socket), "candidates"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=10)
    assert text.returncode == 0 and f"router-b version {row['version']} (mDNS instance '{row['instance']}'): conflict: {reason}" in text.stdout, text.stdout
    # The session holds on while the conflict is shown.
    # Sampled over 3 s of M announcing (bounded: 15 samples).
    for _ in range(15):
        sample()
        assert next(c for c in candidate_rows(a) if c["fingerprint"] == m.key.fingerprint)["state"] == "conflict"
        time.sleep(0.2)
    assert _session(a, "router-m") is None and peer_sections(a)["router-b"]["key_fingerprint"] == b.key.fingerprint
    print(f"A-B session sampled established {established['A']} times while M announced router-b")

    # The fresh approval of M's record is the only way it gets in.
    rc, out, err = _ctl(a, "approve", "router-b", str(row["version"]))
    assert rc == 0, (out, err)
    assert peer_sections(a)["router-b"]["key_fingerprint"] == m.key.fingerprint
    rows = {c["fingerprint"]: c for c in candidate_rows(a) if c["id"] == "router-b"}
    assert rows[m.key.fingerprint]["state"] == "approved", rows
    assert rows[b.key.fingerprint]["state"] == "conflict", rows
    assert rows[b.key.fingerprint]["reason"].startswith(
        f"router-b is approved with key {m.key.fingerprint} (record version {row['version']})"), rows


def test_a_router_that_stops_at_once_still_says_goodbye(mesh):
    """Proves that a router stopped the moment another has seen its
    announcement (no ARPX session between them, so nothing but its mDNS
    goodbye tells) stops being a candidate there within its lifetime plus
    a few seconds, not after the records' 120 s TTL: agentd's exit waits
    until mDNS's goodbyes are handed over."""
    a = discovery_router(mesh, "router-a", "manual")
    b = discovery_router(mesh, "router-b", "manual")
    discovery_link(mesh, a, b)
    a.start()
    b.start()
    wait_for("A: candidate router-b", lambda: "router-b" in candidates(a), timeout=20, interval=0.05)
    b.stop()
    wait_for("A: router-b's goodbye heard and its lifetime over", lambda: "router-b" not in candidates(a),
             timeout=LIFETIME_S + 5)


_LISTEN_V6 = r"""
import ipaddress, json, select, socket, struct, sys, time
ifname, want, bound = sys.argv[1], ipaddress.IPv6Address(sys.argv[2]), float(sys.argv[3])
index = socket.if_nametoindex(ifname)
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
s.bind(("::", 5353))
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP,
             socket.inet_pton(socket.AF_INET6, "ff02::fb") + struct.pack("@I", index))
print("listening", flush=True)
start = time.monotonic()
while time.monotonic() - start < bound:
    if not select.select([s], [], [], 0.2)[0]:
        continue
    data, src = s.recvfrom(9000)
    # A response (QR set), never a query: we send none, so only an
    # unsolicited announcement can come.
    if len(data) >= 12 and data[2] & 0x80 and want.packed in data:
        print(json.dumps({"after_s": round(time.monotonic() - start, 2), "src": src[0]}), flush=True)
        sys.exit(0)
sys.exit(1)
"""


def test_a_link_whose_ipv6_address_is_still_tentative_is_announced_on_once_it_is_usable(mesh):
    """Proves announcements on IPv6 wait for duplicate address detection
    instead of being lost to it: A comes up on a link whose IPv6
    link-local address is still tentative (four DAD probes, 4-5 s), so
    the kernel can send nothing from it. A listener on the other end that
    never queries (so only unsolicited announcements can reach it) hears
    A announce over IPv6, from that address and with it as an AAAA
    record, once detection is over; before, A announced at start, lost
    both announcements to EADDRNOTAVAIL and stayed silent until asked."""
    a = discovery_router(mesh, "router-a", "manual")
    b = discovery_router(mesh, "router-b", "manual")
    discovery_link(mesh, a, b)
    link = mesh.net.find_link("router-a", "router-b")

    def ip_a(*args: str) -> str:
        return subprocess.run(["ip", "-n", a.ns.netns, *args], check=True, capture_output=True,
                              stdin=subprocess.DEVNULL).stdout.decode()

    # Slow detection down, and restart it: the link-local address is made
    # again (tentative) when the link comes back up.
    subprocess.run(a.ns.exec_argv(["sysctl", "-q", "-w", f"net.ipv6.conf.{link.a_if}.dad_transmits=4"]),
                   check=True, capture_output=True, stdin=subprocess.DEVNULL)
    ip_a("link", "set", link.a_if, "down")
    ip_a("link", "set", link.a_if, "up")
    shown = ip_a("-6", "addr", "show", "dev", link.a_if, "scope", "link")
    ll = next(w.split("/")[0] for w in shown.split() if w.startswith("fe80:"))
    assert "tentative" in shown, shown

    listener = subprocess.Popen(b.ns.exec_argv([sys.executable, "-c", _LISTEN_V6, link.b_if, ll, "20"]),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert listener.stdout is not None
        assert listener.stdout.readline().strip() == b"listening"
        a.start()
        # The scenario holds: A runs while its address is tentative.
        assert "tentative" in ip_a("-6", "addr", "show", "dev", link.a_if, "scope", "link")
        out, err = listener.communicate(timeout=30)
    finally:
        if listener.poll() is None:
            listener.kill()
            listener.wait()
    assert listener.returncode == 0, f"no IPv6 announcement from A within 20 s: {err.decode(errors='replace')}"
    heard = json.loads(out.decode().splitlines()[-1])
    assert heard["src"].split("%")[0] == ll, heard


def _kdig(r: MeshRouter, server: str, *query: str) -> str:
    """`kdig` from `r`'s namespace: a plain unicast DNS client, so to
    agentd a legacy resolver (RFC 6762 §6.7: source port not 5353)."""
    p = subprocess.run(r.ns.exec_argv(["kdig", f"@{server}", "-p", "5353", "+notcp", "+time=2", "+retry=1",
                                       "+noall", "+answer", "+additional", *query]),
                       capture_output=True, stdin=subprocess.DEVNULL, timeout=20)
    return p.stdout.decode(errors="replace")


def test_a_legacy_resolver_gets_answers_and_garbage_on_5353_changes_nothing(mesh):
    """Proves our mDNS responder against a real DNS client and a hostile
    sender on the link: kdig in B's namespace, asking A's mDNS port by
    unicast from its own port, gets A's address for `router-a.local` and
    the `_arpx._tcp` PTR with the instance's SRV, TXT and address as
    additional records, with the TTLs capped at 10 s that §6.7 asks for
    (a legacy resolver cannot take a goodbye). Then 3000 datagrams of
    garbage and of truncated, looping and oversized DNS messages to port
    5353 (unicast and to the group) leave A answering, still a candidate
    at B, and B's view of A's record unchanged."""
    a = discovery_router(mesh, "router-a", "manual")
    b = discovery_router(mesh, "router-b", "manual")
    discovery_link(mesh, a, b)
    a.start()
    b.start()
    seen = wait_candidate(b, a)
    addr_a = mesh.net.find_link("router-a", "router-b").addr_of("router-a")

    def lines(out: str) -> List[List[str]]:
        return [line.split() for line in out.splitlines() if line.strip() and not line.startswith(";")]

    host = wait_for("kdig: router-a.local A", lambda: lines(_kdig(b, addr_a, "router-a.local", "A")) or None,
                    timeout=10)
    # The A record answers; the AAAA (link-local) comes as additional.
    assert {row[0].lower() for row in host} == {"router-a.local."}, host
    assert [row[3:] for row in host if row[3] == "A"] == [["A", addr_a]], host
    assert all(0 < int(row[1]) <= 10 for row in host), host
    browse = lines(_kdig(b, addr_a, "_arpx._tcp.local", "PTR"))
    kinds = {(row[0].lower(), row[3]) for row in browse}
    assert ("_arpx._tcp.local.", "PTR") in kinds, browse
    assert {("router-a._arpx._tcp.local.", "SRV"), ("router-a._arpx._tcp.local.", "TXT"),
            ("router-a.local.", "A")} <= kinds, browse
    assert all(0 < int(row[1]) <= 10 for row in browse), browse
    srv = next(row for row in browse if row[3] == "SRV")
    assert srv[4:] == ["0", "0", "7444", "router-a.local."], srv

    flood = r'''
import random, socket, struct, sys
addr, own = sys.argv[1], sys.argv[2]
rnd = random.Random(6762)
def header(qd, an, flags=0x8400):
    return struct.pack("!6H", 0, flags, qd, an, 0, 0)
shapes = [
    lambda: bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 64))),
    lambda: header(1, 0, 0) + b"\xc0\x0c\x00\x01\x00\x01",                  # pointer to itself
    lambda: header(0, 1) + b"\x08router-a\x05local\x00\x00\x01\x80\x01",    # record cut short
    lambda: header(0, 200) + b"\x00" * 40,                                   # counts past the end
    lambda: header(1, 0, 0) + b"\x3f" + b"a" * 63 + b"\xc0\x0c" + b"\x00\xff\x00\x01",
    lambda: header(0, 1) + b"\x08router-a\x05local\x00\x00\x01\x80\x01" + b"\x00\x00\x00\x78\x00\x05" + b"\x01" * 5,
    lambda: b"\x00" * 9100,                                                  # over 9000 bytes
]
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
m = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
m.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
m.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(own))
for i in range(3000):
    data = rnd.choice(shapes)()
    try:
        (u.sendto(data, (addr, 5353)) if i % 2 else m.sendto(data, ("224.0.0.251", 5353)))
    except OSError:
        pass
'''
    addr_b = mesh.net.find_link("router-a", "router-b").addr_of("router-b")
    subprocess.run(b.ns.exec_argv(["python3", "-c", flood, addr_a, addr_b]), check=True, timeout=60,
                   stdin=subprocess.DEVNULL)
    again = wait_for("kdig after the flood", lambda: lines(_kdig(b, addr_a, "router-a.local", "A")) or None,
                     timeout=10)
    assert [row[3:] for row in again if row[3] == "A"] == [["A", addr_a]], again
    now = wait_candidate(b, a)
    assert (now["fingerprint"], now["version"], now["announced"]) == (
        seen["fingerprint"], seen["version"], True), (seen, now)


_QUERY_MDNS = r"""
import select, socket, struct, sys, time
own, name, qtype, bound = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
wire = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\x00"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind(("0.0.0.0", 5353))
s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton("224.0.0.251") + socket.inet_aton(own))
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(own))
# One QM question (multicast answer asked), from port 5353: an mDNS querier.
s.sendto(struct.pack("!6H", 0, 0, 1, 0, 0, 0) + wire + struct.pack("!2H", qtype, 1), ("224.0.0.251", 5353))
# The NSEC record as RFC 6762 §6.1 has it: type 47, class IN with the
# cache-flush bit, TTL 120 (an address record's), next name its own
# name uncompressed, window 0 listing A only.
rdata = wire + b"\x00\x01\x40"
want = struct.pack("!2HIH", 47, 0x8001, 120, len(rdata)) + rdata
start = time.monotonic()
while time.monotonic() - start < bound:
    if not select.select([s], [], [], 0.2)[0]:
        continue
    data, src = s.recvfrom(9000)
    if len(data) >= 12 and data[2] & 0x80 and want in data:
        print(src[0], flush=True)
        sys.exit(0)
sys.exit(1)
"""


def test_a_type_the_router_lacks_gets_a_negative_answer_not_silence(mesh):
    """RFC 6762 §6.1: a question for a name the router holds and a type
    it lacks is answered with an NSEC record. A's link has no IPv6, so
    `router-a.local` has an A record and no AAAA. kdig from B (a real
    DNS client: to agentd a legacy resolver) asking for the AAAA gets a
    prompt NODATA answer with the NSEC, listing A only, in the authority
    section; before, it got nothing and timed out. Its A lookup gets the
    NSEC as an additional record. An mDNS querier
    (port 5353, a multicast answer asked) hears the NSEC multicast in
    mDNS's own form."""
    a = discovery_router(mesh, "router-a", "manual")
    b = discovery_router(mesh, "router-b", "manual")
    discovery_link(mesh, a, b)
    link = mesh.net.find_link("router-a", "router-b")
    subprocess.run(a.ns.exec_argv(["sysctl", "-q", "-w", f"net.ipv6.conf.{link.a_if}.disable_ipv6=1"]),
                   check=True, capture_output=True, stdin=subprocess.DEVNULL)
    a.start()
    b.start()
    wait_candidate(b, a)
    addr_a, addr_b = link.addr_of("router-a"), link.addr_of("router-b")

    def rows(out: str) -> List[List[str]]:
        return [line.split() for line in out.splitlines() if line.strip() and not line.startswith(";")]

    # The A record answers, with the NSEC as additional record: there is
    # no AAAA to ask for (§6.2).
    host = rows(_kdig(b, addr_a, "router-a.local", "A"))
    assert [row[3:] for row in host] == [["A", addr_a], ["NSEC", "router-a.local.", "A"]], host
    # The AAAA: no answer (NODATA), the denial as authority.
    denial = rows(_kdig(b, addr_a, "router-a.local", "AAAA", "+authority"))
    assert [[row[0].lower(), row[3], row[4].lower(), *row[5:]] for row in denial] == [
        ["router-a.local.", "NSEC", "router-a.local.", "A"]], denial
    assert 0 < int(denial[0][1]) <= 10, denial
    heard = subprocess.run(b.ns.exec_argv([sys.executable, "-c", _QUERY_MDNS, addr_b, "router-a.local", "28",
                                           "10"]),
                           capture_output=True, stdin=subprocess.DEVNULL, timeout=30)
    assert heard.returncode == 0, f"no multicast NSEC from A within 10 s: {heard.stderr.decode(errors='replace')}"
    assert heard.stdout.decode().strip() == addr_a, heard.stdout


_QU_MDNS = r"""
import select, socket, struct, sys, time
own, name, addr, bound = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
wire = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\x00"
IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5353))
s.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton("224.0.0.251") + socket.inet_aton(own))
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(own))
record = wire + struct.pack("!2HIH", 1, 0x8001, 120, 4) + socket.inet_aton(addr)
print("listening", flush=True)

def responses(until):
    while time.monotonic() < until:
        if not select.select([s], [], [], 0.2)[0]:
            continue
        data, anc, _, src = s.recvmsg(9000, socket.CMSG_SPACE(12))
        dst = next((socket.inet_ntoa(d[8:12]) for lvl, typ, d in anc if lvl == socket.IPPROTO_IP and typ == IP_PKTINFO),
                   None)
        if len(data) >= 12 and data[2] & 0x80:
            yield data, dst

start = time.monotonic()
# The router's announcement of its address: it holds the name.
if not any(record in data for data, _ in responses(start + bound)):
    sys.exit("no announcement")
# One QU question (class IN with the unicast-response bit), from 5353.
s.sendto(struct.pack("!6H", 0, 0, 1, 0, 0, 0) + wire + struct.pack("!2H", 1, 0x8001), ("224.0.0.251", 5353))
for data, dst in responses(time.monotonic() + 5):
    if record in data:
        print(dst, flush=True)
        sys.exit(0)
sys.exit("no answer")
"""


def test_a_qu_question_is_answered_by_unicast_to_the_asker(mesh):
    """RFC 6762 §5.4: a question with the unicast-response bit is answered
    straight to the asker when the link heard the record from us within a
    quarter of its TTL (as after the announcements); multicast would wake
    every host on the link (costly on Wi-Fi) for one asker. An mDNS
    querier in B's namespace (the only one there: B's agentd is not
    started, so no other socket shares port 5353) hears A announce
    `router-a.local`, asks for it with QU and gets the answer addressed
    to its own address, not to 224.0.0.251."""
    a = discovery_router(mesh, "router-a", "manual")
    b = discovery_router(mesh, "router-b", "manual")
    discovery_link(mesh, a, b)
    link = mesh.net.find_link("router-a", "router-b")
    addr_a, addr_b = link.addr_of("router-a"), link.addr_of("router-b")
    querier = subprocess.Popen(b.ns.exec_argv([sys.executable, "-c", _QU_MDNS, addr_b, "router-a.local", addr_a, "20"]),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        # Only once it listens, so the announcement cannot come first.
        assert querier.stdout is not None
        assert querier.stdout.readline().strip() == b"listening"
        a.start()
        out, err = querier.communicate(timeout=40)
    finally:
        if querier.poll() is None:
            querier.kill()
            querier.wait()
    assert querier.returncode == 0, err.decode(errors="replace")
    assert out.decode().strip() == addr_b, (out, err)
