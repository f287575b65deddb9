"""Handles of tasks that live on another router (issue 21 part 3): an
async call at C whose handler is on A is A's task; C keeps only a handle
to it. That handle table has the local table's shares (one address, one
tenant), frees a handle when its result is collected, and `agentctl
tasks` at C shows it."""

from __future__ import annotations

from typing import Any, Dict, Optional

from harness.http import envelope
from harness.peers import wait_callable
from harness.poll import wait_for

ASYNC = {"Prefer": "respond-async"}


def _pair(mesh: Any) -> Any:
    a = mesh.router("router-a")
    c = mesh.router("router-c", gateway={"task_capacity": 8})
    mesh.link("router-a", "router-c")
    a.start()
    c.start()
    c.wait_established("router-a")
    return a, c


def _remote(c: Any, want: Dict[str, int]) -> Dict[str, Any]:
    """`agentctl tasks --json` at C once its `remote` part shows `want`."""

    def check() -> Optional[Dict[str, Any]]:
        remote = c.stack.ctl_json("tasks").get("remote") or {}
        return remote if all(remote.get(k) == v for k, v in want.items()) else None

    return wait_for(f"agentctl tasks at C to show {want}", check, timeout=15, interval=0.1)


def _collect(c: Any, tid: str, token: str) -> Dict[str, Any]:
    hdr = {"X-Nexus-Task-Token": token}

    def finished() -> Optional[Any]:
        s = c.stack.http.get(f"/agent/v1/tasks/{tid}", headers=hdr)
        return s if s.status == 200 and s.json()["status"] not in ("pending", "running") else None

    wait_for(f"task {tid} to finish", finished, timeout=20)
    r = c.stack.http.get(f"/agent/v1/tasks/{tid}/result", headers=hdr)
    assert r.status == 200, r.describe()
    return r.json()


def test_remote_task_handles_have_shares_free_when_collected_and_show_in_agentctl(mesh):
    """Proves at C (task_capacity 8, so one address may hold 2 handles):
    two slow async calls to A's handler are accepted, a third from the
    same address is 429 `share_exceeded` (nothing sent to A); `agentctl
    tasks` shows the 2 handles; once both results are collected the
    handles are free at once (held 0, 2 released), and 20 more short
    calls from that same address, each collected, all go through — a
    collected handle never holds its slot for `task_ttl`."""
    a, c = _pair(mesh)
    backend = a.lan_backend()
    try:
        a.serve(backend, "rt.echo")
        a.serve(backend, "rt.slow", name="slow")
        wait_callable(c, "rt.echo")
        c.stack.wait_routable(envelope("rt.slow", {}), timeout=30)

        held = []
        for n in range(2):
            r = c.stack.http.post("/agent/v1/invoke", envelope("rt.slow", {"max_s": 30, "n": n}), headers=ASYNC)
            assert r.status == 202, r.describe()
            held.append((r.header("x-nexus-task-id"), r.header("x-nexus-task-token")))
        wait_for("both calls to reach A's handler", lambda: len(backend.calls("rt.slow")) == 2, timeout=10)
        third = c.stack.http.post("/agent/v1/invoke", envelope("rt.slow", {"max_s": 30, "n": 2}), headers=ASYNC)
        assert third.status == 429 and third.error_code() == "share_exceeded", third.describe()
        assert "other routers" in third.json()["error"]["message"], third.describe()
        remote = _remote(c, {"held": 2, "capacity": 8})
        assert remote["refused_source_share"] >= 1, remote
        assert len(backend.calls("rt.slow")) == 2

        backend.release()
        for tid, token in held:
            assert _collect(c, tid, token)["status"] == "completed"
        _remote(c, {"held": 0, "results_released": 2})

        for n in range(20):
            r = c.stack.http.post("/agent/v1/invoke", envelope("rt.echo", {"n": n}), headers=ASYNC)
            assert r.status == 202, (n, r.describe())
            doc = _collect(c, r.header("x-nexus-task-id"), r.header("x-nexus-task-token"))
            assert doc["result"]["echo"] == {"n": n}, doc
        _remote(c, {"held": 0, "results_released": 22})
    finally:
        backend.release()
        backend.close()
