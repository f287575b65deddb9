"""What the LuCI tests share: the headless browser, the two-router lab
with the LuCI harness on router-a, and helpers that read and drive a
page (tests/test_luci.py, tests/test_luci_discovery.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "luci-harness"))

from harness.config import Section as ConfigSection  # noqa: E402
from harness.poll import wait_for  # noqa: E402
from harness.procs import REPO  # noqa: E402
from luci_cdp import Browser, Page, chromium_binary  # noqa: E402
from luci_stack import Harness  # noqa: E402
from luci_uci import Package  # noqa: E402
from luci_web import RESOURCES, menu  # noqa: E402

SCREENS = REPO / "target" / "luci-screens"
SAMPLES = REPO / "tests" / "luci-harness" / "validation-samples.json"

#: The pages of the app: the menu.d entries of type "view".
PAGES = [k.rsplit("/", 1)[1] for k, v in menu().items() if (v.get("action") or {}).get("type") == "view"]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    binary = chromium_binary()
    if binary is None:
        pytest.fail("Debian chromium is not installed (make test-python installs it)")
    b = Browser(binary, tmp_path_factory.mktemp("chromium") / "profile")
    yield b
    b.close()


def schema_table() -> dict:
    """The option table the views validate with (agentd/schema.js,
    generated from uci-schema)."""
    js = (RESOURCES / "agentd" / "schema.js").read_text(encoding="utf-8")
    return json.loads(js[js.index("sections: ") + len("sections: "):js.rindex("\n});")])


TRUE = {"1", "yes", "on", "true", "enabled"}


def meanings(pkg: Package) -> dict:
    """(section, option) → what the file means for every option of every
    section present: its value, else the schema default (booleans
    normalised)."""
    table, out = schema_table(), {}
    for s in pkg.sections:
        for name, spec in table[s.type]["options"].items():
            v = s.options.get(name, spec.get("default"))
            if spec["kind"] == "bool" and v is not None:
                v = "1" if v in TRUE else "0"
            out[(s.name, name)] = v
    return out


class Lab:
    def __init__(self, a: Any, b: Any, harness: Harness, bins: Any) -> None:
        self.a, self.b, self.h, self.bins = a, b, harness, bins

    def check_config(self) -> subprocess.CompletedProcess:
        return self.check_config_of(self.a.cfg.path)

    def check_config_of(self, path: Path) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.bins.agentd), "--check-config", str(path)],
                              capture_output=True, timeout=15, stdin=subprocess.DEVNULL)

    def status(self) -> dict:
        return self.a.stack.ctl_json("status")


@pytest.fixture
def lab(mesh: Any, bins: Any, workdir: Path) -> Iterator[Lab]:
    """router-a and router-b with a session, a local registration on each
    (router-a learns router-b's as a peer route), the harness on router-a;
    router-a is also a relay (no client connects) and binds per-agent
    IPv6 addresses of 2001:db8:55::/64 on its loopback."""
    a = mesh.router("router-a")
    b = mesh.router("router-b")
    mesh.link("router-a", "router-b")
    a.cfg.sections.append(ConfigSection("relay", "relay", {"mode": "server"}))
    a.cfg.sections.append(ConfigSection("ipv6", "ipv6", {"mode": "routed-prefix", "prefix": "2001:db8:55::/64",
                                                         "interface": "lo"}))
    a.start()
    b.start()
    a.wait_established("router-b")
    a.register("luci-local", capability="demo.echo", lease=300)
    b.register("luci-remote", capability="demo.remote", lease=300)
    wait_for("router-a: the peer route from router-b", lambda: any(
        r.get("capability") == "demo.remote" for r in a.peer_routes()), timeout=20)
    h = Harness(workdir / "luci", bins.agentctl, a.cfg.path,
                lambda: [a.stack.agentd.pid, a.stack.gw.pid])
    try:
        yield Lab(a, b, h, bins)
        assert h.server.failures == [], h.server.failures
    finally:
        h.close()


def open_view(browser: Browser, lab: Lab, page: str) -> Page:
    p = browser.new_page()
    p.navigate(lab.h.url(page))
    wait_for(f"the {page} view to render", lambda: p.eval("!!(window.__luci && window.__luci.ready)")
             or (p.errors() and pytest.fail(f"{page}: {p.errors()}")), timeout=60, interval=0.1)
    return p


def text(p: Page, selector: str) -> str:
    return p.eval(f"(function() {{ var n = document.querySelector({json.dumps(selector)}); "
                  f"return n ? n.textContent : null; }})()") or ""


def rows(p: Page, table_id: str) -> List[List[str]]:
    return p.eval(f"Array.from(document.querySelectorAll('#{table_id} tr')).slice(1)"
                  ".map(function(r) { return Array.from(r.cells).map(function(c) { return c.textContent; }); })")


def no_errors(p: Page, page: str) -> None:
    assert p.errors() == [], f"{page}: JS errors: {p.errors()}"
    assert p.eval("window.__luci.errors") == [], f"{page}: view errors: {p.eval('window.__luci.errors')}"


def set_field(p: Page, cbid: str, value: str) -> None:
    ok = p.eval(f"""(function() {{
        var w = document.getElementById({json.dumps(cbid)});
        if (!w) return false;
        w.value = {json.dumps(value)};
        w.dispatchEvent(new Event('input', {{ bubbles: true }}));
        w.dispatchEvent(new Event('change', {{ bubbles: true }}));
        return true; }})()""")
    assert ok, f"no field {cbid}"


def click(p: Page, selector: str) -> None:
    assert p.eval(f"(function() {{ var n = document.querySelector({json.dumps(selector)}); "
                  f"if (!n) return false; n.click(); return true; }})()"), f"nothing to click at {selector}"
