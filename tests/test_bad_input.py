"""Every bad input gets a typed error (`{"error":{"code","message"}}` with
the code of docs/sdk-api.md) and leaves other calls and state untouched."""

from __future__ import annotations

import json
import socket
import threading

from harness.backend import registration
from harness.http import envelope


def _good_call(stack):
    r = stack.http.post("/agent/v1/invoke", envelope("bad.echo", {"ok": True}))
    assert r.status == 200 and r.json()["echo"] == {"ok": True}, r.describe()


def _typed(r, status, code):
    assert r.status == status, f"expected {status} {code}, got {r.describe()}"
    body = r.json()
    assert set(body) >= {"error"}, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"], body


def test_malformed_requests_get_typed_errors_and_leave_state_alone(stack, backend):
    """Proves, for invoke, route and register: invalid JSON, a non-object
    body, trailing data, a duplicated key (top level and nested, never
    "last one wins"), a wrong-typed field, an unknown path and a wrong
    method each get their documented status and code; none of them reaches
    the handler, creates or changes a route; a good call right after each
    succeeds."""
    info = stack.register(registration("bad.echo", backend.endpoint, lease_seconds=60))
    stack.wait_routable(envelope("bad.echo", {}))
    routes_before = sorted(stack.route_ids())
    good = json.dumps(envelope("bad.echo", {"x": 1}))
    dup_top = good[:-1] + ',"intent":"other.cap"}'
    dup_nested = json.dumps(envelope("bad.echo", {"x": 1})).replace('"payload": {"x": 1}', '"payload": {"x": 1, "x": 2}')
    assert '"x": 1, "x": 2' in dup_nested
    # A payload nested 100 levels deep (the limit is 64).
    deep = good.replace('{"x": 1}', '{"a":' * 100 + "1" + "}" * 100)
    assert deep != good
    cases = [
        ("/agent/v1/invoke", b"{not json", 400, "invalid_json"),
        ("/agent/v1/invoke", b"[1,2,3]", 400, "invalid_json"),
        ("/agent/v1/invoke", good.encode() + b" {}", 400, "invalid_json"),
        ("/agent/v1/invoke", b"\xff\xfe{}", 400, "invalid_json"),
        ("/agent/v1/invoke", deep.encode(), 400, "invalid_json"),
        ("/agent/v1/invoke", dup_top.encode(), 400, "duplicate_key"),
        ("/agent/v1/invoke", dup_nested.encode(), 400, "duplicate_key"),
        ("/agent/v1/invoke", json.dumps({**envelope("bad.echo", {}), "hop_limit": "8"}).encode(), 400, "invalid_field"),
        ("/agent/v1/invoke", json.dumps({k: v for k, v in envelope("bad.echo", {}).items() if k != "intent"}).encode(), 400, "invalid_field"),
        ("/agent/v1/route", dup_top.encode(), 400, "duplicate_key"),
        ("/agent/v1/register", b'{"intent":"bad.echo","intent":"evil.cap"}', 400, "duplicate_key"),
        (
            "/agent/v1/register",
            json.dumps(registration("bad.new", backend.endpoint, version=0)).encode(),
            400,
            "invalid_field",
        ),
    ]
    for path, body, status, code in cases:
        _typed(stack.http.post(path, body), status, code)
        _good_call(stack)

    _typed(stack.http.get("/agent/v1/no-such-endpoint"), 404, "not_found")
    r = stack.http.get("/agent/v1/invoke")
    _typed(r, 405, "method_not_allowed")
    assert "POST" in (r.header("allow") or ""), r.headers

    # Nothing above reached the handler or touched the RIB.
    intents = [c.json()["intent"] for c in backend.calls()]
    assert set(intents) == {"bad.echo"}, intents
    payloads = [c.json()["payload"] for c in backend.calls()]
    assert all(p == {"ok": True} for p in payloads), payloads
    assert sorted(stack.route_ids()) == routes_before
    r = stack.http.post("/agent/v1/renew", {"route_id": info["route_id"]})
    assert r.status == 200, r.describe()


