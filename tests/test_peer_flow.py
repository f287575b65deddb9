"""Large bodies and long streams across routers (issue 8 item 4): HTTP/2
flow control between the gateways carries a 1 MiB request and its 1 MiB
answer, and a stream of 20 000 events, C→B→A, while other calls share the
same connections — all on the warm connections, with no new TLS handshake
anywhere on the path."""

from __future__ import annotations

import threading
import time
from typing import Any, List

from harness.http import envelope
from harness.peers import build_chain, wait_callable

MIB = 1024 * 1024
# Every gateway of the chain takes a 1 MiB payload (plus envelope).
BIG = {"max_request_bytes": 2 * MIB}


def _handshakes(router: Any) -> tuple:
    s = router.gateway_stats(after=time.monotonic())
    return (s["peer_handshakes_out"], s["peer_handshakes_in"])


def test_one_mib_bodies_and_a_long_stream_cross_two_routers_on_the_warm_connections(mesh):
    """Proves flow control end to end: a 1 MiB payload (four of the
    gateways' 256 KiB stream windows, sixteen of h2's default) reaches the handler on A
    byte for byte and its echo comes back whole at C; a 20 000-event
    stream arrives complete and in order; four of each at once, on the
    same connections, all correct; and the gateways of C and B count the
    same TLS handshakes before and after (nothing reconnected)."""
    ch = build_chain(mesh, a_gateway=BIG, b_gateway=BIG, c_gateway=BIG)
    backend = ch.a.lan_backend()
    try:
        ch.a.serve(backend, "flow.echo")
        ch.a.serve(backend, "flow.stream", name="streamer")
        wait_callable(ch.c, "flow.echo", {"warm": 1}, headers=ch.auth)
        ch.c.stack.wait_routable(envelope("flow.stream", {}), headers=ch.auth)
        before_c, before_b = _handshakes(ch.c), _handshakes(ch.b)
        assert before_c[0] >= 1 and before_b[1] >= 1, (before_c, before_b)

        blob = "".join(chr(0x61 + i % 26) for i in range(MIB))

        def big_call() -> Any:
            r = ch.c.stack.http.post("/agent/v1/invoke", envelope("flow.echo", {"blob": blob}),
                                     headers=ch.auth, timeout=60)
            assert r.status == 200, r.describe()[:500]
            return r.json()

        got = big_call()
        assert got["echo"]["blob"] == blob
        seen = backend.calls("flow.echo")[-1].json()
        assert seen["payload"]["blob"] == blob, "the handler on A got another body"

        def long_stream() -> List[int]:
            s = ch.c.stack.http.stream("/agent/v1/invoke-stream", envelope("flow.stream", {"count": 20000}),
                                       headers=ch.auth, timeout=120)
            assert s.status == 200, s.error_body
            assert s.complete, "the stream did not end with its completion marker"
            return [e.json()["n"] for e in s.events]

        assert long_stream() == list(range(1, 20001))

        errors: List[BaseException] = []
        results: List[Any] = []

        def run(fn: Any) -> None:
            try:
                results.append(fn())
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(f,)) for f in [big_call, long_stream] * 4]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=180)
        assert not any(t.is_alive() for t in threads), "a concurrent call did not end"
        assert errors == [], errors
        assert len(results) == 8
        for r in results:
            if isinstance(r, list):
                assert r == list(range(1, 20001))
            else:
                assert r["echo"]["blob"] == blob

        assert _handshakes(ch.c) == before_c, "C's gateway reconnected"
        assert _handshakes(ch.b) == before_b, "B's gateway reconnected"
    finally:
        backend.close()


def test_a_sending_gateway_costs_one_replay_window_at_any_rate(mesh):
    """Proves the replay cache holds windows, not one nonce per call: with
    room for only two windows at A and at B (`gateway.replay_cache` 2), 300
    calls C→B→A in a row all succeed — each gateway numbers its assertions
    to each neighbour, so a sender is one window whatever its rate — and
    none is refused as `assertion_cache_full`."""
    tiny = {"replay_cache": 2}
    ch = build_chain(mesh, a_gateway=tiny, b_gateway=tiny)
    backend = ch.a.lan_backend()
    try:
        ch.a.serve(backend, "flow.echo")
        wait_callable(ch.c, "flow.echo", {"warm": 1}, headers=ch.auth)
        for i in range(300):
            r = ch.c.stack.http.post("/agent/v1/invoke", envelope("flow.echo", {"i": i}), headers=ch.auth)
            assert r.status == 200 and r.json()["echo"] == {"i": i}, (i, r.describe())
        assert len([x for x in backend.calls("flow.echo") if "i" in x.json()["payload"]]) == 300
    finally:
        backend.close()
