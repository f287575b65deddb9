"""An HTTP client run inside a network namespace for the flood tests
(tests/test_budget.py). One JSON plan on argv, one JSON report on stdout.
Every loop is bounded in count and in wall time.

Plans:
  {"op": "async", "base", "n", "tenant", "intent", "pad", "stop_on_refusal", "stop_on"}
      n async invokes; reports each status, error code, Retry-After and
      the task handles of the accepted ones.
  {"op": "stream", "base", "n", "tenant", "intent", "count", "size", "stop_on_refusal"}
      n streams read to the end (or refused).
  {"op": "fetch", "base", "tasks": [[id, token], ...]}
      GET /result of each task; reports the statuses.
  {"op": "second", "base", "tenant", "intent", "endpoint", "seconds", "max", "pause_ms", "skip"}
      until `seconds` pass (at most `max` rounds, `pause_ms` apart): one sync invoke, one
      async invoke, one stream and one registration per round; counts
      successes per kind.
"""

from __future__ import annotations

import http.client
import json
import sys
import time
import uuid
from urllib.parse import urlsplit


def _conn(base: str) -> http.client.HTTPConnection:
    u = urlsplit(base)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=30)


def _env(tenant: str, intent: str, payload) -> dict:
    return {
        "version": "1.0",
        "intent": intent,
        "intent_version": 1,
        "task_id": str(uuid.uuid4()),
        "source_agent": f"agent://{tenant}/flooder",
        "tenant": tenant,
        "hop_limit": 8,
        "constraints": {},
        "payload": payload,
    }


def _post(base: str, path: str, body, headers=None):
    c = _conn(base)
    try:
        data = json.dumps(body).encode()
        h = {"Content-Type": "application/json", "Content-Length": str(len(data))}
        h.update(headers or {})
        c.request("POST", path, data, h)
        r = c.getresponse()
        raw = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, raw
    finally:
        c.close()


def _code(raw: bytes):
    try:
        return json.loads(raw).get("error", {}).get("code")
    except (ValueError, AttributeError):
        return None


def op_async(p: dict) -> dict:
    out = {"statuses": [], "refusals": [], "tasks": []}
    end = time.monotonic() + 60
    for _ in range(int(p["n"])):
        if time.monotonic() > end:
            break
        env = _env(p["tenant"], p["intent"], {"pad": "x" * int(p.get("pad", 0))})
        status, h, raw = _post(p["base"], "/agent/v1/invoke", env, {"Prefer": "respond-async"})
        out["statuses"].append(status)
        if status == 202:
            out["tasks"].append([h.get("x-nexus-task-id"), h.get("x-nexus-task-token")])
        else:
            msg = ""
            try:
                msg = json.loads(raw)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                pass
            out["refusals"].append({"status": status, "code": _code(raw), "retry_after": h.get("retry-after"), "message": msg})
            if p.get("stop_on_refusal") or (p.get("stop_on") and p["stop_on"] in msg):
                break
    return out


def op_stream(p: dict) -> dict:
    out = {"statuses": [], "refusals": [], "events": 0}
    end = time.monotonic() + 60
    for _ in range(int(p["n"])):
        if time.monotonic() > end:
            break
        env = _env(p["tenant"], p["intent"], {"count": int(p["count"]), "size": int(p.get("size", 0))})
        status, h, raw = _post(p["base"], "/agent/v1/invoke-stream", env, {"Accept": "text/event-stream"})
        out["statuses"].append(status)
        if status == 200:
            out["events"] += raw.count(b"\nid: ") + raw.startswith(b"id: ")
        else:
            out["refusals"].append({"status": status, "code": _code(raw), "retry_after": h.get("retry-after")})
            if p.get("stop_on_refusal"):
                break
    return out


def op_fetch(p: dict) -> dict:
    statuses = []
    for task_id, token in p["tasks"]:
        c = _conn(p["base"])
        try:
            c.request("GET", f"/agent/v1/tasks/{task_id}/result", headers={"X-Nexus-Task-Token": token})
            r = c.getresponse()
            r.read()
            statuses.append(r.status)
        finally:
            c.close()
    return {"statuses": statuses}


def op_second(p: dict) -> dict:
    counts = {k: [0, 0] for k in ("sync", "async", "stream", "register")}
    failures = []
    end = time.monotonic() + float(p["seconds"])
    rounds = 0
    while time.monotonic() < end and rounds < int(p["max"]):
        if rounds:
            time.sleep(float(p.get("pause_ms", 0)) / 1000)
        rounds += 1
        tenant, intent = p["tenant"], p["intent"]
        checks = [
            ("sync", lambda: _post(p["base"], "/agent/v1/invoke", _env(tenant, intent, {"r": rounds})), 200),
            ("async", lambda: _post(p["base"], "/agent/v1/invoke", _env(tenant, intent, {"r": rounds}), {"Prefer": "respond-async"}), 202),
            ("stream", lambda: _post(p["base"], "/agent/v1/invoke-stream", _env(tenant, intent + ".stream", {"count": 2}), {"Accept": "text/event-stream"}), 200),
            (
                "register",
                lambda: _post(
                    p["base"],
                    "/agent/v1/register",
                    {
                        "intent": f"second.r{rounds % 4}",
                        "origin": f"agent://{tenant}/second",
                        "endpoint": p["endpoint"],
                        "tenant": tenant,
                        "version": 1,
                        "region": "local",
                        "lease_seconds": 60,
                    },
                ),
                200,
            ),
        ]
        for kind, call, want in checks:
            if kind in p.get("skip", []):
                continue
            try:
                status, _, raw = call()
            except OSError as e:
                status, raw = 0, str(e).encode()
            counts[kind][0] += 1
            if status == want:
                counts[kind][1] += 1
            elif len(failures) < 20:
                failures.append({"kind": kind, "status": status, "body": raw[:300].decode("utf-8", "replace")})
    return {"rounds": rounds, "counts": counts, "failures": failures}


def main() -> None:
    plan = json.loads(sys.argv[1])
    ops = {"async": op_async, "stream": op_stream, "fetch": op_fetch, "second": op_second}
    print(json.dumps(ops[plan["op"]](plan)))


if __name__ == "__main__":
    main()