def test_bad_cursor_and_unknown_task_are_typed(stack, backend):
    """Proves that a non-numeric or negative `Last-Event-ID` /
    `resume_from_event_id` and a bad `after` query get 400 `invalid_cursor`,
    that an unknown task id (and a wrong task token) get 404 `not_found`,
    and that a stream and an invoke made right after still work."""
    stack.register(registration("bad.stream", backend.endpoint, lease_seconds=60))
    stack.register(registration("bad.echo", backend.endpoint, lease_seconds=60))
    stack.wait_routable(envelope("bad.stream", {}))
    stack.wait_routable(envelope("bad.echo", {}))

    env = envelope("bad.stream", {"count": 2})
    for headers, body in [
        ({"Last-Event-ID": "abc"}, env),
        ({"Last-Event-ID": "-1"}, env),
        ({}, {**env, "resume_from_event_id": "7"}),
        ({}, {**env, "resume_from_event_id": -3}),
    ]:
        r = stack.http.stream("/agent/v1/invoke-stream", body, headers=headers)
        assert r.status == 400, (r.status, r.error_body)
        assert json.loads(r.error_body)["error"]["code"] == "invalid_cursor", r.error_body

    _typed(stack.http.get("/agent/v1/tasks/t-unknown", headers={"X-Nexus-Task-Token": "nope"}), 404, "not_found")
    _typed(stack.http.get("/agent/v1/tasks/t-unknown/result", headers={"X-Nexus-Task-Token": "nope"}), 404, "not_found")
    _typed(stack.http.request("DELETE", "/agent/v1/tasks/t-unknown", headers={"X-Nexus-Task-Token": "x"}), 404, "not_found")

    # A real task: wrong token is indistinguishable from unknown; bad `after` is a cursor error.
    r = stack.http.post("/agent/v1/invoke", envelope("bad.echo", {"t": 1}), headers={"Prefer": "respond-async"})
    assert r.status == 202, r.describe()
    task_id, token = r.header("x-nexus-task-id"), r.header("x-nexus-task-token")
    assert task_id and token, r.headers
    _typed(stack.http.get(f"/agent/v1/tasks/{task_id}", headers={"X-Nexus-Task-Token": token + "x"}), 404, "not_found")
    _typed(stack.http.get(f"/agent/v1/tasks/{task_id}", headers={}), 404, "not_found")
    _typed(
        stack.http.get(f"/agent/v1/tasks/{task_id}/events?after=xyz", headers={"X-Nexus-Task-Token": token}),
        400,
        "invalid_cursor",
    )
    ok = stack.http.get(f"/agent/v1/tasks/{task_id}", headers={"X-Nexus-Task-Token": token})
    assert ok.status == 200 and ok.json()["task_id"] == task_id, ok.describe()

    good = stack.http.stream("/agent/v1/invoke-stream", envelope("bad.stream", {"count": 2}))
    assert good.status == 200 and good.complete and [e.json() for e in good.events] == [{"n": 1}, {"n": 2}]
    _good_call(stack)


