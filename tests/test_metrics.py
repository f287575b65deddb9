"""The Prometheus endpoint (`gateway.admin_listen`, GET /metrics; issue 26
item 1), checked with the real tools of Debian's `prometheus` package:
`promtool check metrics` lints the exposition, and a real Prometheus
server, started here on loopback with its own config and storage
directory, scrapes the endpoint and answers HTTP API queries for counters
the test moved in each daemon (the gateway's requests, agentd's routes).

One endpoint covers both daemons: agent-gw serves its own live counters
and agentd's, asked over IPC during the scrape (docs/metrics.md).
Everything listens on 127.0.0.1; Prometheus is stopped by PID.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, Optional

import pytest

from harness.backend import registration
from harness.config import Section, free_port
from harness.http import Http, envelope
from harness.poll import Fatal, wait_for

pytestmark = pytest.mark.skipif(
    shutil.which("promtool") is None or shutil.which("prometheus") is None,
    reason="needs Debian's prometheus package (make test-python installs it)",
)

# agent-gw's cap on concurrent admin connections (metrics::MAX_CONNECTIONS).
MAX_ADMIN_CONNECTIONS = 4


@pytest.fixture
def metrics_stack(make_stack):
    port = free_port()
    # One configured peer that never answers (a closed loopback port): its
    # session state shows in agentd_arpx_sessions.
    peer = Section(
        "peer",
        "router_b",
        {"router_id": "router-b", "address": "127.0.0.1", "port": free_port(), "key_fingerprint": "sha256:" + "ab" * 32},
    )
    stack = make_stack(gateway={"admin_listen": f"127.0.0.1:{port}"}, extra_sections=[peer])
    stack.admin = Http("127.0.0.1", port)
    return stack


def session_states(text: str) -> Dict[str, float]:
    prefix = 'agentd_arpx_sessions{state="'
    return {
        line[len(prefix) :].split('"', 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(prefix)
    }


def scrape(stack) -> str:
    r = stack.admin.get("/metrics")
    assert r.status == 200, r.describe()
    assert r.header("content-type").startswith("text/plain; version=0.0.4"), r.headers
    return r.body.decode("utf-8")


def sample(text: str, series: str) -> Optional[float]:
    """The value of the exact series line `series` (name and labels as
    written), or None when it is not there."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line[len(series) + 1 :])
    return None


def test_metrics_cover_both_daemons_and_pass_promtool(metrics_stack, backend):
    stack = metrics_stack
    stack.register(registration("metrics.echo", backend.endpoint, lease_seconds=60))
    stack.wait_routable(envelope("metrics.echo", {}))
    text = scrape(stack)
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert lint.returncode == 0, f"promtool check metrics:\n{lint.stdout}{lint.stderr}\n----\n{text}"
    # Both daemons: agentd answered this scrape, and its route count is
    # there by source next to the gateway's own families.
    assert sample(text, "agentd_up") == 1, text
    assert sample(text, 'agentd_routes{source="local"}') == 1, text
    assert sample(text, 'agentd_routes{source="peer"}') == 0, text
    # The one configured peer is in exactly one state, not established.
    states = session_states(text)
    assert set(states) == {"idle", "connecting", "open_sent", "snapshot", "established"}, text
    assert sum(states.values()) == 1 and states["established"] == 0, states
    assert sample(text, "agentd_arpx_peers") == 1, text
    for family in (
        "agentgw_requests_total counter",
        "agentgw_refusals_total counter",
        "agentgw_tasks gauge",
        "agentgw_buffer_used_bytes gauge",
        "agentgw_peer_handshakes_total counter",
        "agentgw_peer_signature_checks_total counter",
        "agentd_health_probe_results_total counter",
    ):
        assert f"# TYPE {family}\n" in text, family
    assert sample(text, 'agentgw_refusals_total{resource="tasks",reason="full"}') == 0, text


def test_only_get_metrics_is_served(metrics_stack):
    admin = metrics_stack.admin
    assert admin.get("/").status == 404
    assert admin.get("/metrics/x").status == 404
    assert admin.get("/healthz").status == 404
    r = admin.post("/metrics", {})
    assert r.status == 405 and r.header("allow") == "GET, HEAD", r.describe()


