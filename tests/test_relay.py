"""The relay (issue 22, DESIGN §7 "Relay (NAT)"): router B behind a real
NAT (nftables masquerade, nothing gets in) serves its agent to the mesh
through an outbound tunnel to relay A; a caller on router C reaches it.
Topology in harness/relay.py."""

from __future__ import annotations

import hashlib
import http.client
import json
import socket
import sys
import time
from pathlib import Path

from nexus_agent.client import NexusAgentClient

from harness.agentproc import AgentProcess
from harness.http import envelope
from harness.jwt import bearer
from harness.mesh import ARPX_PORT, PEER_PORT
from harness.peers import InFlight, outcome, wait_callable
from harness.pki import DOMAIN, domain_ca, issue, use_ca
from harness.poll import wait_for
from harness.relay import build_nat, connect_from, start

AGENTS = Path(__file__).resolve().parent / "agents"
MIB = 1024 * 1024
BIG = {"max_request_bytes": 20 * MIB}


def test_an_agent_behind_nat_is_called_through_its_relay_with_bodies_up_to_16_mib(mesh):
    """Proves the relay's data path end to end: the NAT really blocks
    every connection to B (ARPX and data plane) while B's own session to
    relay A is up; A holds B's route with source `relay` and C learns it
    with A in its path; calls from C reach the handler on B's LAN, and
    request bodies of 1 KiB, 64 KiB, 1 MiB and 16 MiB come back exact
    (hashed on both ends of the handler)."""
    t = start(build_nat(mesh, gateway=BIG))
    a, b, c = t.relays[0], t.b, t.c
    auth = bearer(t.token)
    for port in (ARPX_PORT, PEER_PORT):
        why = connect_from(a.ns.netns, t.b_addr, port)
        assert why is not None, f"A reached B:{port} through the NAT"
    assert connect_from(b.ns.netns, t.relay_addr(0), ARPX_PORT) is None, "B cannot reach its relay"

    backend = b.lan_backend()
    try:
        rid = b.serve(backend, "nat.echo")
        relayed = wait_for("A to hold B's route as a relay route",
                           lambda: [r for r in a.stack.routes()
                                    if r.get("route_id") == rid and r.get("source") == "relay"], timeout=20)
        assert relayed[0]["next_hop"] == "router-b", relayed
        # Both ends say which relay carries B, and that it sees payloads.
        rb = b.stack.ctl_json("status")["relay"]
        assert rb["mode"] == "client" and rb["in_use"] == f"{t.relay_addr(0)}:{ARPX_PORT}", rb
        assert rb["servers"][0]["router_id"] == "router-a" and rb["servers"][0]["state"] == "in_use", rb
        assert "sees the payloads" in rb["payloads"]
        ra = a.stack.ctl_json("status")["relay"]
        assert ra["mode"] == "server" and ra["clients"] == ["router-b"], ra
        assert "sees the payloads" in ra["payloads"]
        assert b.stack.ctl_json("peers")["relay"]["in_use"] == rb["in_use"]
        ok = wait_callable(c, "nat.echo", {"hello": "nat"}, headers=auth)
        assert ok.json()["echo"] == {"hello": "nat"}
        assert ok.header("x-agentd-route-id") == f"{rid}@router-a", ok.headers
        # B was admitted by its pinned key (outside A's domain): A's calls
        # to it carry signed forwarding assertions.
        assert a.gateway_stats(after=time.monotonic())["peer_assertions_signed"] >= 1
        seen = [r for r in c.stack.routes() if r.get("route_id") == rid]
        assert seen and seen[0].get("path") == ["router-b", "router-a"], seen

        before = a.gateway_stats(after=time.monotonic())
        sent = 0
        for size in (1024, 64 * 1024, MIB, 16 * MIB):
            blob = "".join(chr(0x61 + (i * 7) % 26) for i in range(size))
            want = hashlib.sha256(blob.encode()).hexdigest()
            body = envelope("nat.echo", {"blob": blob})
            r = c.stack.http.post("/agent/v1/invoke", body, headers=auth, timeout=120)
            sent += len(json.dumps(body))
            assert r.status == 200, (size, r.describe()[:300])
            got = r.json()["echo"]["blob"]
            assert hashlib.sha256(got.encode()).hexdigest() == want, f"{size}: the answer differs"
            seen_body = backend.calls("nat.echo")[-1].json()["payload"]["blob"]
            assert hashlib.sha256(seen_body.encode()).hexdigest() == want, f"{size}: the handler got another body"
        # The relay passed every body on as it arrived (C's link is of
        # A's domain, B's is signed: A hashed each body on its way and
        # signed it after it): no body was ever held in A's buffers.
        after = a.gateway_stats(after=time.monotonic())
        assert after["peer_transit_calls"] - before["peer_transit_calls"] == 4, (before, after)
        assert after["peer_transit_bytes"] - before["peer_transit_bytes"] >= sent - 4 * 1024, (sent, after)
        assert after["buffer"]["peak"] < MIB, f"A held a body in its buffers: {after}"
    finally:
        backend.release()
        backend.close()


