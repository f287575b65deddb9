"""Streaming capabilities: SSE framing of generator handlers, in-band
errors, and cancellation when the caller disconnects."""

import json
import socket
import threading

import pytest

from agentd_sdk import Agent, Event
from conftest import envelope, post


def parse_sse(raw):
    """(events, comments) of an SSE body: events as (id, event, data)."""
    events, comments = [], []
    for block in raw.decode().split("\n\n"):
        if not block:
            continue
        fields = {}
        for line in block.split("\n"):
            if line.startswith(":"):
                comments.append(line[1:].strip())
                continue
            name, _, value = line.partition(": ")
            fields.setdefault(name, []).append(value)
        if "data" in fields:
            events.append((int(fields["id"][0]), fields.get("event", [None])[0], "\n".join(fields["data"])))
    return events, comments


@pytest.fixture
def streaming():
    agent = Agent(router="http://192.0.2.1:7446", tenant="lab", agent_id="s", host="127.0.0.1", allow_loopback=True)
    state = {"closed": threading.Event(), "ctx_cancelled": threading.Event(), "started": threading.Event()}

    @agent.capability("demo.count")
    def count(payload):
        for i in range(payload["to"]):
            yield {"n": i + 1}
        yield Event("multi\nline", event="end")

    @agent.capability("demo.breaks")
    def breaks(payload):
        yield "first"
        raise RuntimeError("internal detail")

    @agent.capability("demo.forever")
    def forever(payload, ctx):
        try:
            i = 0
            while True:
                i += 1
                state["started"].set()
                yield {"i": i}
                if ctx.wait_cancelled(0.01):
                    state["ctx_cancelled"].set()
        finally:
            state["closed"].set()

    handle = agent.start(register=False)
    yield f"http://127.0.0.1:{handle.port}", handle.port, state
    handle.close()


def test_generator_items_become_numbered_sse_events_then_the_marker(streaming):
    base, _, _ = streaming
    status, headers, body = post(base + "/invoke", envelope("demo.count", {"to": 3}),
                                 headers={"Accept": "text/event-stream"})
    assert status == 200 and headers["Content-Type"] == "text/event-stream"
    events, comments = parse_sse(body)
    assert events == [(1, None, '{"n":1}'), (2, None, '{"n":2}'), (3, None, '{"n":3}'), (4, "end", "multi\nline")]
    assert comments == ["nexus-stream-complete"]


def test_a_failing_generator_ends_with_an_error_event(streaming):
    base, _, _ = streaming
    _, _, body = post(base + "/invoke", envelope("demo.breaks", {}), headers={"Accept": "text/event-stream"})
    events, comments = parse_sse(body)
    assert events[0] == (1, None, "first")
    assert events[1][:2] == (2, "error")
    err = json.loads(events[1][2])
    assert err["code"] == "handler_failed" and "internal detail" not in err["message"]
    assert comments == ["nexus-stream-complete"]


def test_resume_requests_are_refused_explicitly(streaming):
    base, _, _ = streaming
    status, _, body = post(base + "/invoke", envelope("demo.count", {"to": 3}),
                           headers={"Accept": "text/event-stream", "Last-Event-ID": "2"})
    assert status == 409 and json.loads(body)["error"]["code"] == "history_lost"


def test_caller_disconnect_closes_the_generator_and_cancels_the_context(streaming):
    _, port, state = streaming
    body = json.dumps(envelope("demo.forever", {})).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"POST /invoke HTTP/1.1\r\nHost: a\r\nAccept: text/event-stream\r\n"
              b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    got = b""
    while got.count(b"\n\n") < 3:
        chunk = s.recv(4096)
        assert chunk, f"stream ended early: {got!r}"
        got += chunk
    assert b"HTTP/1.1 200" in got and b"id: 1\n" in got
    s.close()
    assert state["closed"].wait(10), "the handler generator was never closed"
    assert state["ctx_cancelled"].is_set() or state["closed"].is_set()
