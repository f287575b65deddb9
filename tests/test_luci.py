"""luci-app-agentd in real headless Chromium (issue 10 items 5 and 6).

Two routers in network namespaces (router-a and router-b, one ARPX
session), an agent registered on each, and the LuCI harness
(tests/luci-harness, a documented stand-in of LuCI's client runtime and
of rpcd) serving the app's views against router-a: `rpc` calls go to the
feed's real rpcd exec plugin (agentctl on router-a's agentd), `uci` reads
and writes go to router-a's config file, and a commit reloads the daemons
as procd's reload trigger does (SIGHUP). Every page loads without a JS
error, shows the live data, and the forms' changes land in the file (which
`agentd --check-config` accepts) and in the running daemon. One screenshot
per page in target/luci-screens/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harness.discovery import candidates
from harness.luci_lab import (SCREENS, SAMPLES, PAGES, browser, schema_table, meanings, Lab, lab, open_view,
                              text, rows, no_errors, set_field, click)
from harness.poll import wait_for
from harness.procs import REPO
import luci_netns
from luci_cdp import Browser
from luci_stack import Harness
from luci_uci import Package
from luci_web import ACL, menu


def test_the_browser_and_the_server_share_a_namespace_of_their_own(browser: Browser, lab: Lab) -> None:
    """Chromium fails loads in flight when the host's links change
    (`net::ERR_NETWORK_CHANGED`), and other tests change them: the browser
    runs in a network namespace that is not the host's, and still loads
    the harness's pages, whose server listens in that namespace."""
    ns = os.stat(f"/proc/{browser.proc.pid}/ns/net").st_ino
    assert ns != os.stat("/proc/self/ns/net").st_ino
    assert ns == os.stat(f"/run/netns/{luci_netns.name()}").st_ino
    p = open_view(browser, lab, "overview")
    try:
        assert p.errors() == []
    finally:
        p.close()


