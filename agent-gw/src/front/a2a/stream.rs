//! SSE answers of `SendStreamingMessage` and `SubscribeToTask`: the task
//! as it is now, then one `StreamResponse` per step of its event history
//! (working, the artifact, the final state), each a JSON-RPC result on a
//! `data:` line; the stream ends with the task's final state. Driven by
//! the task table's change signal, no polling; a comment line every
//! [`KEEPALIVE`] while nothing happens keeps idle-timeout clients and
//! middleboxes from cutting a long task's stream.
//!
//! A subscriber that disconnects drops only its follower: the task runs
//! on (A2A tasks outlive their streams), and `CancelTask` ends it.

use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Response};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::body::{guarded, Body};
use crate::core::Core;
use crate::jsonrpc::Id;
use crate::limits::InflightGuard;
use crate::task::TaskId;

use super::error::A2aError;
use super::rpc::{error_bytes, result_bytes, view_of, Call, Tasks};
use super::task_view::TaskView;

/// Idle time after which a comment line is sent.
pub const KEEPALIVE: Duration = Duration::from_secs(4);

/// The SSE comment sent while nothing happens.
pub(crate) const KEEPALIVE_LINE: &[u8] = b": keepalive\n\n";

/// Most history events read per table borrow.
const BATCH: usize = 16;

/// One SSE event carrying a JSON-RPC answer (`error` events for errors,
/// as the official servers mark them).
pub(crate) fn sse(answer: &[u8], error: bool) -> Bytes {
    let mut out = Vec::with_capacity(answer.len() + 24);
    if error {
        out.extend_from_slice(b"event: error\n");
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(answer);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// The SSE response following task `tid` (A2A id `a2a_id`) from now.
/// The first event is taken here, before the caller yields: for a new
/// task that is the task as submitted, whatever its producer does next.
pub(crate) fn respond(
    call: &Call<'_>,
    tid: TaskId,
    a2a_id: String,
    guard: InflightGuard,
) -> Response<Body> {
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    let state = call.cx.state.clone();
    // The task now, and the history position it reflects.
    let cursor = state
        .tasks
        .borrow_mut()
        .task(&tid)
        .map(|task| task.history().last_id());
    let first = cursor.zip(view_of(&state, call.tasks, &tid, &a2a_id));
    let held = (state, call.tasks.clone());
    tokio::task::spawn_local(pump(held, tid, a2a_id, call.id.clone(), first, tx));
    let mut r = Response::new(guarded(crate::body::channel(rx), guard));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

async fn pump(
    (state, contexts): (Rc<Core>, Tasks),
    tid: TaskId,
    a2a_id: String,
    id: Id,
    first: Option<(u64, TaskView)>,
    tx: mpsc::Sender<Bytes>,
) {
    let send = |v: Value| sse(&result_bytes(&id, v), false);
    let Some((mut cursor, view)) = first else {
        let e = A2aError::task_not_found(&a2a_id);
        let _ = tx.send(sse(&error_bytes(Some(&id), &e), true)).await;
        return;
    };
    if tx.send(send(view.first_event())).await.is_err() || view.state.is_terminal() {
        return;
    }
    loop {
        let step = {
            let t = state.tasks.borrow_mut();
            match (t.batch(&tid, cursor, BATCH), t.task(&tid)) {
                (Ok(b), Some(task)) => Some((b, task.subscribe())),
                _ => None,
            }
        };
        let Some((batch, mut changed)) = step else {
            let e = A2aError::task_not_found(&a2a_id);
            let _ = tx.send(sse(&error_bytes(Some(&id), &e), true)).await;
            return;
        };
        if !batch.events.is_empty() {
            let Some(view) = view_of(&state, &contexts, &tid, &a2a_id) else {
                return;
            };
            for e in &batch.events {
                cursor = e.id;
                for v in view.events_for(e.event.as_deref()) {
                    if tx.send(send(v)).await.is_err() {
                        return;
                    }
                }
            }
        }
        if batch.finished.is_some() {
            return;
        }
        if !batch.events.is_empty() {
            continue;
        }
        match tokio::time::timeout(KEEPALIVE, changed.changed()).await {
            Ok(Ok(())) => {}
            // The task left the table: the next round says so.
            Ok(Err(_)) => {}
            Err(_) => {
                if tx.send(Bytes::from_static(KEEPALIVE_LINE)).await.is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_data_lines_and_errors_are_marked() {
        assert_eq!(&sse(b"{\"a\":1}", false)[..], b"data: {\"a\":1}\n\n");
        assert_eq!(&sse(b"{}", true)[..], b"event: error\ndata: {}\n\n");
    }
}