def _path_at(router, rid):
    return [r.get("path") for r in router.stack.routes() if r.get("route_id") == rid and r.get("eligible", True)]


def test_relay_failover_moves_to_the_next_relay_and_back_without_a_second_execution(mesh):
    """Proves failover between two relays: with B on relay A, a slow
    non-idempotent call in flight when A's whole stack is killed ends
    with the typed outcome `unknown` and ran once; B moves to A2 (next in
    its list) and C's calls succeed through A2 (the mesh sees the path
    change); when A is back and has held for `prefer_hold_s`, B goes back
    to it and C's path follows, and calls still succeed."""
    t = start(build_nat(mesh, relays=2, b_relay={"reconnect_min_ms": 200, "reconnect_max_ms": 2000,
                                                 "prefer_hold_s": 2}))
    a, a2, b, c = t.relays[0], t.relays[1], t.b, t.c
    auth = bearer(t.token)
    backend = b.lan_backend()
    try:
        rid = b.serve(backend, "nat.echo")
        b.serve(backend, "nat.slow", name="slow")
        wait_callable(c, "nat.echo", {"via": "a"}, headers=auth)
        wait_for("C to reach B through A", lambda: ["router-b", "router-a"] in _path_at(c, rid), timeout=20)
        c.stack.wait_routable(envelope("nat.slow", {}), headers=auth)

        call = InFlight(c, envelope("nat.slow", {"max_s": 30}), headers=auth)
        wait_for("the slow call to reach B's handler", lambda: len(backend.calls("nat.slow")) == 1, timeout=15)
        a.stack.gw.kill9()
        a.stack.agentd.kill9()
        r = call.result()
        assert r.status >= 500 and r.error_code(), r.describe()
        assert outcome(r) == "unknown", r.describe()

        a2.wait_established("router-b", timeout=20)
        wait_for("C to reach B through A2", lambda: _path_at(c, rid) == [["router-b", "router-a2"]], timeout=20)
        ok = wait_callable(c, "nat.echo", {"via": "a2"}, headers=auth)
        assert ok.header("x-agentd-route-id") == f"{rid}@router-a2", ok.headers
        assert len(backend.calls("nat.slow")) == 1, "the slow call ran twice"

        a.stack.start()
        a.wait_established("router-b", timeout=30)
        wait_for("C to reach B through A again", lambda: _path_at(c, rid) == [["router-b", "router-a"]], timeout=30)
        ok = wait_callable(c, "nat.echo", {"via": "a again"}, headers=auth)
        assert ok.header("x-agentd-route-id") == f"{rid}@router-a", ok.headers
        wait_for("B to close its session with A2", lambda: (a2.peer("router-b") or {}).get("state") != "established",
                 timeout=15)
    finally:
        backend.release()
        backend.close()


