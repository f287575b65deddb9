"""A registration storm from one LAN host must not shut another out
(issue 6 item 4b): per-source rate limits and route quotas refuse the
flooder with typed answers while a second host's registrations, renewals
and calls keep succeeding. Both hosts are network namespaces; the flood
is bounded in attempts and time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.agentproc import AgentProcess

LAN_HOST = str(Path(__file__).resolve().parent / "agents" / "lan_host.py")
PORT = 18080
FLOOD_ATTEMPTS = 20000
FLOOD_SECONDS = 8
PER_SOURCE_QUOTA = 50


def test_one_hosts_registration_flood_leaves_another_host_working(make_stack, netns, netns2, workdir):
    """Proves that while host F fires up to 20000 registrations (4 threads,
    at most 8 s, 16 origins), F is refused only with typed answers — 429
    `rate_limited` with a Retry-After of at least 1 s, then 403
    `quota_exceeded` once it holds `max_routes_per_source` routes — and
    never gets more than that quota into the table, while host S, at about
    10 operations per second during the whole flood, registers, renews and
    invokes its own capability with every single operation succeeding.
    Prints S's success rate (the figure for the issue)."""
    steady_ns, flood_ns = netns, netns2
    stack = make_stack(
        start=False,
        sdk_host=steady_ns.host_addr,
        agentd={"max_routes_per_source": PER_SOURCE_QUOTA},
        # The router's defaults (the harness lifts them for bulk setup).
        gateway={"control_rate_per_source": 20, "control_burst_per_source": 40},
    )
    stack.start()
    flood_ns.reach(steady_ns.host_addr)
    base = stack.http.base_url
    handler = AgentProcess(
        steady_ns.exec_argv([sys.executable, LAN_HOST, "serve", str(PORT), "steady"]), workdir / "steady-handler.log"
    )
    handler.wait_message("ready", timeout=20)
    try:
        steady = subprocess.Popen(
            steady_ns.exec_argv(
                [sys.executable, LAN_HOST, "steady", base, f"http://{steady_ns.ns_addr}:{PORT}/invoke", str(FLOOD_SECONDS)]
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        flood = subprocess.run(
            flood_ns.exec_argv(
                [sys.executable, LAN_HOST, "flood", base, str(FLOOD_ATTEMPTS), str(FLOOD_SECONDS),
                 f"http://{flood_ns.ns_addr}:9/invoke", "4"]
            ),
            capture_output=True,
            timeout=FLOOD_SECONDS + 60,
            stdin=subprocess.DEVNULL,
        )
        out, err = steady.communicate(timeout=FLOOD_SECONDS + 60)
        assert flood.returncode == 0, flood.stderr.decode(errors="replace")
        assert steady.returncode == 0, err.decode(errors="replace")
        f = json.loads(flood.stdout)
        s = json.loads(out)
        total = s["ok"] + s["failed"]
        print(f"flood: {f}")
        print(f"steady host: {s['ok']}/{total} operations succeeded during the flood "
              f"({100.0 * s['ok'] / max(total, 1):.1f}%)")

        # The flooder met typed refusals only, and at most its quota got in.
        counts = f["counts"]
        assert set(counts) <= {"200", "429 rate_limited", "403 quota_exceeded"}, counts
        assert counts.get("429 rate_limited", 0) > 0, counts
        assert counts.get("403 quota_exceeded", 0) > 0, counts
        assert counts.get("200", 0) == PER_SOURCE_QUOTA, counts
        assert f["retry_after"] and all(int(v) >= 1 for v in f["retry_after"]), f
        flooded = [r for r in stack.routes() if str(r["origin"]).startswith("agent://lab/flood")]
        assert len(flooded) == PER_SOURCE_QUOTA, len(flooded)

        # The other host did not notice.
        assert total >= 20, s
        assert s["failed"] == 0, s["failures"]
    finally:
        handler.stop()
