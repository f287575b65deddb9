"""Load generator for the per-source cap tests, run inside a network
namespace host. Bounded in count and time; prints one JSON summary line.

  flood_client.py halfopen HOST PORT --conns N --hold S
      Opens N TCP connections to HOST:PORT, sends a partial request head on
      each (never completing it), prints `holding` once every connect was
      tried, holds them for S seconds, then reports how many the server
      closed and how many were still open, and closes them all.

  flood_client.py calls HOST PORT --n N --concurrency C --intent I [--payload JSON]
      Makes N POST /agent/v1/invoke calls (C at a time, one connection
      each) and reports every status and error code.
"""

from __future__ import annotations

import argparse
import json
import resource
import select
import socket
import sys
import threading
import time
import uuid
from http.client import HTTPConnection
from typing import Any, Dict, List

PARTIAL_HEAD = b"POST /agent/v1/invoke HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"


def halfopen(host: str, port: int, conns: int, hold: float) -> Dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, conns + 64)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    socks: List[socket.socket] = []
    connect_deadline = time.monotonic() + 30.0
    refused = 0
    for _ in range(conns):
        if time.monotonic() > connect_deadline:
            break
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        if s.connect_ex((host, port)) not in (0, 115):  # 115: EINPROGRESS
            refused += 1
            s.close()
            continue
        socks.append(s)
    # Finish the handshakes (bounded) and send the partial head.
    pending = {s.fileno(): s for s in socks}
    connected: List[socket.socket] = []
    end = time.monotonic() + 10.0
    while pending and time.monotonic() < end:
        # select() is limited to FD_SETSIZE: poll instead.
        p = select.poll()
        for fd in pending:
            p.register(fd, select.POLLOUT)
        for fd, _ in p.poll(200):
            s = pending.pop(fd)
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                try:
                    s.send(PARTIAL_HEAD)
                    connected.append(s)
                except OSError:
                    pass
    print("holding", flush=True)
    # Hold; notice every connection the server closes.
    closed = set()
    by_fd = {s.fileno(): s for s in connected}
    stop = time.monotonic() + hold
    while time.monotonic() < stop and len(closed) < len(by_fd):
        p = select.poll()
        for fd in by_fd:
            if fd not in closed:
                p.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        for fd, _ in p.poll(200):
            try:
                if by_fd[fd].recv(4096, socket.MSG_DONTWAIT) == b"":
                    closed.add(fd)
            except BlockingIOError:
                pass
            except OSError:
                closed.add(fd)
    result = {
        "attempted": conns,
        "connect_refused": refused,
        "connected": len(connected),
        "closed_by_server": len(closed),
        "open_at_end": len(connected) - len(closed),
    }
    for s in socks:
        s.close()
    return result


def calls(host: str, port: int, n: int, concurrency: int, intent: str, payload: Any) -> Dict[str, Any]:
    results: List[Dict[str, Any]] = []
    lock = threading.Lock()
    counter = iter(range(n))

    def worker() -> None:
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            env = {
                "version": "1.0",
                "intent": intent,
                "intent_version": 1,
                "task_id": str(uuid.uuid4()),
                "source_agent": "agent://lab/caller",
                "tenant": "lab",
                "hop_limit": 8,
                "constraints": {},
                "payload": payload if payload is not None else {"i": i},
            }
            t0 = time.monotonic()
            rec: Dict[str, Any] = {"i": i}
            try:
                c = HTTPConnection(host, port, timeout=20.0)
                c.request("POST", "/agent/v1/invoke", body=json.dumps(env), headers={"Content-Type": "application/json"})
                r = c.getresponse()
                body = r.read()
                rec["status"] = r.status
                if r.status != 200:
                    try:
                        err = json.loads(body)["error"]
                        rec["code"] = err.get("code")
                        rec["reason"] = err.get("reason")
                    except (ValueError, KeyError, TypeError):
                        rec["body"] = body[:200].decode(errors="replace")
                c.close()
            except OSError as e:
                rec["status"] = None
                rec["error"] = repr(e)
            rec["s"] = round(time.monotonic() - t0, 3)
            with lock:
                results.append(rec)

    threads = [threading.Thread(target=worker) for _ in range(max(1, concurrency))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60.0)
    ok = sum(1 for r in results if r.get("status") == 200)
    return {"n": n, "ok": ok, "results": sorted(results, key=lambda r: r["i"])}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["halfopen", "calls"])
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("--conns", type=int, default=1500)
    ap.add_argument("--hold", type=float, default=8.0)
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--intent", default="flood.echo")
    ap.add_argument("--payload", default=None)
    a = ap.parse_args()
    if a.conns > 20000 or a.hold > 60 or a.n > 10000:
        print("refusing an unbounded run", file=sys.stderr)
        return 2
    if a.mode == "halfopen":
        out = halfopen(a.host, a.port, a.conns, a.hold)
    else:
        payload = json.loads(a.payload) if a.payload else None
        out = calls(a.host, a.port, a.n, a.concurrency, a.intent, payload)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