def test_a_client_over_its_stream_limit_is_refused_typed_and_the_relays_other_clients_are_not(mesh):
    """Proves the per-client bounds of a relay: with
    `max_streams_per_client 2` on A, two slow calls toward B hold B's two
    slots and a third is refused at once with a typed `not_delivered`
    that never reached B's handler, while calls to B2 (another client of
    the same relay) succeed meanwhile; once B's calls end, B takes calls
    again. With `max_clients 1` a second client is refused at its
    handshake and A says so (test below)."""
    t = start(build_nat(mesh, clients=2, a_relay={"max_streams_per_client": 2}))
    a, b, b2, c = t.relays[0], t.b, t.more[0], t.c
    a.wait_established("router-b2", timeout=30)
    auth = bearer(t.token)
    backend, backend2 = b.lan_backend(), b2.lan_backend()
    try:
        b.serve(backend, "lim.echo")
        b.serve(backend, "lim.slow", name="slow")
        b2.serve(backend2, "other.echo", name="other")
        wait_callable(c, "lim.echo", {}, headers=auth)
        wait_callable(c, "other.echo", {}, headers=auth)
        c.stack.wait_routable(envelope("lim.slow", {}), headers=auth)
        held = [InFlight(c, envelope("lim.slow", {"max_s": 30, "n": i}), headers=auth) for i in range(2)]
        wait_for("two slow calls at B's handler", lambda: len(backend.calls("lim.slow")) == 2, timeout=15)
        r = c.stack.http.post("/agent/v1/invoke", envelope("lim.echo", {"third": 1}), headers=auth)
        assert r.status in (502, 503), r.describe()
        assert outcome(r) == "not_delivered", r.describe()
        assert "calls in flight" in r.describe(), r.describe()
        assert not [x for x in backend.calls("lim.echo") if x.json().get("payload") == {"third": 1}]
        ok = c.stack.http.post("/agent/v1/invoke", envelope("other.echo", {"meanwhile": 1}), headers=auth)
        assert ok.status == 200, ok.describe()
        backend.release()
        for h in held:
            assert h.result().status == 200
        again = c.stack.http.post("/agent/v1/invoke", envelope("lim.echo", {"after": 1}), headers=auth)
        assert again.status == 200, again.describe()
    finally:
        backend.release()
        backend.close()
        backend2.close()


def test_a_relay_full_of_clients_refuses_the_next_at_its_handshake(mesh):
    """`max_clients 1`: the first client router is served, the second is
    refused at its ARPX handshake (A counts it; B2 shows no relay in use
    and why), and A's session with the first stays."""
    t = build_nat(mesh, clients=2, a_relay={"max_clients": 1})
    for r in (*t.relays, t.c, t.b):
        r.start()
    a, b2 = t.relays[0], t.more[0]
    a.wait_established("router-b", timeout=30)
    b2.start()
    relay = wait_for("A to refuse B2", lambda: (lambda v: v if v["refused"] >= 1 else None)(
        a.stack.ctl_json("status")["relay"]), timeout=20)
    assert relay["clients"] == ["router-b"], relay
    mine = b2.stack.ctl_json("status")["relay"]
    assert mine["in_use"] is None, mine
    assert (a.peer("router-b") or {}).get("state") == "established"


def _ids(events):
    return [int(e.id) for e in events]


def _streaming(mesh):
    """B behind the NAT serving `nat.echo` and `nat.stream` from a backend
    on its LAN, both callable from C; the caller closes the backend."""
    t = start(build_nat(mesh))
    backend = t.b.lan_backend()
    try:
        t.b.serve(backend, "nat.echo")
        t.b.serve(backend, "nat.stream", name="streamer")
        wait_callable(t.c, "nat.echo", {}, headers=bearer(t.token))
        t.c.stack.wait_routable(envelope("nat.stream", {}), headers=bearer(t.token))
    except BaseException:
        backend.close()
        raise
    return t, backend


