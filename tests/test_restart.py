"""agentd dies (`kill -9`) and comes back while callers keep invoking: the
gateway forwards on its last FIB, the agent's SDK re-registers, and the
gateway resyncs with the new agentd — and no idempotent call fails."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from harness.agentproc import AgentProcess
from harness.http import envelope
from harness.poll import wait_for

AGENTS = Path(__file__).resolve().parent / "agents"
# Bounds of the call stream: it stops by itself at whichever comes first.
MAX_CALLS_PER_WORKER = 20000
MAX_SECONDS = 90.0


class CallStream:
    """Two workers making idempotent invocations (Idempotency-Key,
    X-Agentd-Idempotent) until stopped or bounded; every outcome kept."""

    def __init__(self, stack, intent: str) -> None:
        self.stack = stack
        self.intent = intent
        self.ok = 0
        self.failures = []
        # What the test is doing now; recorded with every failure.
        self.phase = "before the kill"
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(w,), daemon=True) for w in range(2)]
        self._deadline = time.monotonic() + MAX_SECONDS

    def start(self):
        for t in self._threads:
            t.start()
        return self

    def _run(self, w: int) -> None:
        for i in range(MAX_CALLS_PER_WORKER):
            if self._stop.is_set() or time.monotonic() > self._deadline:
                return
            payload = {"w": w, "i": i}
            headers = {"Idempotency-Key": str(uuid.uuid4()), "X-Agentd-Idempotent": "1", "X-Agentd-Timeout-Ms": "5000"}
            try:
                r = self.stack.http.post("/agent/v1/invoke", envelope(self.intent, payload), headers=headers, timeout=10)
                good = r.status == 200 and r.json().get("echo") == payload
                detail = r.describe()
            except Exception as exc:  # noqa: BLE001 - a failed call is data here
                good, detail = False, repr(exc)
            with self._lock:
                if good:
                    self.ok += 1
                else:
                    self.failures.append((self.phase, w, i, detail))

    def count(self) -> int:
        with self._lock:
            return self.ok + len(self.failures)

    def wait_more(self, n: int, what: str, timeout: float = 20.0) -> None:
        target = self.count() + n
        wait_for(f"{n} more calls ({what})", lambda: self.count() >= target, timeout=timeout)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=15)


def _agent(kind: str, stack, netns, workdir, lease: int) -> AgentProcess:
    router = f"http://{stack.cfg.sdk_host}:{stack.cfg.sdk_port}"
    if kind == "agentd_sdk":
        argv = [sys.executable, str(AGENTS / "sdk_agent.py"), router, "lab", "rs-echo", str(lease)]
    else:
        argv = [sys.executable, str(AGENTS / "nexilume_agent.py"), router, "lab", "rs-echo", str(lease), "0"]
    return AgentProcess(netns.exec_argv(argv), workdir / f"{kind}.log")


@pytest.mark.parametrize("state", ["state-kept", "state-lost"])
@pytest.mark.parametrize("kind", ["agentd_sdk", "nexilume"])
def test_kill9_agentd_under_idempotent_calls(make_stack, netns, workdir, kind, state):
    """Proves the control-plane restart story end to end: with an agent
    registered through its SDK (ours, or nexilume with /renew) and two
    workers invoking it idempotently, `kill -9` of agentd makes
    /healthz report `control_plane: down` while calls keep succeeding on
    the gateway's last FIB and registrations answer 503
    `control_plane_unavailable`; agentd is started again with its
    state_dir as it was (`state-kept`) or wiped (`state-lost`: a crash that
    lost its lease file); the gateway reports `up` and resyncs, agentd's
    RIB holds the agent's route, and it still holds it after more than one
    whole lease has passed since the restart (the SDK's renewals, or its
    re-registration after a 404, reach the new agentd). No call in the
    whole run fails."""
    lease = 6
    # Rate limits out of the way: the call stream runs flat out.
    stack = make_stack(sdk_host=netns.host_addr, gateway={"rate_per_second": 1000000, "rate_burst": 1000000})
    agent = _agent(kind, stack, netns, workdir, lease)
    try:
        agent.wait_message("ready", timeout=30)
        intent = "nx.echo" if kind == "nexilume" else "sdk.echo"
        stack.wait_routable(envelope(intent, {}))
        calls = CallStream(stack, intent).start()
        calls.wait_more(30, "before the kill")

        calls.phase = "agentd killed"
        stack.agentd.kill9()
        wait_for(
            "gateway to notice agentd is gone",
            lambda: stack.http.healthz().get("control_plane") == "down",
            timeout=10,
        )
        calls.wait_more(30, "while agentd is down")
        r = stack.http.post(
            "/agent/v1/register",
            {"intent": "x.y", "origin": "agent://lab/x", "endpoint": "http://192.0.2.9:1/x", "tenant": "lab"},
        )
        assert r.status == 503 and r.error_code() == "control_plane_unavailable", r.describe()

        if state == "state-lost":
            run_dir = stack.cfg.socket.parent
            for f in run_dir.iterdir():
                if f.is_file() and not f.is_socket():
                    f.unlink()
        calls.phase = "agentd restarting"
        restarted_at = time.monotonic()
        stack.start_agentd()
        calls.phase = "agentd restarted"
        stack.wait_gw_ready(timeout=15, control_plane="up")
        wait_for(
            "the agent's route in the restarted agentd's RIB",
            lambda: any(str(r.get("origin")) == "agent://lab/rs-echo" for r in stack.routes()),
            timeout=lease * 2 + 5,
        )
        calls.phase = "route in the new agentd"
        stack.wait_routable(envelope(intent, {}))
        calls.wait_more(30, "after the resync")
        # A whole lease after the restart the route is still there: it was
        # renewed (or re-registered) at the new agentd.
        wait_for(
            "one lease to pass since the restart",
            lambda: time.monotonic() > restarted_at + lease + 1.0,
            timeout=lease + 15,
            interval=0.1,
        )
        assert any(str(r.get("origin")) == "agent://lab/rs-echo" for r in stack.routes()), stack.routes()
        stack.wait_routable(envelope(intent, {}), timeout=1)
        calls.wait_more(10, "after one lease")
        calls.stop()
        assert calls.ok >= 90, calls.ok
        by_phase = {}
        for phase, *_ in calls.failures:
            by_phase[phase] = by_phase.get(phase, 0) + 1
        assert not calls.failures, (
            f"{len(calls.failures)} of {calls.count()} calls failed, by phase {by_phase}; first: {calls.failures[:2]}"
        )
    finally:
        agent.stop()