def test_every_page_renders_the_live_daemon_without_js_errors(browser: Browser, lab: Lab) -> None:
    """Each menu entry's view loads with no JS error and shows router-a's
    live state; the overview refreshes in place; the agents page counts
    leases down; the views declare exactly the ubus methods the ACL
    grants, and every string they translate is in the template."""
    assert set(PAGES) == {"overview", "agents", "routes", "peers", "policy", "settings", "mappings"}, PAGES
    declared, strings = set(), set()
    for page in PAGES:
        p = open_view(browser, lab, page)
        try:
            if page == "overview":
                wait_for("overview: health", lambda: text(p, "#agentd-router-id") == "router-a", timeout=10)
                assert text(p, "#agentd-health") == "running"
                assert text(p, "#agentd-ipv6") == "routed-prefix: 2001:db8:55::/64 on lo, 0 of 256 bound"
                assert wait_for("overview: the gateway's task report",
                                lambda: (lambda t: "held" in t and t)(text(p, "#agentd-tasks")), timeout=10).startswith("0 of ")
                peer = wait_for("overview: router-b established",
                                lambda: [r for r in rows(p, "agentd-peer-table") if r[0] == "router-b" and r[2] == "established"],
                                timeout=10)
                assert peer
                # In place: the same node gets the new count after another registration.
                p.eval("document.querySelector('#agentd-routes').__mark = 1")
                before = text(p, "#agentd-routes")
                lab.a.register("luci-more", capability="demo.more", lease=300)
                wait_for("overview: route count updated by the 5 s poll",
                         lambda: text(p, "#agentd-routes") != before and p.eval("document.querySelector('#agentd-routes').__mark === 1"),
                         timeout=15, interval=0.2)
                assert any("routes:" in r[1] for r in rows(p, "agentd-events")), rows(p, "agentd-events")
            elif page == "agents":
                mine = lambda: [r for r in rows(p, "agentd-lease-table") if r[2] == "agent://lab/luci-local"]  # noqa: E731
                lease = mine()
                assert lease and lease[0][1] == "demo.echo v1", rows(p, "agentd-lease-table")
                first = lease[0][5]
                wait_for("agents: the lease counts down",
                         lambda: mine()[0][5] != first,
                         timeout=5, interval=0.2)
                assert any(r[0] == "agent://lab/luci-local" for r in rows(p, "agentd-agent-table"))
            elif page == "routes":
                table = rows(p, "agentd-route-table")
                local = [r for r in table if r[1] == "demo.echo v1" and r[2] == "local"]
                remote = [r for r in table if r[1] == "demo.remote v1" and r[2] == "peer"]
                assert local and remote, table
                assert remote[0][3] == "router-b", remote
                # Scores come from the daemon's own lookup: the winner is ranked first.
                assert local[0][12].endswith("(#1)"), local
                set_field(p, "agentd-lookup-capability", "demo.remote")
                set_field(p, "agentd-lookup-tenant", "lab")
                click(p, "#agentd-lookup-run")
                wait_for("routes: lookup result", lambda: "Winner" in text(p, "#agentd-lookup-verdict"), timeout=10)
                assert "@router-b" in text(p, "#agentd-lookup-verdict")
            elif page == "peers":
                sess = [r for r in rows(p, "agentd-session-table") if r[0] == "router-b"]
                assert sess and sess[0][2] == "established", rows(p, "agentd-session-table")
                # The relay role from ubus peers, and what a relay sees.
                relay = text(p, "#agentd-relay")
                assert "Relay for 0 of at most 64 client routers" in relay, relay
                assert "sees the payloads" in relay, relay
                cands = lab.h.plugin.call("candidates", {})[1]
                if "error" in cands:
                    e = cands["error"]
                    msg = e.get("message") if isinstance(e, dict) else cands.get("message")
                    assert msg and msg in text(p, "#agentd-admission"), text(p, "#agentd-admission")
                else:
                    shown = [r[0] for r in rows(p, "agentd-candidate-table")]
                    for c in cands.get("candidates", []):
                        assert str(c.get("id", c.get("router_id"))) in shown
            elif page == "policy":
                assert p.eval("!!document.getElementById('cbid.agentd.main.default_action')")
                assert p.eval("!!document.getElementById('cbi-agentd-rule')")
            elif page == "settings":
                for sec in ("gateway", "arpx", "discovery"):
                    assert p.eval(f"!!document.getElementById('cbi-agentd-{sec}')"), sec
                sdk = p.eval("document.getElementById('cbid.agentd.gateway.sdk_listen').value")
                assert sdk == f"{lab.a.cfg.sdk_host}:{lab.a.cfg.sdk_port}"
            elif page == "mappings":
                assert p.eval("!!document.getElementById('cbi-agentd-mapping')")
            p.screenshot(SCREENS / f"{page}.png")
            no_errors(p, page)
            declared |= {(d["object"], d["method"]) for d in p.eval("window.__luci.declared")}
            strings |= set(p.eval("Object.keys(window.__luci.strings)"))
        finally:
            p.close()

    # Absent arguments are left out, never sent as null (blobmsg has no
    # typed null; the plugin's signatures say str/32/bool).
    nulls = [c for c in lab.h.rpcd.calls if c["object"] == "agentd" and None in c["args"].values()]
    assert not nulls, nulls[:3]
    assert any(c["method"] == "lookup" for c in lab.h.rpcd.calls)

    acl = json.loads(ACL.read_text(encoding="utf-8"))["luci-app-agentd"]
    granted = {("agentd", m) for scope in ("read", "write") for m in acl[scope]["ubus"]["agentd"]}
    assert {d for d in declared if d[0] == "agentd"} == granted
    sys.path.insert(0, str(REPO / "tests" / "luci-harness"))
    from make_pot import POT, msgids
    assert "Agent routing: overview" in strings and "Rules" in strings, sorted(strings)[:20]
    missing = strings - set(msgids(POT.read_text(encoding="utf-8")))
    assert not missing, f"translated at run time but not in agentd.pot: {sorted(missing)}"


