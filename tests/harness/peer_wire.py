"""The peer data plane written again in Python, independently of agent-gw:
the forwarding assertion (postcard layout and Ed25519 signature of
ISSUE8.md / `agent-gw/src/peer/assertion.rs`'s doc) and a data-plane
client that holds a router's key — TLS 1.3 with that router's
certificate, ALPN `h2`, HTTP/2 through the `h2` package. Tests use it as
a router that sends correct calls (the positive control: it proves the
encoding) and then misbehaves: replays, expired or over-long assertions,
tampered bodies, wrong targets, signatures by another key, oversized
requests next to good streams on the same connection.

Assertion header value = base64url (no padding) of postcard(Assertion):

    Claims    = source, target, origin, caller, tenant, capability
                (each: varint length + UTF-8), body_sha256 (32 raw bytes),
                nonce (16 raw bytes), expires_ms (varint u64, Unix ms)
    Proof     = index (varint u32), size (varint u32),
                path (varint count + 32 raw bytes each, leaf upwards)
    Assertion = Claims ++ Proof ++ signature (64 raw bytes: two halves)

One signature covers a batch (RFC 9162 Merkle tree, SHA-256):

    leaf      = SHA-256(0x00 ++ postcard(Claims)),  node = SHA-256(0x01 ++ left ++ right)
    signature = Ed25519(b"agentd forwarding batch v2\\0" ++ source ++ target
                        ++ varint(expires_ms) ++ varint(size) ++ root)

(source and target as postcard strings; every leaf of a batch has the
batch's source, target and expiry.) A batch of one has an empty path.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import select
import socket
import ssl
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import h2.config
import h2.connection
import h2.events
import h2.exceptions
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from .arpx_wire import pstr, self_signed_cert, varint
from .mesh import PEER_PORT
from .poll import wait_for

SIGN_LABEL = b"agentd forwarding batch v2\x00"
HEADER = "x-agentd-assertion"


def now_ms() -> int:
    return int(time.time() * 1000)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass
class Claims:
    source: str
    target: str
    origin: str
    caller: str
    tenant: str
    capability: str
    body_sha256: bytes
    nonce: bytes = field(default_factory=lambda: os.urandom(16))
    expires_ms: int = field(default_factory=lambda: now_ms() + 10_000)

    @classmethod
    def for_body(cls, body: bytes, **kw: Any) -> "Claims":
        return cls(body_sha256=hashlib.sha256(body).digest(), **kw)

    def encode(self) -> bytes:
        assert len(self.body_sha256) == 32 and len(self.nonce) == 16
        return b"".join([
            pstr(self.source), pstr(self.target), pstr(self.origin), pstr(self.caller),
            pstr(self.tenant), pstr(self.capability), self.body_sha256, self.nonce, varint(self.expires_ms),
        ])

    def fresh(self, **changes: Any) -> "Claims":
        """A copy with a new nonce (and any `changes`)."""
        return replace(self, nonce=os.urandom(16), **changes)


def leaf_hash(claims: Claims) -> bytes:
    return hashlib.sha256(b"\x00" + claims.encode()).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def merkle(leaves: List[bytes]) -> Tuple[bytes, List[List[bytes]]]:
    """RFC 9162's tree hash of `leaves` and each leaf's audit path."""
    if len(leaves) == 1:
        return leaves[0], [[]]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    left, lp = merkle(leaves[:k])
    right, rp = merkle(leaves[k:])
    return node_hash(left, right), [p + [right] for p in lp] + [p + [left] for p in rp]


def root_message(source: str, target: str, expires_ms: int, size: int, root: bytes) -> bytes:
    return SIGN_LABEL + pstr(source) + pstr(target) + varint(expires_ms) + varint(size) + root


def encode_assertion(claims: Claims, index: int, size: int, path: List[bytes], signature: bytes) -> str:
    assert len(signature) == 64 and all(len(h) == 32 for h in path)
    return b64url(claims.encode() + varint(index) + varint(size) + varint(len(path)) + b"".join(path) + signature)


def batch(claims: List[Claims], key: Ed25519PrivateKey) -> List[str]:
    """The header values of one signed batch (every claim must share the
    first one's source, target and expiry)."""
    c0 = claims[0]
    assert all((c.source, c.target, c.expires_ms) == (c0.source, c0.target, c0.expires_ms) for c in claims)
    root, paths = merkle([leaf_hash(c) for c in claims])
    signature = key.sign(root_message(c0.source, c0.target, c0.expires_ms, len(claims), root))
    return [encode_assertion(c, i, len(claims), p, signature) for i, (c, p) in enumerate(zip(claims, paths))]


def assertion(claims: Claims, key: Ed25519PrivateKey) -> str:
    """The header value: the claims signed by `key` (a batch of one)."""
    return batch([claims], key)[0]


# ---- HTTP/2 over mTLS --------------------------------------------------------


@dataclass
class H2Resp:
    """What one stream got: the answer, or the peer's RST_STREAM code."""

    stream_id: int
    status: Optional[int] = None
    headers: Dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    ended: bool = False
    reset: Optional[int] = None

    @property
    def done(self) -> bool:
        return self.ended or self.reset is not None

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))

    def error(self) -> Dict[str, Any]:
        try:
            value = self.json()
        except (ValueError, UnicodeDecodeError):
            return {}
        return value.get("error", {}) if isinstance(value, dict) else {}

    def describe(self) -> str:
        if self.reset is not None:
            return f"stream {self.stream_id} reset (code {self.reset}) after {self.body[:200]!r}"
        return f"HTTP/2 {self.status} {self.body[:600].decode('utf-8', 'replace')}"


