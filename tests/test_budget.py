"""The gateway's memory budget and fair shares under floods (issue 6
items 3 and 4a). Each flood runs from one network-namespace host while a
second host's calls keep being served; agent-gw listens on the first
host's veth peer address and the second host routes to it through its own
veth. Clients run inside the namespaces (tests/agents/budget_client.py);
every loop is bounded in count and time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

from harness.backend import registration
from harness.http import envelope
from harness.netns import NetNs
from harness.poll import wait_for

CLIENT = Path(__file__).resolve().parent / "agents" / "budget_client.py"
MIB = 1024 * 1024
BUDGET = 16 * MIB
TTL = 60


def _argv(ns: NetNs, plan: Dict[str, Any]):
    return ns.exec_argv([sys.executable, str(CLIENT), json.dumps(plan)])


def _run(ns: NetNs, plan: Dict[str, Any], timeout: float = 120) -> Dict[str, Any]:
    out = subprocess.run(_argv(ns, plan), capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _start(ns: NetNs, plan: Dict[str, Any]) -> subprocess.Popen:
    return subprocess.Popen(_argv(ns, plan), stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)


def _finish(proc: subprocess.Popen, timeout: float = 120) -> Dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return json.loads(out)


def _two_hosts(make_stack, netns, backend, gateway):
    """The stack on the first host's veth peer, a second host routed to it,
    and routes for `bud.echo` (sync/async) and `bud.echo.stream`."""
    second = NetNs()
    try:
        second.reach(netns.host_addr)
        stack = make_stack(sdk_host=netns.host_addr, gateway=gateway)
        for intent in ("bud.echo", "bud.echo.stream"):
            stack.register(registration(intent, backend.endpoint, name=intent.replace(".", "-"), lease_seconds=600))
        stack.wait_routable(envelope("bud.echo", {}))
        stack.wait_routable(envelope("bud.echo.stream", {}))
    except BaseException:
        second.close()
        raise
    return stack, second


def _rate(counts: Dict[str, Any], kinds) -> float:
    total = sum(counts[k][0] for k in kinds)
    ok = sum(counts[k][1] for k in kinds)
    return ok / total if total else 0.0


def test_flood_of_large_results_and_histories_stays_within_the_budget(make_stack, netns, backend):
    """Proves that one host filling the budget with ~900 KB async results
    and ~1 MiB stream histories gets 503 `overloaded` with a truthful
    Retry-After (within the task TTL, when the first result expires) for
    new async and stream work, that agent-gw's peak RSS stays under the
    budget plus the idle RSS plus a stated allowance, that a second host's
    sync calls and registrations all succeed meanwhile, that `agentctl
    stats` shows the budget in use and the refusals, and that fetching the
    results frees the budget so new work is accepted again."""
    gateway = {
        "buffer_budget": BUDGET,
        "tenant_share_percent": 100,
        "source_share_percent": 100,
        "max_request_bytes": 2 * MIB,
        "rate_per_second": 100000,
        "rate_burst": 100000,
        "task_ttl": TTL,
    }
    stack, second = _two_hosts(make_stack, netns, backend, gateway)
    try:
        base = stack.http.base_url
        idle = stack.gw.rss_kib()["VmRSS"]
        b = _start(second, {"op": "second", "base": base, "tenant": "lab", "intent": "bud.echo",
                            "endpoint": backend.endpoint, "seconds": 6, "max": 200, "pause_ms": 20,
                            "skip": ["async", "stream"]})
        streams = _run(netns, {"op": "stream", "base": base, "n": 6, "tenant": "lab", "intent": "bud.echo.stream",
                               "count": 64, "size": 16000})
        assert streams["statuses"] == [200] * 6, streams
        flood = _run(netns, {"op": "async", "base": base, "n": 40, "tenant": "lab", "intent": "bud.echo",
                             "pad": 900_000, "stop_on_refusal": False})
        accepted = flood["tasks"]
        assert 3 <= len(accepted) <= 16, flood["statuses"]
        assert flood["refusals"], "the budget never filled"
        for r in flood["refusals"]:
            assert (r["status"], r["code"]) == (503, "overloaded"), r
            assert r["retry_after"] is not None and 1 <= int(r["retry_after"]) <= TTL + 1, r
        # Streams need less (their 320 KiB event reserve): a few more fit,
        # degrading their own histories, until they are refused too.
        more = _run(netns, {"op": "stream", "base": base, "n": 12, "tenant": "lab", "intent": "bud.echo.stream",
                            "count": 64, "size": 16000, "stop_on_refusal": True})
        assert [(r["status"], r["code"]) for r in more["refusals"]] == [(503, "overloaded")], more
        assert 1 <= int(more["refusals"][0]["retry_after"]) <= TTL + 1, more
        rss = stack.gw.rss_kib()
        second_host = _finish(b)

        # The budget's use and its refusals reach `agentctl stats`.
        def reported():
            g = stack.ctl_json("stats").get("gateway")
            return g if g and g["refused"]["budget"] >= len(flood["refusals"]) else None

        g = wait_for("the gateway's report in agentctl stats", reported, timeout=15)
        assert g["buffer"]["limit"] == BUDGET and 0 < g["buffer"]["used"] <= BUDGET, g
        assert g["buffer"]["peak"] <= BUDGET + 4 * MIB, g

        # Fetching the results frees the budget: new work is accepted.
        fetched = _run(netns, {"op": "fetch", "base": base, "tasks": accepted})
        assert fetched["statuses"] == [200] * len(accepted), fetched
        after = _run(netns, {"op": "async", "base": base, "n": 1, "tenant": "lab", "intent": "bud.echo", "pad": 10})
        assert after["statuses"] == [202], after
        again = _run(netns, {"op": "stream", "base": base, "n": 1, "tenant": "lab", "intent": "bud.echo.stream", "count": 3})
        assert again["statuses"] == [200], again
    finally:
        second.close()

    # Allowance over idle + budget: per-request copies of one ~1 MiB body
    # (read, decoded, re-encoded, answer) and allocator slack.
    allowance_kib = 12 * 1024
    print(f"agent-gw RSS idle {idle} KiB, after flood {rss['VmRSS']} KiB, peak {rss['VmHWM']} KiB "
          f"(bound idle + budget {BUDGET // 1024} KiB + allowance {allowance_kib} KiB); "
          f"second host: {second_host['counts']}")
    assert rss["VmHWM"] <= idle + BUDGET // 1024 + allowance_kib, (idle, rss)
    counts = second_host["counts"]
    assert counts["sync"][0] > 0 and counts["register"][0] > 0, second_host
    assert _rate(counts, ("sync", "register")) == 1.0, second_host


def test_one_source_cannot_fill_the_task_table_for_everyone(make_stack, netns, backend):
    """Proves that one host flooding async calls is refused with 429
    `share_exceeded` once it holds its source share (25% of a 64-task
    table: 16; while several of its calls still run, also its 25% share of
    the buffer budget), with a Retry-After that is when its first finished task
    really expires (not 1 s), while a second host's sync, async and stream
    calls and registrations are all accepted meanwhile, and that fetching
    results frees the flooder's slots at once."""
    gateway = {
        "task_capacity": 64,
        "task_ttl": TTL,
        "rate_per_second": 100000,
        "rate_burst": 100000,
    }
    stack, second = _two_hosts(make_stack, netns, backend, gateway)
    try:
        base = stack.http.base_url
        b = _start(second, {"op": "second", "base": base, "tenant": "lab", "intent": "bud.echo",
                            "endpoint": backend.endpoint, "seconds": 30, "max": 6, "pause_ms": 200})
        # Until the table share refuses (earlier refusals may come from the
        # source's budget share while several calls still run).
        flood = _run(netns, {"op": "async", "base": base, "n": 400, "tenant": "lab", "intent": "bud.echo", "pad": 0,
                             "stop_on": "task slots"})
        second_host = _finish(b)
        assert len(flood["tasks"]) == 16, (flood["statuses"], [r["message"] for r in flood["refusals"]][-3:])
        assert flood["refusals"], flood
        for r in flood["refusals"]:
            assert (r["status"], r["code"]) == (429, "share_exceeded"), r
        last = flood["refusals"][-1]
        assert "task slots" in last["message"], last
        # The first slot frees when the first finished task expires.
        assert TTL - 10 <= int(last["retry_after"]) <= TTL + 1, last

        # Fetching results frees the slots at once.
        fetched = _run(netns, {"op": "fetch", "base": base, "tasks": flood["tasks"][:4]})
        assert fetched["statuses"] == [200] * 4, fetched
        after = _run(netns, {"op": "async", "base": base, "n": 1, "tenant": "lab", "intent": "bud.echo", "pad": 0})
        assert after["statuses"] == [202], after

        # Refusals by the source's task share, or (while several of its
        # tasks still ran with their 1 MiB reserve) its budget share.
        def refused():
            r = (stack.ctl_json("stats").get("gateway") or {}).get("refused", {})
            n = r.get("tasks_source_share", 0) + r.get("budget_source_share", 0)
            return n if n >= len(flood["refusals"]) else None

        wait_for("the refusals in agentctl stats", refused, timeout=15)
    finally:
        second.close()
    counts = second_host["counts"]
    print(f"second host during the async flood: {counts}")
    assert all(counts[k][0] > 0 for k in counts), second_host
    assert _rate(counts, counts.keys()) == 1.0, second_host
