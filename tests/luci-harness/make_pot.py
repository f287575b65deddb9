#!/usr/bin/env python3
"""Writes luci-app/po/templates/agentd.pot: every
string the app's JavaScript passes to `_()` or `N_()` and every menu.d
title (what LuCI's build/i18n-scan.pl collects), with file:line references, sorted by
first appearance. test_luci_static.py checks the committed template is
what this produces: run `python3 tests/luci-harness/make_pot.py` after
changing a view's strings."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Dict, List, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
APP = REPO / "luci-app"
POT = APP / "po" / "templates" / "agentd.pot"

# _('...'), _("..."), N_(n, '...', '...') — plain literals, as i18n-scan.pl.
LITERAL = r"""'((?:[^'\\\n]|\\.)*)'|"((?:[^"\\\n]|\\.)*)\""""
CALL = re.compile(r"(?<![A-Za-z0-9_$.])(N?_)\(\s*")
LIT = re.compile(r"\s*(?:" + LITERAL + r")")


def unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)


def strings(text: str) -> List[Tuple[int, str]]:
    out: List[Tuple[int, str]] = []
    for m in CALL.finditer(text):
        pos = m.end()
        if m.group(1) == "N_":
            comma = text.find(",", pos)
            if comma < 0:
                continue
            pos = comma + 1
        count = 2 if m.group(1) == "N_" else 1
        for _ in range(count):
            lit = LIT.match(text, pos)
            if not lit:
                break
            value = lit.group(1) if lit.group(1) is not None else lit.group(2)
            out.append((text.count("\n", 0, lit.start()) + 1, unescape(value)))
            pos = lit.end()
            comma = re.match(r"\s*,", text[pos:])
            if not comma:
                break
            pos += comma.end()
    return out


def po_quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def generate() -> str:
    refs: Dict[str, List[str]] = {}
    files = sorted((APP / "htdocs").rglob("*.js"))
    for f in files:
        rel = f.relative_to(REPO).as_posix()
        for line, s in strings(f.read_text(encoding="utf-8")):
            if s:
                refs.setdefault(s, []).append(f"{rel}:{line}")
    # Menu titles are translated too (i18n-scan.pl reads menu.d JSON).
    for f in sorted((APP / "root" / "usr" / "share" / "luci" / "menu.d").glob("*.json")):
        rel = f.relative_to(REPO).as_posix()
        for no, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            m = re.search(r'"title"\s*:\s*"((?:[^"\\]|\\.)*)"', line)
            if m:
                refs.setdefault(unescape(m.group(1)), []).append(f"{rel}:{no}")
    out = ['msgid ""', 'msgstr "Content-Type: text/plain; charset=UTF-8"', ""]
    for s, where in refs.items():
        out.extend(f"#: {w}" for w in where)
        out.append(f"msgid {po_quote(s)}")
        out.append('msgstr ""')
        out.append("")
    return "\n".join(out)


def msgids(pot_text: str) -> List[str]:
    """The msgids of a template (single-line entries, as generate() writes)."""
    ids = []
    for line in pot_text.splitlines():
        if line.startswith("msgid "):
            ids.append(unescape(line[len('msgid "'):-1]))
    return [i for i in ids if i]


if __name__ == "__main__":
    POT.parent.mkdir(parents=True, exist_ok=True)
    POT.write_text(generate(), encoding="utf-8")
    print(f"wrote {POT} ({len(msgids(POT.read_text(encoding='utf-8')))} strings)", file=sys.stderr)
