"""ARPX written again in Python, independently of the `arpx` crate: postcard
encoding of the messages (the spec at postcard.jamesmunns.com), origin
signatures with `cryptography`, and a TLS 1.3 client holding a router key
and certificate. Tests use it as a peer that misbehaves on purpose
(garbage, looped paths, forged owners, sequence gaps, too many routes)
and as a second reading of the wire format.

Message layout (enum variants by index, struct fields in order; integers
as LEB128 varints; strings and byte strings length-prefixed):

    Message = Open(0) | Heartbeat(1) | Update(2) | Withdraw(3)
            | SnapshotBegin(4){version} | SnapshotEnd(5){version} | Close(6)
"""

from __future__ import annotations

import datetime
import hashlib
import socket
import ssl
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.x509.oid import NameOID

PROTOCOL_VERSION = 2
SIGN_LABEL = b"agentd arpx route v2\x00"

CLOSE_CODES = [
    "AdminShutdown", "PeerRemoved", "UnsupportedVersion", "IdentityMismatch", "HoldExpired",
    "SequenceGap", "FrameTooLarge", "Decode", "InvalidMessage", "UnexpectedMessage",
    "LoopDetected", "BadSignature", "RouteLimit", "Collision",
]
EFFECTS = ["Read", "Write", "External"]
# How an origin was proven at its router (weakest first; signed).
PROOFS = ["None", "Bootstrap", "Static", "Jwt"]


# ---- postcard --------------------------------------------------------------


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pstr(s: str) -> bytes:
    b = s.encode()
    return varint(len(b)) + b


def pbytes(b: bytes) -> bytes:
    return varint(len(b)) + b


def pvec(items: List[bytes]) -> bytes:
    return varint(len(items)) + b"".join(items)


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def varint(self) -> int:
        n, shift = 0, 0
        while True:
            b = self.data[self.at]
            self.at += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n

    def raw(self, n: int) -> bytes:
        out = self.data[self.at:self.at + n]
        if len(out) != n:
            raise ValueError("truncated")
        self.at += n
        return out

    def str(self) -> str:
        return self.raw(self.varint()).decode()

    def bytes(self) -> bytes:
        return self.raw(self.varint())

    def bool(self) -> bool:
        return self.raw(1) != b"\x00"


# ---- routes ------------------------------------------------------------------


@dataclass
class RouteAd:
    route_id: str
    origin_router: str
    path: List[str]
    capability: str = "demo.echo"
    version: int = 1
    origin_agent: str = "agent://lab/echo"
    tenant: str = "lab"
    region: str = ""
    attrs: Tuple[int, int, int, int] = (1, 0, 0, 50)  # latency, cost, load, trust
    allowed_tenants: List[str] = field(default_factory=list)
    allowed_sources: List[str] = field(default_factory=list)
    contract: Optional[Tuple[str, bool, bytes]] = None  # effect, idempotent, digest
    origin_key: bytes = b"\x00" * 32
    serial: int = 1
    signature: bytes = b"\x00" * 64
    lease_ms: int = 30000
    proof: str = "Jwt"
    trust_limit: int = 100
    proof_limit: str = "Jwt"
    origin_cert: bytes = b""

    def _stable(self) -> bytes:
        contract = b"\x00"
        if self.contract is not None:
            eff, idem, digest = self.contract
            contract = b"\x01" + varint(EFFECTS.index(eff)) + (b"\x01" if idem else b"\x00") + pbytes(digest)
        return b"".join([
            pstr(self.route_id), pstr(self.capability), varint(self.version), pstr(self.origin_agent),
            pstr(self.tenant), pstr(self.region), b"".join(varint(a) for a in self.attrs),
            pvec([pstr(t) for t in self.allowed_tenants]), pvec([pstr(s) for s in self.allowed_sources]),
            contract, pstr(self.origin_router), pbytes(self.origin_key), varint(self.serial),
        ])

    def sign(self, key: Ed25519PrivateKey) -> "RouteAd":
        # The signed bytes: the stable fields in wire order, then the proof
        # (signed, though it travels after the path).
        self.origin_key = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.signature = key.sign(SIGN_LABEL + self._stable() + varint(PROOFS.index(self.proof)))
        return self

    def encode(self) -> bytes:
        return (self._stable() + pbytes(self.signature) + varint(self.lease_ms) + pvec([pstr(p) for p in self.path])
                + varint(PROOFS.index(self.proof)) + varint(self.trust_limit) + varint(PROOFS.index(self.proof_limit))
                + pbytes(self.origin_cert))


def decode_route(r: Reader) -> Dict[str, Any]:
    ad: Dict[str, Any] = {
        "route_id": r.str(), "capability": r.str(), "version": r.varint(), "origin_agent": r.str(),
        "tenant": r.str(), "region": r.str(), "attrs": [r.varint() for _ in range(4)],
        "allowed_tenants": [r.str() for _ in range(r.varint())],
        "allowed_sources": [r.str() for _ in range(r.varint())],
    }
    if r.bool():
        ad["contract"] = (EFFECTS[r.varint()], r.bool(), r.bytes())
    else:
        ad["contract"] = None
    ad.update(origin_router=r.str(), origin_key=r.bytes(), serial=r.varint(), signature=r.bytes(),
              lease_ms=r.varint(), path=[r.str() for _ in range(r.varint())])
    ad.update(proof=PROOFS[r.varint()], trust_limit=r.varint(), proof_limit=PROOFS[r.varint()],
              origin_cert=r.bytes())
    return ad