def test_settings_policy_and_mapping_changes_land_in_the_file_and_the_daemon(browser: Browser, lab: Lab) -> None:
    """An invalid value is refused in the page (nothing written); a valid
    settings change, a deny rule and a mapping are committed to the file,
    which agentd --check-config accepts, and the reloaded daemon applies
    them (the rule denies the lookup)."""
    original = lab.a.cfg.path.read_text(encoding="utf-8")
    gen0 = lab.status()["config"]["generation"]

    p = open_view(browser, lab, "settings")
    try:
        set_field(p, "cbid.agentd.gateway.rate_per_second", "0")
        assert p.eval("document.getElementById('cbid.agentd.gateway.rate_per_second').classList.contains('cbi-input-invalid')")
        click(p, ".cbi-button-apply")
        err = wait_for("settings: the save is refused", lambda: text(p, ".agentd-save-error"), timeout=10)
        # Named by its label (uci-schema's), with uci-schema's range.
        assert "Requests per second" in err and "1..=1000000" in err, err
        p.screenshot(SCREENS / "settings-invalid.png")
        assert lab.h.uci.commits == [] and lab.a.cfg.path.read_text(encoding="utf-8") == original
        click(p, "#modal_overlay .cbi-button")

        set_field(p, "cbid.agentd.gateway.rate_per_second", "150")
        click(p, ".cbi-button-apply")
        wait_for("settings: committed", lambda: lab.h.uci.commits, timeout=10)
        no_errors(p, "settings")
    finally:
        p.close()
    body = lab.a.cfg.path.read_text(encoding="utf-8")
    assert "option rate_per_second '150'" in body
    # Only the changed option means something else now (options at their
    # default may have been dropped or written, as LuCI does); in
    # particular the listeners the file turns off with 'off' stay off (an
    # empty value would have been dropped by the uci layer, turning them
    # back on: issue 24).
    changed = {k: v for k, v in meanings(Package.parse(body)).items() if meanings(Package.parse(original)).get(k) != v}
    assert changed == {("gateway", "rate_per_second"): "150"}, changed
    for sec, opt in (("gateway", "public_listen"), ("gateway", "admin_listen")):
        assert Package.parse(body).get(sec).options.get(opt) == "off", (sec, opt, body)
    gen1 = wait_for("agentd reloaded the settings", lambda: (lambda s: s["config"]["generation"] > gen0 and s)(lab.status()),
                    timeout=10)
    assert gen1["config"]["ok"], gen1["config"]

    p = open_view(browser, lab, "policy")
    try:
        assert p.eval("(function(){ var i = document.querySelector('.cbi-tblsection .cbi-section-create-name');"
                      " i.value = 'deny_echo'; return true; })()")
        click(p, ".cbi-tblsection .cbi-section-create .cbi-button-add")
        wait_for("policy: the new rule's dialog", lambda: p.eval("!!document.getElementById('cbid.agentd.deny_echo.action')"),
                 timeout=10)
        set_field(p, "cbid.agentd.deny_echo.action", "deny")
        set_field(p, "cbid.agentd.deny_echo.capability", "demo.echo")
        set_field(p, "cbid.agentd.deny_echo.priority", "10")
        click(p, "#cbi-modal-save")
        wait_for("policy: the rule row", lambda: p.eval("!!document.querySelector('tr[data-sid=deny_echo]')"), timeout=10)
        p.screenshot(SCREENS / "policy-rule.png")
        click(p, ".cbi-button-apply")
        wait_for("policy: committed", lambda: len(lab.h.uci.commits) == 2, timeout=10)
        no_errors(p, "policy")
    finally:
        p.close()
    body = lab.a.cfg.path.read_text(encoding="utf-8")
    assert "config rule 'deny_echo'" in body and "option action 'deny'" in body, body

    p = open_view(browser, lab, "mappings")
    try:
        assert p.eval("(function(){ var i = document.querySelector('.cbi-tblsection .cbi-section-create-name');"
                      " i.value = 'echo_tool'; return true; })()")
        click(p, ".cbi-tblsection .cbi-section-create .cbi-button-add")
        wait_for("mappings: the dialog", lambda: p.eval("!!document.getElementById('cbid.agentd.echo_tool.capability')"),
                 timeout=10)
        set_field(p, "cbid.agentd.echo_tool.capability", "demo.echo")
        set_field(p, "cbid.agentd.echo_tool.input_schema", "not json")
        click(p, "#cbi-modal-save")
        assert "Input schema" in wait_for("mappings: bad schema refused", lambda: text(p, "#cbi-modal-error"), timeout=5)
        p.screenshot(SCREENS / "mappings-dialog.png")
        set_field(p, "cbid.agentd.echo_tool.input_schema", '{"type":"object"}')
        click(p, "#cbi-modal-save")
        wait_for("mappings: the row", lambda: p.eval("!!document.querySelector('tr[data-sid=echo_tool]')"), timeout=10)
        click(p, ".cbi-button-apply")
        wait_for("mappings: committed", lambda: len(lab.h.uci.commits) == 3, timeout=10)
        no_errors(p, "mappings")
    finally:
        p.close()
    body = lab.a.cfg.path.read_text(encoding="utf-8")
    assert "config mapping 'echo_tool'" in body and "option capability 'demo.echo'" in body, body

    check = lab.check_config()
    assert check.returncode == 0, check.stdout.decode() + check.stderr.decode()

    # The running daemon has the rule: the Routes page's lookup is denied by it.
    wait_for("agentd reloaded the policy", lambda: lab.status()["config"]["generation"] >= gen1["config"]["generation"] + 2,
             timeout=10)
    p = open_view(browser, lab, "routes")
    try:
        set_field(p, "agentd-lookup-capability", "demo.echo")
        set_field(p, "agentd-lookup-tenant", "lab")
        click(p, "#agentd-lookup-run")
        verdict = wait_for("routes: denied", lambda: (lambda t: "Denied" in t and t)(text(p, "#agentd-lookup-verdict")),
                           timeout=10)
        assert "deny_echo" in verdict, verdict
        no_errors(p, "routes")
    finally:
        p.close()


