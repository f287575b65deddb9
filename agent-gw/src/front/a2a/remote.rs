//! A2A tasks that live on another router: a message whose best route is
//! a peer path is placed like an SDK async task (`endpoints::remote`), on
//! the router that calls the handler. This gateway keeps the handle and
//! the A2A facts (context, skill); every A2A method asks that router
//! through the SDK task API over any live path: the status for
//! `GetTask`, `DELETE` for `CancelTask`, and `/events` with `wait_ms`
//! to follow the task (blocking `SendMessage`, the SSE methods), which
//! answers when the task changes, not on a timer.

use bytes::Bytes;
use http::{header, HeaderValue, Response};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::api::error::ErrorCode;
use crate::api::task_request::TaskRequest;
use crate::body::{guarded, Body};
use crate::front::Ctx;
use crate::jsonrpc::Id;
use crate::limits::InflightGuard;
use crate::pipeline::tasks::MAX_EVENTS_WAIT_MS;
use crate::router::TaskOp;
use crate::task::{TaskFailure, TaskId, TaskResult, TaskState};

use super::error::{A2aError, Kind};
use super::handle::Meta;
use super::rpc::{error_bytes, result_bytes};
use super::stream::{sse, KEEPALIVE_LINE};
use super::task_view::TaskView;

/// Largest task document read back (a result of `max_result_bytes`,
/// quoted, plus the status fields).
fn max_doc(cx: &Ctx) -> usize {
    cx.state
        .cfg
        .max_result_bytes
        .saturating_mul(2)
        .saturating_add(64 * 1024)
}

/// One remote task: where to ask and as whom.
#[derive(Clone, Debug)]
pub(crate) struct Remote {
    pub tid: TaskId,
    /// The token its router issued (hex).
    pub token: Box<str>,
    pub tenant: Box<str>,
    pub a2a_id: String,
    pub meta: Meta,
    pub capability: Box<str>,
}

impl Remote {
    /// Task operation `op` (`query`: the events cursor and wait) on the
    /// task's router; its JSON answer, or the A2A error for its refusal.
    async fn ask(&self, cx: &Ctx, op: TaskOp, wait: Option<(u64, u64)>) -> Result<Value, A2aError> {
        let token = HeaderValue::from_str(&self.token)
            .map_err(|_| A2aError::task_not_found(&self.a2a_id))?;
        let mut req = TaskRequest::new(&self.tid.to_string(), op, token);
        if let Some((after, wait_ms)) = wait {
            req.after = after;
            req.wait_ms = wait_ms;
        }
        let not_found = || A2aError::task_not_found(&self.a2a_id);
        let answer = crate::pipeline::remote::task_op(&cx.state, &req, Some(&self.tenant)).await;
        let resp: Response<Body> = match answer {
            Ok(r) => r,
            Err(e) if e.code == ErrorCode::NotFound => return Err(not_found()),
            Err(e) => return Err(A2aError::from(e)),
        };
        let status = resp.status();
        let (head, body) = resp.into_parts();
        let bytes = crate::api::request_body::read_limited(&head.headers, body, max_doc(cx))
            .await
            .map_err(A2aError::from)?;
        let doc: Value = serde_json::from_slice(&bytes).unwrap_or_default();
        if status.is_success() {
            return Ok(doc);
        }
        let code = doc["error"]["code"].as_str().unwrap_or("");
        if matches!(code, "not_found" | "task_expired" | "result_released") {
            return Err(not_found());
        }
        Err(A2aError::new(
            Kind::Internal,
            format!(
                "the router holding task {} answered {status}: {}",
                self.a2a_id,
                doc["error"]["message"]
                    .as_str()
                    .unwrap_or("no reason given")
            ),
        ))
    }

    /// The task as A2A shows it now.
    pub async fn view(&self, cx: &Ctx) -> Result<TaskView, A2aError> {
        let doc = self.ask(cx, TaskOp::Status, None).await?;
        Ok(self.view_of(&doc))
    }

    /// `CancelTask` on the task's router; the task as it ends up.
    pub async fn cancel(&self, cx: &Ctx) -> Result<TaskView, A2aError> {
        let doc = self.ask(cx, TaskOp::Cancel, None).await?;
        Ok(self.view_of(&doc))
    }

