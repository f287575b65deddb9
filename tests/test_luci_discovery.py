"""luci-app-agentd's discovery on the Peers page, in real headless
Chromium against the live daemons (the lab of tests/test_luci.py): a
discovered router is approved and revoked from the page, an approval that
outlives its announcement is revoked there, and a conflicting
announcement of an approved router shows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List

import pytest
from harness.discovery import (candidate_rows, candidates, discovery_router, discovery_segment, linked_pair,
                               peer_sections, wait_candidate)
from harness.luci_lab import SCREENS, browser, Lab, lab, open_view, text, rows, no_errors, click
from harness.poll import wait_for
from luci_cdp import Browser, Page
from luci_stack import Harness


def candidate_row(p: Page, router_id: str) -> List[str]:
    """The Peers page's candidate row of router_id (Router, Domain,
    Address, Key fingerprint, Record version, State, Expires, Decision),
    or []."""
    return next((r for r in rows(p, "agentd-candidate-table") if r[0] == router_id), [])


def session_row(p: Page, router_id: str) -> List[str]:
    return next((r for r in rows(p, "agentd-session-table") if r[0] == router_id), [])


def test_approve_and_revoke_of_a_discovered_router_land_in_the_file_and_the_daemon(
        browser: Browser, mesh: Any, bins: Any, workdir: Path) -> None:
    """router-a and router-b (discovery on, admission manual, no peer
    sections) find each other over mDNS; router-b approves router-a with
    agentctl (under manual both sides approve). router-a's Peers page
    shows router-b as a pending candidate with its key fingerprint and
    the record version it announces; Approve in the page sends exactly
    that {id, version}, writes a `peer` section with `discovered '1'`
    (the pinned key, that record_version; `agentd --check-config`
    accepts the file), the row turns `approved` in place and the ARPX
    session comes up (agentctl and the page). Revoke sends the same
    record, removes the section, the session goes down on both sides and
    the row is `pending` again. No JS error."""
    a, b = linked_pair(mesh, "manual")
    cb = wait_candidate(a, b)
    ca = wait_candidate(b, a)
    assert cb["state"] == "pending" and cb["fingerprint"] == b.key.fingerprint, cb
    done = b.stack.ctl_json("approve", "router-a", str(ca["version"]))
    assert done.get("ok") is True, done
    assert peer_sections(a) == {} and a.peers_status() == []

    h = Harness(workdir / "luci", bins.agentctl, a.cfg.path, lambda: [a.stack.agentd.pid, a.stack.gw.pid])
    p = open_view(browser, Lab(a, b, h, bins), "peers")
    try:
        row = wait_for("peers: router-b pending", lambda: (lambda r: r and r[5] == "pending" and r)(
            candidate_row(p, "router-b")), timeout=15, interval=0.2)
        assert row[3] == b.key.fingerprint, row
        assert row[4] == str(cb["version"]), row
        assert row[1] == "lab.example" and row[2].startswith(f"{cb['address']}:{cb['port']}"), row
        assert row[6] == "announced", row
        assert "manual" in text(p, "#agentd-admission")
        assert not session_row(p, "router-b")
        sel = '.agentd-approve[data-id="router-b"]'
        assert p.eval(f"document.querySelector({json.dumps(sel)}).dataset.version") == str(cb["version"])
        assert p.eval(f"document.querySelector({json.dumps(sel.replace('approve', 'revoke'))}).disabled") is True
        p.screenshot(SCREENS / "peers-candidate-pending.png")

        click(p, sel)
        sec = wait_for("router-a's file: a discovered peer section for router-b",
                       lambda: peer_sections(a).get("router-b"), timeout=15, interval=0.2)
        assert sec["discovered"] == "1" and sec["record_version"] == str(cb["version"]), sec
        assert sec["key_fingerprint"] == b.key.fingerprint and sec["address"] == cb["address"], sec
        decisions = [c for c in h.rpcd.calls if c["method"] in ("approve", "revoke")]
        assert [(c["method"], c["args"].get("id"), c["args"].get("version")) for c in decisions] == \
            [("approve", "router-b", cb["version"])], decisions
        chk = Lab(a, b, h, bins).check_config()
        assert chk.returncode == 0, chk.stdout.decode() + chk.stderr.decode()
        # The view refreshes in place after the answer (not only on the 5 s poll).
        wait_for("peers: router-b approved", lambda: candidate_row(p, "router-b")[5:6] == ["approved"],
                 timeout=5, interval=0.1)
        notes = lambda: p.eval("Array.from(document.querySelectorAll('.alert-message')).map(function(n) {"  # noqa: E731
                               " return n.className + ': ' + n.textContent; })")
        assert any(n.startswith("alert-message") and " info: " in n and f"router-b (record version {cb['version']}) "
                   "approved: peer section disc_router_b written" in n for n in notes()), notes()
        a.wait_established("router-b", timeout=20)
        b.wait_established("router-a", timeout=20)
        wait_for("peers: the session with router-b established",
                 lambda: session_row(p, "router-b")[2:3] == ["established"], timeout=15, interval=0.2)
        assert candidates(a)["router-b"]["state"] == "approved"
        p.screenshot(SCREENS / "peers-candidate-approved.png")

        rsel = '.agentd-revoke[data-id="router-b"]'
        assert p.eval(f"document.querySelector({json.dumps(rsel)}).dataset.version") == str(cb["version"])
        click(p, rsel)
        wait_for("router-a's file: router-b's section removed", lambda: "router-b" not in peer_sections(a),
                 timeout=15, interval=0.2)
        decisions = [c for c in h.rpcd.calls if c["method"] in ("approve", "revoke")]
        assert [(c["method"], c["args"].get("id"), c["args"].get("version")) for c in decisions][1:] == \
            [("revoke", "router-b", cb["version"])], decisions
        wait_for("router-a: no peer router-b", lambda: a.peer("router-b") is None, timeout=10)
        wait_for("router-b: the session with router-a down",
                 lambda: (b.peer("router-a") or {}).get("state") != "established", timeout=20)
        wait_for("peers: router-b pending again, no session",
                 lambda: candidate_row(p, "router-b")[5:6] == ["pending"] and not session_row(p, "router-b"),
                 timeout=15, interval=0.2)
        assert any(" info: " in n and f"router-b (record version {cb['version']}) revoked: peer section "
                   "disc_router_b removed" in n for n in notes()), notes()
        assert not [n for n in notes() if " error: " in n], notes()
        p.screenshot(SCREENS / "peers-candidate-revoked.png")
        no_errors(p, "peers")
        assert h.server.failures == [], h.server.failures
    finally:
        p.close()
        h.close()


def approval_row(p: Page, router_id: str) -> List[str]:
    """The Peers page's approval row of router_id (Router, Record version,
    Key fingerprint, Section, Announced now, Decision), or []."""
    return next((r for r in rows(p, "agentd-approval-table") if r[0] == router_id), [])


def test_an_approval_outliving_its_announcement_is_revoked_from_the_page(
        browser: Browser, mesh: Any, bins: Any, workdir: Path) -> None:
    """router-a approves router-b (agentctl), then router-b stops: its
    candidate expires, so the candidate table has no row (and no Revoke)
    for it, but the approval stays in the file. The Peers page lists it
    among the approvals as `not announced`, with the record version and
    key fingerprint of the section; its Revoke sends that record and
    removes the section. No JS error."""
    a, b = linked_pair(mesh, "manual")
    cb = wait_candidate(a, b)
    done = a.stack.ctl_json("approve", "router-b", str(cb["version"]))
    assert done.get("ok") is True, done
    sec = wait_for("router-a's file: router-b approved", lambda: peer_sections(a).get("router-b"), timeout=10)
    b.stop()
    wait_for("router-a: router-b's candidate gone", lambda: "router-b" not in candidates(a), timeout=30)

    h = Harness(workdir / "luci", bins.agentctl, a.cfg.path, lambda: [a.stack.agentd.pid, a.stack.gw.pid])
    p = open_view(browser, Lab(a, b, h, bins), "peers")
    try:
        row = wait_for("peers: router-b's approval listed", lambda: approval_row(p, "router-b"),
                       timeout=15, interval=0.2)
        assert row[1:5] == [str(cb["version"]), b.key.fingerprint, "disc_router_b", "not announced"], row
        assert not candidate_row(p, "router-b")
        p.screenshot(SCREENS / "peers-approval-stale.png")
        assert sec["record_version"] == str(cb["version"]), sec
        click(p, '.agentd-revoke-approval[data-id="router-b"]')
        wait_for("router-a's file: router-b's section removed", lambda: "router-b" not in peer_sections(a),
                 timeout=15, interval=0.2)
        decisions = [c for c in h.rpcd.calls if c["method"] in ("approve", "revoke")]
        assert [(c["method"], c["args"].get("id"), c["args"].get("version")) for c in decisions] == \
            [("revoke", "router-b", cb["version"])], decisions
        wait_for("peers: no approval left", lambda: not approval_row(p, "router-b"), timeout=5, interval=0.1)
        assert "No discovered router is approved." in text(p, "#agentd-approval-table")
        no_errors(p, "peers")
        assert h.server.failures == [], h.server.failures
    finally:
        p.close()
        h.close()


def test_a_conflicting_announcement_of_an_approved_router_shows_on_the_peers_page(
        browser: Browser, mesh: Any, bins: Any, workdir: Path) -> None:
    """router-a approved router-b (agentctl); then router-m, configured
    with router_id `router-b` and its own key, announces on the same LAN.
    router-a's Peers page lists both rows of router-b: B's `approved`,
    M's `conflict` with agentd's reason (the approved fingerprint and the
    announced one) and its renamed mDNS instance in the State cell, its
    Approve enabled (the fresh approval is the way in) and its Revoke
    not; the approvals table says the approval is announced at its
    version. No JS error."""
    a = discovery_router(mesh, "router-a", "manual")
    b = discovery_router(mesh, "router-b", "manual")
    m = discovery_router(mesh, "router-m", "manual", agentd={"router_id": "router-b"})
    discovery_segment(mesh, [a, b, m])
    a.start()
    b.start()
    cb = wait_candidate(a, b)
    assert a.stack.ctl_json("approve", "router-b", str(cb["version"])).get("ok") is True
    m.start()
    cm = wait_for("router-a: M's conflict", lambda: next(
        (c for c in candidate_rows(a) if c["fingerprint"] == m.key.fingerprint and c["state"] == "conflict"), None),
        timeout=30, interval=0.2)

    h = Harness(workdir / "luci", bins.agentctl, a.cfg.path, lambda: [a.stack.agentd.pid, a.stack.gw.pid])
    p = open_view(browser, Lab(a, b, h, bins), "peers")
    try:
        def both() -> Any:
            got = {r[3]: r for r in rows(p, "agentd-candidate-table") if r[0] == "router-b"}
            return got if len(got) == 2 else None

        got = wait_for("peers: both announcements of router-b", both, timeout=15, interval=0.2)
        assert got[b.key.fingerprint][5] == "approved", got
        state = got[m.key.fingerprint][5]
        assert state.startswith(f"conflict (mDNS instance {cm['instance']})"), state
        assert cm["reason"] in state and b.key.fingerprint in state and m.key.fingerprint in state, state
        sel = f'[data-id="router-b"][data-version="{cm["version"]}"]'
        assert p.eval(f"document.querySelector({json.dumps('.agentd-approve' + sel)}).disabled") is False
        assert p.eval(f"document.querySelector({json.dumps('.agentd-revoke' + sel)}).disabled") is True
        assert approval_row(p, "router-b")[4] == "at this version"
        p.screenshot(SCREENS / "peers-candidate-conflict.png")
        no_errors(p, "peers")
        assert h.server.failures == [], h.server.failures
    finally:
        p.close()
        h.close()
