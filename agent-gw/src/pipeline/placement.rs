//! Placement: where an async call's task lives — one rule for the SDK
//! API and A2A. On this gateway when its best candidate is a handler
//! here; else on the router that calls the handler, sent there as an
//! async call, this gateway keeping only the handle. When no router in
//! front took it and local candidates follow, the task is held here.

use std::rc::Rc;

use http::{header, HeaderName, HeaderValue, Response, StatusCode};
use serde_json::json;

use agentd::route::RouteId;

use crate::api::error::{ApiError, Outcome};
use crate::body::Body;
use crate::core::Core;
use crate::forward::Dest;
use crate::task::{TaskId, TaskToken, TASK_ID_HEADER, TASK_TOKEN_HEADER};

use super::decision::{self, goes_to_peer, Dispatch};
use super::dispatch::{self, Relay};
use super::invocation::Invocation;
use super::remote;
use super::tasks::{self, json_answer};

/// Where an async call's task went.
#[derive(Debug)]
pub enum Placement {
    /// In this gateway's table: its id and token.
    Here(TaskId, TaskToken),
    /// On the router that calls the handler: its id and the token it
    /// issued (hex), the handle kept here; `answer` is that router's
    /// 202, relayed.
    There {
        id: TaskId,
        token: Box<str>,
        answer: Response<Body>,
    },
    /// Placed by nobody here: the next router's answer, relayed as it
    /// is — a call passing through for a neighbour, or a refusal.
    Relayed(RouteId, Response<Body>),
}

impl Placement {
    /// The SDK API's answer: 202 with the task handle (`X-Nexus-Task-*`
    /// and `Location`), or the relayed answer.
    pub fn into_response(self) -> Response<Body> {
        match self {
            Placement::Here(id, token) => accepted(&id, &token),
            Placement::There { answer, .. } | Placement::Relayed(_, answer) => answer,
        }
    }
}

fn accepted(id: &TaskId, token: &TaskToken) -> Response<Body> {
    let mut r = json_answer(
        StatusCode::ACCEPTED,
        &json!({"task_id": id.to_string(), "status": "running"}),
    );
    let h = r.headers_mut();
    for (name, value) in [
        (TASK_ID_HEADER, id.to_string()),
        (TASK_TOKEN_HEADER, token.to_hex()),
        (header::LOCATION.as_str(), format!("/agent/v1/tasks/{id}")),
    ] {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(HeaderName::from_static(name), v);
        }
    }
    r
}

/// Places the async invocation `inv`.
pub async fn place(core: &Rc<Core>, inv: Box<Invocation>) -> Result<Placement, ApiError> {
    let kind = decision::kind(&inv, false, false);
    let mut d = decision::decide(core, &inv, kind)?;
    if !goes_to_peer(&d.candidates) {
        let (id, token) = tasks::start_async(core, &inv, d)?;
        return Ok(Placement::Here(id, token));
    }
    if inv.principal.neighbour().is_some() {
        // Passing through: the router in front places it.
        let (resp, route) = {
            let out = dispatch::outgoing(core, &inv, inv.envelope.to_bytes(), &d.candidates);
            dispatch::send(core, &inv, &d, out, Relay::Sync).await?
        };
        return Ok(Placement::Relayed(route, dispatch::hold(resp, inv.slot)));
    }
    remote::room(core, &inv)?;
    let lead = d
        .candidates
        .iter()
        .take_while(|c| matches!(c.dest, Dest::Peer { .. }))
        .count();
    let rest = d.candidates.split_off(lead);
    let mut out = dispatch::outgoing(core, &inv, inv.envelope.to_bytes(), &d.candidates);
    out.relay.insert(
        HeaderName::from_static("prefer"),
        HeaderValue::from_static("respond-async"),
    );
    let (resp, route) = match dispatch::send(core, &inv, &d, out, Relay::Sync).await {
        Ok(sent) => sent,
        Err(e) if !rest.is_empty() && never_delivered(&e) => {
            let here = Dispatch {
                candidates: rest,
                ..d
            };
            let (id, token) = tasks::start_async(core, &inv, here)?;
            return Ok(Placement::Here(id, token));
        }
        Err(e) => return Err(e),
    };
    remote::remember(core, &resp, &route, &inv, None, d.deadline);
    match handle_of(&resp) {
        Some((id, token)) if resp.status() == StatusCode::ACCEPTED => Ok(Placement::There {
            id,
            token,
            answer: dispatch::hold(resp, inv.slot),
        }),
        _ => Ok(Placement::Relayed(route, dispatch::hold(resp, inv.slot))),
    }
}

/// The task id and token (hex) a router answered with.
fn handle_of(resp: &Response<Body>) -> Option<(TaskId, Box<str>)> {
    let h = resp.headers();
    let id = h
        .get(TASK_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(TaskId::parse)?;
    let token = h
        .get(TASK_TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()))?;
    Some((id, token.into()))
}

fn never_delivered(e: &ApiError) -> bool {
    matches!(e.outcome, Some(Outcome::Rejected | Outcome::NotDelivered))
}

/// The typed error a router answered instead of accepting a task (for a
/// front end that needs a task, not an answer to relay).
pub async fn refusal_of(route: &RouteId, resp: Response<Body>) -> ApiError {
    let status = resp.status();
    let (head, body) = resp.into_parts();
    let bytes = crate::api::request_body::read_limited(&head.headers, body, 64 * 1024)
        .await
        .unwrap_or_default();
    let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let code = doc["error"]["code"]
        .as_str()
        .and_then(crate::api::error::ErrorCode::parse)
        .unwrap_or(crate::api::error::ErrorCode::UpstreamError);
    let message = doc["error"]["message"].as_str().map_or_else(
        || format!("answered {status} without a task"),
        str::to_string,
    );
    ApiError::new(code, format!("route {route}: {message}")).route_id(route.as_str())
}
