"""SSE streams through the gateway: numeric event ids, resume after a client
disconnect with only later events, explicit errors instead of silent
restarts."""

from __future__ import annotations

import json

from harness.backend import registration
from harness.http import envelope
from harness.poll import wait_for


def _ids(events):
    return [int(e.id) for e in events]


def test_stream_resume_after_disconnect_has_no_duplicates(stack, backend):
    """Proves that a client that drops the connection after 3 of 6 events
    and resumes with the same envelope and `Last-Event-ID` receives exactly
    the remaining events (ids strictly after the cursor, increasing, no
    event twice, the completion marker at the end), that a second resume
    via the envelope's `resume_from_event_id` from an earlier cursor works
    the same way, and that the producer (the handler) ran exactly once:
    resuming never restarts it."""
    stack.register(registration("st.stream", backend.endpoint, lease_seconds=60))
    stack.wait_routable(envelope("st.stream", {}))
    env = envelope("st.stream", {"count": 6})

    first = stack.http.stream("/agent/v1/invoke-stream", env, stop_after=3)
    assert first.status == 200, first.error_body
    assert len(first.events) == 3 and not first.complete
    ids1 = _ids(first.events)
    assert ids1 == sorted(set(ids1)) and ids1[0] >= 1, ids1

    second = stack.http.stream("/agent/v1/invoke-stream", env, headers={"Last-Event-ID": str(ids1[-1])})
    assert second.status == 200, second.error_body
    assert second.complete, "resumed stream did not finish with the completion marker"
    ids2 = _ids(second.events)
    assert ids2 and ids2[0] > ids1[-1] and ids2 == sorted(set(ids2)), (ids1, ids2)
    data = [e.json() for e in first.events + second.events]
    assert data == [{"n": n} for n in range(1, 7)], data

    # Resume again from the first event, cursor in the body (nexilume style).
    third = stack.http.stream("/agent/v1/invoke-stream", {**env, "resume_from_event_id": ids1[0]})
    assert third.status == 200 and third.complete, third.error_body
    assert [e.json() for e in third.events] == [{"n": n} for n in range(2, 7)]
    assert _ids(third.events) == ids1[1:] + ids2

    assert len(backend.calls("st.stream")) == 1, "the producer was restarted"


def test_stream_resume_errors_are_explicit(make_stack, backend):
    """Proves that resuming with a changed request (same task_id, other
    payload) gets 409 `stream_changed` and resuming from a cursor older
    than the retained history (history bound 4 events, 10 produced) gets
    409 `history_lost` — never a silent restart of the producer — while the
    last retained events can still be resumed. The producer is paced (one
    event per 20 ms) and keeps running after the client drops."""
    stack = make_stack(gateway={"stream_history_events": 4})
    stack.register(registration("st2.stream", backend.endpoint, lease_seconds=60))
    stack.wait_routable(envelope("st2.stream", {}))
    env = envelope("st2.stream", {"count": 10, "pace_ms": 20})

    first = stack.http.stream("/agent/v1/invoke-stream", env, stop_after=2)
    assert first.status == 200 and [e.json() for e in first.events] == [{"n": 1}, {"n": 2}], first
    cursor = int(first.events[-1].id)
    wait_for("the producer to finish", lambda: backend.streams_finished, timeout=10)

    changed = stack.http.stream("/agent/v1/invoke-stream", {**env, "payload": {"count": 11}}, headers={"Last-Event-ID": str(cursor)})
    assert changed.status == 409, (changed.status, changed.error_body)
    assert json.loads(changed.error_body)["error"]["code"] == "stream_changed"

    lost = stack.http.stream("/agent/v1/invoke-stream", env, headers={"Last-Event-ID": str(cursor)})
    assert lost.status == 409, (lost.status, lost.error_body, [e.data for e in lost.events])
    assert json.loads(lost.error_body)["error"]["code"] == "history_lost"

    # The last 4 events are retained: resuming from event 6 gives 7..10.
    tail = stack.http.stream("/agent/v1/invoke-stream", env, headers={"Last-Event-ID": str(cursor + 4)})
    assert tail.status == 200 and tail.complete, tail.error_body
    assert [e.json() for e in tail.events] == [{"n": n} for n in range(7, 11)]
    assert len(backend.calls("st2.stream")) == 1, "the producer was restarted"


def test_live_stream_is_not_cut_by_the_history_bound(make_stack, backend):
    """Proves that the resume history bound (4 events here) limits only
    what can be resumed, not what a connected client receives: a producer
    that writes 10 events at once still reaches the live client as events
    1..10 in order with the completion marker."""
    stack = make_stack(gateway={"stream_history_events": 4})
    stack.register(registration("st3.stream", backend.endpoint, lease_seconds=60))
    stack.wait_routable(envelope("st3.stream", {}))
    live = stack.http.stream("/agent/v1/invoke-stream", envelope("st3.stream", {"count": 10}))
    assert live.status == 200, live.error_body
    assert [(e.event or "message", e.data) for e in live.events] == [("message", json.dumps({"n": n})) for n in range(1, 11)]
    assert live.complete
