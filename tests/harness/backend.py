"""A plain-HTTP agent handler endpoint (no SDK) that the gateway forwards
to. It records every request it receives, so tests can check what reached
the handler (identity overwrite, relayed headers, how often a stream
producer ran), and it behaves by intent suffix:

- `*.echo`   200 `{"echo": payload, "tenant", "source_agent", "route_id"}`
- `*.stream` SSE: `payload.count` events (`id: n`, `data: {"n": n}`), then
             `: nexus-stream-complete`, connection closed; all in one write,
             or one event per `payload.pace_ms`; finished streams are
             recorded in `streams_finished`, broken ones in `peer_closed`
- `*.slow`   blocks until the test calls `release()` (bounded by
             `payload.max_s`, default 10 s), then answers like echo; if the
             caller closes the connection first (a propagated cancel), it
             records the call in `peer_closed` and answers nothing
- `*.relay`  (with `relay_url`) a misconfigured proxy agent: POSTs the body
             it received, unchanged, to `relay_url` (a gateway's invoke URL)
             (with `relay_headers`) and answers with that answer's status and body
"""

from __future__ import annotations

import http.client
import json
import select
import socket
import struct
import subprocess
import threading
import time
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional


class _Server(ThreadingHTTPServer):
    """A handler server whose listen queue takes a burst. socketserver's
    default backlog is 5: when a gateway opens hundreds of connections at
    once (the relay's 256-call test) and this one accept thread falls
    behind on a loaded machine, the kernel drops the SYNs it cannot
    queue and each client retries after 1, 3, 7, 15 … s, so calls reach
    the handler tens of seconds late. The tests that use this server
    measure the gateway and the mesh, not a handler's accept queue, so it
    takes the burst. (An agent on Python's `http.server` keeps the backlog
    of 5 and would see the same delays under such a burst of new
    connections.)"""

    request_queue_size = 1024
    #: Cleared while the handler stops accepting (`Backend.pause_accept`).
    accepting: threading.Event

    def get_request(self) -> Any:
        self.accepting.wait(timeout=60)
        return super().get_request()


