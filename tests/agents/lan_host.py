"""What one LAN host does in the ownership and flood tests; runs inside a
network namespace (`ip netns exec`), so every request leaves from that
host's own address. Standard library only.

usage:
  lan_host.py serve PORT TAG
      HTTP handler on 0.0.0.0:PORT inside the namespace; every POST is
      answered {"tag": TAG}. Prints {"ready": true}; runs until stdin closes.
  lan_host.py post URL BODY_JSON [TOKEN]
      One request (a GET when BODY_JSON is null); prints {"status", "body"}.
  lan_host.py flood GW_URL MAX_ATTEMPTS MAX_SECONDS ENDPOINT THREADS
      A registration storm, bounded by attempts and time: every attempt a
      new capability of one of 16 origins. Prints the count per answer
      ({"200": n, "429 rate_limited": n, ...}), the Retry-After values seen
      and the attempts made.
  lan_host.py steady GW_URL ENDPOINT SECONDS
      The well-behaved host: during SECONDS registers a few routes, renews
      them and invokes its capability, about 10 operations per second.
      Prints {"ok": n, "failed": n, "failures": [...]}.
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _conn(url: str) -> http.client.HTTPConnection:
    u = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=10)


def _call(conn, method, path, body=None, token=""):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    data = None if body is None else json.dumps(body).encode()
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    raw = r.read()
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = raw.decode("utf-8", "replace")
    return r.status, doc, r.getheader("Retry-After")


def serve(port: int, tag: str) -> None:
    class H(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            n = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(n)
            body = json.dumps({"tag": tag}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("0.0.0.0", port), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    print(json.dumps({"ready": True}), flush=True)
    sys.stdin.read()
    srv.shutdown()


def post(url: str, body_json: str, token: str) -> None:
    u = urllib.parse.urlsplit(url)
    body = json.loads(body_json)
    c = _conn(url)
    status, doc, _ = _call(c, "GET" if body is None else "POST", u.path, body, token)
    print(json.dumps({"status": status, "body": doc}))


def registration(intent: str, origin: str, endpoint: str, lease: int = 30) -> dict:
    return {
        "intent": intent,
        "origin": origin,
        "endpoint": endpoint,
        "tenant": "lab",
        "version": 1,
        "lease_seconds": lease,
    }


def flood(gw: str, max_attempts: int, max_seconds: float, endpoint: str, threads: int) -> None:
    counts: dict = {}
    retry_after: set = set()
    lock = threading.Lock()
    next_i = [0]
    stop_at = time.monotonic() + max_seconds

    def worker() -> None:
        c = _conn(gw)
        while time.monotonic() < stop_at:
            with lock:
                i = next_i[0]
                if i >= max_attempts:
                    return
                next_i[0] += 1
            reg = registration(f"flood.c{i}", f"agent://lab/flood{i % 16}", endpoint)
            try:
                status, doc, ra = _call(c, "POST", "/agent/v1/register", reg)
                code = doc["error"]["code"] if isinstance(doc, dict) and "error" in doc else ""
                key = f"{status} {code}".strip()
            except (OSError, http.client.HTTPException) as e:
                key, ra = f"transport {type(e).__name__}", None
                c = _conn(gw)
            with lock:
                counts[key] = counts.get(key, 0) + 1
                if ra is not None:
                    retry_after.add(ra)

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    start = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(
        json.dumps(
            {
                "counts": counts,
                "retry_after": sorted(retry_after),
                "attempts": next_i[0],
                "seconds": round(time.monotonic() - start, 2),
            }
        )
    )


def steady(gw: str, endpoint: str, seconds: float) -> None:
    c = _conn(gw)
    ok, failed, failures = 0, 0, []
    routes = []
    stop_at = time.monotonic() + seconds
    i = 0

    def record(what, status, doc):
        nonlocal ok, failed
        if status == 200:
            ok += 1
        else:
            failed += 1
            if len(failures) < 20:
                failures.append({"op": what, "status": status, "body": doc})

    while time.monotonic() < stop_at:
        step = i % 4
        try:
            if step == 0 and len(routes) < 8:
                st, doc, _ = _call(c, "POST", "/agent/v1/register",
                                   registration(f"steady.c{len(routes)}", "agent://lab/steady", endpoint))
                record("register", st, doc)
                if st == 200:
                    routes.append(doc["route_id"])
            elif step == 1 and routes:
                st, doc, _ = _call(c, "POST", "/agent/v1/renew", {"route_id": routes[i % len(routes)]})
                record("renew", st, doc)
            else:
                env = {
                    "version": "1.0", "intent": "steady.c0", "intent_version": 1,
                    "task_id": str(uuid.uuid4()), "source_agent": "agent://lab/steady-caller",
                    "tenant": "lab", "hop_limit": 8, "payload": {"i": i},
                }
                st, doc, _ = _call(c, "POST", "/agent/v1/invoke", env)
                if st == 200 and doc != {"tag": "steady"}:
                    st = -1
                record("invoke", st, doc)
        except (OSError, http.client.HTTPException) as e:
            record("transport", 0, type(e).__name__)
            c = _conn(gw)
        i += 1
        time.sleep(0.1)
    print(json.dumps({"ok": ok, "failed": failed, "failures": failures, "routes": routes}))


def main() -> None:
    cmd = sys.argv[1]
    if cmd == "serve":
        serve(int(sys.argv[2]), sys.argv[3])
    elif cmd == "post":
        post(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "")
    elif cmd == "flood":
        flood(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5], int(sys.argv[6]))
    elif cmd == "steady":
        steady(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
