"""Config that passes every check and breaks the mesh (issue 20, item 7):
files whose sections are each well-formed but that cannot run a router —
empty, without `config agentd 'main'`, with peers but no `router_id` —
and malformed typed values (a pin that is not `sha256:` + 64 hex digits, a
prefix longer than its family allows, a port out of range) are refused by
`agentd --check-config` with a message naming what is wrong, and by a
strict reload (`agentctl reload`) on a running router of a two-router
mesh, whose ARPX session stays established throughout (sampled in the
background); `agentctl reload` answers with the configuration generation.
At start, peers without a router_id are listed with the problem and no
session is tried."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

from harness.config import Section
from harness.mesh import MeshRouter
from harness.poll import wait_for

HEX = "0123456789abcdef" * 4


class SessionWatch:
    """Samples the A–B session on both routers every 50 ms in the
    background (bounded: stops by itself after `max_seconds`) and keeps
    every sample that was not `established` on both sides."""

    def __init__(self, a: MeshRouter, b: MeshRouter, max_seconds: float = 120.0) -> None:
        self.a, self.b = a, b
        self.samples = 0
        self.bad: List[Tuple[Any, Any]] = []
        self._stop = threading.Event()
        self._deadline = time.monotonic() + max_seconds
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set() and time.monotonic() < self._deadline:
            pa = self.a.peer(self.b.name) or {}
            pb = self.b.peer(self.a.name) or {}
            self.samples += 1
            if pa.get("state") != "established" or pb.get("state") != "established":
                self.bad.append((pa.get("state"), pb.get("state")))
            self._stop.wait(0.05)

    def __enter__(self) -> "SessionWatch":
        self._t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._t.join(timeout=5)


def _check_config(mesh: Any, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(mesh.bins.agentd), "--check-config", str(path)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=10)


def _ctl_text(r: MeshRouter, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(r.stack.bins.agentctl), "--socket", str(r.cfg.socket), *args], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=10)


def _without(text: str, section_type: str) -> str:
    """The UCI text without its sections of `section_type`."""
    out: List[str] = []
    skip = False
    for line in text.splitlines(keepends=True):
        if line.startswith("config "):
            skip = line.split()[1] == section_type
        if not skip:
            out.append(line)
    return "".join(out)


def _set_option(text: str, section_type: str, option: str, value: str) -> str:
    """`option` of the first `section_type` section set to `value` (added
    after its `config` line, an existing line removed)."""
    out: List[str] = []
    inside = done = False
    for line in text.splitlines(keepends=True):
        if line.startswith("config "):
            inside = line.split()[1] == section_type and not done
            out.append(line)
            if inside:
                out.append(f"\toption {option} '{value}'\n")
                done = True
            continue
        if inside and line.split()[:2] == ["option", option]:
            continue
        out.append(line)
    assert done, f"no {section_type} section"
    return "".join(out)


def _add_section(text: str, section: str) -> str:
    return text + "\n" + section


def test_files_that_break_the_mesh_are_refused_by_check_config_and_reload(mesh):
    """Proves for each bad file — empty, no `config agentd 'main'`, peers
    without `router_id`, a pin `sha257:…`, a pin of 65 hex digits, a
    prefix `/33`, a relay `host:99999` — that `--check-config` exits 1
    with a message naming the problem (section and option where there is
    one), and that writing it to router A's file and running `agentctl
    reload` is refused with the same message while A keeps its running
    configuration (config generation unchanged, status reports the
    refusal) and the A–B ARPX session never leaves `established`
    (sampled every 50 ms on both routers, and neither router ever
    established it again). Then the good file reloads,
    and `agentctl reload` prints the configuration generation — the one
    `status` counts as config.generation, not the route table's."""
    a = mesh.router("router-a")
    b = mesh.router("router-b")
    mesh.link("router-a", "router-b")
    a.start()
    b.start()
    a.wait_established("router-b")
    b.wait_established("router-a")
    # Route-table changes, so its generation and the config's differ.
    for i in range(3):
        a.register(f"guard{i}")
    good = a.cfg.path.read_text(encoding="utf-8")
    assert _check_config(mesh, a.cfg.path).returncode == 0

    peer_b = "peer 'router_b'"
    bad_files: List[Tuple[str, str, Callable[[str], bool]]] = [
        ("empty", "", lambda e: "the file is empty: a router's configuration needs at least `config agentd 'main'`" in e),
        ("no main", _without(good, "agentd"), lambda e: "no `config agentd 'main'` section" in e
         and "1 enabled peer section(s) need a router_id" in e),
        ("no router_id", _set_option(good, "agentd", "router_id", ""), lambda e:
         "agentd 'main': option 'router_id': required when peer sections are configured (1 enabled, the first "
         f"{peer_b})" in e),
        ("sha257 pin", _set_option(good, "peer", "key_fingerprint", f"sha257:{HEX}"), lambda e:
         f"{peer_b}: option 'key_fingerprint': expected a key fingerprint 'sha256:' and 64 hex digits" in e),
        ("65 hex digits", _set_option(good, "peer", "key_fingerprint", f"sha256:{HEX}0"), lambda e:
         f"{peer_b}: option 'key_fingerprint': expected a key fingerprint" in e),
        ("prefix /33", _add_section(good, "config agent 'pin'\n\toption origin 'agent://lab/x'\n"
                                          "\tlist source '192.0.2.0/33'\n"),
         lambda e: "agent 'pin': option 'source': expected an IP network 'addr/len' or an address, got '192.0.2.0/33'" in e),
        ("port 99999", _add_section(good, "config relay 'relay'\n\toption mode 'client'\n"
                                          "\toption server 'relay.example:99999'\n"),
         lambda e: "relay 'relay': option 'server': expected 'host:port', got 'relay.example:99999'" in e),
    ]
    gen0 = a.stack.ctl_json("status")["config"]["generation"]
    sessions0 = [r.stack.ctl_json("stats")["counters"]["arpx.sessions_established"] for r in (a, b)]
    with SessionWatch(a, b) as watch:
        for n, (what, text, names_it) in enumerate(bad_files):
            path = a.dir / f"bad-{n}.conf"
            path.write_text(text, encoding="utf-8")
            chk = _check_config(mesh, path)
            assert chk.returncode == 1 and names_it(chk.stderr), (what, chk.returncode, chk.stdout, chk.stderr)

            a.cfg.path.write_text(text, encoding="utf-8")
            rl = _ctl_text(a, "reload")
            assert rl.returncode != 0 and names_it(rl.stderr), (what, rl.returncode, rl.stdout, rl.stderr)
            st = a.stack.ctl_json("status")
            assert st["config"]["generation"] == gen0, (what, st["config"])
            assert names_it(st["config"]["error"] or ""), (what, st["config"])
            assert a.peer("router-b")["state"] == "established", what
        a.cfg.path.write_text(good, encoding="utf-8")
        # Still serving what it ran before, and the good file reloads.
        assert len([r for r in a.stack.routes() if r.get("source") == "local"]) == 3
        rl = _ctl_text(a, "reload")
        assert rl.returncode == 0, rl.stderr
        st = a.stack.ctl_json("status")
        assert st["config"]["generation"] == gen0 + 1 and st["config"]["error"] is None, st["config"]
        assert st["generation"] != st["config"]["generation"], st
        assert rl.stdout == f"configuration reloaded, config generation {gen0 + 1}\n", rl.stdout
        js = a.stack.ctl_json("reload")
        assert js == {"reloaded": True, "generation": gen0 + 2}, js
        assert a.stack.ctl_json("status")["config"]["generation"] == gen0 + 2
        # Keep sampling past a hold time (3 heartbeats) after the last
        # refusal: a session the refused files had touched would be down.
        wait_for("40 session samples", lambda: watch.samples >= 40, timeout=20)
    # No session was ever re-established: none was lost in between.
    assert [r.stack.ctl_json("stats")["counters"]["arpx.sessions_established"] for r in (a, b)] == sessions0
    assert watch.bad == [], f"the session left established in {len(watch.bad)} of {watch.samples} samples"
    print(f"A-B session established in all {watch.samples} samples across {len(bad_files)} refused reloads")


def test_peers_without_router_id_at_start_are_listed_and_say_why(make_stack):
    """Proves the start on a file with a peer but no router_id: agentd
    starts (a config problem is never an outage), `agentctl status`
    names the problem with its section and option and what was done
    (`peers_idle`), and `agentctl peers` lists the peer, sessions off,
    and says why."""
    stack = make_stack(
        agentd={"router_id": ""},
        extra_sections=[Section("peer", "router_b", {"router_id": "router-b", "address": "192.0.2.2",
                                                     "key_fingerprint": f"sha256:{HEX}"})],
    )
    st = stack.ctl_json("status")
    problems: List[Dict[str, Any]] = st["config"]["problems"]
    assert any(p["section"] == "agentd 'main'" and p["option"] == "router_id" and p["action"] == "peers_idle"
               and "required when peer sections are configured" in p["reason"] for p in problems), problems
    assert st["policy"]["ok"] is True, st
    view = stack.ctl_json("peers")
    listed = [p for p in view["peers"] if p["router_id"] == "router-b"]
    assert len(listed) == 1 and listed[0]["established"] is False, view
    assert view["off_reason"] == "agentd.router_id is not set (a mesh needs a stable router identity)", view
    assert view["sessions"] == "off", view


def test_check_config_warns_about_reflection_that_cannot_reflect(mesh, workdir):
    """Proves that `agentd --check-config` accepts (exit 0, OK) a spoke
    whose one peer section, the hub's, carries `reflector_client '1'` —
    valid, but it reflects nothing — and says so on stderr naming the
    peer and the docs section; the same file with a second peer has no
    warning."""
    spoke = workdir / "spoke.conf"
    base = ("config agentd 'main'\n\toption router_id 'router-s'\n\n"
            "config peer 'hub'\n\toption router_id 'hub'\n\toption address '192.0.2.1'\n"
            "\toption reflector_client '1'\n")
    spoke.write_text(base)
    p = _check_config(mesh, spoke)
    assert p.returncode == 0 and p.stdout.strip() == "OK", (p.stdout, p.stderr)
    assert "warning: reflector_client '1' on peer hub reflects nothing" in p.stderr, p.stderr
    assert 'docs/mesh.md, "Reflection"' in p.stderr, p.stderr
    spoke.write_text(base + "\nconfig peer 'other'\n\toption router_id 'other'\n\toption address '192.0.2.9'\n")
    p = _check_config(mesh, spoke)
    assert p.returncode == 0 and "warning" not in p.stderr, p.stderr
