"""Calls across routers on the peer data plane (issue 8 items 3, 7): a
caller on router C's LAN invokes capabilities served on router A's LAN
through B (C–B–A chain in namespaces, real binaries, h2 over mTLS between
the gateways), with our SDK and with raw HTTP: sync calls, async tasks
whose status/result/cancel at C reach the task on A, SSE streams resumed
at C after a dropped connection without restarting the producer, caller
hang-up reaching the handler, and the hop limit ending a forwarding loop."""

from __future__ import annotations

import json
import socket
import time

import agentd_sdk

from harness.http import envelope
from harness.peers import build_chain, wait_callable
from harness.poll import wait_for


def _ids(events):
    return [int(e.id) for e in events]


def test_sync_call_crosses_two_routers_with_the_callers_identity(mesh):
    """Proves a sync call from C's LAN to an agent on A's LAN: our SDK's
    agent registered at A and our SDK's client at C (JWT of
    `agent://lab/caller`) get the handler's answer; a raw call's answer at
    C names the route `<id>@router-b` (C's path), while the handler on A
    receives the base route id, tenant and caller from C's verified token
    (the body claimed `agent://lab/evil`), and `hop_limit` 5: each of the
    three gateways used one hop. A call arriving with too few hops is
    refused where they run out: `hop_limit` 3 reaches A with 1 and gets
    508 `hop_limit_exceeded` (outcome rejected, the message naming router-a
    and hop_limit 1) at C without reaching the handler, `hop_limit` 4 reaches it with 1."""
    ch = build_chain(mesh)
    backend = ch.a.lan_backend()
    agent = agentd_sdk.Agent(router=ch.a.sdk_url, tenant="lab", agent_id="sdk-echo", host=ch.a.ns.mgmt_host_addr)

    @agent.capability("sdk.echo", version=1, idempotent=True)
    def echo(payload):
        return {"echo": payload, "via": "agentd_sdk"}

    handle = agent.start()
    try:
        rid = ch.a.serve(backend, "chain.echo")
        caller = agentd_sdk.Client(router=ch.c.sdk_url, tenant="lab", agent_id="caller", token=ch.token)
        wait_callable(ch.c, "sdk.echo", headers=ch.auth)
        assert caller.invoke("sdk.echo", {"a": 1}) == {"echo": {"a": 1}, "via": "agentd_sdk"}

        wait_callable(ch.c, "chain.echo", {"warm": 1}, headers=ch.auth)
        warm = len(backend.calls("chain.echo"))
        r = ch.c.stack.http.post("/agent/v1/invoke", envelope("chain.echo", {"b": 2}, source_agent="agent://lab/evil"),
                                 headers=ch.auth)
        assert r.status == 200, r.describe()
        assert r.header("x-agentd-route-id") == f"{rid}@router-b", r.headers
        got = r.json()
        assert got["echo"] == {"b": 2} and got["route_id"] == rid, got
        assert (got["tenant"], got["source_agent"]) == ("lab", "agent://lab/caller"), got
        seen = backend.calls("chain.echo")
        assert len(seen) == warm + 1
        assert seen[-1].json()["hop_limit"] == 5, seen[-1].json()

        r = ch.c.stack.http.post("/agent/v1/invoke", envelope("chain.echo", {"h": 3}, hop_limit=3), headers=ch.auth)
        assert r.status == 508 and r.error_code() == "hop_limit_exceeded", r.describe()
        assert r.json()["error"].get("outcome") == "rejected", r.describe()
        # Relayed back to C, it still names the router that refused and
        # the hop count the call reached it with.
        message = r.json()["error"]["message"]
        assert "router router-a" in message and "hop_limit 1" in message, message
        assert len(backend.calls("chain.echo")) == warm + 1
        r = ch.c.stack.http.post("/agent/v1/invoke", envelope("chain.echo", {"h": 4}, hop_limit=4), headers=ch.auth)
        assert r.status == 200, r.describe()
        assert backend.calls("chain.echo")[-1].json()["hop_limit"] == 1

        # Each hop's counters (agentctl stats): C and B signed what they
        # forwarded, B and A verified it; a signature and a verification
        # cover one or more calls, never none.
        sa, sb, sc = (r.gateway_stats(after=time.monotonic()) for r in (ch.a, ch.b, ch.c))
        for who, st in (("C", sc), ("B", sb)):
            assert st["peer_assertions_signed"] >= 4, (who, st)
            assert 1 <= st["peer_signatures"] <= st["peer_assertions_signed"], (who, st)
        for who, st in (("B", sb), ("A", sa)):
            assert st["peer_assertions_verified"] >= 4, (who, st)
            assert 1 <= st["peer_signature_checks"] <= st["peer_assertions_verified"], (who, st)
        assert sa["peer_assertions_signed"] == 0 and sc["peer_assertions_verified"] == 0, (sa, sc)
    finally:
        handle.close()
        backend.close()