def test_concurrent_garbage_does_not_disturb_good_calls(stack, backend):
    """Proves isolation under concurrency: 4 threads sending 25 malformed
    bodies each while 4 threads make 25 good invocations each; every good
    call returns its own payload, every bad one a 400 with a typed code."""
    stack.register(registration("bad.echo", backend.endpoint, lease_seconds=60))
    stack.wait_routable(envelope("bad.echo", {}))
    failures = []
    bad_bodies = [b"{", b'{"a":1,"a":2}', b"null", b'{"version":"1.0"}']

    def good_worker(w):
        for i in range(25):
            r = stack.http.post("/agent/v1/invoke", envelope("bad.echo", {"w": w, "i": i}))
            if r.status != 200 or r.json()["echo"] != {"w": w, "i": i}:
                failures.append(("good", w, i, r.describe()))

    def bad_worker(w):
        for i in range(25):
            r = stack.http.post("/agent/v1/invoke", bad_bodies[(w + i) % len(bad_bodies)])
            if r.status != 400 or r.error_code() not in ("invalid_json", "duplicate_key", "invalid_field"):
                failures.append(("bad", w, i, r.describe()))

    threads = [threading.Thread(target=good_worker, args=(w,)) for w in range(4)]
    threads += [threading.Thread(target=bad_worker, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "workers did not finish in 60 s"
    assert not failures, failures[:5]


def _until_closed(stack, request: bytes) -> bytes:
    """Sends `request` on a raw socket and reads until the gateway closes
    the connection (bounded by the socket timeout: a gateway that keeps
    the connection open fails the test)."""
    with socket.create_connection((stack.http.host, stack.http.port), timeout=10) as sock:
        try:
            sock.sendall(request)
        except OSError:
            pass  # the gateway may answer and stop reading first
        data = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                raise AssertionError(f"connection left open after {data[:200]!r}")
            if not chunk:
                return data
            data += chunk


def test_requests_the_http_layer_refuses_get_the_json_shape_and_close(stack, backend):
    """Proves, on the real agent-gw binary: an oversized head (431), two
    different Content-Length values, a non-numeric Content-Length,
    `Transfer-Encoding: gzip`, an obs-folded header line, a malformed
    request line, and (RFC 9112 §3.2) an HTTP/1.1 request with two `Host`
    lines or none each get `{"error":{"code","message","outcome"}}` with
    `X-Agentd-Outcome: rejected` and the connection closed, the 400s with
    a reason naming their own fault; a good call right after each
    succeeds."""
    stack.register(registration("bad.echo", backend.endpoint, lease_seconds=60))
    stack.wait_routable(envelope("bad.echo", {}))
    big = b"".join(b"x-pad-%d: %s\r\n" % (i, b"p" * 1000) for i in range(40))
    post = b"POST /agent/v1/invoke HTTP/1.1\r\nHost: gw\r\n"
    cases = [
        (b"GET /healthz HTTP/1.1\r\nHost: gw\r\n" + big + b"\r\n", 431, "header_too_large", None),
        (post + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400, "malformed_request", "bad_content_length"),
        (post + b"Content-Length: 2x\r\n\r\n{}", 400, "malformed_request", "bad_content_length"),
        (post + b"Transfer-Encoding: gzip\r\n\r\n", 400, "malformed_request", "bad_transfer_encoding"),
        (b"GET /healthz HTTP/1.1\r\nHost: gw\r\nX-A: 1\r\n folded\r\n\r\n", 400, "malformed_request", "bad_header_line"),
        (b"GET /healthz HTTP/7.1\r\nHost: gw\r\n\r\n", 400, "malformed_request", "bad_version"),
        (b"GET /healthz\r\nHost: gw\r\n\r\n", 400, "malformed_request", "bad_target"),
        (b"GET /healthz HTTP/1.1\r\nHost: gw\r\nHost: other\r\n\r\n", 400, "malformed_request", "repeated_host"),
        (b"GET /healthz HTTP/1.1\r\n\r\n", 400, "malformed_request", "missing_host"),
    ]
    messages = set()
    for request, status, code, reason in cases:
        data = _until_closed(stack, request)
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        assert lines[0].startswith(f"HTTP/1.1 {status} "), data[:300]
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        assert headers.get("x-agentd-outcome") == "rejected", headers
        assert headers.get("connection") == "close", headers
        assert headers.get("content-type") == "application/json", headers
        error = json.loads(body)["error"]
        assert error["code"] == code and error["outcome"] == "rejected", error
        assert error["message"], error
        assert error.get("reason") == reason, (request[:80], error)
        if reason and reason != "bad_content_length":
            assert error["message"] not in messages, error
            messages.add(error["message"])
        _good_call(stack)


def _answer_then_send_rest(stack, first: bytes, rest: bytes) -> bytes:
    """Sends `first`, reads the gateway's whole answer (Content-Length
    framed), then sends `rest` in 16 KiB writes and reads to the end: the
    client of a gateway that answered before reading the body is still
    writing it. Fails on a reset in either direction."""
    with socket.create_connection((stack.http.host, stack.http.port), timeout=10) as sock:
        sock.sendall(first)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            assert chunk, f"closed before answering: {data[:200]!r}"
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(int(v) for k, _, v in (line.partition(b":") for line in head.split(b"\r\n")[1:])
                      if k.strip().lower() == b"content-length")
        while len(body) < length:
            chunk = sock.recv(65536)
            assert chunk, "closed inside the answer"
            body += chunk
        for i in range(0, len(rest), 16384):
            try:
                sock.sendall(rest[i:i + 16384])
            except OSError as e:
                raise AssertionError(f"connection reset while the client still sent its body: {e!r}")
        try:
            tail = sock.recv(65536)
        except OSError as e:
            raise AssertionError(f"connection reset instead of closed: {e!r}")
        assert tail == b"", tail[:200]
        return head + b"\r\n\r\n" + body


def test_an_answer_before_the_body_is_read_is_not_reset_away(stack, backend):
    """Proves that when the gateway answers before it has read a request's
    body (a declared or chunked body over `max_request_bytes`, or a
    refusal on /mcp before any body is read), it goes on reading what the
    client still sends and then closes in order: a client still writing
    its body gets no reset, so it can read the answer. Closing a socket
    with unread bytes resets the connection instead, and a client that
    is still writing (the official MCP client's HTTP stack) loses the
    answer."""
    stack.register(registration("bad.echo", backend.endpoint, lease_seconds=60))
    stack.wait_routable(envelope("bad.echo", {}))
    over = 65536 + 100_000
    body = b"{" + b" " * (over - 2) + b"}"
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 16384]), body[i:i + 16384])
                       for i in range(0, len(body), 16384)) + b"0\r\n\r\n"
    invoke = b"POST /agent/v1/invoke HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
    cases = [
        (invoke + b"Content-Length: %d\r\n\r\n" % len(body), body, 413, "payload_too_large"),
        # The gateway reads the first 64 KiB before it can tell.
        (invoke + b"Transfer-Encoding: chunked\r\n\r\n" + chunked[:80_000], chunked[80_000:],
         413, "payload_too_large"),
        (b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
         b"Accept: application/json, text/event-stream\r\n"
         b"Content-Length: %d\r\n\r\n" % len(body), body, None, None),
    ]
    for first, rest, status, code in cases:
        data = _answer_then_send_rest(stack, first, rest)
        head, _, answer = data.partition(b"\r\n\r\n")
        line = head.split(b"\r\n")[0].decode("latin-1")
        assert line.startswith("HTTP/1.1 4"), data[:300]
        if status is not None:
            assert line.startswith(f"HTTP/1.1 {status} "), data[:300]
            assert json.loads(answer)["error"]["code"] == code, answer[:300]
        _good_call(stack)


