"""The LuCI harness's UCI reader/writer (tests/luci-harness/luci_uci.py)
against uci-schema: what it writes back is a file `agentd --check-config`
accepts and that it reads again unchanged; the rpcd stand-in's `uci`
object stages edits and commits them with a reload trigger."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "luci-harness"))

from harness.procs import REPO  # noqa: E402
from luci_rpcd import Acl, Rpcd, UciStore  # noqa: E402
from luci_uci import Package, UciSyntaxError  # noqa: E402
from luci_web import ACL  # noqa: E402

DESIGN_EXAMPLE = REPO / "uci-schema" / "tests" / "design-example.conf"


def check_config(bins: Any, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(bins.agentd), "--check-config", str(path)], capture_output=True, timeout=15,
                          stdin=subprocess.DEVNULL)


def test_rewritten_config_passes_check_config_and_reads_back_the_same(bins: Any, tmp_path: Path) -> None:
    original = DESIGN_EXAMPLE.read_text(encoding="utf-8")
    assert check_config(bins, DESIGN_EXAMPLE).returncode == 0
    pkg = Package.parse(original)
    assert pkg.of_type("rule") and pkg.get("main") is not None
    out = tmp_path / "agentd"
    out.write_text(pkg.render(), encoding="utf-8")
    p = check_config(bins, out)
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()
    again = Package.parse(out.read_text(encoding="utf-8"))
    assert again == pkg
    assert again.render() == pkg.render()


def test_quotes_lists_and_anonymous_sections() -> None:
    pkg = Package.parse("config rule\n\toption tenant 'it'\\''s'\n\tlist sources local\n\tlist sources \"peer\"\n"
                        "# a comment\nconfig agentd 'main'\n\toption router_id r1 # trailing\n")
    rule = pkg.of_type("rule")[0]
    assert rule.anonymous and rule.name.startswith("cfg00")
    assert rule.options == {"tenant": "it's", "sources": ["local", "peer"]}
    assert pkg.get("main").options == {"router_id": "r1"}
    assert Package.parse(pkg.render()) == pkg
    for bad in ("option x 'y'\n", "config a b c\n", "config a\n\toption k\n", "bogus line\n", "config a 'open\n"):
        try:
            Package.parse(bad)
        except UciSyntaxError:
            continue
        raise AssertionError(f"accepted {bad!r}")


def test_staged_edits_commit_once_with_a_reload(tmp_path: Path) -> None:
    conf = tmp_path / "agentd"
    conf.write_text("config agentd 'main'\n\toption router_id 'r1'\n", encoding="utf-8")
    reloads = []
    store = UciStore({"agentd": conf}, reloads.append)
    rpcd = Rpcd(Acl([ACL], ["luci-app-agentd"]), {}, store, session="s")

    def call(method: str, args: dict) -> Any:
        return rpcd.handle({"jsonrpc": "2.0", "id": 1, "method": "call", "params": ["s", "uci", method, args]})

    assert call("set", {"config": "agentd", "section": "main", "values": {"log_level": "debug"}})["result"] == [0]
    assert call("add", {"config": "agentd", "type": "rule", "name": "r", "values": {"action": "deny"}})["result"] == [0, {"section": "r"}]
    assert "log_level" not in conf.read_text(encoding="utf-8"), "staged, not committed"
    assert call("get", {"config": "agentd"})["result"][1]["values"]["main"]["log_level"] == "debug"
    assert call("apply", {"rollback": True, "timeout": 10})["result"] == [0]
    assert reloads == [["agentd"]]
    assert Package.parse(conf.read_text(encoding="utf-8")).get("r").options == {"action": "deny"}
    # Outside the ACL: another package, a wrong session, an unknown object.
    assert call("get", {"config": "network"})["result"] == [4]
    denied = rpcd.handle({"jsonrpc": "2.0", "id": 2, "method": "call", "params": ["other", "uci", "get", {"config": "agentd"}]})
    assert denied["error"]["code"] == -32002
    read_only = Rpcd(Acl([ACL], ["luci-app-agentd"], scopes=("read",)), {}, store, session="s")
    r = read_only.handle({"jsonrpc": "2.0", "id": 3, "method": "call",
                          "params": ["s", "uci", "set", {"config": "agentd", "section": "main", "values": {"x": "1"}}]})
    assert r["error"]["code"] == -32002


def test_an_empty_option_is_not_stored_and_a_commit_drops_it(tmp_path: Path) -> None:
    """As libuci: `option x ''` is not stored when the file is read (so
    rpcd never returns it) and the next commit writes the file without
    it; `uci set` with '' deletes the option. `off` survives both."""
    conf = tmp_path / "agentd"
    conf.write_text("config gateway 'gateway'\n\toption public_listen ''\n\toption peer_listen 'off'\n"
                    "\toption admin_listen '127.0.0.1:9101'\n", encoding="utf-8")
    store = UciStore({"agentd": conf}, lambda configs: None)
    rpcd = Rpcd(Acl([ACL], ["luci-app-agentd"]), {}, store, session="s")

    def call(method: str, args: dict) -> Any:
        return rpcd.handle({"jsonrpc": "2.0", "id": 1, "method": "call", "params": ["s", "uci", method, args]})

    gw = call("get", {"config": "agentd", "section": "gateway"})["result"][1]["values"]
    assert "public_listen" not in gw and gw["peer_listen"] == "off", gw
    assert call("set", {"config": "agentd", "section": "gateway", "values": {"admin_listen": ""}})["result"] == [0]
    assert call("apply", {})["result"] == [0]
    assert Package.parse(conf.read_text(encoding="utf-8")).get("gateway").options == {"peer_listen": "off"}
    assert "public_listen" not in conf.read_text(encoding="utf-8")


def test_session_access_answers_for_the_sessions_own_acl(tmp_path: Path) -> None:
    """rpcd's `session access` (every session may ask): uci write and the
    write-scoped ubus methods are granted to the write scope only."""
    conf = tmp_path / "agentd"
    conf.write_text("config agentd 'main'\n", encoding="utf-8")
    store = UciStore({"agentd": conf}, lambda configs: None)

    def access(rpcd: Rpcd, scope: str, obj: str, function: str) -> bool:
        r = rpcd.handle({"jsonrpc": "2.0", "id": 1, "method": "call", "params": [
            "s", "session", "access", {"scope": scope, "object": obj, "function": function}]})
        return r["result"][1]["access"]

    rw = Rpcd(Acl([ACL], ["luci-app-agentd"]), {}, store, session="s")
    ro = Rpcd(Acl([ACL], ["luci-app-agentd"], scopes=("read",)), {}, store, session="s")
    assert access(rw, "uci", "agentd", "write") and access(rw, "ubus", "agentd", "reload")
    assert access(ro, "uci", "agentd", "read") and access(ro, "ubus", "agentd", "status")
    assert not access(ro, "uci", "agentd", "write") and not access(ro, "ubus", "agentd", "reload")
    assert access(ro, "access-group", "luci-app-agentd", "read")
    assert not access(ro, "access-group", "luci-app-agentd", "write")