    /// A task status document of the SDK API as an A2A view.
    fn view_of(&self, doc: &Value) -> TaskView {
        let state = state_of(doc);
        let result = doc.get("result").map(|r| TaskResult {
            status: doc["result_status"]
                .as_u64()
                .and_then(|s| u16::try_from(s).ok())
                .unwrap_or(200),
            content_type: Some("application/json".into()),
            body: serde_json::to_vec(r).unwrap_or_default(),
        });
        let failure = doc.get("error").map(|e| {
            let code = e["code"].as_str().unwrap_or("");
            TaskFailure::new(
                ErrorCode::parse(code).unwrap_or(ErrorCode::UpstreamError),
                e["message"].as_str().unwrap_or(code).to_string(),
            )
        });
        TaskView {
            id: self.a2a_id.clone(),
            context_id: self.meta.context_id.to_string(),
            state,
            skill: self.meta.skill.to_string(),
            capability: doc["capability"].as_str().unwrap_or("").to_string(),
            result,
            failure,
        }
    }

    /// The next events after `cursor`, waiting for a change when there
    /// are none: (events as (seq, name), the task's state).
    async fn next(
        &self,
        cx: &Ctx,
        cursor: u64,
    ) -> Result<(Vec<(u64, String)>, TaskState), A2aError> {
        let wait = Some((cursor, MAX_EVENTS_WAIT_MS));
        let doc = self.ask(cx, TaskOp::Events, wait).await?;
        let events = doc["events"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| Some((e["seq"].as_u64()?, e["event"].as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        Ok((events, state_of(&doc)))
    }

    /// Until the task has ended (a blocking `SendMessage`), or its
    /// router cannot be asked. The task's own deadline bounds this.
    pub async fn wait_terminal(&self, cx: &Ctx) {
        let mut cursor = 0;
        while let Ok((events, state)) = self.next(cx, cursor).await {
            if state.is_terminal() {
                return;
            }
            cursor = events.last().map_or(cursor, |e| e.0);
        }
    }
}

/// Our task state named by a status document.
fn state_of(doc: &Value) -> TaskState {
    match doc["status"].as_str() {
        Some("completed") => TaskState::Completed,
        Some("failed") => TaskState::Failed,
        Some("cancelled") => TaskState::Cancelled,
        Some("running") => TaskState::Running,
        _ => TaskState::Pending,
    }
}

/// The SSE answer of `SendStreamingMessage` / `SubscribeToTask` for a
/// remote task: the task now (`fresh`: as submitted, before any step,
/// like a new local task), then one `StreamResponse` per step its
/// router reports, until it ends.
pub(crate) fn respond(
    cx: &Ctx,
    task: Remote,
    fresh: bool,
    id: Id,
    guard: InflightGuard,
) -> Response<Body> {
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    tokio::task::spawn_local(pump(cx.clone(), task, fresh, id, tx));
    let mut r = Response::new(guarded(crate::body::channel(rx), guard));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

async fn pump(cx: Ctx, task: Remote, fresh: bool, id: Id, tx: mpsc::Sender<Bytes>) {
    let fail = |e: &A2aError| sse(&error_bytes(Some(&id), e), true);
    let send = |v: Value| sse(&result_bytes(&id, v), false);
    let doc = if fresh {
        serde_json::json!({"status": "pending", "last_seq": 0})
    } else {
        match task.ask(&cx, TaskOp::Status, None).await {
            Ok(d) => d,
            Err(e) => {
                let _ = tx.send(fail(&e)).await;
                return;
            }
        }
    };
    let mut view = task.view_of(&doc);
    if fresh {
        view.capability = task.capability.to_string();
    }
    if tx.send(send(view.first_event())).await.is_err() || view.state.is_terminal() {
        return;
    }
    let mut cursor = doc["last_seq"].as_u64().unwrap_or(0);
    loop {
        let (events, state) = match task.next(&cx, cursor).await {
            Ok(step) => step,
            Err(e) => {
                let _ = tx.send(fail(&e)).await;
                return;
            }
        };
        if events.is_empty() {
            if state.is_terminal() {
                return;
            }
            if tx.send(Bytes::from_static(KEEPALIVE_LINE)).await.is_err() {
                return;
            }
            continue;
        }
        // The steps' content (the result) is in the task's status.
        let view = match task.view(&cx).await {
            Ok(v) => v,
            Err(e) => {
                let _ = tx.send(fail(&e)).await;
                return;
            }
        };
        for (seq, name) in events {
            cursor = seq;
            for v in view.events_for(Some(&name)) {
                if tx.send(send(v)).await.is_err() {
                    return;
                }
            }
        }
        // An ended task answers the next round at once, with no
        // events after its last one: the stream ends there.
    }
}
