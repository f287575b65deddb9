"""A small UCI package reader and writer for the LuCI harness (the
stand-in rpcd's `uci` object keeps /etc/config/agentd this way).

It reads what libuci writes and what the tests write — `config TYPE
['NAME']`, `option NAME VALUE`, `list NAME VALUE`, `#` comments, values
quoted with '...' or "..." or bare, `'\\''` for a quote — and writes the
file back the way `uci commit` does (one tab of indent, every value in
single quotes). Like libuci it does not store `option NAME ''`: upstream
uci's file.c parses an option line into `uci_set()`, and list.c's
`uci_set()` returns without storing anything when the value is empty and
the option does not exist yet (`if (!ptr->value[0]) ... return 0`), so
rpcd never returns such an option and the next commit writes the file
without it. Anonymous sections get libuci-style names (`cfgXXYYYY`)
in memory and are written without a name. test_luci_uci.py checks that
what it writes is what uci-schema (`agentd --check-config`) reads.
"""

from __future__ import annotations

import copy
import shlex
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union

Value = Union[str, List[str]]


class UciSyntaxError(ValueError):
    def __init__(self, line_no: int, line: str, reason: str) -> None:
        super().__init__(f"line {line_no}: {reason}: {line!r}")
        self.line_no = line_no


@dataclass
class Section:
    type: str
    name: str
    anonymous: bool
    options: Dict[str, Value] = field(default_factory=dict)


@dataclass
class Package:
    sections: List[Section] = field(default_factory=list)

    # ---- reading ---------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> "Package":
        pkg = cls()
        current: Optional[Section] = None
        for no, raw in enumerate(text.splitlines(), 1):
            try:
                words = shlex.split(raw, comments=True, posix=True)
            except ValueError as e:
                raise UciSyntaxError(no, raw, str(e)) from None
            if not words:
                continue
            kw = words[0]
            if kw == "package":
                continue
            if kw == "config":
                if len(words) not in (2, 3):
                    raise UciSyntaxError(no, raw, "config takes a type and an optional name")
                if len(words) == 3:
                    current = Section(words[1], words[2], False)
                else:
                    current = Section(words[1], pkg.anonymous_name(words[1]), True)
                pkg.sections.append(current)
            elif kw in ("option", "list"):
                if current is None:
                    raise UciSyntaxError(no, raw, f"{kw} outside a section")
                if len(words) != 3:
                    raise UciSyntaxError(no, raw, f"{kw} takes a name and one value")
                name, value = words[1], words[2]
                if kw == "option":
                    if value == "":
                        continue  # libuci: uci_set() with an empty value stores nothing
                    current.options[name] = value
                else:
                    prev = current.options.get(name)
                    items = prev if isinstance(prev, list) else ([] if prev is None else [prev])
                    current.options[name] = items + [value]
            else:
                raise UciSyntaxError(no, raw, f"unknown keyword {kw!r}")
        return pkg

    def anonymous_name(self, type_: str) -> str:
        """`cfg` + section index (2 hex digits) + a 4-hex-digit hash of the
        type, as libuci names anonymous sections."""
        h = 0
        for b in type_.encode():
            h = (h * 31 + b) & 0xFFFF
        return "cfg%02x%04x" % (len(self.sections) & 0xFF, h)

    # ---- access ------------------------------------------------------------
    def get(self, name: str) -> Optional[Section]:
        for s in self.sections:
            if s.name == name:
                return s
        return None

    def of_type(self, type_: str) -> List[Section]:
        return [s for s in self.sections if s.type == type_]

    def copy(self) -> "Package":
        return copy.deepcopy(self)

    # ---- writing -----------------------------------------------------------
    def render(self) -> str:
        out: List[str] = []
        for s in self.sections:
            out.append(f"config {s.type}" + ("" if s.anonymous else f" {quote(s.name)}"))
            for k, v in s.options.items():
                if isinstance(v, list):
                    out.extend(f"\tlist {k} {quote(item)}" for item in v)
                else:
                    out.append(f"\toption {k} {quote(v)}")
            out.append("")
        return "\n".join(out)


def quote(value: str) -> str:
    """Single-quoted as `uci` writes values (`'` becomes `'\\''`)."""
    return "'" + value.replace("'", "'\\''") + "'"