def test_the_validator_agrees_with_uci_schema_on_every_sample(browser: Browser, make_stack: Any, bins: Any,
                                                             workdir: Path) -> None:
    """agentd/validate.js gives uci-schema's verdict (check_value) for every
    probe value of every kind in the generated corpus."""
    samples = json.loads(SAMPLES.read_text(encoding="utf-8"))
    stack = make_stack()
    h = Harness(workdir / "luci", bins.agentctl, stack.cfg.path, lambda: [stack.agentd.pid, stack.gw.pid])
    lab = Lab(None, None, h, bins)
    p = open_view(browser, lab, "settings")
    try:
        got = p.eval("L.require('agentd.validate').then(function(v) { var s = %s, out = {};"
                     " Object.keys(s.kinds).forEach(function(k) { out[k] = s.probes.map(function(x) {"
                     " return v.checkKind(s.kinds[k], x) ? '1' : '0'; }).join(''); }); return out; })" % json.dumps(samples))
        bad = []
        for key, kind in samples["kinds"].items():
            for i, (want, have) in enumerate(zip(kind["accepts"], got[key])):
                if want != have:
                    bad.append(f"{key}: {samples['probes'][i]!r} rust={want} js={have}")
        assert not bad, "\n".join(bad[:40])
        assert sum(len(k["accepts"]) for k in samples["kinds"].values()) > 1000
        no_errors(p, "settings")
    finally:
        p.close()
        h.close()


def test_the_overview_reports_a_stopped_agentd_in_place(browser: Browser, make_stack: Any, bins: Any,
                                                         workdir: Path) -> None:
    """agentd going away mid-session: the plugin's error object reaches the
    page, which says so in place (and logs the event) with no JS error."""
    stack = make_stack()
    h = Harness(workdir / "luci", bins.agentctl, stack.cfg.path, lambda: [stack.agentd.pid, stack.gw.pid])
    p = open_view(browser, Lab(None, None, h, bins), "overview")
    try:
        wait_for("overview: running", lambda: text(p, "#agentd-health") == "running", timeout=10)
        stack.agentd.stop()
        down = wait_for("overview: agentd down", lambda: (lambda t: t.startswith("not running") and t)(
            text(p, "#agentd-health")), timeout=15, interval=0.2)
        assert "unreachable" in down, down
        assert any("went away" in r[1] for r in rows(p, "agentd-events")), rows(p, "agentd-events")
        p.screenshot(SCREENS / "overview-down.png")
        no_errors(p, "overview")
        assert h.server.failures == []
    finally:
        p.close()
        h.close()