class PeerClient:
    """One HTTP/2 connection to a router's peer listener, as router
    `router_id` (its key and a self-signed certificate for it). Single
    threaded: requests are queued, `pump` drives the socket until a
    condition holds (bounded by a deadline)."""

    def __init__(self, key: Ed25519PrivateKey, router_id: str, workdir: Path) -> None:
        self.key = key
        self.router_id = router_id
        d = Path(tempfile.mkdtemp(prefix="peer-", dir=workdir))
        self.cert_path, self.key_path = d / "cert.pem", d / "key.pem"
        self.cert_path.write_bytes(self_signed_cert(key, router_id))
        self.key_path.write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        self.sock: Optional[ssl.SSLSocket] = None
        self.conn: Optional[h2.connection.H2Connection] = None
        self.streams: Dict[int, H2Resp] = {}
        self._pending: Dict[int, bytes] = {}  # body bytes not yet sent (flow control)
        self._trailers: Dict[int, List[Tuple[str, str]]] = {}  # sent after a stream's body
        self.closed: Optional[str] = None  # why the connection ended (GOAWAY, EOF)
        self.authority = ""

    # ---- connection ----------------------------------------------------------
    def connect(self, addr: str, port: int, authority: str = "", timeout: float = 5.0) -> "PeerClient":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.check_hostname = False
        # Whom we talk to is the test's business; the router checks us.
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["h2"])
        ctx.load_cert_chain(str(self.cert_path), str(self.key_path))
        raw = socket.create_connection((addr, port), timeout=timeout)
        try:
            self.sock = ctx.wrap_socket(raw, server_hostname=None)
        except BaseException:
            raw.close()
            raise
        alpn = self.sock.selected_alpn_protocol()
        if alpn != "h2":
            self.close()
            raise AssertionError(f"peer listener chose ALPN {alpn!r}, not h2")
        self.authority = authority or addr
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self._flush()
        return self

    def close(self) -> None:
        if self.sock is not None:
            try:
                if self.conn is not None and self.closed is None:
                    self.conn.close_connection()
                    self.sock.sendall(self.conn.data_to_send())
            except (OSError, h2.exceptions.ProtocolError):
                pass
            try:
                self.sock.close()
            finally:
                self.sock = None

    def _flush(self) -> None:
        assert self.sock is not None and self.conn is not None
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    # ---- requests ------------------------------------------------------------
    def start(self, method: str, path: str, headers: Mapping[str, str], body: bytes = b"",
              trailers: Optional[Mapping[str, str]] = None, declare_length: bool = True) -> int:
        """Opens a stream; the body follows as flow control allows, then
        `trailers` if given. `declare_length=False` sends no
        content-length (the receiver learns the size as bytes arrive)."""
        assert self.conn is not None
        sid = self.conn.get_next_available_stream_id()
        hdrs: List[Tuple[str, str]] = [
            (":method", method), (":scheme", "https"), (":authority", self.authority), (":path", path),
        ]
        hdrs += [(k.lower(), v) for k, v in headers.items()]
        if body and declare_length:
            hdrs.append(("content-length", str(len(body))))
        self.streams[sid] = H2Resp(sid)
        if trailers is not None:
            self._trailers[sid] = [(k.lower(), v) for k, v in trailers.items()]
        self.conn.send_headers(sid, hdrs, end_stream=not body and trailers is None)
        if body:
            self._pending[sid] = body
            self._send_pending()
        elif trailers is not None:
            self.conn.send_headers(sid, self._trailers.pop(sid), end_stream=True)
        self._flush()
        return sid

    def _send_pending(self) -> None:
        assert self.conn is not None
        for sid in list(self._pending):
            data = self._pending[sid]
            if self.streams[sid].done:
                # Answered or reset before we finished: stop sending.
                del self._pending[sid]
                continue
            try:
                while data:
                    window = min(self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size)
                    if window <= 0:
                        break
                    chunk, data = data[:window], data[window:]
                    self.conn.send_data(sid, chunk, end_stream=not data and sid not in self._trailers)
                if not data and sid in self._trailers:
                    self.conn.send_headers(sid, self._trailers.pop(sid), end_stream=True)
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                data = b""
                self._trailers.pop(sid, None)
            if data:
                self._pending[sid] = data
            else:
                del self._pending[sid]

    def pump(self, until: Callable[[], bool], timeout: float = 15.0) -> None:
        """Reads and handles frames until `until()` holds; raises on
        timeout or if the connection ends first."""
        assert self.sock is not None and self.conn is not None
        deadline = time.monotonic() + timeout
        while not until():
            if self.closed is not None:
                raise ConnectionError(f"peer connection ended: {self.closed}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no condition after {timeout}s; streams: {self.streams}")
            if not self.sock.pending():
                readable, _, _ = select.select([self.sock], [], [], min(remaining, 0.2))
                if not readable:
                    continue
            try:
                data = self.sock.recv(65536)
            except (ConnectionResetError, ssl.SSLError) as e:
                self.closed = f"{type(e).__name__}: {e}"
                continue
            if not data:
                self.closed = "EOF"
                continue
            for ev in self.conn.receive_data(data):
                self._event(ev)
            self._send_pending()
            self._flush()

    def _event(self, ev: Any) -> None:
        assert self.conn is not None
        if isinstance(ev, h2.events.ResponseReceived):
            s = self.streams[ev.stream_id]
            s.headers = {k: v for k, v in ev.headers if not k.startswith(":")}
            s.status = int(dict(ev.headers)[":status"])
        elif isinstance(ev, h2.events.DataReceived):
            self.streams[ev.stream_id].body += ev.data
            self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            self.streams[ev.stream_id].ended = True
        elif isinstance(ev, h2.events.StreamReset):
            if ev.stream_id in self.streams:
                self.streams[ev.stream_id].reset = int(ev.error_code)
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.closed = f"GOAWAY {ev.error_code} {ev.additional_data!r}"

    def wait(self, *sids: int, timeout: float = 15.0) -> List[H2Resp]:
        self.pump(lambda: all(self.streams[s].done for s in sids), timeout=timeout)
        return [self.streams[s] for s in sids]

    def request(self, method: str, path: str, headers: Mapping[str, str], body: bytes = b"",
                timeout: float = 15.0, **kw: Any) -> H2Resp:
        sid = self.start(method, path, headers, body, **kw)
        return self.wait(sid, timeout=timeout)[0]


