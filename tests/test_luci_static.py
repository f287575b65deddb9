"""luci-app-agentd's files checked against each other (issue 10 item 6):
the rpcd ACL grants exactly the ubus methods the views declare with
`rpc.declare` (read and write separated), every method it names exists in
the feed's rpcd plugin's `list`, the menu's views exist, and the
translation template holds exactly the app's strings. No daemon, no
browser (test_luci.py loads the views)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Set, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent / "luci-harness"))

from luci_stack import plugin_command  # noqa: E402
from luci_web import ACL, MENU, RESOURCES  # noqa: E402
import make_pot  # noqa: E402

VIEWS = RESOURCES / "view" / "agentd"

#: Methods that change the daemon's state: granted under "write" only.
STATE_CHANGING = {"approve", "revoke", "reload"}


def declared_methods() -> Set[Tuple[str, str]]:
    """(object, method) of every `rpc.declare({...})` in the app's JS:
    each declaration's object literal, its `object` and `method` keys."""
    out: Set[Tuple[str, str]] = set()
    for f in sorted(RESOURCES.rglob("*.js")):
        src = f.read_text(encoding="utf-8")
        for m in re.finditer(r"rpc\.declare\(\s*\{", src):
            depth, i = 0, m.end() - 1
            while i < len(src):
                depth += {"{": 1, "}": -1}.get(src[i], 0)
                if depth == 0:
                    break
                i += 1
            body = src[m.end():i]
            obj = re.search(r"\bobject\s*:\s*'([^']*)'", body)
            meth = re.search(r"\bmethod\s*:\s*'([^']*)'", body)
            assert obj and meth, f"{f.name}: rpc.declare without a literal object/method: {body!r}"
            out.add((obj.group(1), meth.group(1)))
    return out


def acl() -> Dict[str, Any]:
    doc = json.loads(ACL.read_text(encoding="utf-8"))
    assert list(doc) == ["luci-app-agentd"], list(doc)
    return doc["luci-app-agentd"]


def test_the_acl_grants_exactly_the_methods_the_views_declare() -> None:
    declared = declared_methods()
    assert declared, "no rpc.declare found"
    assert {o for o, _ in declared} == {"agentd"}, "the views call only the agentd plugin (and uci)"
    a = acl()
    read, write = set(a["read"]["ubus"]["agentd"]), set(a["write"]["ubus"]["agentd"])
    assert set(a["read"]["ubus"]) == {"agentd"} and set(a["write"]["ubus"]) == {"agentd"}
    assert read | write == {m for _, m in declared}, (read | write) ^ {m for _, m in declared}
    assert not read & write, f"granted twice: {read & write}"
    assert write == STATE_CHANGING & write and not read & STATE_CHANGING, (read, write)
    assert a["read"]["uci"] == ["agentd"] and a["write"]["uci"] == ["agentd"]


def test_every_acl_method_exists_in_the_plugin_list(bins: Any, tmp_path: Path) -> None:
    """`list` of the feed's rpcd plugin (run as rpcd runs it, no daemon)
    answers every method the ACL grants, with typed signatures."""
    argv, env = plugin_command(bins.agentctl, tmp_path / "no-such-config")
    p = subprocess.run(argv + ["list"], capture_output=True, timeout=10, stdin=subprocess.DEVNULL, env=env)
    assert p.returncode == 0, p.stderr
    sigs = json.loads(p.stdout)
    a = acl()
    for scope in ("read", "write"):
        for m in a[scope]["ubus"]["agentd"]:
            assert m in sigs, f"ACL grants agentd.{m}, the plugin does not list it ({sorted(sigs)})"
            assert isinstance(sigs[m], dict)


def test_the_menu_names_existing_views_and_the_acl_group() -> None:
    m = json.loads(MENU.read_text(encoding="utf-8"))
    root = m["admin/services/agentd"]
    assert root["depends"]["acl"] == ["luci-app-agentd"] and root["depends"]["uci"] == {"agentd": True}
    views: List[str] = []
    for path, entry in m.items():
        action = entry["action"]
        if action["type"] == "view":
            assert (RESOURCES / "view" / f"{action['path']}.js").is_file(), path
            views.append(action["path"])
        else:
            assert action["type"] == "alias" and action["path"] in m, path
    assert sorted(views) == sorted(f"agentd/{f.stem}" for f in VIEWS.glob("*.js"))


def test_the_translation_template_is_what_the_sources_say() -> None:
    committed = make_pot.POT.read_text(encoding="utf-8")
    assert committed == make_pot.generate(), \
        "po/templates/agentd.pot is stale: run python3 tests/luci-harness/make_pot.py"
    ids = make_pot.msgids(committed)
    assert len(ids) == len(set(ids)) and "Agent routing" in ids


def test_the_pot_scanner_reads_literals_as_luci_does() -> None:
    src = "x(_('a %s').format(1)); y(_(\"it's\")); z(N_(n, 'one', 'many')); _(v); foo_('no');"
    assert [s for _, s in make_pot.strings(src)] == ["a %s", "it's", "one", "many"]