#: Combinations uci-schema refuses between options of one section (page,
#: section type, section name, options to set in the page, words the
#: refusal must carry). The page must refuse each, and so must
#: `agentd --check-config` for a file holding the same values.
CROSS_CASES = [
    ("settings", "relay", "relay", {"mode": "client"}, ["server", "client"]),
    ("settings", "relay", "relay", {"mode": "server", "reconnect_min_ms": "5000", "reconnect_max_ms": "1000"},
     ["reconnect_min_ms", "reconnect_max_ms"]),
    ("settings", "ipv6", "ipv6", {"mode": "ndp-proxy"}, ["prefix"]),
    ("settings", "ipv6", "ipv6", {"mode": "ndp-proxy", "prefix": "2001:db8:1::/56"}, ["ndp-proxy", "/64"]),
    ("settings", "gateway", "gateway", {"public_cert": "/etc/agentd/public.pem"}, ["public_key"]),
    ("mappings", "mapping", "both_schemas", {"capability": "demo.echo", "input_schema": "{}",
                                             "input_schema_file": "/etc/agentd/schema.json"}, ["input_schema"]),
]


def test_cross_option_rules_refused_in_the_page_as_by_check_config(browser: Browser, make_stack: Any, bins: Any,
                                                                     workdir: Path) -> None:
    """Each rule between options (required when, order, exclusive) that
    uci-schema applies is applied by the page too: nothing is committed,
    the refusal names the options; the same values in a file fail
    `agentd --check-config`."""
    stack = make_stack()
    h = Harness(workdir / "luci", bins.agentctl, stack.cfg.path, lambda: [stack.agentd.pid, stack.gw.pid])
    original = stack.cfg.path.read_text(encoding="utf-8")
    try:
        for page, type_, name, values, words in CROSS_CASES:
            # check-config's verdict on the same values.
            pkg = Package.parse(original)
            sec = pkg.get(name)
            if sec is None:
                from luci_uci import Section
                sec = Section(type_, name, False)
                pkg.sections.append(sec)
            sec.options.update(values)
            probe = workdir / f"cross-{type_}.conf"
            probe.write_text(pkg.render(), encoding="utf-8")
            p_ = subprocess.run([str(bins.agentd), "--check-config", str(probe)], capture_output=True, timeout=15,
                                stdin=subprocess.DEVNULL)
            assert p_.returncode != 0, f"check-config accepts {type_} {values}"

            p = open_view(browser, Lab(None, None, h, bins), page)
            try:
                if type_ == "mapping":
                    assert p.eval("(function(){ var i = document.querySelector('.cbi-tblsection .cbi-section-create-name');"
                                  f" i.value = {json.dumps(name)}; return true; }})()")
                    click(p, ".cbi-tblsection .cbi-section-create .cbi-button-add")
                elif p.eval(f"!!document.getElementById('cbi-add-{name}')"):
                    click(p, f"#cbi-add-{name}")
                for opt, v in values.items():
                    wait_for(f"field {name}.{opt}", lambda: p.eval(
                        f"!!document.getElementById('cbid.agentd.{name}.{opt}')"), timeout=5)
                    if p.eval(f"document.getElementById('cbid.agentd.{name}.{opt}').type") == "checkbox":
                        p.eval(f"(function(w){{ w.checked = {json.dumps(v == '1')}; w.dispatchEvent(new Event('change')); }})"
                               f"(document.getElementById('cbid.agentd.{name}.{opt}'))")
                    else:
                        set_field(p, f"cbid.agentd.{name}.{opt}", v)
                if type_ == "mapping":
                    click(p, "#cbi-modal-save")
                    msg = wait_for("the dialog refuses", lambda: text(p, "#cbi-modal-error"), timeout=5)
                else:
                    click(p, ".cbi-button-apply")
                    msg = wait_for("the save is refused", lambda: text(p, ".agentd-save-error"), timeout=5)
                for w in words:
                    assert w in msg, (type_, values, msg)
                no_errors(p, page)
            finally:
                p.close()
            assert h.uci.commits == [] and stack.cfg.path.read_text(encoding="utf-8") == original
        assert h.server.failures == []
    finally:
        h.close()


