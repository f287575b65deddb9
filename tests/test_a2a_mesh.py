"""A2A across routers (issue 9 item 4): the official `a2a-sdk` client on
router C's LAN (JWT of tenant lab) uses a skill whose agent is on router
A's LAN, through B (C–B–A chain, h2 + mTLS between the gateways). A
message is placed like an SDK async task: the A2A task lives on A, the
router that calls the handler (A's task table), and C keeps its handle;
every A2A method at C asks A over the peer data plane, so A's handler
sees C's verified caller, and a CancelTask at C closes the handler's
connection on A."""

from __future__ import annotations

import httpx
from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest

from harness.a2a_client import A2a, data_message, kinds, run
from harness.config import Section
from harness.peers import build_chain, wait_callable
from harness.poll import wait_for


def _tasks(router, part: str, key: str, want) -> None:
    """Until `agentctl tasks --json` at `router` shows `want(value)`."""
    wait_for(f"{router.name}: agentctl tasks {part}.{key}",
             lambda: want(((router.stack.ctl_json("tasks").get(part) or {}).get(key))), timeout=15, interval=0.1)


def test_a2a_client_at_c_uses_an_agent_at_a(mesh):
    """Proves across routers: C's card lists the mapped skill with C's own
    JSON-RPC URL; a blocking SendMessage completes with A's handler's
    answer (tenant and caller from C's token), a streamed one gives every
    step and ends, GetTask at C returns the task, and a CancelTask at C of
    a slow call reaches the handler on A (its connection closed, no
    answer)."""

    def configure(a, b, c):
        for name, cap in (("echo", "mesh.echo"), ("slow", "mesh.slow")):
            c.cfg.sections.append(Section("mapping", name, {"protocol": "a2a", "capability": cap}))

    ch = build_chain(mesh, configure=configure)
    backend = ch.a.lan_backend()
    try:
        ch.a.serve(backend, "mesh.echo")
        ch.a.serve(backend, "mesh.slow")
        wait_callable(ch.c, "mesh.echo", headers=ch.auth)
        ch.c.stack.wait_routable({"version": "1.0", "intent": "mesh.slow", "intent_version": 1, "task_id": "w",
                                  "source_agent": "agent://lab/caller", "tenant": "lab", "hop_limit": 8,
                                  "payload": {}}, headers=ch.auth, timeout=30)
        warm = len(backend.calls("mesh.echo"))
        c = A2a(ch.c.sdk_url, ch.auth)

        async def card():
            async with httpx.AsyncClient(headers=c.headers, timeout=15) as http:
                return await c.card(http)

        card = run(card())
        assert card.supported_interfaces[0].url == f"{ch.c.sdk_url}/a2a", card.supported_interfaces
        assert sorted(s.id for s in card.skills) == ["echo", "slow"], card.skills

        task = run(c.send(data_message({"n": 1}, skill="echo")))[0]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        answer = task["artifacts"][0]["parts"][0]["data"]
        assert answer["echo"] == {"n": 1}, answer
        assert (answer["tenant"], answer["source_agent"]) == ("lab", "agent://lab/caller"), answer
        assert len(backend.calls("mesh.echo")) == warm + 1
        # Placed like an SDK async task: held by A, a handle at C.
        _tasks(ch.a, "tasks", "held", lambda n: n is not None and n >= 1)
        _tasks(ch.c, "remote", "held", lambda n: n is not None and n >= 1)
        _tasks(ch.c, "tasks", "held", lambda n: n == 0)

        events = run(c.send(data_message({"n": 2}, skill="echo"), streaming=True))
        assert kinds(events)[-1] == ("statusUpdate", "TASK_STATE_COMPLETED"), events
        got = run(c.call("get_task", GetTaskRequest(id=task["id"])))
        assert got["status"]["state"] == "TASK_STATE_COMPLETED" and got["artifacts"] == task["artifacts"], got

        slow = run(c.send(data_message({"max_s": 20}, skill="slow"), polling=True))[0]["task"]
        wait_for("A's handler to receive the slow call", lambda: backend.calls("mesh.slow"), timeout=15)
        got = run(c.call("cancel_task", CancelTaskRequest(id=slow["id"])))
        assert got["status"]["state"] == "TASK_STATE_CANCELED", got
        wait_for("the cancel at C to close the handler's connection on A", lambda: backend.peer_closed, timeout=15)
        assert [r.json()["intent"] for r in backend.answered].count("mesh.slow") == 0
    finally:
        backend.close()
