"""STAND-IN for rpcd behind uhttpd's /ubus JSON-RPC endpoint, for the LuCI
tests only. It does what rpcd documents for what the agentd views use:

- sessions hold the ACL groups of `/usr/share/rpcd/acl.d/*.json` files
  (`read` and `write` scopes, `ubus` object → methods, `uci` packages);
  a call outside them is JSON-RPC error -32002 "Access denied";
- `session access` {scope, object, function} answers `{"access": bool}`
  for the session's own ACL (LuCI's form.Map asks it for `uci`/config/
  `write` and goes read-only on false);
- exec plugins (`/usr/libexec/rpcd/NAME`): `NAME list` once for the
  signatures, `NAME call METHOD` with the arguments as JSON on stdin and
  one JSON object on stdout (anything else: ubus status 5, no data);
- object `uci`: get / set / add / delete / changes / revert stage edits
  in the session (rpcd's delta); apply commits them to the package file
  and runs the reload triggers (procd would run the init scripts'
  `reload`, i.e. SIGHUP); confirm is accepted (no rollback timer here).

The reply frame is uhttpd-mod-ubus's: {"jsonrpc":"2.0","id":N,
"result":[status, data]} or {"error":{"code","message"}}.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from luci_uci import Package, Section

ACCESS_DENIED = {"code": -32002, "message": "Access denied"}
NOT_FOUND = {"code": -32000, "message": "Object not found"}

# ubus status codes (libubus): 0 ok, 2 invalid argument, 4 not found, 5 no data.
UBUS_OK, UBUS_INVALID_ARGUMENT, UBUS_NOT_FOUND, UBUS_NO_DATA = 0, 2, 4, 5

#: How long one plugin call may take (rpcd's exec timeout is longer; the
#: plugin answers in milliseconds or reports the daemon down).
PLUGIN_TIMEOUT_S = 15.0


class Acl:
    """The union of some ACL groups, per scope (`read`/`write`)."""

    def __init__(self, files: Sequence[Path], groups: Sequence[str], scopes: Sequence[str] = ("read", "write")) -> None:
        self.ubus: Dict[str, set] = {}
        self.uci_read: set = set()
        self.uci_write: set = set()
        #: ACL groups granted per scope (`access-group` in rpcd's session).
        self.groups: Dict[str, set] = {scope: set() for scope in scopes}
        for f in files:
            doc = json.loads(f.read_text(encoding="utf-8"))
            for g in groups:
                if g not in doc:
                    continue
                for scope in scopes:
                    self.groups[scope].add(g)
                    part = doc[g].get(scope) or {}
                    for obj, methods in (part.get("ubus") or {}).items():
                        self.ubus.setdefault(obj, set()).update(methods)
                    for pkg in part.get("uci") or []:
                        (self.uci_read if scope == "read" else self.uci_write).add(pkg)
                        if scope == "write":
                            self.uci_read.add(pkg)

    def ubus_ok(self, obj: str, method: str) -> bool:
        allowed = self.ubus.get(obj, set())
        return method in allowed or "*" in allowed

    def access(self, scope: str, obj: str, function: str) -> bool:
        """rpcd's `session access`: may this session call `function` of
        `obj` in `scope` (`ubus` object/method, `uci` package/read|write,
        `access-group` group/read|write)."""
        if scope == "ubus":
            return self.ubus_ok(obj, function)
        if scope == "uci":
            return obj in (self.uci_write if function == "write" else self.uci_read if function == "read" else ())
        if scope == "access-group":
            return obj in self.groups.get(function, set())
        return False


class ExecPlugin:
    """One rpcd exec plugin: an executable and the argv prefix to run it."""

    def __init__(self, name: str, argv: List[str], env: Optional[Dict[str, str]] = None) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.signatures = self._list()

    def _list(self) -> Dict[str, Any]:
        p = subprocess.run(self.argv + ["list"], capture_output=True, timeout=PLUGIN_TIMEOUT_S,
                           stdin=subprocess.DEVNULL, env=self.env)
        value = json.loads(p.stdout)
        if not isinstance(value, dict):
            raise ValueError(f"{self.name} list: not an object: {p.stdout[:200]!r}")
        return value

    def call(self, method: str, args: Dict[str, Any]) -> List[Any]:
        if method not in self.signatures:
            return [UBUS_NOT_FOUND]
        p = subprocess.run(self.argv + ["call", method], input=json.dumps(args).encode(), capture_output=True,
                           timeout=PLUGIN_TIMEOUT_S, env=self.env)
        try:
            value = json.loads(p.stdout)
        except ValueError:
            return [UBUS_NO_DATA]
        return [UBUS_OK, value] if isinstance(value, dict) else [UBUS_NO_DATA]


class UciStore:
    """Package files of one directory, with one staged copy per session."""

    def __init__(self, files: Dict[str, Path], on_commit: Callable[[List[str]], None]) -> None:
        self.files = files
        self.on_commit = on_commit
        self.staged: Dict[str, Package] = {}
        self.changes: Dict[str, List[List[Any]]] = {}
        self.commits: List[List[str]] = []

    def _committed(self, config: str) -> Package:
        return Package.parse(self.files[config].read_text(encoding="utf-8"))

    def view(self, config: str) -> Package:
        return self.staged[config] if config in self.staged else self._committed(config)

    def _stage(self, config: str) -> Package:
        if config not in self.staged:
            self.staged[config] = self._committed(config)
        return self.staged[config]

    @staticmethod
    def section_json(s: Section, index: int) -> Dict[str, Any]:
        out: Dict[str, Any] = {".anonymous": s.anonymous, ".type": s.type, ".name": s.name, ".index": index}
        out.update(s.options)
        return out

    def get(self, a: Dict[str, Any]) -> List[Any]:
        pkg = self.view(a["config"])
        values = {s.name: self.section_json(s, i) for i, s in enumerate(pkg.sections)}
        if a.get("section") is not None:
            s = values.get(a["section"])
            if s is None:
                return [UBUS_NOT_FOUND]
            if a.get("option") is not None:
                return [UBUS_OK, {"value": s[a["option"]]}] if a["option"] in s else [UBUS_NOT_FOUND]
            return [UBUS_OK, {"values": s}]
        return [UBUS_OK, {"values": values}]

    @staticmethod
    def _value(v: Any) -> Any:
        if isinstance(v, list):
            return [str(x) for x in v]
        if isinstance(v, bool):
            return "1" if v else "0"
        return str(v)

    def set(self, a: Dict[str, Any]) -> List[Any]:
        pkg = self._stage(a["config"])
        s = pkg.get(a["section"])
        if s is None:
            return [UBUS_NOT_FOUND]
        for k, v in (a.get("values") or {}).items():
            value = self._value(v)
            if value == "":
                # rpcd hands the value to libuci's uci_set(), which deletes
                # an option set to the empty string.
                s.options.pop(k, None)
                self.changes.setdefault(a["config"], []).append(["remove", s.name, k])
                continue
            s.options[k] = value
            self.changes.setdefault(a["config"], []).append(["set", s.name, k, s.options[k]])
        return [UBUS_OK]

    def add(self, a: Dict[str, Any]) -> List[Any]:
        pkg = self._stage(a["config"])
        name = a.get("name")
        if name is not None and pkg.get(name) is not None:
            return [UBUS_INVALID_ARGUMENT]
        s = Section(a["type"], name or pkg.anonymous_name(a["type"]), name is None)
        for k, v in (a.get("values") or {}).items():
            s.options[k] = self._value(v)
        pkg.sections.append(s)
        self.changes.setdefault(a["config"], []).append(["add", s.name, s.type])
        return [UBUS_OK, {"section": s.name}]

    def delete(self, a: Dict[str, Any]) -> List[Any]:
        pkg = self._stage(a["config"])
        s = pkg.get(a["section"])
        if s is None:
            return [UBUS_NOT_FOUND]
        opts = a.get("options") or ([a["option"]] if a.get("option") else None)
        if opts is None:
            pkg.sections.remove(s)
            self.changes.setdefault(a["config"], []).append(["remove", s.name])
        else:
            for o in opts:
                s.options.pop(o, None)
                self.changes.setdefault(a["config"], []).append(["remove", s.name, o])
        return [UBUS_OK]

    def apply(self, a: Dict[str, Any]) -> List[Any]:
        configs = sorted(self.staged)
        for c in configs:
            self.files[c].write_text(self.staged[c].render(), encoding="utf-8")
        self.staged.clear()
        self.changes.clear()
        if configs:
            self.commits.append(configs)
            self.on_commit(configs)
        return [UBUS_OK]

    def revert(self, a: Dict[str, Any]) -> List[Any]:
        self.staged.pop(a["config"], None)
        self.changes.pop(a["config"], None)
        return [UBUS_OK]


class Rpcd:
    """The ubus JSON-RPC endpoint: one session with `acl`."""

    def __init__(self, acl: Acl, plugins: Dict[str, ExecPlugin], uci: UciStore, session: str) -> None:
        self.acl = acl
        self.plugins = plugins
        self.uci = uci
        self.session = session
        self.calls: List[Dict[str, Any]] = []
        self.lock = threading.Lock()

    def handle(self, msg: Any) -> Any:
        if isinstance(msg, list):
            return [self.handle(m) for m in msg]
        reply: Dict[str, Any] = {"jsonrpc": "2.0", "id": msg.get("id") if isinstance(msg, dict) else None}
        try:
            result = self._dispatch(msg)
        except PermissionError:
            reply["error"] = ACCESS_DENIED
            return reply
        except LookupError:
            reply["error"] = NOT_FOUND
            return reply
        reply["result"] = result
        return reply

    def _dispatch(self, msg: Dict[str, Any]) -> Any:
        if msg.get("method") == "list":
            names = msg.get("params") or []
            if not names:
                return sorted(self.plugins) + ["uci"]
            return {n: self.plugins[n].signatures for n in names if n in self.plugins}
        if msg.get("method") != "call":
            raise LookupError(msg.get("method"))
        sid, obj, method, args = msg["params"]
        if sid != self.session:
            raise PermissionError(sid)
        args = args or {}
        with self.lock:
            self.calls.append({"object": obj, "method": method, "args": args})
            if obj == "session" and method == "access":
                # Every session may ask (rpcd's `unauthenticated` ACL group
                # grants ubus session/access); the answer is its own ACL.
                return [UBUS_OK, {"access": self.acl.access(str(args.get("scope", "ubus")), str(args.get("object", "")),
                                                           str(args.get("function", "")))}]
            if obj == "uci":
                return self._uci(method, args)
            if obj in self.plugins:
                if not self.acl.ubus_ok(obj, method):
                    raise PermissionError(f"{obj}.{method}")
                return self.plugins[obj].call(method, args)
        raise LookupError(obj)

    def _uci(self, method: str, a: Dict[str, Any]) -> Any:
        if method in ("apply", "confirm", "rollback"):
            return self.uci.apply(a) if method == "apply" else [UBUS_OK]
        if method == "changes":
            return [UBUS_OK, {"changes": {c: v for c, v in self.uci.changes.items() if c in self.acl.uci_read}}]
        config = a.get("config")
        if config not in self.uci.files:
            return [UBUS_NOT_FOUND]
        if method == "get":
            if config not in self.acl.uci_read:
                raise PermissionError(config)
            return self.uci.get(a)
        if config not in self.acl.uci_write:
            raise PermissionError(config)
        if method == "set":
            return self.uci.set(a)
        if method == "add":
            return self.uci.add(a)
        if method == "delete":
            return self.uci.delete(a)
        if method == "revert":
            return self.uci.revert(a)
        raise LookupError(f"uci.{method}")
