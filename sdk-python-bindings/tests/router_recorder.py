"""A tiny HTTP peer that records what the SDK client sends.

Run as a separate process (``python router_recorder.py [port]``) so it
keeps answering while the test process holds the GIL. It prints
``{"listening": port}`` and then one JSON line per request received
(method, path, headers, body). It keeps an in-memory route table so renew
of a route it does not know answers 404 — which is what a restarted router
does — and scripts a few invoke/stream/task answers for client tests.

This is a recording peer for SDK client unit tests, not a model of the
agentd router; the system tests run the SDK against the real agent-gw.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROUTES = {}
COUNTER = {"route": 0, "stream_connections": 0}
TASK = {"id": "task-1", "token": "tok-123", "polls": 0}
# A task on a router that releases a task once its result is fetched:
# `GET …/result` answers the outcome once, then 410 `result_released`, and
# the status says `result_released: true` without the result.
RELEASING = {"id": "task-2", "token": "tok-456", "released": False}
# Bootstrap mode (argv[2] == "bootstrap"): auth metadata offers trusted-LAN
# bootstrap, tokens are "boot-<n>", and register/renew refuse anything but
# the newest token with 401 (as a router does once a token expired).
MODE = {"bootstrap": False, "tokens": 0}


def public_ipv6_answer(body):
    """The register reply's answer to ``public_ipv6: true`` in the shape
    agent-gw sends (agent-gw/src/front/sdk/public_ipv6.rs): served for
    every capability but ``*.unserved``, which is told why not."""
    if str(body.get("intent", "")).endswith(".unserved"):
        return {"public_ipv6_status": {"address": None, "served": False,
                                       "reason": "ipv6.mode 'off' on this router"}}
    addr = "2001:db8:66::7"
    return {
        "public_ipv6": addr,
        "public_endpoint": {"address": addr, "port": 7443, "scheme": "https",
                            "tls_server_name": "router-a", "ca_bundle_id": "agentd-ca-0011223344556677"},
        "public_port": 7443, "tls_server_name": "router-a", "ca_bundle_id": "agentd-ca-0011223344556677",
        "public_ipv6_status": {"address": addr, "served": True},
    }


def emit(record):
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else None

    def _send(self, status, body, headers=()):
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(raw)

    def _record(self, body):
        emit({
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body,
        })

    def do_GET(self):
        self._record(None)
        if self.path == "/agent/v1/authentication":
            if MODE["bootstrap"]:
                return self._send(200, {"schema_version": 2,
                                        "authentication": {"required": True, "type": "oauth2"},
                                        "bootstrap": {"type": "trusted-lan", "endpoint": "/agent/v1/bootstrap",
                                                      "token_ttl_seconds": 300}})
            return self._send(404, {"error": {"code": "not_found", "message": "no auth metadata"}})
        if self.path.startswith(f"/agent/v1/tasks/{RELEASING['id']}"):
            return self._releasing_task()
        if self.path == f"/agent/v1/tasks/{TASK['id']}":
            if self.headers.get("X-Nexus-Task-Token") != TASK["token"]:
                return self._send(404, {"error": {"code": "not_found", "message": "no such task"}})
            TASK["polls"] += 1
            if TASK["polls"] < 2:
                return self._send(200, {"task_id": TASK["id"], "status": "running"})
            return self._send(200, {"task_id": TASK["id"], "status": "completed", "result": {"done": True}})
        return self._send(404, {"error": {"code": "not_found", "message": self.path}})

    def _releasing_task(self):
        if self.headers.get("X-Nexus-Task-Token") != RELEASING["token"]:
            return self._send(404, {"error": {"code": "not_found", "message": "no such task"}})
        done = {"task_id": RELEASING["id"], "status": "completed"}
        if self.path.endswith("/result"):
            if RELEASING["released"]:
                return self._send(410, {"error": {"code": "result_released",
                                                  "message": "the result was fetched; the task is released"}})
            RELEASING["released"] = True
            return self._send(200, {**done, "result": {"kept": True}})
        if RELEASING["released"]:
            return self._send(200, {**done, "result_released": True})
        return self._send(200, {**done, "result": {"kept": True}})

    def do_DELETE(self):
        self._record(None)
        return self._send(200, {"task_id": TASK["id"], "status": "cancelled"})

    def do_POST(self):
        body = self._body()
        self._record(body)
        if self.path == "/agent/v1/bootstrap":
            MODE["tokens"] += 1
            return self._send(200, {"access_token": f"boot-{MODE['tokens']}", "token_type": "Bearer",
                                    "expires_in": 300, "scope": " ".join(body.get("scopes", [])),
                                    "identity": {"tenant": body.get("tenant"), "origin": body.get("origin")}})
        if MODE["bootstrap"]:
            if self.headers.get("Authorization") != f"Bearer boot-{MODE['tokens']}":
                return self._send(401, {"error": {"code": "unauthenticated", "message": "token expired",
                                                  "reason": "token_expired"}})
            if self.path == "/agent/v1/renew" and MODE["tokens"] == 1:
                # Invalidate the first token at the first renew.
                MODE["tokens"] += 1
                return self._send(401, {"error": {"code": "unauthenticated", "message": "token expired",
                                                  "reason": "token_expired"}})
        if self.path == "/agent/v1/register":
            COUNTER["route"] += 1
            rid = f"r{COUNTER['route']}"
            ROUTES[rid] = body
            reply = {"route_id": rid, "generation": COUNTER["route"], "lease_seconds": body.get("lease_seconds", 30)}
            if body.get("public_ipv6") is True:
                reply.update(public_ipv6_answer(body))
            return self._send(200, reply)
        if self.path == "/agent/v1/renew":
            rid = body.get("route_id")
            if rid not in ROUTES:
                return self._send(404, {"error": {"code": "not_found", "message": f"no route {rid}"}})
            return self._send(200, {"route_id": rid, "generation": 1, "lease_seconds": body.get("lease_seconds", 30)})
        if self.path == "/agent/v1/unregister":
            ROUTES.pop(body.get("route_id"), None)
            return self._send(200, {"route_id": body.get("route_id"), "generation": 1, "lease_seconds": 0,
                                    "removed": True})
        if self.path == "/agent/v1/invoke":
            intent = body.get("intent")
            if intent == "missing":
                return self._send(404, {"error": {"code": "no_route", "message": "no eligible route for missing v1: tenant_access (1 candidate)",
                                                   "outcome": "rejected", "reason": "tenant_access",
                                                   "capability": "missing"}})
            if intent == "limited":
                return self._send(429, {"error": {"code": "rate_limited", "message": "tenant over its rate"}})
            if "respond-async" in (self.headers.get("Prefer") or "") and intent == "demo.release":
                return self._send(202, {"task_id": RELEASING["id"], "status": "running"},
                                  [("X-Nexus-Task-Id", RELEASING["id"]),
                                   ("X-Nexus-Task-Token", RELEASING["token"])])
            if "respond-async" in (self.headers.get("Prefer") or ""):
                return self._send(202, {"task_id": TASK["id"], "status": "running"},
                                  [("X-Nexus-Task-Id", TASK["id"]), ("X-Nexus-Task-Token", TASK["token"])])
            return self._send(200, {"echo": body.get("payload")})
        if self.path == "/agent/v1/invoke-stream":
            return self._stream(body)
        return self._send(404, {"error": {"code": "not_found", "message": self.path}})

    def _stream(self, body):
        COUNTER["stream_connections"] += 1
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.send_header("X-Nexus-Task-Id", body.get("task_id", ""))
        self.end_headers()
        if COUNTER["stream_connections"] == 1:
            # Two events, then the connection drops without the marker.
            self.wfile.write(b"id: 1\ndata: one\n\nid: 2\nevent: tick\ndata: two\n\n")
            self.wfile.flush()
            self.close_connection = True
            return
        # The resume replays from the cursor inclusive (an overlap the
        # client must drop), then finishes.
        self.wfile.write(b"id: 2\nevent: tick\ndata: two\n\nid: 3\ndata: three\n\n"
                         b"id: 4\ndata: four\n\n: nexus-stream-complete\n\n")
        self.wfile.flush()
        self.close_connection = True


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    MODE["bootstrap"] = len(sys.argv) > 2 and sys.argv[2] == "bootstrap"
    ThreadingHTTPServer.allow_reuse_address = True
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    emit({"listening": server.server_address[1]})
    server.serve_forever()


if __name__ == "__main__":
    main()