def test_streams_cross_the_relay_whole_and_resume_without_a_second_producer(mesh):
    """Proves streams over the relay: a 200-event stream from B's
    handler arrives at C intact and in order; a caller that drops after
    50 events and resumes with `Last-Event-ID` gets exactly the rest and
    the completion marker, and B's producer ran once for that stream."""
    t, backend = _streaming(mesh)
    c, auth = t.c, bearer(t.token)
    try:
        whole = c.stack.http.stream("/agent/v1/invoke-stream", envelope("nat.stream", {"count": 200}), headers=auth)
        assert whole.status == 200 and whole.complete, whole.error_body
        assert [e.json() for e in whole.events] == [{"n": n} for n in range(1, 201)]

        env = envelope("nat.stream", {"count": 200, "pace_ms": 5})
        first = c.stack.http.stream("/agent/v1/invoke-stream", env, headers=auth, stop_after=50)
        assert first.status == 200 and len(first.events) == 50 and not first.complete, first.error_body
        cursor = _ids(first.events)[-1]
        second = c.stack.http.stream("/agent/v1/invoke-stream", env, headers={**auth, "Last-Event-ID": str(cursor)},
                                     timeout=60)
        assert second.status == 200 and second.complete, second.error_body
        got = [e.json() for e in first.events + second.events]
        assert got == [{"n": n} for n in range(1, 201)], (len(got), got[:3], got[-3:])
        assert len(backend.calls("nat.stream")) == 2, "the resumed stream restarted its producer on B"
    finally:
        backend.close()


def test_256_calls_share_the_one_tunnel_and_an_oversized_call_is_refused_alone(mesh):
    """Proves multiplexing on the tunnel: 256 calls at once from C to B's
    handler all succeed with their own answers while an oversized call
    (within C's `max_request_bytes`, over the relay A's) is refused typed
    on its own stream; C, A and B count no new handshake across it (one
    tunnel, one data connection each way)."""
    t = start(build_nat(mesh, gateway={"max_inflight": 1024, "max_inflight_per_source": 1024,
                                       "max_inflight_per_peer": 1024, "max_conns_per_source": 1024,
                                       "rate_per_second": 100000,
                                       "rate_burst": 100000},
                     tenant={"rate_per_second": 100000, "rate_burst": 100000},
                     c_gateway={"max_request_bytes": 4 * MIB}))
    a, b, c = t.relays[0], t.b, t.c
    auth = bearer(t.token)
    backend = b.lan_backend()
    try:
        b.serve(backend, "nat.echo")
        b.serve(backend, "nat.slow", name="slow")
        wait_callable(c, "nat.echo", {}, headers=auth)
        c.stack.wait_routable(envelope("nat.slow", {}), headers=auth)
        before = {r.name: r.gateway_stats(after=time.monotonic()) for r in (a, b, c)}
        calls = [InFlight(c, envelope("nat.slow", {"max_s": 20, "n": i}), headers=auth, timeout=60) for i in range(256)]
        wait_for("256 calls at B's handler at once", lambda: len(backend.calls("nat.slow")) == 256, timeout=40)
        big = c.stack.http.post("/agent/v1/invoke", envelope("nat.echo", {"blob": "x" * (2 * MIB)}),
                                headers=auth, timeout=30)
        assert big.status == 413, big.describe()[:300]
        assert big.error_code(), big.describe()[:300]
        assert not [x for x in backend.calls("nat.echo") if len(x.body) > MIB], "the oversized call reached B"
        backend.release()
        for i, call in enumerate(calls):
            r = call.result(timeout=60)
            assert r.status == 200, r.describe()
            assert r.json()["echo"] == {"max_s": 20, "n": i}
        after = {r.name: r.gateway_stats(after=time.monotonic()) for r in (a, b, c)}
        for name in ("router-a", "router-b", "router-c"):
            for k in ("peer_handshakes_in", "peer_handshakes_out"):
                assert after[name][k] == before[name][k], (name, k, before[name], after[name])
    finally:
        backend.release()
        backend.close()


