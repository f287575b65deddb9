"""The LuCI harness web server (tests only): serves the luci-app-agentd
views from luci-app/htdocs, the LuCI client runtime
stand-in from tests/luci-harness/standin, one page per menu.d entry
(`/cgi-bin/luci/admin/services/agentd/<page>`, as LuCI's dispatcher
serves a `"type": "view"` action), and the ubus JSON-RPC endpoint
`/ubus/` backed by the rpcd stand-in (luci_rpcd.py). Loopback only; the
test stops it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, Optional

import luci_netns
from luci_rpcd import Rpcd

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
APP = REPO / "luci-app"
RESOURCES = APP / "htdocs" / "luci-static" / "resources"
STANDIN = HERE / "standin"
MENU = APP / "root" / "usr" / "share" / "luci" / "menu.d" / "luci-app-agentd.json"
ACL = APP / "root" / "usr" / "share" / "rpcd" / "acl.d" / "luci-app-agentd.json"

#: Largest JSON-RPC request body accepted (LuCI's are a few hundred bytes).
MAX_BODY = 1 << 20

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{title} - agentd (LuCI stand-in)</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/luci-static/standin/standin.css">
<script>window.__luci_env = {env};</script>
<script src="/luci-static/resources/luci.js"></script>
</head><body>
<header><b>LuCI stand-in</b> &middot; {menu}</header>
<div id="maincontent"><div id="view"></div></div>
</body></html>
"""


def menu() -> Dict[str, Any]:
    return json.loads(MENU.read_text(encoding="utf-8"))


def _file(root: Path, rel: str) -> Optional[Path]:
    p = (root / rel).resolve()
    return p if p.is_file() and root.resolve() in p.parents else None


class LuciServer:
    def __init__(self, rpcd: Rpcd) -> None:
        self.rpcd = rpcd
        self.menu = menu()
        #: Exceptions the endpoint raised (a harness bug; tests assert none).
        self.failures: list = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                path = self.path.split("?", 1)[0]
                if path.startswith("/luci-static/resources/"):
                    rel = path[len("/luci-static/resources/"):]
                    f = _file(RESOURCES, rel) or _file(STANDIN, rel)
                    if f:
                        return self._send(200, f.read_bytes(), "application/javascript")
                elif path == "/luci-static/standin/standin.css":
                    return self._send(200, (STANDIN / "standin.css").read_bytes(), "text/css")
                elif path.startswith("/cgi-bin/luci/"):
                    page = server.page(path[len("/cgi-bin/luci/"):].strip("/"))
                    if page is not None:
                        return self._send(200, page.encode(), "text/html; charset=utf-8")
                self._send(404, b"not found", "text/plain")

            def do_POST(self) -> None:  # noqa: N802
                if self.path.split("?", 1)[0].rstrip("/") != "/ubus":
                    return self._send(404, b"not found", "text/plain")
                n = int(self.headers.get("Content-Length") or 0)
                if n > MAX_BODY:
                    return self._send(413, b"too large", "text/plain")
                try:
                    msg = json.loads(self.rfile.read(n))
                except ValueError:
                    return self._send(400, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}',
                                      "application/json")
                try:
                    reply = server.rpcd.handle(msg)
                except Exception as e:  # noqa: BLE001 - a harness bug, shown to the test
                    server.failures.append(repr(e))
                    return self._send(500, repr(e).encode(), "text/plain")
                self._send(200, json.dumps(reply).encode(), "application/json")

        # Where the browser is: its own namespace (luci_netns says why).
        self.httpd = luci_netns.inside(lambda: ThreadingHTTPServer(("127.0.0.1", 0), Handler))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def url(self, page: str) -> str:
        return f"{self.base}/cgi-bin/luci/admin/services/agentd/{page}"

    def page(self, path: str) -> Optional[str]:
        """The HTML of a menu entry of type `view` (an `alias` resolves to
        its target), or None."""
        for _ in range(4):
            entry = self.menu.get(path)
            if entry is None:
                return None
            action = entry.get("action") or {}
            if action.get("type") == "alias":
                path = action["path"]
                continue
            if action.get("type") != "view":
                return None
            env = {
                "base_url": "/luci-static/resources",
                "resource": "/luci-static/resources",
                "scriptname": "/cgi-bin/luci",
                "requestpath": path.split("/"),
                "sessionid": self.rpcd.session,
                "ubuspath": "/ubus/",
                "pollinterval": 5,
                "view": action["path"],
                "nodespec": self.nodespec(path, entry),
            }
            links = " | ".join(
                f'<a href="/cgi-bin/luci/{k}">{v.get("title", k)}</a>'
                for k, v in sorted(self.menu.items(), key=lambda kv: int(kv[1].get("order", 0)))
                if k.count("/") == 3
            )
            return PAGE.format(title=entry.get("title", path), env=json.dumps(env), menu=links)
        return None

    def nodespec(self, path: str, entry: Dict[str, Any]) -> Dict[str, Any]:
        """`L.env.nodespec` as LuCI's dispatcher sets it: the ACL groups of
        `depends.acl` on every node of the path, `satisfied` when the
        session holds any of them, `readonly` unless one is granted with
        write access (dispatcher.uc check_acl_depends). luci.js's
        hasViewPermission() returns `!nodespec.readonly`."""
        parts = path.split("/")
        groups = []
        for i in range(1, len(parts) + 1):
            node = self.menu.get("/".join(parts[:i])) or {}
            groups += ((node.get("depends") or {}).get("acl") or [])
        acl = self.rpcd.acl
        read = any(acl.access("access-group", g, "read") for g in groups)
        write = any(acl.access("access-group", g, "write") for g in groups)
        return {"satisfied": read or write, "readonly": not write, "title": entry.get("title"),
                "depends": entry.get("depends")}

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)
