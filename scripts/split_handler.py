#!/usr/bin/env python3
"""A handler that answers like Python's `http.server` -- and so like the
nexilume SDK's handler server -- does: HTTP/1.1 keep-alive, the response
head in one write and the body in a second, with Nagle on (no
TCP_NODELAY). Echoes the request body. For `make bench-local`'s
`split_handler` row.

Usage: split_handler.py [IP]   -- prints "listening IP:PORT" and serves
until SIGTERM."""

from __future__ import annotations

import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args: object) -> None:
        return

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()  # the head: one write
        self.wfile.write(body)  # the body: another


def main() -> None:
    ip = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1"
    server = ThreadingHTTPServer((ip, 0), Handler)
    server.daemon_threads = True
    print(f"listening {ip}:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
