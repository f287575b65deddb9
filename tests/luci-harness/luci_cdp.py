"""Headless Debian Chromium driven over the Chrome DevTools Protocol on
its debugging pipe (`--remote-debugging-pipe`: NUL-terminated JSON
messages on fds 3 and 4), with the standard library only. One browser
per test module, one page (target) per view; the browser is stopped by
PID.

A page collects what counts as a JS error: uncaught exceptions
(Runtime.exceptionThrown), console.error/assert calls
(Runtime.consoleAPICalled) and browser log entries of level error
(Log.entryAdded: failed loads, CSP and the like)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import luci_netns

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")

#: Longest wait for one DevTools answer.
CALL_TIMEOUT_S = 60.0


def chromium_binary() -> Optional[str]:
    for c in CHROMIUM_CANDIDATES:
        if os.access(c, os.X_OK):
            return c
    return shutil.which("chromium")


class CdpError(RuntimeError):
    pass


class Browser:
    def __init__(self, binary: str, profile: Path) -> None:
        # Our ends: we write to Chromium's fd 3, read from its fd 4. The
        # child's ends are moved above the low fds so the shell can put
        # them on 3 and 4 without clobbering one with the other.
        to_r, self._to_w = os.pipe()
        self._from_r, from_w = os.pipe()
        to_r, from_w = self._high(to_r), self._high(from_w)
        argv = [binary, "--headless=new", "--remote-debugging-pipe", f"--user-data-dir={profile}",
                "--no-first-run", "--no-default-browser-check", "--disable-gpu", "--disable-extensions",
                "--disable-dev-shm-usage", "--disable-background-networking", "--disable-sync",
                "--disable-component-update", "--metrics-recording-only", "--mute-audio",
                "--window-size=1280,900", "about:blank"]
        if os.geteuid() == 0:
            argv.insert(1, "--no-sandbox")
        # A tiny exec wrapper puts the pipe ends on fds 3 and 4 (the
        # order is safe: both are above 9).
        # In a network namespace of its own (luci_netns says why).
        shell = luci_netns.exec_prefix() + [sys.executable, "-c",
                 "import os, sys; os.dup2(%d, 3); os.dup2(%d, 4); os.close(%d); os.close(%d); "
                 "os.execv(sys.argv[1], sys.argv[1:])" % (to_r, from_w, to_r, from_w)]
        self.log = profile.parent / "chromium.log"
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(shell + argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         pass_fds=(to_r, from_w))
        os.close(to_r)
        os.close(from_w)
        self._id = 0
        self._lock = threading.Lock()
        self._waiting: Dict[int, Any] = {}
        self._answers: Dict[int, Dict[str, Any]] = {}
        self._cond = threading.Condition()
        self.events: Dict[str, List[Dict[str, Any]]] = {}
        self.bad_messages: List[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.version = self.call("Browser.getVersion")

    @staticmethod
    def _high(fd: int) -> int:
        import fcntl
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(fd)
        return high

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_r, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._closed = True
                    self._cond.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                try:
                    msg = json.loads(raw.decode("utf-8", errors="replace"))
                except ValueError as e:
                    # Never let one odd message end the reader (every later
                    # call would then wait out its timeout).
                    self.bad_messages.append(f"{e}: {raw[:200]!r}")
                    continue
                with self._cond:
                    if "id" in msg:
                        self._answers[msg["id"]] = msg
                    else:
                        self.events.setdefault(msg.get("sessionId", ""), []).append(msg)
                    self._cond.notify_all()

    def call(self, method: str, params: Optional[Dict[str, Any]] = None, session: Optional[str] = None,
             timeout: float = CALL_TIMEOUT_S) -> Dict[str, Any]:
        with self._lock:
            self._id += 1
            mid = self._id
            msg: Dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
            if session:
                msg["sessionId"] = session
            os.write(self._to_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cond:
            while mid not in self._answers:
                left = deadline - time.monotonic()
                if left <= 0 or getattr(self, "_closed", False):
                    alive = "running" if self.proc.poll() is None else f"exited {self.proc.returncode}"
                    raise CdpError(f"no answer to {method} within {timeout} s (browser {alive}, "
                                   f"reader {'alive' if self._reader.is_alive() else 'dead'}, log: {self.log})")
                self._cond.wait(left)
            answer = self._answers.pop(mid)
        if "error" in answer:
            raise CdpError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def new_page(self) -> "Page":
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        return Page(self, target, session)

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except CdpError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        for fd in (self._to_w, self._from_r):
            try:
                os.close(fd)
            except OSError:
                pass


class Page:
    def __init__(self, browser: Browser, target: str, session: str) -> None:
        self.browser = browser
        self.target = target
        self.session = session
        for domain in ("Runtime", "Log", "Page"):
            self.call(f"{domain}.enable")

    def call(self, method: str, params: Optional[Dict[str, Any]] = None, **kw: Any) -> Dict[str, Any]:
        return self.browser.call(method, params, session=self.session, **kw)

    def navigate(self, url: str) -> None:
        r = self.call("Page.navigate", {"url": url})
        if r.get("errorText"):
            raise CdpError(f"navigate {url}: {r['errorText']}")

    def eval(self, expression: str, timeout: float = CALL_TIMEOUT_S) -> Any:
        """The value of a JS expression (promises awaited)."""
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                      timeout=timeout)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise CdpError(f"{expression[:80]}: {d.get('exception', {}).get('description') or d.get('text')}")
        return r.get("result", {}).get("value")

    def errors(self) -> List[str]:
        """Every JS error the page reported so far."""
        out: List[str] = []
        for ev in list(self.browser.events.get(self.session, [])):
            m, p = ev.get("method"), ev.get("params", {})
            if m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append("exception: " + str(d.get("exception", {}).get("description") or d.get("text")))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.%s: %s" % (p["type"], " ".join(
                    str(a.get("value", a.get("description", ""))) for a in p.get("args", []))))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                e = p["entry"]
                out.append(f"log: {e.get('text')} {e.get('url', '')}")
        return out

    def screenshot(self, path: Path) -> Path:
        """A PNG of the whole page (not just the viewport)."""
        size = self.call("Page.getLayoutMetrics").get("cssContentSize") or {}
        w, h = int(size.get("width", 1280)), int(min(size.get("height", 900), 6000))
        r = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                 "clip": {"x": 0, "y": 0, "width": max(w, 1), "height": max(h, 1), "scale": 1}})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(r["data"]))
        return path

    def close(self) -> None:
        try:
            self.browser.call("Target.closeTarget", {"targetId": self.target}, timeout=5)
        except CdpError:
            pass
