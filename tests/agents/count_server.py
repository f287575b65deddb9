"""A TCP listener that counts the connections it accepts (for tests that
must know how often agentd probes an endpoint). Runs inside a network
namespace host; prints `ready` once listening, then one
`accept <CLOCK_MONOTONIC seconds>` line per accepted connection. Answers
any HTTP request with `200 OK` (so `health_check 'http'` probes pass) and
closes. Stops by itself after --max-seconds or --max-accepts.

Usage: count_server.py HOST PORT [--max-seconds S] [--max-accepts N]
"""

from __future__ import annotations

import argparse
import socket
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("--max-seconds", type=float, default=120.0)
    ap.add_argument("--max-accepts", type=int, default=100_000)
    a = ap.parse_args()
    family = socket.AF_INET6 if ":" in a.host else socket.AF_INET
    ls = socket.socket(family, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((a.host, a.port))
    ls.listen(1024)
    print("ready", flush=True)
    stop_at = time.monotonic() + a.max_seconds
    accepted = 0
    while accepted < a.max_accepts:
        left = stop_at - time.monotonic()
        if left <= 0:
            break
        ls.settimeout(min(left, 1.0))
        try:
            conn, _ = ls.accept()
        except socket.timeout:
            continue
        accepted += 1
        print(f"accept {time.monotonic():.6f}", flush=True)
        # A TCP probe closes at once; an HTTP probe sends a request head.
        conn.settimeout(0.5)
        try:
            data = conn.recv(1024)
            if data.startswith(b"GET "):
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        except OSError:
            pass
        finally:
            conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