# ---- a router's forwarded call, built by hand ---------------------------------


def handler_body(intent: str, payload: Any, *, tenant: str = "lab", source_agent: str = "agent://lab/caller",
                 hop_limit: int = 7, task_id: str = "", intent_version: int = 1) -> bytes:
    """The envelope as the sending router forwards it (what a handler would
    receive: hop_limit already decremented)."""
    import uuid

    env = {
        "version": "1.0", "intent": intent, "intent_version": intent_version,
        "task_id": task_id or str(uuid.uuid4()), "source_agent": source_agent, "tenant": tenant,
        "hop_limit": hop_limit, "constraints": {}, "payload": payload,
    }
    return json.dumps(env, separators=(",", ":")).encode()


def forward_headers(assertion_value: str, route_id: str, deadline_ms: int = 10_000,
                    extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    h = {
        HEADER: assertion_value,
        "x-agentd-route-id": route_id,
        "x-agentd-deadline-ms": str(deadline_ms),
        "content-type": "application/json",
    }
    h.update(extra or {})
    return h


# ---- a connection to a router's peer listener, as another router ------------


def connect_as(router: Any, target: Any, workdir: Path, key: Optional[Ed25519PrivateKey] = None) -> PeerClient:
    """A data-plane connection to `target`'s peer listener (its management
    address) claiming to be `router`, with `router`'s key unless told."""
    client = PeerClient(key or router.key.private, router.name, workdir)
    return client.connect(target.ns.mgmt_addr, PEER_PORT, authority=target.name)


def wait_accepted(router: Any, target: Any, workdir: Path) -> PeerClient:
    """`target`'s gateway trusts `router`'s key once the ARPX session's
    link reached it: poll the handshake (a refused one raises) until it is
    accepted."""

    def attempt() -> PeerClient:
        c = connect_as(router, target, workdir)
        try:
            # The server's verdict on our certificate arrives after the
            # client's side of the TLS 1.3 handshake: wait for an answer.
            r = c.request("GET", "/agent/v1/none", forward_headers("", ""), timeout=5)
            assert r.status in (403, 404), r.describe()
            return c
        except BaseException:
            c.close()
            raise

    return wait_for(f"{target.name}'s peer listener to accept {router.name}'s key", attempt, timeout=20, interval=0.2)
