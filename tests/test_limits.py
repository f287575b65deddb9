"""Request size and rate limits: typed refusals that do not disturb the
calls around them."""

from __future__ import annotations

import json
import threading

from harness.backend import registration
from harness.http import envelope

LIMIT = 4096


def _sized_envelope(intent: str, total: int) -> bytes:
    """An envelope whose JSON encoding is exactly `total` bytes."""
    env = envelope(intent, {"pad": ""})
    base = len(json.dumps(env, separators=(",", ":")).encode())
    env["payload"]["pad"] = "x" * (total - base)
    raw = json.dumps(env, separators=(",", ":")).encode()
    assert len(raw) == total
    return raw


def test_oversized_body_gets_413_while_concurrent_calls_succeed(make_stack, backend):
    """Proves that with `max_request_bytes 4096` a body of exactly 4096
    bytes is served, a 1 MiB body announced by Content-Length and a 64 KiB
    chunked body both get 413 `payload_too_large` (the gateway answers
    without needing the rest of the body), the handler never sees them, and
    4 threads making 20 calls each at the same time all succeed."""
    stack = make_stack(gateway={"max_request_bytes": LIMIT})
    stack.register(registration("lim.echo", backend.endpoint, lease_seconds=60))
    stack.wait_routable(envelope("lim.echo", {}))

    at_limit = stack.http.post("/agent/v1/invoke", _sized_envelope("lim.echo", LIMIT))
    assert at_limit.status == 200, at_limit.describe()

    failures = []
    stop = threading.Event()

    def caller(w):
        for i in range(20):
            r = stack.http.post("/agent/v1/invoke", envelope("lim.echo", {"w": w, "i": i}))
            if r.status != 200 or r.json()["echo"] != {"w": w, "i": i}:
                failures.append(r.describe())
            if stop.is_set() and i >= 5:
                break

    threads = [threading.Thread(target=caller, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()

    big = _sized_envelope("lim.echo", 1024 * 1024)
    head = (
        f"POST /agent/v1/invoke HTTP/1.1\r\nHost: {stack.http.host}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(big)}\r\n\r\n"
    ).encode()
    chunks = [big[i : i + 16384] for i in range(0, len(big), 16384)]
    r = stack.http.raw_exchange(head, chunks)
    assert r.status == 413, r.describe()
    assert json.loads(r.body)["error"]["code"] == "payload_too_large", r.describe()

    chunked_body = _sized_envelope("lim.echo", 64 * 1024)
    head = (
        f"POST /agent/v1/invoke HTTP/1.1\r\nHost: {stack.http.host}\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    pieces = []
    for i in range(0, len(chunked_body), 8192):
        part = chunked_body[i : i + 8192]
        pieces.append(f"{len(part):x}\r\n".encode() + part + b"\r\n")
    pieces.append(b"0\r\n\r\n")
    r = stack.http.raw_exchange(head, pieces)
    assert r.status == 413, r.describe()
    assert json.loads(r.body)["error"]["code"] == "payload_too_large", r.describe()

    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert not failures, failures[:5]
    sizes = [len(c.body) for c in backend.calls("lim.echo")]
    assert max(sizes) <= LIMIT, max(sizes)


def test_tenant_rate_limit_is_typed_429_and_per_tenant(make_stack, backend):
    """Proves the per-tenant token bucket: tenant `lab` with burst 4 and
    1 token/s gets 429 `rate_limited` with a Retry-After header once its
    burst is spent within a quick run of 8 calls, while tenant `other`
    (its own bucket) is served at the same moment."""
    stack = make_stack(
        tenants=[
            ("lab", {"name": "lab", "rate_per_second": 1, "rate_burst": 4}),
            ("other", {"name": "other", "rate_per_second": 100, "rate_burst": 100}),
        ],
    )
    stack.register(registration("rate.echo", backend.endpoint, lease_seconds=60, allowed_tenants=["other"]))
    stack.wait_routable(envelope("rate.echo", {}, tenant="other", source_agent="agent://other/c"))
    statuses = []
    limited = None
    for i in range(8):
        r = stack.http.post("/agent/v1/invoke", envelope("rate.echo", {"i": i}))
        statuses.append(r.status)
        if r.status == 429:
            limited = r
    assert limited is not None, statuses
    # The register above may have spent a token of the same bucket.
    assert statuses[0] == 200 and statuses.count(200) >= 3 and statuses.count(429) >= 3, statuses
    assert limited.error_code() == "rate_limited", limited.describe()
    assert (limited.header("retry-after") or "").isdigit(), limited.headers
    r = stack.http.post("/agent/v1/invoke", envelope("rate.echo", {"o": 1}, tenant="other", source_agent="agent://other/c"))
    assert r.status == 200 and r.json()["echo"] == {"o": 1}, r.describe()
