"""EdDSA (Ed25519, RFC 8037) JWTs minted in Python with `cryptography`, so
the gateway's verifier is checked against an independent implementation."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass
class TenantKey:
    """An Ed25519 key pair; `uci_value` is the `jwt_key` list item."""

    private: Ed25519PrivateKey

    @classmethod
    def generate(cls) -> "TenantKey":
        return cls(Ed25519PrivateKey.generate())

    @property
    def public_raw(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )

    @property
    def uci_value(self) -> str:
        return "ed25519:" + base64.b64encode(self.public_raw).decode("ascii")

    def mint(
        self,
        *,
        tenant: str,
        sub: str,
        scopes: Sequence[str],
        aud: str,
        iss: Optional[str] = None,
        lifetime: int = 300,
        iat: Optional[int] = None,
        extra: Optional[Dict[str, Any]] = None,
    ) -> str:
        now = int(time.time()) if iat is None else iat
        claims: Dict[str, Any] = {
            "iss": iss or f"tenant:{tenant}",
            "sub": sub,
            "tenant": tenant,
            "scope": " ".join(scopes),
            "aud": aud,
            "iat": now,
            "exp": now + lifetime,
        }
        claims.update(extra or {})
        return sign(self.private, claims)


def sign(key: Ed25519PrivateKey, claims: Dict[str, Any], header: Optional[Dict[str, Any]] = None) -> str:
    head = header or {"alg": "EdDSA", "typ": "JWT"}
    signing_input = (
        b64url(json.dumps(head, separators=(",", ":")).encode())
        + "."
        + b64url(json.dumps(claims, separators=(",", ":")).encode())
    )
    signature = key.sign(signing_input.encode("ascii"))
    return signing_input + "." + b64url(signature)


def tamper_payload(token: str, **changes: Any) -> str:
    """Change claims but keep the old signature (a forged token)."""
    head, payload, sig = token.split(".")
    padded = payload + "=" * (-len(payload) % 4)
    claims = json.loads(base64.urlsafe_b64decode(padded))
    claims.update(changes)
    return head + "." + b64url(json.dumps(claims, separators=(",", ":")).encode()) + "." + sig


def bearer(token: str) -> Dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