def test_a_caller_that_reads_nothing_slows_only_its_own_stream_through_the_relay(mesh):
    """Proves flow control end to end across the relay: a caller on C asks
    B's handler for a 16 MiB answer and reads none of it (its socket's
    receive buffer held small), so the answer backs up from C through A
    and the tunnel to B; meanwhile 20 calls to B over the same tunnel
    answer; then the caller reads its answer, whole and exact, and no
    router made a new handshake."""
    t = start(build_nat(mesh, gateway=BIG))
    a, b, c = t.relays[0], t.b, t.c
    auth = bearer(t.token)
    backend = b.lan_backend()
    s = None
    try:
        b.serve(backend, "nat.echo")
        wait_callable(c, "nat.echo", {}, headers=auth)
        before = {r.name: r.gateway_stats(after=time.monotonic()) for r in (a, b, c)}
        blob = "".join(chr(0x61 + (i * 11) % 26) for i in range(16 * MIB))
        want = hashlib.sha256(blob.encode()).hexdigest()
        body = json.dumps(envelope("nat.echo", {"blob": blob})).encode()
        head = "".join([
            "POST /agent/v1/invoke HTTP/1.1\r\n",
            f"Host: {c.stack.http.host}\r\n",
            "Content-Type: application/json\r\n",
            f"Content-Length: {len(body)}\r\n",
            *(f"{k}: {v}\r\n" for k, v in auth.items()),
            "\r\n",
        ]).encode()
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        s.settimeout(60)
        s.connect((c.stack.http.host, c.stack.http.port))
        s.sendall(head + body)
        wait_for("B's handler to take the big call",
                 lambda: any(len(x.body) > 16 * MIB for x in backend.calls("nat.echo")), timeout=60)
        for i in range(20):
            r = c.stack.http.post("/agent/v1/invoke", envelope("nat.echo", {"i": i}), headers=auth, timeout=20)
            assert r.status == 200 and r.json()["echo"] == {"i": i}, r.describe()[:300]
        resp = http.client.HTTPResponse(s)
        resp.begin()
        assert resp.status == 200, resp.status
        got = json.loads(resp.read())["echo"]["blob"]
        assert hashlib.sha256(got.encode()).hexdigest() == want, "the big answer differs"
        after = {r.name: r.gateway_stats(after=time.monotonic()) for r in (a, b, c)}
        for name in ("router-a", "router-b", "router-c"):
            for k in ("peer_handshakes_in", "peer_handshakes_out"):
                assert after[name][k] == before[name][k], (name, k, before[name], after[name])
    finally:
        if s is not None:
            s.close()
        backend.release()
        backend.close()


def test_a_relay_trusts_client_routers_of_its_domain_and_refuses_another_domains(mesh, bins):
    """Proves the relay's trust rule without pins: relay A and client B
    hold certificates of one domain CA and find each other (A accepts B,
    B accepts A, nothing pinned on either side), calls reach B's handler;
    B2, certified by another domain's CA, is refused at its handshake and
    holds no session."""
    t = build_nat(mesh, clients=2, pins=False)
    a, b, b2, c = t.relays[0], t.b, t.more[0], t.c
    ca = domain_ca(bins, mesh.workdir / "ca", DOMAIN)
    for r in (a, b, c):
        use_ca(r, ca, issue(bins, ca, r, r.name, DOMAIN))
    other = domain_ca(bins, mesh.workdir / "other-ca", "other.example")
    use_ca(b2, other, issue(bins, other, b2, "router-b2", "other.example"), "other.example")
    start(t)
    auth = bearer(t.token)
    backend = b.lan_backend()
    try:
        b.serve(backend, "ca.echo")
        ok = wait_callable(c, "ca.echo", {"ca": 1}, headers=auth)
        assert ok.json()["echo"] == {"ca": 1}
        # Inside the domain the link authenticates each call (DESIGN §3):
        # the relay signs nothing toward its client.
        assert a.gateway_stats(after=time.monotonic())["peer_assertions_signed"] == 0
        wait_for("A to refuse B2", lambda: a.stack.ctl_json("status")["relay"]["refused"] >= 1
                 or "domain" in str(b2.stack.ctl_json("status")["relay"]["servers"][0].get("last_error")), timeout=20)
        assert a.stack.ctl_json("status")["relay"]["clients"] == ["router-b"]
        assert a.peer("router-b2") is None
        err = b2.stack.ctl_json("status")["relay"]["servers"][0].get("last_error") or ""
        assert err, "B2 shows no reason for having no relay"
    finally:
        backend.close()