def test_a_read_only_session_sees_everything_and_is_offered_no_change(browser: Browser, make_stack: Any, bins: Any,
                                                                       workdir: Path) -> None:
    """With only the ACL's `read` scope (rpcd grants it to a read-only
    LuCI user) the pages show the daemon, and nothing that writes is
    offered, the way upstream goes read-only: the forms (form.Map asks
    rpcd `session access` for uci write and gets false) have disabled
    fields and a disabled Save & Apply, the Overview's "Reload
    configuration" (ubus agentd.reload, write scope) is disabled
    (L.hasViewPermission() is false), so no raw -32002 error reaches the
    page. rpcd itself still refuses the writes; the file and the daemon's
    config generation stay as they were."""
    stack = make_stack(rules=[("r1", {"action": "deny", "capability": "demo.x"})])
    h = Harness(workdir / "luci", bins.agentctl, stack.cfg.path, lambda: [stack.agentd.pid, stack.gw.pid],
                scopes=("read",))
    original = stack.cfg.path.read_text(encoding="utf-8")
    gen = stack.ctl_json("status")["config"]["generation"]
    lab = Lab(None, None, h, bins)
    try:
        p = open_view(browser, lab, "overview")
        try:
            wait_for("overview: running", lambda: text(p, "#agentd-health") == "running", timeout=10)
            assert p.eval("document.getElementById('agentd-reload').disabled") is True
            click(p, "#agentd-reload")
            assert not text(p, ".alert-message.error"), text(p, ".alert-message.error")
            assert not any(c["method"] == "reload" for c in h.rpcd.calls)
            no_errors(p, "overview")
        finally:
            p.close()
        for page in ("settings", "policy", "mappings"):
            p = open_view(browser, lab, page)
            try:
                enabled = p.eval("Array.from(document.querySelectorAll('#view input, #view select, #view textarea,"
                                 " #view .cbi-button:not(.cbi-button-edit)')).filter(function(w) { return !w.disabled; })"
                                 ".map(function(w) { return w.id || w.className; })")
                assert enabled == [], (page, enabled)
                if page == "policy":
                    # A rule's dialog opens to be read; nothing in it can be saved.
                    click(p, "tr[data-sid=r1] .cbi-button-edit")
                    wait_for("policy: r1's dialog", lambda: p.eval("!!document.getElementById('cbi-modal-save')"), timeout=5)
                    enabled = p.eval("Array.from(document.querySelectorAll('#modal_overlay input, #modal_overlay select,"
                                     " #modal_overlay textarea, #cbi-modal-save')).filter(function(w) { return !w.disabled; })"
                                     ".map(function(w) { return w.id; })")
                    assert enabled == [], enabled
                no_errors(p, page)
            finally:
                p.close()
        # rpcd refuses the writes all the same.
        for obj, method, args in (("agentd", "reload", {}),
                                  ("uci", "set", {"config": "agentd", "section": "gateway",
                                                  "values": {"rate_per_second": "150"}})):
            r = h.rpcd.handle({"jsonrpc": "2.0", "id": 1, "method": "call", "params": [h.rpcd.session, obj, method, args]})
            assert r["error"]["code"] == -32002, r
        assert stack.cfg.path.read_text(encoding="utf-8") == original and h.uci.commits == []
        assert stack.ctl_json("status")["config"]["generation"] == gen
        assert h.server.failures == []
    finally:
        h.close()