@dataclass
class Received:
    path: str
    headers: Dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Backend:
    def __init__(self, host: str = "127.0.0.1", path: str = "/invoke", reset_all: bool = False,
                 relay_url: Optional[str] = None, relay_headers: Optional[Dict[str, str]] = None,
                 backlog: int = _Server.request_queue_size) -> None:
        self.path = path
        self.relay_url = relay_url
        self.relay_headers = dict(relay_headers or {})
        # reset_all: read each request, then drop the connection without a
        # byte of answer (a handler that may have run; outcome `unknown`).
        self.reset_all = reset_all
        self._lock = threading.Lock()
        self.received: List[Received] = []
        self.answered: List[Received] = []
        self.peer_closed: List[Received] = []
        self.streams_finished: List[Received] = []
        self._release = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:  # noqa: N802
                if self.path == "/healthz":
                    owner._send_json(self, 200, {"status": "ok"})
                else:
                    owner._send_json(self, 404, {"code": "NOT_FOUND", "message": "no such path"})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                rec = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with owner._lock:
                    owner.received.append(rec)
                owner._dispatch(self, rec)

        # backlog: the listen queue; 5 is what an agent on Python's
        # http.server (nexilume's handler server) has.
        server = _Server if backlog == _Server.request_queue_size else type(
            "_Backlogged", (_Server,), {"request_queue_size": backlog})
        self._server = server((host, 0), Handler)
        self._server.accepting = threading.Event()
        self._server.accepting.set()
        self._server.daemon_threads = True
        self.host, self.port = self._server.server_address[:2]
        self._thread = threading.Thread(target=self._server.serve_forever, name="backend", daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}{self.path}"

    def release(self) -> None:
        """Let every blocked `*.slow` call answer."""
        self._release.set()

    def pause_accept(self) -> None:
        """Stop accepting connections (as a handler busy in its one accept
        thread): the kernel queues them up to the backlog, then drops
        SYNs."""
        self._server.accepting.clear()

    def resume_accept(self) -> None:
        self._server.accepting.set()

    def accept_queue(self) -> int:
        """Connections the kernel completed that wait to be accepted (the
        listening socket's Recv-Q)."""
        out = subprocess.run(["ss", "-Hltn", f"src {self.host}:{self.port}"], check=True,
                             capture_output=True, text=True, timeout=10).stdout.split()
        return int(out[1]) if len(out) > 1 else 0

    def calls(self, intent: Optional[str] = None) -> List[Received]:
        with self._lock:
            items = list(self.received)
        if intent is None:
            return items
        out = []
        for rec in items:
            try:
                if rec.json().get("intent") == intent:
                    out.append(rec)
            except ValueError:
                pass
        return out

    def close(self) -> None:
        self._release.set()
        self._server.accepting.set()
        self._server.shutdown()
        self._server.server_close()

    # ---- behaviour ---------------------------------------------------------
    @staticmethod
    def _send_json(req: BaseHTTPRequestHandler, status: int, value: Any, close: bool = False) -> None:
        data = json.dumps(value).encode()
        req.send_response(status)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(data)))
        if close:
            req.send_header("Connection", "close")
        req.end_headers()
        req.wfile.write(data)

    def _dispatch(self, req: BaseHTTPRequestHandler, rec: Received) -> None:
        if self.reset_all:
            conn = req.connection
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()
            req.close_connection = True
            return
        try:
            env = rec.json()
        except ValueError:
            self._send_json(req, 400, {"code": "INVALID_JSON", "message": "handler got invalid JSON"})
            return
        intent = str(env.get("intent", ""))
        payload = env.get("payload")
        answer = {
            "echo": payload,
            "intent": intent,
            "tenant": env.get("tenant"),
            "source_agent": env.get("source_agent"),
            "route_id": rec.headers.get("x-agentd-route-id"),
            "deadline_ms": rec.headers.get("x-agentd-deadline-ms"),
        }
        if intent.endswith(".stream"):
            count = int(payload.get("count", 3)) if isinstance(payload, dict) else 3
            req.send_response(200)
            req.send_header("Content-Type", "text/event-stream")
            req.send_header("Cache-Control", "no-store")
            req.send_header("Connection", "close")
            req.end_headers()
            pace_ms = int(payload.get("pace_ms", 0)) if isinstance(payload, dict) else 0
            size = int(payload.get("size", 0)) if isinstance(payload, dict) else 0
            pad = {"pad": "x" * size} if size else {}
            chunks = [f"id: {n}\nevent: message\ndata: {json.dumps({'n': n, **pad})}\n\n" for n in range(1, count + 1)]
            chunks.append(": nexus-stream-complete\n\n")
            try:
                if pace_ms:
                    # One event per write, paced like a real producer.
                    for chunk in chunks:
                        req.wfile.write(chunk.encode())
                        req.wfile.flush()
                        time.sleep(pace_ms / 1000)
                else:
                    # One write for the whole stream: the producer finishes at once.
                    req.wfile.write("".join(chunks).encode())
                    req.wfile.flush()
                with self._lock:
                    self.streams_finished.append(rec)
            except (BrokenPipeError, ConnectionResetError):
                with self._lock:
                    self.peer_closed.append(rec)
            req.close_connection = True
            return
        if intent.endswith(".relay") and self.relay_url:
            self._relay(req, rec.body)
            return
        if intent.endswith(".slow"):
            max_s = float(payload.get("max_s", 10)) if isinstance(payload, dict) else 10.0
            if not self._wait_or_peer_close(req, max_s):
                with self._lock:
                    self.peer_closed.append(rec)
                return
        self._send_json(req, 200, answer)
        with self._lock:
            self.answered.append(rec)

    def _relay(self, req: BaseHTTPRequestHandler, body: bytes) -> None:
        assert self.relay_url is not None
        u = urllib.parse.urlsplit(self.relay_url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        try:
            conn.request("POST", u.path, body=body, headers={"Content-Type": "application/json", **self.relay_headers})
            r = conn.getresponse()
            status, data = r.status, r.read()
        finally:
            conn.close()
        req.send_response(status)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(data)))
        req.end_headers()
        req.wfile.write(data)

    def _wait_or_peer_close(self, req: BaseHTTPRequestHandler, max_s: float) -> bool:
        """Wait for `release()` (True) or for the caller to close the
        connection (False: a cancel that reached the handler)."""
        conn = req.connection
        deadline = time.monotonic() + max_s
        while not self._release.is_set() and time.monotonic() < deadline:
            readable, _, _ = select.select([conn], [], [], 0.05)
            if readable:
                try:
                    if conn.recv(1, socket.MSG_PEEK) == b"":
                        return False
                except OSError:
                    return False
        return True


def registration(
    intent: str,
    endpoint: str,
    *,
    tenant: str = "lab",
    name: str = "echo",
    version: int = 1,
    lease_seconds: Optional[int] = None,
    **extra: Any,
) -> Dict[str, Any]:
    """A registration body in the nexilume `CapabilityRegistration` shape."""
    body: Dict[str, Any] = {
        "intent": intent,
        "origin": f"agent://{tenant}/{name}",
        "endpoint": endpoint,
        "tenant": tenant,
        "version": version,
        "region": "local",
        "cost_microunits": 0,
        "latency_ms": 0,
        "trust": 50,
        "load_permille": 0,
        "hop_count": 0,
    }
    if lease_seconds is not None:
        body["lease_seconds"] = lease_seconds
    body.update(extra)
    return body