def test_a_nexilume_agent_behind_nat_is_called_by_a_nexilume_caller_on_another_router(mesh, workdir):
    """Proves the real SDKs across the relay, unchanged: an unmodified
    nexilume agent on B's LAN (B behind the NAT) registers through B's
    trusted-LAN bootstrap, and a nexilume client at C invoking `nx.echo`
    with `target_agent` gets the agent's JSON; its stream arrives as the
    agent's numbered events in order."""
    t = build_nat(mesh)
    b = t.b
    b.cfg.section("gateway").options.update(auth="jwt", bootstrap_networks=[f"{b.ns.mgmt_host_addr}/32"],
                                            bootstrap_tenant=["lab"])
    start(t)
    c = t.c
    argv = [sys.executable, str(AGENTS / "nexilume_agent.py"), b.sdk_url, "lab", "nx-echo", "30", "0", "auto"]
    agent = AgentProcess(argv, workdir / "nexilume-agent.log")
    try:
        ready = agent.wait_message("ready", timeout=30)
        assert len(ready["route_ids"]) == 2, ready
        wait_callable(c, "nx.echo", {"warm": 1}, headers=bearer(t.token))
        client = NexusAgentClient(c.sdk_url, token=t.token, use_environment_proxy=False, timeout=20)
        result = client.invoke_intent("nx.echo", {"text": "through the relay"}, tenant="lab",
                                      source_agent="agent://lab/caller", target_agent="agent://lab/nx-echo")
        assert result == {"echo": {"text": "through the relay"}, "via": "nexilume"}, result
        events = list(client.invoke_stream(envelope("nx.count", {"n": 4}, target_agent="agent://lab/nx-echo"),
                                           resume=True, max_reconnects=0))
        assert [json.loads(e.data) for e in events] == [{"i": i} for i in range(4)]
    finally:
        agent.stop()


def test_a_cancel_crosses_the_relay_and_closes_the_producer_on_b(mesh):
    """Proves cancellation across the relay: a paced stream left after 2
    events is a task at C; its events come from B, and its cancel at C
    closes the producer's connection on B's LAN (through A and the
    tunnel)."""
    t, backend = _streaming(mesh)
    c, auth = t.c, bearer(t.token)
    try:
        paced = c.stack.http.stream("/agent/v1/invoke-stream", envelope("nat.stream", {"count": 300, "pace_ms": 50}),
                                    headers=auth, stop_after=2)
        assert paced.status == 200 and len(paced.events) == 2, paced.error_body
        task_id = paced.headers.get("x-nexus-task-id")
        tok = {"X-Nexus-Task-Token": paced.headers.get("x-nexus-task-token", "")}
        assert task_id and tok["X-Nexus-Task-Token"], paced.headers
        r = c.stack.http.request("DELETE", f"/agent/v1/tasks/{task_id}", headers={**auth, **tok})
        assert r.status == 200 and r.json()["status"] == "cancelled", r.describe()
        wait_for("the cancel to close the producer's connection on B", lambda: backend.peer_closed, timeout=10)
        assert len(backend.calls("nat.stream")) == 1
    finally:
        backend.close()
