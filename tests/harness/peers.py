"""Set-ups of the peer data-plane tests (test_peer_*.py): the C–B–A chain
(reflection at B, so C learns A's routes with path [A, B]) with a JWT
caller at C, and waiting until a capability served on another router is
callable from a router's LAN."""

from __future__ import annotations

import http.client
import json
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from .http import Resp, envelope, iter_sse
from .jwt import TenantKey, bearer
from .mesh import MeshRouter
from .poll import wait_for


@dataclass
class Chain:
    a: MeshRouter
    b: MeshRouter
    c: MeshRouter
    lab: TenantKey
    audience: str
    #: Bearer token of `agent://lab/caller` at C (invoke + route scopes).
    token: str

    @property
    def auth(self) -> Dict[str, str]:
        return bearer(self.token)


def build_chain(mesh: Any, *, a_gateway: Optional[Dict[str, Any]] = None, b_gateway: Optional[Dict[str, Any]] = None,
                c_gateway: Optional[Dict[str, Any]] = None,
                configure: Optional[Callable[[MeshRouter, MeshRouter, MeshRouter], None]] = None) -> Chain:
    """A–B and B–C links, B a reflector; C's SDK API takes JWTs of tenant
    `lab` (A and B run auth `none` unless told: they see calls only from
    their peers and their own LAN's agents). `configure(a, b, c)` may
    change the configs before the start. All three started, sessions
    established."""
    lab = TenantKey.generate()
    a = mesh.router("router-a", gateway=a_gateway)
    b = mesh.router("router-b", reflector=True, gateway=b_gateway)
    c = mesh.router("router-c", gateway={"auth": "jwt", **(c_gateway or {})},
                    tenants=[("lab", {"name": "lab", "jwt_key": [lab.uci_value]})])
    mesh.link("router-a", "router-b")
    mesh.link("router-b", "router-c")
    if configure is not None:
        configure(a, b, c)
    for r in (a, b, c):
        r.start()
    b.wait_established("router-a")
    b.wait_established("router-c")
    disc = c.stack.http.get("/agent/v1/authentication")
    assert disc.status == 200, disc.describe()
    aud = disc.json()["authentication"]["audience"]
    token = lab.mint(tenant="lab", sub="agent://lab/caller", scopes=("agent.invoke", "agent.route"), aud=aud)
    return Chain(a, b, c, lab, aud, token)


def wait_callable(router: MeshRouter, capability: str, payload: Any = None, headers: Optional[Dict[str, str]] = None,
                  timeout: float = 30.0) -> Resp:
    """Until a sync call of `capability` (an idempotent echo) at `router`
    succeeds: its FIB has the remote route and the data plane along the
    path is up. Returns that first good answer."""
    router.stack.wait_routable(envelope(capability, {}), headers=headers, timeout=timeout)

    def check() -> Optional[Resp]:
        r = router.stack.http.post("/agent/v1/invoke", envelope(capability, payload if payload is not None else {}),
                                   headers=headers)
        return r if r.status == 200 else None

    return wait_for(f"{router.name}: a call of {capability} to succeed", check, timeout=timeout, interval=0.1)


class InFlight:
    """One sync call in a thread (bounded by its own timeout)."""

    def __init__(self, router, env, headers=None, timeout: float = 40.0) -> None:
        self.resp = None
        self.error = None

        def run() -> None:
            try:
                self.resp = router.stack.http.post("/agent/v1/invoke", env, headers=headers, timeout=timeout)
            except Exception as e:  # noqa: BLE001 - reported by the test
                self.error = e

        self._t = threading.Thread(target=run, daemon=True)
        self._t.start()

    def result(self, timeout: float = 45.0):
        self._t.join(timeout)
        assert not self._t.is_alive(), "the call did not end"
        assert self.error is None, f"the call raised {self.error!r}"
        return self.resp


def outcome(r: Resp) -> Optional[str]:
    """`error.outcome` of a gateway error answer, or None."""
    try:
        return r.json()["error"].get("outcome")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


class SseReader:
    """A raw SSE reader in a thread: events as they arrive, then how the
    stream ended (bounded by the socket timeout)."""

    def __init__(self, router, env, headers, timeout: float = 30.0) -> None:
        self.events = []
        self.ended = None
        self.status = None
        self.headers = {}

        def run() -> None:
            conn = http.client.HTTPConnection(router.stack.http.host, router.stack.http.port, timeout=timeout)
            try:
                conn.request("POST", "/agent/v1/invoke-stream", body=json.dumps(env).encode(),
                             headers={"Content-Type": "application/json", "Accept": "text/event-stream", **headers})
                resp = conn.getresponse()
                self.status, self.headers = resp.status, {k.lower(): v for k, v in resp.getheaders()}
                for item in iter_sse(resp):
                    if item == "complete":
                        self.ended = "complete"
                        return
                    self.events.append(item)
                self.ended = "eof"
            except Exception as e:  # noqa: BLE001 - the broken hop
                self.ended = f"{type(e).__name__}"
            finally:
                conn.close()

        self._t = threading.Thread(target=run, daemon=True)
        self._t.start()

    def join(self, timeout: float = 40.0) -> None:
        self._t.join(timeout)
        assert not self._t.is_alive(), "the stream did not end"