def test_async_tasks_and_cancellation_reach_the_handler_on_a(mesh):
    """Proves async tasks across routers: `invoke_async` at C (our SDK)
    returns a task whose result at C is the handler's answer on A, which
    releases it on A (A's stats count it; another handle at C gets
    `result_released`); the task lives on A (its id and token work at A's
    own SDK API); a slow task
    reports `running` at C, its cancel at C answers `cancelled` and closes
    the handler's connection on A before it answered, and the task stays
    `cancelled`. A caller at C that hangs up on a sync call closes the
    handler's connection on A too (cancellation hop by hop)."""
    ch = build_chain(mesh)
    backend = ch.a.lan_backend()
    try:
        ch.a.serve(backend, "chain.echo")
        ch.a.serve(backend, "chain.slow", name="slow")
        wait_callable(ch.c, "chain.echo", {"warm": 1}, headers=ch.auth)
        ch.c.stack.wait_routable(envelope("chain.slow", {}), headers=ch.auth)
        caller = agentd_sdk.Client(router=ch.c.sdk_url, tenant="lab", agent_id="caller", token=ch.token)

        task = caller.invoke_async("chain.echo", {"job": 7})
        assert task.result(timeout=15)["echo"] == {"job": 7}
        st = task.status()
        assert (st["status"], st.get("result_released")) == ("completed", True), st
        # Released where it lives: on A; another handle at C gets the typed refusal.
        wait_for("the release in A's gateway stats", lambda: ch.a.gateway_stats().get("results_released", 0) >= 1,
                 timeout=15)
        try:
            agentd_sdk.client.Task(caller, task.task_id, task._token).result(timeout=10)
            raise AssertionError("a second handle got a released task's result")
        except agentd_sdk.TaskResultReleasedError as e:
            assert e.code == "result_released", e

        slow = caller.invoke_async("chain.slow", {"max_s": 30})
        wait_for("the slow task to reach the handler on A", lambda: backend.calls("chain.slow"), timeout=10)
        assert slow.status()["status"] == "running"
        at_a = ch.a.stack.http.get(f"/agent/v1/tasks/{slow.task_id}", headers={"X-Nexus-Task-Token": slow._token})
        assert at_a.status == 200 and at_a.json()["status"] == "running", at_a.describe()
        assert slow.cancel()["status"] == "cancelled"
        wait_for("the cancel to close the handler's connection on A", lambda: backend.peer_closed, timeout=10)
        assert [x.json()["intent"] for x in backend.answered if x.json()["intent"] == "chain.slow"] == []
        assert slow.status()["status"] == "cancelled"

        # A sync call whose caller hangs up.
        body = json.dumps(envelope("chain.slow", {"max_s": 30, "hangup": 1})).encode()
        head = (
            f"POST /agent/v1/invoke HTTP/1.1\r\nHost: {ch.c.ns.mgmt_addr}\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {ch.token}\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        sock = socket.create_connection((ch.c.stack.http.host, ch.c.stack.http.port), timeout=10)
        try:
            sock.sendall(head + body)
            wait_for("the sync slow call to reach A's handler",
                     lambda: [x for x in backend.calls("chain.slow") if x.json()["payload"].get("hangup")], timeout=10)
        finally:
            sock.close()
        wait_for("the hang-up to close the handler's connection on A",
                 lambda: [x for x in backend.peer_closed if x.json()["payload"].get("hangup")], timeout=10)
        assert len(backend.calls("chain.slow")) == 2, "a cancelled call ran again"
    finally:
        backend.close()


def test_stream_resumes_at_c_without_restarting_the_producer_on_a(mesh):
    """Proves SSE streams across routers: a raw client at C that drops the
    connection after 3 of 6 events and resumes with the same envelope and
    `Last-Event-ID` gets exactly the later events (increasing ids after the
    cursor, the completion marker), from the history kept on A, and again
    from an earlier cursor given in the body (`resume_from_event_id`) — the
    producer ran exactly once; our SDK's `stream` at C delivers a whole
    stream in order. A paced stream left after 2 events is a task at C:
    its events at C (`…/events?after=0`) come from A, and its cancel at C
    closes the producer's connection on A."""
    ch = build_chain(mesh)
    backend = ch.a.lan_backend()
    try:
        ch.a.serve(backend, "chain.echo")
        ch.a.serve(backend, "chain.stream", name="streamer")
        wait_callable(ch.c, "chain.echo", {"warm": 1}, headers=ch.auth)
        ch.c.stack.wait_routable(envelope("chain.stream", {}), headers=ch.auth)

        env = envelope("chain.stream", {"count": 6})
        first = ch.c.stack.http.stream("/agent/v1/invoke-stream", env, headers=ch.auth, stop_after=3)
        assert first.status == 200, first.error_body
        assert len(first.events) == 3 and not first.complete
        ids1 = _ids(first.events)
        assert ids1 == sorted(set(ids1)) and ids1[0] >= 1, ids1

        second = ch.c.stack.http.stream("/agent/v1/invoke-stream", env,
                                        headers={**ch.auth, "Last-Event-ID": str(ids1[-1])})
        assert second.status == 200, second.error_body
        assert second.complete, "the resumed stream did not end with the completion marker"
        ids2 = _ids(second.events)
        assert ids2 and ids2[0] > ids1[-1] and ids2 == sorted(set(ids2)), (ids1, ids2)
        assert [e.json() for e in first.events + second.events] == [{"n": n} for n in range(1, 7)]
        # The cursor in the body (nexilume style), from the first event.
        third = ch.c.stack.http.stream("/agent/v1/invoke-stream", {**env, "resume_from_event_id": ids1[0]},
                                       headers=ch.auth)
        assert third.status == 200 and third.complete, third.error_body
        assert [e.json() for e in third.events] == [{"n": n} for n in range(2, 7)]
        assert len(backend.calls("chain.stream")) == 1, "the producer was restarted"

        caller = agentd_sdk.Client(router=ch.c.sdk_url, tenant="lab", agent_id="caller", token=ch.token)
        events = list(caller.stream("chain.stream", {"count": 4}))
        assert [e.json() for e in events] == [{"n": n} for n in range(1, 5)]
        assert len(backend.calls("chain.stream")) == 2

        paced = ch.c.stack.http.stream("/agent/v1/invoke-stream", envelope("chain.stream", {"count": 300, "pace_ms": 50}),
                                       headers=ch.auth, stop_after=2)
        assert paced.status == 200 and len(paced.events) == 2, paced.error_body
        task_id, tok = paced.headers.get("x-nexus-task-id"), {"X-Nexus-Task-Token": paced.headers.get("x-nexus-task-token", "")}
        assert task_id and tok["X-Nexus-Task-Token"], paced.headers
        ev = ch.c.stack.http.get(f"/agent/v1/tasks/{task_id}/events?after=0", headers={**ch.auth, **tok})
        assert ev.status == 200, ev.describe()
        seqs = [e["seq"] for e in ev.json()["events"]]
        assert seqs[:2] == [1, 2] and seqs == sorted(set(seqs)), seqs
        assert [e["data"] for e in ev.json()["events"]][:2] == [{"n": 1}, {"n": 2}], ev.describe()
        r = ch.c.stack.http.request("DELETE", f"/agent/v1/tasks/{task_id}", headers={**ch.auth, **tok})
        assert r.status == 200 and r.json()["status"] == "cancelled", r.describe()
        wait_for("the cancel to close the producer's connection on A", lambda: backend.peer_closed, timeout=10)
        assert len(backend.calls("chain.stream")) == 3
    finally:
        backend.close()


def test_a_forwarding_loop_ends_with_hop_limit_exceeded(mesh):
    """Proves the hop limit ends a loop that crosses routers: a
    misconfigured proxy agent on A's LAN serves `loop.relay` by calling
    the same capability at C again, so each pass goes C → B → A → proxy →
    C. The loop stops by itself: the proxy is called with `hop_limit` 5,
    then 2 (one hop per gateway), the next pass is refused at B, and the
    original caller at C gets 508 `hop_limit_exceeded` relayed back
    through every pass."""
    ch = build_chain(mesh)
    echo = ch.a.lan_backend()
    proxy = ch.a.lan_backend(relay_url=f"{ch.c.sdk_url}/agent/v1/invoke", relay_headers=ch.auth)
    try:
        ch.a.serve(echo, "chain.echo")
        ch.a.serve(proxy, "loop.relay", name="proxy")
        wait_callable(ch.c, "chain.echo", {"warm": 1}, headers=ch.auth)
        ch.c.stack.wait_routable(envelope("loop.relay", {}), headers=ch.auth)
        r = ch.c.stack.http.post("/agent/v1/invoke", envelope("loop.relay", {"loop": 1}), headers=ch.auth, timeout=30)
        assert r.status == 508 and r.error_code() == "hop_limit_exceeded", r.describe()
        assert [x.json()["hop_limit"] for x in proxy.calls("loop.relay")] == [5, 2]
    finally:
        proxy.close()
        echo.close()