def test_settings_saves_and_deletes_on_the_shipped_config(browser: Browser, bins: Any, workdir: Path) -> None:
    """On the config the feed ships (every singleton section, cloud
    connector off), the Settings page commits an unrelated change and
    deletes a section. Upstream validates a Flag by its checkbox's value
    attribute ('1' whether ticked or not); a cross-option check fed with
    that once made the unticked cloud `enabled` "invalid" and refused
    every save and delete (issue 24). The result passes
    `agentd --check-config`; nothing else changes meaning."""
    conf = workdir / "agentd"
    shipped = (REPO / "openwrt-feed" / "agentd" / "files" / "agentd.config").read_text(encoding="utf-8")
    conf.write_text(shipped, encoding="utf-8")
    h = Harness(workdir / "luci", bins.agentctl, conf, lambda: [])
    lab = Lab(None, None, h, bins)
    try:
        p = open_view(browser, lab, "settings")
        try:
            assert not p.eval("!!document.getElementById('cbi-agentd-cloud')"), "the cloud connector is offered"
            set_field(p, "cbid.agentd.gateway.rate_per_second", "150")
            click(p, ".cbi-button-apply")
            wait_for("settings: committed", lambda: len(h.uci.commits) == 1 or text(p, ".agentd-save-error"), timeout=10)
            assert not text(p, ".agentd-save-error"), text(p, ".agentd-save-error")
            assert len(h.uci.commits) == 1
            click(p, "#cbi-agentd-relay .cbi-button-remove")
            wait_for("settings: relay gone from the page", lambda: p.eval("!!document.getElementById('cbi-add-relay')"),
                     timeout=5)
            click(p, ".cbi-button-apply")
            wait_for("settings: the delete committed", lambda: len(h.uci.commits) == 2 or text(p, ".agentd-save-error"),
                     timeout=10)
            assert not text(p, ".agentd-save-error"), text(p, ".agentd-save-error")
            no_errors(p, "settings")
        finally:
            p.close()
        body = conf.read_text(encoding="utf-8")
        assert Package.parse(body).get("relay") is None, body
        changed = {k: v for k, v in meanings(Package.parse(body)).items()
                   if meanings(Package.parse(shipped)).get(k) != v}
        assert changed == {("gateway", "rate_per_second"): "150"}, changed
        chk = lab.check_config_of(conf)
        assert chk.returncode == 0, chk.stdout.decode() + chk.stderr.decode()
        assert h.server.failures == []
    finally:
        h.close()


def test_a_flags_cross_option_check_reads_the_box_not_the_validators_value(browser: Browser, make_stack: Any,
                                                                         bins: Any, workdir: Path) -> None:
    """agentd/validate.js on a Flag with a rule between options (uci-schema:
    cloud.url is required when cloud.enabled is '1'), in a form.Map of the
    stand-in, which validates a Flag as upstream does (with the checkbox's
    value attribute, '1', ticked or not): unticked, the section parses;
    ticked without a url, it is refused naming url. The check must read
    the box (this.formvalue), not the validator's argument."""
    stack = make_stack()
    with stack.cfg.path.open("a", encoding="utf-8") as f:
        f.write("\nconfig cloud 'cloud'\n\toption enabled '0'\n")
    h = Harness(workdir / "luci", bins.agentctl, stack.cfg.path, lambda: [stack.agentd.pid, stack.gw.pid])
    p = open_view(browser, Lab(None, None, h, bins), "settings")
    try:
        js = """Promise.all([ L.require('form'), L.require('agentd.validate') ]).then(function(r) {
            var form = r[0], v = r[1];
            var m = new form.Map('agentd');
            var s = m.section(form.NamedSection, 'cloud', 'cloud');
            v.option(s, 'cloud', 'enabled');
            return m.render().then(function(node) {
                document.body.appendChild(node);
                var box = node.querySelector('[id="cbid.agentd.cloud.enabled"]');
                var parse = function(ticked) {
                    box.checked = ticked;
                    return m.parse().then(function() { return 'ok'; }, function(e) { return 'refused: ' + e.message; });
                };
                return parse(false).then(function(off) {
                    return parse(true).then(function(on) { return [ off, on ]; });
                });
            });
        })"""
        off, on = p.eval(js)
        assert off == "ok", off
        assert on.startswith("refused: ") and "url" in on, on
        assert h.uci.commits == []
        no_errors(p, "settings")
    finally:
        p.close()
        h.close()