# ---- messages ----------------------------------------------------------------


def open_msg(router_id: str, domain: str = "", boot_epoch: int = 1, heartbeat_ms: int = 1000,
             version: int = PROTOCOL_VERSION) -> bytes:
    return varint(0) + varint(version) + pstr(router_id) + pstr(domain) + varint(boot_epoch) + varint(heartbeat_ms) + b"\x00"


def heartbeat() -> bytes:
    return varint(1)


def update(seq: int, routes: List[RouteAd]) -> bytes:
    return varint(2) + varint(seq) + pvec([r.encode() for r in routes])


def withdraw(seq: int, route_ids: List[str]) -> bytes:
    return varint(3) + varint(seq) + pvec([pstr(i) for i in route_ids])


def snapshot_begin(version: int) -> bytes:
    return varint(4) + varint(version)


def snapshot_end(version: int) -> bytes:
    return varint(5) + varint(version)


def frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def decode(body: bytes) -> Dict[str, Any]:
    """One message as a dict with its `type`; raises on anything else."""
    r = Reader(body)
    tag = r.varint()
    if tag == 0:
        msg = {"type": "open", "version": r.varint(), "router_id": r.str(), "domain": r.str(),
               "boot_epoch": r.varint(), "heartbeat_ms": r.varint(), "reflector_client": r.bool()}
    elif tag == 1:
        msg = {"type": "heartbeat"}
    elif tag == 2:
        seq = r.varint()
        msg = {"type": "update", "seq": seq, "routes": [decode_route(r) for _ in range(r.varint())]}
    elif tag == 3:
        seq = r.varint()
        msg = {"type": "withdraw", "seq": seq, "route_ids": [r.str() for _ in range(r.varint())]}
    elif tag in (4, 5):
        msg = {"type": "snapshot_begin" if tag == 4 else "snapshot_end", "version": r.varint()}
    elif tag == 6:
        msg = {"type": "close", "code": CLOSE_CODES[r.varint()], "reason": r.str()}
    else:
        raise ValueError(f"unknown message tag {tag}")
    if r.at != len(body):
        raise ValueError(f"{len(body) - r.at} trailing bytes")
    return msg


# ---- a TLS peer --------------------------------------------------------------


def self_signed_cert(key: Ed25519PrivateKey, router_id: str) -> bytes:
    """A self-signed Ed25519 certificate naming `router_id` (what a router
    without a domain certificate presents, made here independently)."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, router_id)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(router_id)]), critical=False)
        .sign(key, None)
    )
    return cert.public_bytes(serialization.Encoding.PEM)


class RoguePeer:
    """A TLS 1.3 client with a router identity that speaks raw ARPX."""

    def __init__(self, key: Ed25519PrivateKey, router_id: str, workdir: Path) -> None:
        self.key = key
        self.router_id = router_id
        d = Path(tempfile.mkdtemp(prefix="rogue-", dir=workdir))
        self.cert_path = d / "cert.pem"
        self.key_path = d / "key.pem"
        self.cert_path.write_bytes(self_signed_cert(key, router_id))
        self.key_path.write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        self.sock: Optional[ssl.SSLSocket] = None
        self.buf = b""

    def connect(self, addr: str, port: int, timeout: float = 5.0, source: Optional[str] = None) -> None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.check_hostname = False
        # The router's certificate is checked by the test's expectations
        # (a rogue peer does not care whom it talks to).
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["arpx/1"])
        ctx.load_cert_chain(str(self.cert_path), str(self.key_path))
        raw = socket.create_connection((addr, port), timeout=timeout,
                                       source_address=(source, 0) if source else None)
        self.sock = ctx.wrap_socket(raw, server_hostname=None)
        self.sock.settimeout(timeout)

    def send(self, body: bytes) -> None:
        assert self.sock is not None
        self.sock.sendall(frame(body))

    def send_raw(self, data: bytes) -> None:
        assert self.sock is not None
        self.sock.sendall(data)

    def recv(self) -> Optional[Dict[str, Any]]:
        """The next message, or None at EOF."""
        assert self.sock is not None
        while True:
            if len(self.buf) >= 4:
                (n,) = struct.unpack(">I", self.buf[:4])
                if len(self.buf) >= 4 + n:
                    body, self.buf = self.buf[4:4 + n], self.buf[4 + n:]
                    return decode(body)
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, ssl.SSLError):
                return None
            if not chunk:
                return None
            self.buf += chunk

    def recv_until(self, kind: str, limit: int = 100000) -> Optional[Dict[str, Any]]:
        """Messages up to the first of `kind` (heartbeats and the router's
        own snapshot are skipped); None at EOF."""
        for _ in range(limit):
            msg = self.recv()
            if msg is None or msg["type"] == kind:
                return msg
        raise AssertionError(f"no {kind} within {limit} messages")

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None


def fingerprint_of(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + hashlib.sha256(raw).hexdigest()