def test_without_agentd_the_gateway_still_answers_with_agentd_up_0(metrics_stack):
    stack = metrics_stack
    stack.agentd.stop()

    def down() -> Optional[str]:
        text = scrape(stack)
        return text if sample(text, "agentd_up") == 0 else None

    text = wait_for("agentd_up 0 after agentd stopped", down, timeout=15)
    assert "agentd_routes" not in text
    assert "# TYPE agentgw_requests_total counter\n" in text


def test_connections_beyond_the_cap_are_closed_at_accept(metrics_stack):
    admin = metrics_stack.admin
    held = []
    try:
        for _ in range(MAX_ADMIN_CONNECTIONS):
            s = socket.create_connection(("127.0.0.1", admin.port), timeout=10)
            held.append(s)
        # The gateway has taken them all (a scrape on a fresh connection
        # can no longer be served) ...
        def refused() -> bool:
            # Closed at accept: the close reads as EOF, or — when our
            # request got there before the close — as a reset (the kernel
            # answers unread data with RST). Either is a refusal; an
            # answer byte is not.
            with socket.create_connection(("127.0.0.1", admin.port), timeout=10) as s:
                try:
                    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                    return s.recv(1) == b""
                except (ConnectionResetError, BrokenPipeError):
                    return True

        wait_for("a connection beyond the cap to be closed", refused, timeout=10)
    finally:
        for s in held:
            s.close()
    # ... and serves again once they are gone.
    wait_for("a scrape after the held connections closed", lambda: admin.get("/metrics").status == 200, timeout=10)


# ---- a real Prometheus server ------------------------------------------------


class Prometheus:
    """`prometheus` on 127.0.0.1 with its own config and storage directory,
    scraping `target` every second; stopped by PID."""

    def __init__(self, workdir: Path, target: str) -> None:
        self.dir = workdir / "prometheus"
        self.dir.mkdir()
        cfg = self.dir / "prometheus.yml"
        cfg.write_text(
            "global:\n"
            "  scrape_interval: 1s\n"
            "  scrape_timeout: 1s\n"
            "scrape_configs:\n"
            "  - job_name: agentd\n"
            f"    static_configs:\n      - targets: ['{target}']\n"
        )
        self.port = free_port()
        self.log = open(self.dir / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={cfg}",
                f"--storage.tsdb.path={self.dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        wait_for("prometheus to be ready", self._ready, timeout=30, interval=0.1)

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise Fatal(f"prometheus exited ({self.proc.returncode}):\n{self.log_text()}")
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=5) as r:
            return r.status == 200

    def query(self, promql: str) -> Dict[str, Any]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]

    def value(self, promql: str) -> Optional[float]:
        """The value of a query that yields one series, or None."""
        result = self.query(promql)["result"]
        return float(result[0]["value"][1]) if len(result) == 1 else None

    def log_text(self) -> str:
        return (self.dir / "prometheus.log").read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.log.close()


@pytest.fixture
def prometheus(metrics_stack, workdir) -> Iterator[Prometheus]:
    p = Prometheus(workdir, f"127.0.0.1:{metrics_stack.admin.port}")
    yield p
    p.stop()


def test_a_prometheus_server_scrapes_both_daemons_and_answers_queries(metrics_stack, prometheus, backend):
    stack = metrics_stack
    # The target is up (Prometheus parsed a scrape of it).
    wait_for("prometheus to scrape the target", lambda: prometheus.value('up{job="agentd"}') == 1, timeout=30, interval=0.2)
    # Move a gateway counter: N requests answered 200 on the LAN listener.
    n = 25
    for _ in range(n):
        assert stack.http.get("/healthz").status == 200
    stack.register(registration("prom.echo", backend.endpoint, lease_seconds=60))
    stack.register(registration("prom.echo2", backend.endpoint, name="echo2", lease_seconds=60))

    requests = 'sum(agentgw_requests_total{job="agentd",listener="lan",outcome="answered",code="200"})'
    got = wait_for(
        f"prometheus to report >= {n} LAN requests answered 200",
        lambda: (lambda v: v if v is not None and v >= n else None)(prometheus.value(requests)),
        timeout=30,
        interval=0.2,
    )
    assert got >= n
    # And one of agentd's: the two local routes registered above.
    routes = 'agentd_routes{job="agentd",source="local"}'
    wait_for(
        "prometheus to report agentd's 2 local routes",
        lambda: prometheus.value(routes) == 2,
        timeout=30,
        interval=0.2,
    )
    assert prometheus.value('agentd_up{job="agentd"}') == 1