def test_grid_cells_and_fields_show_labels_and_what_unset_options_mean(browser: Browser, make_stack: Any, bins: Any,
                                                                       workdir: Path) -> None:
    """Policy and Mappings rows of sections that leave options unset show
    uci-schema's default in the grid (upstream's textvalue falls back to
    the option's default; "none" only where there is none): a rule
    without `source` matches '*', a mapping without `version` invokes
    version 1. Fields are titled with uci-schema's labels, not option
    names, and an unlimited bound reads 'unlimited', not 2^64-1."""
    stack = make_stack()
    h = Harness(workdir / "luci", bins.agentctl, stack.cfg.path, lambda: [stack.agentd.pid, stack.gw.pid])
    with stack.cfg.path.open("a", encoding="utf-8") as f:
        f.write("\nconfig rule 'r1'\n\toption action 'deny'\n\toption capability 'demo.x'\n"
                "\nconfig mapping 'm1'\n\toption capability 'demo.echo'\n")
    table = schema_table()
    lab = Lab(None, None, h, bins)
    cell = "(function(){ var n = document.querySelector('tr[data-sid=%s] td[data-name=%s]'); return n ? n.textContent : null; })()"
    try:
        p = open_view(browser, lab, "policy")
        try:
            assert p.eval(cell % ("r1", "source")) == table["rule"]["options"]["source"]["default"] == "*"
            assert p.eval(cell % ("r1", "tenant")) == "*"
            assert p.eval(cell % ("r1", "capability")) == "demo.x"
            heads = p.eval("Array.from(document.querySelectorAll('#cbi-agentd-rule th')).map(function(n) { return n.textContent; })")
            assert "Source" in heads and "source" not in heads, heads
            click(p, "tr[data-sid=r1] .cbi-button-edit")
            wait_for("policy: r1's dialog", lambda: p.eval("!!document.getElementById('cbid.agentd.r1.max_latency_ms')"),
                     timeout=5)
            assert p.eval("document.getElementById('cbid.agentd.r1.max_latency_ms').placeholder") == "unlimited"
            label = p.eval("document.querySelector('label[for=\"cbid.agentd.r1.max_latency_ms\"]').textContent")
            assert label == table["rule"]["options"]["max_latency_ms"]["label"] == "Highest latency (ms)", label
            p.screenshot(SCREENS / "policy-defaults.png")
            no_errors(p, "policy")
        finally:
            p.close()
        p = open_view(browser, lab, "mappings")
        try:
            assert p.eval(cell % ("m1", "version")) == table["mapping"]["options"]["version"]["default"] == "1"
            assert p.eval(cell % ("m1", "capability")) == "demo.echo"
            no_errors(p, "mappings")
        finally:
            p.close()
        p = open_view(browser, lab, "settings")
        try:
            label = p.eval("document.querySelector('label[for=\"cbid.agentd.gateway.public_listen\"]').textContent")
            assert label == table["gateway"]["options"]["public_listen"]["label"], label
            descr = text(p, "#cbi-agentd-gateway-public_listen .cbi-value-description")
            assert "'off'" in descr, descr
            assert p.eval("document.getElementById('cbid.agentd.gateway.public_listen').value") == "off"
            no_errors(p, "settings")
        finally:
            p.close()
        assert h.server.failures == []
    finally:
        h.close()


def test_new_rule_and_mapping_names_are_checked_before_anything_is_added(browser: Browser, make_stack: Any,
                                                                        bins: Any, workdir: Path) -> None:
    """A new rule or mapping is named like its section-name option (a
    rule id, a mapping name), as libuci accepts section names (letters,
    digits, '_': a route id's '-' or '.' is not) and not like any other
    section of the file (libuci refuses a name reused with another type):
    a bad or used name adds nothing and says why."""
    stack = make_stack()
    h = Harness(workdir / "luci", bins.agentctl, stack.cfg.path, lambda: [stack.agentd.pid, stack.gw.pid])
    lab = Lab(None, None, h, bins)
    try:
        for page, name, words in [("policy", "gateway", ["gateway", "already"]), ("policy", "bad name", ["id", "expected"]),
                                  ("policy", "deny-echo", ["deny-echo", "letters, digits and '_'"]),
                                  ("mappings", "main", ["main", "already"]), ("mappings", "x/y", ["name", "expected"])]:
            p = open_view(browser, lab, page)
            try:
                p.eval("(function(){ document.querySelector('.cbi-tblsection .cbi-section-create-name').value = %s; })()"
                       % json.dumps(name))
                click(p, ".cbi-tblsection .cbi-section-create .cbi-button-add")
                note = wait_for(f"{page}: {name!r} refused", lambda: text(p, ".alert-message"), timeout=5)
                for w in words:
                    assert w in note, (page, name, note)
                assert not p.eval("!!document.getElementById('modal_overlay')")
                assert p.eval("document.querySelectorAll('tr.cbi-section-table-row').length") == 0
                no_errors(p, page)
            finally:
                p.close()
        assert h.uci.commits == [] and h.uci.staged == {}
    finally:
        h.close()