def _read_answer(sock: socket.socket, data: bytes = b"") -> tuple:
    """One Content-Length framed answer from `sock` (after `data` already
    read): (status, lower-cased headers, body, bytes left over)."""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before answering: {data[:200]!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed inside the answer"
        rest += chunk
    return int(lines[0].split()[1]), headers, rest[:length], rest[length:]


def test_an_answer_that_leaves_the_body_unread_says_close_or_serves_the_next_request(stack, backend):
    """Proves that a client following HTTP/1.1 never loses its next
    request on a connection the gateway answered before reading the body:
    the head comes first and the gateway answers it (a foreign Origin on
    /mcp, a method or path it does not serve, an endpoint that answers
    from the head); only then does the client send the body and its next
    request on the same connection. Either the answer said
    `Connection: close` (and the connection ends in order), or the next
    request is answered. Before, the answer kept the connection open in
    name only: hyper closed it as the body had not arrived, and the
    client's next request got no answer (test_a2a's DNS-rebinding test
    saw it once in CI as "Server disconnected without sending a
    response")."""
    stack.register(registration("bad.echo", backend.endpoint, lease_seconds=60))
    stack.wait_routable(envelope("bad.echo", {}))
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    length = b"Content-Length: %d\r\n\r\n" % len(body)
    cases = [
        (b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nOrigin: http://evil.example\r\n"
         b"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n", 403),
        (b"POST /healthz HTTP/1.1\r\nHost: gw\r\n", 405),
        (b"POST /no-such-endpoint HTTP/1.1\r\nHost: gw\r\n", 404),
        (b"GET /healthz HTTP/1.1\r\nHost: gw\r\n", 200),
    ]
    following = b"GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n"
    for head, status in cases:
        with socket.create_connection((stack.http.host, stack.http.port), timeout=10) as sock:
            sock.sendall(head + length)
            got, headers, _, left = _read_answer(sock)
            assert got == status, (head[:40], got, headers)
            try:
                sock.sendall(body + following)
            except OSError as e:
                raise AssertionError(f"{head[:40]!r}: connection reset while the client sent its body: {e!r}")
            if headers.get("connection", "").lower() == "close":
                data = left
                while True:
                    try:
                        chunk = sock.recv(65536)
                    except OSError as e:
                        raise AssertionError(f"{head[:40]!r}: reset instead of closed: {e!r}")
                    if not chunk:
                        break
                    data += chunk
                assert data == b"", (head[:40], data[:200])
            else:
                nxt, _, _, _ = _read_answer(sock, left)
                assert nxt == 200, (head[:40], nxt)
    _good_call(stack)
