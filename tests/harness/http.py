"""A small HTTP/1.1 client for the gateway's SDK API.

`http.client` for ordinary calls (bodies are sent byte for byte, so
malformed JSON and duplicate keys reach the server as written), a raw
socket for the oversized-body case (the server may answer and close before
the whole body is sent), and an SSE reader that can stop after N events
and drop the connection.
"""

from __future__ import annotations

import http.client
import json
import ssl
import socket
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple


@dataclass
class Resp:
    status: int
    headers: Dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))

    def header(self, name: str) -> Optional[str]:
        return self.headers.get(name.lower())

    def error_code(self) -> Optional[str]:
        """`error.code` of a gateway error body, or None if there is none."""
        try:
            value = self.json()
        except (ValueError, UnicodeDecodeError):
            return None
        if isinstance(value, dict) and isinstance(value.get("error"), dict):
            code = value["error"].get("code")
            return code if isinstance(code, str) else None
        return None

    def describe(self) -> str:
        text = self.body[:600].decode("utf-8", "replace")
        return f"HTTP {self.status} {text}"


def envelope(
    intent: str,
    payload: Any,
    *,
    tenant: str = "lab",
    source_agent: str = "agent://lab/caller",
    intent_version: int = 1,
    task_id: Optional[str] = None,
    hop_limit: int = 8,
    constraints: Optional[Mapping[str, Any]] = None,
    target_agent: Optional[str] = None,
) -> Dict[str, Any]:
    """The Nexus envelope of docs/sdk-api.md."""
    value: Dict[str, Any] = {
        "version": "1.0",
        "intent": intent,
        "intent_version": intent_version,
        "task_id": task_id or str(uuid.uuid4()),
        "source_agent": source_agent,
        "tenant": tenant,
        "hop_limit": hop_limit,
        "constraints": dict(constraints or {}),
        "payload": payload,
    }
    if target_agent is not None:
        value["target_agent"] = target_agent
    return value


@dataclass
class SseEvent:
    id: Optional[str]
    event: Optional[str]
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


@dataclass
class SseRead:
    """What one SSE connection delivered before it ended or was dropped."""

    status: int
    headers: Dict[str, str]
    events: List[SseEvent] = field(default_factory=list)
    complete: bool = False
    error_body: bytes = b""


class Http:
    """Client bound to one `host:port`."""

    def __init__(self, host: str, port: int, timeout: float = 15.0, tls: Optional[ssl.SSLContext] = None) -> None:
        """`tls`: speak HTTPS with this client context (the public listener)."""
        self.host = host
        self.port = port
        self.timeout = timeout
        self.tls = tls

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def _connection(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        t = timeout or self.timeout
        if self.tls is not None:
            return http.client.HTTPSConnection(self.host, self.port, timeout=t, context=self.tls)
        return http.client.HTTPConnection(self.host, self.port, timeout=t)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
    ) -> Resp:
        """`body`: bytes as is, str as UTF-8, anything else as JSON."""
        raw: Optional[bytes]
        if body is None:
            raw = None
        elif isinstance(body, bytes):
            raw = body
        elif isinstance(body, str):
            raw = body.encode("utf-8")
        else:
            raw = json.dumps(body, separators=(",", ":")).encode("utf-8")
        hdrs = {"Content-Type": "application/json"} if raw is not None else {}
        hdrs.update(headers or {})
        conn = self._connection(timeout)
        try:
            conn.request(method, path, body=raw, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read()
            return Resp(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
        finally:
            conn.close()

    def get(self, path: str, **kw: Any) -> Resp:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any, **kw: Any) -> Resp:
        return self.request("POST", path, body=body, **kw)

    def healthz(self) -> Dict[str, Any]:
        r = self.get("/healthz", timeout=2.0)
        if r.status != 200:
            raise AssertionError(f"/healthz: {r.describe()}")
        return r.json()

    def raw_exchange(self, head: bytes, body_chunks: List[bytes], timeout: float = 15.0) -> Resp:
        """Send a request head and body chunks on a raw socket while reading
        the answer concurrently, so a server that answers and closes before
        the whole body is written (what a gateway that stops reading at its
        size limit does) is heard before our further writes provoke a reset.
        The write side is never half-closed: an HTTP/1.1 server may take
        that for a client that went away."""
        sock = socket.create_connection((self.host, self.port), timeout=timeout)

        def send() -> None:
            try:
                sock.sendall(head)
                for chunk in body_chunks:
                    sock.sendall(chunk)
            except OSError:
                pass  # the server stopped reading: expected for refusals

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        data = b""
        try:
            while not _complete_response(data):
                try:
                    chunk = sock.recv(65536)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                data += chunk
        finally:
            sock.close()
            sender.join(timeout=timeout)
        return _parse_response(data)

    def stream(
        self,
        path: str,
        body: Any,
        headers: Optional[Mapping[str, str]] = None,
        stop_after: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> SseRead:
        """POST and read an SSE response. With `stop_after`, close the
        connection right after that many events (a client disconnect)."""
        raw = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":")).encode()
        hdrs = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        hdrs.update(headers or {})
        conn = self._connection(timeout)
        try:
            conn.request("POST", path, body=raw, headers=hdrs)
            resp = conn.getresponse()
            headers_out = {k.lower(): v for k, v in resp.getheaders()}
            out = SseRead(resp.status, headers_out)
            if resp.status != 200 or "text/event-stream" not in headers_out.get("content-type", ""):
                out.error_body = resp.read()
                return out
            for item in iter_sse(resp):
                if item == "complete":
                    out.complete = True
                    break
                assert isinstance(item, SseEvent)
                out.events.append(item)
                if stop_after is not None and len(out.events) >= stop_after:
                    break
            return out
        finally:
            # Closing without reading the rest is the client disconnect.
            sock = getattr(conn, "sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            conn.close()


def iter_sse(resp: http.client.HTTPResponse) -> Iterator[Any]:
    """Yield `SseEvent`s and the string "complete" for the
    `: nexus-stream-complete` comment."""
    ev_id: Optional[str] = None
    ev_name: Optional[str] = None
    data: List[str] = []
    while True:
        line_b = resp.readline()
        if not line_b:
            return
        line = line_b.decode("utf-8").rstrip("\r\n")
        if line == "":
            if data:
                yield SseEvent(ev_id, ev_name, "\n".join(data))
            ev_id, ev_name, data = None, None, []
            continue
        if line.startswith(":"):
            if line.strip() == ": nexus-stream-complete":
                yield "complete"
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "id":
            ev_id = value
        elif name == "event":
            ev_name = value


def _split_head(data: bytes) -> Tuple[bytes, bytes]:
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        raise ValueError(f"incomplete HTTP response: {data[:200]!r}")
    return head, rest


def _complete_response(data: bytes) -> bool:
    if b"\r\n\r\n" not in data:
        return False
    head, rest = _split_head(data)
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(rest) >= int(value.strip())
    return False


def _parse_response(data: bytes) -> Resp:
    head, rest = _split_head(data)
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    headers: Dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower().decode()] = value.strip().decode()
    length = headers.get("content-length")
    body = rest[: int(length)] if length is not None else rest
    return Resp(status, headers, body)
