"""Shared fixtures: a served agent on loopback and the recording peer."""

import json
import os
import queue
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


class Recorder:
    """The recording HTTP peer in its own process (see router_recorder.py)."""

    def __init__(self, port=0, mode=""):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "router_recorder.py"), str(port), mode],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        first = self.lines.get(timeout=10)
        self.port = first["listening"]
        self.url = f"http://127.0.0.1:{self.port}"

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def next(self, timeout=15.0):
        """The next recorded request (waits for it up to ``timeout``)."""
        return self.lines.get(timeout=timeout)

    def until(self, predicate, timeout=15.0):
        """Recorded requests up to and including the first matching one."""
        seen = []
        while True:
            rec = self.next(timeout)
            seen.append(rec)
            if predicate(rec):
                return seen

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()


@pytest.fixture
def recorder():
    r = Recorder()
    yield r
    r.stop()


def post(url, body, headers=None, timeout=10):
    """POST JSON with urllib; returns (status, headers, raw body)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def get(url, headers=None, method="GET", timeout=10):
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def envelope(intent, payload, version=1, task_id="t-1", **extra):
    env = {"version": "1.0", "intent": intent, "intent_version": version, "task_id": task_id,
           "source_agent": "agent://lab/caller", "tenant": "lab", "hop_limit": 8,
           "constraints": {}, "payload": payload}
    env.update(extra)
    return env
