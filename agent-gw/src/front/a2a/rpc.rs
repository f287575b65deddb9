//! The A2A endpoint: `GET /.well-known/agent-card.json`, `POST /a2a`, and
//! the per-mapping agents at `/a2a/<name>` (card at
//! `/a2a/<name>/.well-known/agent-card.json`).
//!
//! Order of a call: Host/Origin check, in-flight slot and authentication
//! (transport-level refusals: HTTP status, as the A2A spec leaves auth to
//! the transport), the bounded body read, the JSON-RPC decode, the
//! `A2A-Version` check, then the method. From the decode on, every
//! refusal is a JSON-RPC error with HTTP 200 (what the official clients
//! parse; they turn any other status into a bare HTTP error).

use std::rc::Rc;

use agentd::time::Millis;
use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderValue, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{json, Value};
use tokio::time::Instant;
use uci_schema::Protocol;

use crate::api::envelope::{Envelope, NewCall};
use crate::api::error::{ApiError, ErrorCode};
use crate::body::{full, guarded, Body};
use crate::catalog::{Caller, Entry};
use crate::front::{inflight_slot, read_body, Ctx};
use crate::jsonrpc::{self, Id, Message};
use crate::limits::InflightGuard;
use crate::task::{TaskId, TaskState};

use super::card::{self, Card, Skill};
use super::error::{A2aError, Kind};
use super::handle::{self, Meta};
use super::remote::{self, Remote};
use super::task_view::TaskView;
use super::wire::{SendMessage, TaskQuery};
use super::{check_version, part, select_skill, stream, Method, VERSION_HEADER};
use crate::pipeline::{Answer, Mode, Placement};

/// Which agent a request addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Agent<'p> {
    /// The router's agent: every skill the caller may use.
    Router,
    /// One mapping served as its own agent.
    Mapping(&'p str),
}

impl<'p> From<Option<&'p str>> for Agent<'p> {
    fn from(name: Option<&'p str>) -> Agent<'p> {
        name.map_or(Agent::Router, Agent::Mapping)
    }
}

/// Who an A2A call acts for (shared with `/mcp`): the verified caller,
/// or in auth `none` `gateway.protocol_tenant` as its `a2a-client`.
/// Nothing in the JSON-RPC payload (its `tenant` field included) changes
/// this.
pub use crate::front::protocol::Identity;

fn identity(cx: &Ctx, parts: &Parts) -> Result<Identity, ApiError> {
    crate::front::protocol::identity(cx, parts, "a2a")
}

fn caller(who: &Identity) -> Caller<'_> {
    Caller {
        tenant: &who.tenant,
        source: &who.subject,
    }
}

fn skill_of(e: &Entry) -> Skill {
    Skill {
        id: e.name.to_string(),
        name: e.title.as_deref().unwrap_or(&e.name).to_string(),
        description: e.description.as_deref().unwrap_or("").to_string(),
        capability: e.capability.to_string(),
        version: e.version,
    }
}

/// The skills `who` may use at `agent`; `None` when a per-mapping agent
/// does not exist for this caller (unknown, or hidden from it).
fn skills(cx: &Ctx, who: &Identity, agent: Agent<'_>) -> Option<Vec<Skill>> {
    let fib = cx.state.fib.borrow();
    let now = Millis::now();
    match agent {
        Agent::Router => Some(
            cx.state
                .catalog
                .visible(&fib, Protocol::A2a, caller(who), now)
                .iter()
                .map(|(e, _)| skill_of(e))
                .collect(),
        ),
        Agent::Mapping(name) => cx
            .state
            .catalog
            .find(&fib, Protocol::A2a, caller(who), name, now)
            .map(|(e, _)| vec![skill_of(&e)]),
    }
}

fn no_agent(name: &str) -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        format!("no A2A agent {name:?} here (no a2a mapping of that name the caller may use)"),
    )
}

/// The path of an agent's JSON-RPC endpoint.
fn rpc_path(agent: Agent<'_>) -> String {
    match agent {
        Agent::Router => "/a2a".into(),
        Agent::Mapping(name) => format!("/a2a/{name}"),
    }
}

/// `GET …/.well-known/agent-card.json`.
pub fn agent_card(cx: &Ctx, parts: &Parts, agent: Agent<'_>) -> Result<Response<Body>, ApiError> {
    guard_host(cx, parts)?;
    let who = identity(cx, parts)?;
    let skills = match agent {
        Agent::Mapping(name) => skills(cx, &who, agent).ok_or_else(|| no_agent(name))?,
        Agent::Router => skills(cx, &who, agent).unwrap_or_default(),
    };
    let host = parts
        .headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or(parts.uri.authority().map(|a| a.as_str()));
    let base =
        card::base_url(&cx.state.cfg.public_url, scheme(cx, parts), host).ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidField,
                "the agent card needs the Host header (or gateway.public_url) to name its URL",
            )
        })?;
    let (name, description) = match agent {
        Agent::Router => (
            format!("agentd {}", cx.state.cfg.router_id),
            format!(
                "Capabilities routed by the agentd mesh at router {} (one skill per a2a mapping)",
                cx.state.cfg.router_id
            ),
        ),
        Agent::Mapping(name) => (
            skills
                .first()
                .map_or_else(|| name.to_string(), |s| s.name.clone()),
            skills
                .first()
                .map(|s| s.description.clone())
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| {
                    format!("The {name} skill of router {}", cx.state.cfg.router_id)
                }),
        ),
    };
    let doc = Card {
        name,
        description,
        rpc_url: format!("{base}{}", rpc_path(agent)),
        skills: &skills,
    }
    .to_value();
    Ok(crate::front::json(StatusCode::OK, &doc))
}

/// The scheme of the listener that took the request (the public
/// listener is HTTPS, the LAN one plain HTTP); an absolute-form target
/// names its own.
fn scheme(cx: &Ctx, parts: &Parts) -> &'static str {
    match (cx.ingress.is_public(), parts.uri.scheme_str()) {
        (true, _) | (_, Some("https")) => "https",
        _ => "http",
    }
}

/// The DNS-rebinding protection shared with `/mcp`: a Host that is not
/// the router's is 421, a foreign Origin 403, before anything else.
fn guard_host(cx: &Ctx, parts: &Parts) -> Result<(), ApiError> {
    crate::front::protocol::check_origin(cx, parts).map_err(|r| {
        let status = r.status().as_u16();
        let code = match status {
            403 => ErrorCode::OriginMismatch,
            _ => ErrorCode::Other {
                code: "misdirected_request",
                status,
            },
        };
        ApiError::new(code, r.to_string())
    })
}

/// A JSON-RPC answer body (HTTP 200).
/// What A2A remembers per task (context id, skill), bounded by the task
/// table: this front end's own state, shared by its connections.
pub type Tasks = Rc<std::cell::RefCell<super::handle::Contexts>>;

pub(crate) fn answer(bytes: Bytes) -> Response<Body> {
    let mut r = Response::new(full(bytes));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// The JSON-RPC error answer for `e`.
pub(crate) fn error_bytes(id: Option<&Id>, e: &A2aError) -> Bytes {
    let v = e.to_value();
    jsonrpc::error(id, e.kind.code(), &e.message, v.get("data").cloned())
}

/// The JSON-RPC result answer.
pub(crate) fn result_bytes(id: &Id, result: Value) -> Bytes {
    jsonrpc::result(id, result)
}

/// `POST /a2a` and `POST /a2a/<name>`.
pub async fn rpc(
    cx: &Ctx,
    tasks: &Tasks,
    parts: &Parts,
    body: Incoming,
    agent: Agent<'_>,
) -> Result<Response<Body>, ApiError> {
    let start = Instant::now();
    guard_host(cx, parts)?;
    let guard = inflight_slot(cx)?;
    let who = identity(cx, parts)?;
    if let Agent::Mapping(name) = agent {
        skills(cx, &who, agent).ok_or_else(|| no_agent(name))?;
    }
    let bytes = match read_body(cx, parts, body).await {
        Ok(b) => b,
        Err(e) => {
            // Oversized or trickled: a JSON-RPC error as the official
            // servers answer it; the unread rest closes the connection.
            let close = e.close || e.code == ErrorCode::PayloadTooLarge;
            let mut r = answer(error_bytes(None, &A2aError::from(e)));
            if close {
                r.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            return Ok(r);
        }
    };
    let (id, method, params) = match jsonrpc::decode(&bytes) {
        Ok(Message::Request { id, method, params }) => (id, method, params),
        Ok(Message::Notification { .. }) => {
            let mut r = Response::new(crate::body::empty());
            *r.status_mut() = StatusCode::ACCEPTED;
            return Ok(r);
        }
        Ok(Message::Response { id, .. }) => {
            let e = A2aError::new(
                Kind::InvalidRequest,
                "an A2A server takes requests, not answers",
            );
            return Ok(answer(error_bytes(Some(&id), &e)));
        }
        Err(e) => return Ok(answer(e.to_answer())),
    };
    let call = Call {
        cx,
        tasks,
        parts,
        who,
        id,
        agent,
        start,
    };
    let version = parts.headers.get(VERSION_HEADER).map(HeaderValue::as_bytes);
    let outcome = match check_version(version).and_then(|()| Method::parse(&method)) {
        Ok(m) => call.run(m, params.as_ref(), guard).await,
        Err(e) => Err(e),
    };
    Ok(match outcome {
        Ok(resp) => resp,
        Err(e) => answer(error_bytes(Some(&call.id), &e)),
    })
}

/// Where an A2A task lives.
pub(crate) enum Found {
    /// In this gateway's table: its id and A2A id.
    Here(TaskId, String),
    /// On another router.
    There(Remote),
}

/// One decoded request, with who sent it.
pub(crate) struct Call<'a> {
    pub cx: &'a Ctx,
    /// What A2A remembers of its tasks.
    pub tasks: &'a Tasks,
    pub parts: &'a Parts,
    pub who: Identity,
    pub id: Id,
    pub agent: Agent<'a>,
    pub start: Instant,
}

impl Call<'_> {
    async fn run(
        &self,
        method: Method,
        params: Option<&Value>,
        guard: InflightGuard,
    ) -> Result<Response<Body>, A2aError> {
        match method {
            Method::SendMessage | Method::SendStreamingMessage => {
                let send = SendMessage::decode(params)?;
                let streaming = method == Method::SendStreamingMessage;
                let (tid, handle) = match self.send(&send).await? {
                    Found::Here(tid, handle) => (tid, handle),
                    Found::There(task) => {
                        if streaming {
                            return Ok(remote::respond(
                                self.cx,
                                task,
                                true,
                                self.id.clone(),
                                guard,
                            ));
                        }
                        if !send.return_immediately {
                            task.wait_terminal(self.cx).await;
                        }
                        let view = task.view(self.cx).await?;
                        return self.ok(json!({"task": view.task()}), guard);
                    }
                };
                if streaming {
                    return Ok(stream::respond(self, tid, handle, guard));
                }
                if !send.return_immediately {
                    self.wait_terminal(&tid).await;
                }
                let view = self.view(&tid, &handle)?;
                self.ok(json!({"task": view.task()}), guard)
            }
            Method::GetTask => {
                let q = TaskQuery::decode(params)?;
                let view = match self.find(&q.id)? {
                    Found::Here(tid, _) => self.view(&tid, &q.id)?,
                    Found::There(task) => task.view(self.cx).await?,
                };
                self.ok(view.task(), guard)
            }
            Method::CancelTask => {
                let q = TaskQuery::decode(params)?;
                let (here, state) = match self.find(&q.id)? {
                    Found::Here(tid, _) => {
                        let state = self.resolve(&q.id)?.1;
                        (Some(tid), state)
                    }
                    Found::There(task) => {
                        let state = task.view(self.cx).await?.state;
                        if !state.is_terminal() {
                            let view = task.cancel(self.cx).await?;
                            return self.ok(view.task(), guard);
                        }
                        (None, state)
                    }
                };
                if state.is_terminal() {
                    return Err(A2aError::new(
                        Kind::TaskNotCancelable,
                        format!(
                            "task {} has already ended ({}); only a submitted or working task can be canceled",
                            q.id,
                            super::task_view::state_name(state)
                        ),
                    )
                    .with("taskId", &*q.id)
                    .with("state", super::task_view::state_name(state)));
                }
                let Some(tid) = here else {
                    return Err(A2aError::task_not_found(&q.id));
                };
                self.cx.state.tasks.borrow_mut().cancel(&tid, Millis::now());
                let view = self.view(&tid, &q.id)?;
                self.ok(view.task(), guard)
            }
            Method::SubscribeToTask => {
                let q = TaskQuery::decode(params)?;
                let (here, state) = match self.find(&q.id)? {
                    Found::Here(tid, _) => (Some(tid), self.resolve(&q.id)?.1),
                    Found::There(task) => {
                        let state = task.view(self.cx).await?.state;
                        if !state.is_terminal() {
                            return Ok(remote::respond(
                                self.cx,
                                task,
                                false,
                                self.id.clone(),
                                guard,
                            ));
                        }
                        (None, state)
                    }
                };
                if state.is_terminal() {
                    return Err(A2aError::new(
                        Kind::UnsupportedOperation,
                        format!(
                            "task {} has already ended ({}): nothing more to subscribe to; GetTask has its outcome",
                            q.id,
                            super::task_view::state_name(state)
                        ),
                    )
                    .with("taskId", &*q.id));
                }
                let Some(tid) = here else {
                    return Err(A2aError::task_not_found(&q.id));
                };
                Ok(stream::respond(self, tid, q.id.to_string(), guard))
            }
        }
    }

    fn ok(&self, result: Value, guard: InflightGuard) -> Result<Response<Body>, A2aError> {
        let r = answer(result_bytes(&self.id, result));
        let (head, body) = r.into_parts();
        Ok(Response::from_parts(head, guarded(body, guard)))
    }

    /// Starts the invocation for a message, placed like an SDK async
    /// task (here, or on the router that calls the handler); returns the
    /// task and its A2A id.
    async fn send(&self, send: &SendMessage) -> Result<Found, A2aError> {
        if let Some(existing) = &send.message.task_id {
            self.find(existing)?;
            return Err(A2aError::new(
                Kind::UnsupportedOperation,
                format!(
                    "task {existing} takes no further messages: every task of this gateway is one invocation; send a new message without taskId"
                ),
            )
            .with("taskId", &**existing));
        }
        if send.message.role != super::wire::Role::User {
            return Err(A2aError::invalid_params("message.role must be ROLE_USER"));
        }
        let skills = skills(self.cx, &self.who, self.agent).unwrap_or_default();
        let requested = send.skill();
        let skill = match self.agent {
            Agent::Mapping(name) if requested.is_some_and(|r| r != name) => {
                return Err(A2aError::invalid_params(format!(
                    "this agent serves skill {name:?} only, the message names {:?}",
                    requested.unwrap_or_default()
                ))
                .with("skills", name))
            }
            _ => select_skill(requested, &skills)?.clone(),
        };
        let cx = self.cx;
        let payload = part::payload(&send.message.parts);
        let env = self.envelope(&skill, &send.message.message_id, payload)?;
        let capability = env.intent.clone();
        // The JSON-RPC request holds its own in-flight slot (it may wait
        // for the task): the invocation takes none of its own.
        let inv = crate::front::protocol::invocation(
            cx,
            &self.parts.headers,
            (env, self.start),
            Mode::Async,
            None,
        )?;
        let placed = match crate::pipeline::invoke(&cx.state, inv).await? {
            Answer::Placed(p) => p,
            Answer::Response(_) => {
                return Err(A2aError::new(
                    Kind::Internal,
                    "the invocation was answered without a task",
                ))
            }
        };
        let (tid, token, remote) = match placed {
            Placement::Here(tid, token) => (tid, token.to_hex().into_boxed_str(), false),
            Placement::There { id, token, .. } => (id, token, true),
            Placement::Relayed(route, resp) => {
                return Err(crate::pipeline::placement::refusal_of(&route, resp)
                    .await
                    .into())
            }
        };
        let context_id: Box<str> = match &send.message.context_id {
            Some(c) => c.clone(),
            None => TaskId::random()
                .map_err(|_| A2aError::new(Kind::Internal, "random source unavailable"))?
                .to_string()
                .into(),
        };
        let cap = cx.state.tasks.borrow_mut().config().capacity;
        let tasks = cx.state.tasks.clone();
        let meta = Meta {
            context_id,
            skill: skill.id.as_str().into(),
            remote,
        };
        self.tasks.borrow_mut().insert(tid, meta.clone(), cap, |k| {
            tasks.borrow_mut().task(k).is_some() || cx.state.peer.remote.borrow().contains(k)
        });
        let a2a_id = format!("{tid}{token}");
        if !remote {
            return Ok(Found::Here(tid, a2a_id));
        }
        Ok(Found::There(Remote {
            tid,
            token,
            tenant: self.who.tenant.clone(),
            a2a_id,
            meta,
            capability,
        }))
    }

    /// Where the task behind an A2A id lives, if it is this caller's
    /// (right tenant and subject, made by A2A; a task here is also
    /// checked against its token, a remote one by its router). Anything
    /// else is "task not found".
    pub(crate) fn find(&self, a2a_id: &str) -> Result<Found, A2aError> {
        let not_found = || A2aError::task_not_found(a2a_id);
        let (tid, token) = handle::parse(a2a_id).ok_or_else(not_found)?;
        let meta = self
            .tasks
            .borrow()
            .get(&tid)
            .cloned()
            .ok_or_else(not_found)?;
        if !meta.remote {
            self.resolve(a2a_id)?;
            return Ok(Found::Here(tid, a2a_id.to_string()));
        }
        let task = self
            .cx
            .state
            .peer
            .remote
            .borrow_mut()
            .get(&tid, Millis::now())
            .ok_or_else(not_found)?;
        if *task.tenant != *self.who.tenant || *task.caller != *self.who.subject {
            return Err(not_found());
        }
        Ok(Found::There(Remote {
            tid,
            token: String::from_utf8_lossy(token).into(),
            tenant: task.tenant,
            a2a_id: a2a_id.to_string(),
            meta,
            capability: task.capability,
        }))
    }

    /// The invocation envelope of a message to `skill`, identity applied.
    fn envelope(
        &self,
        skill: &Skill,
        message_id: &str,
        payload: Value,
    ) -> Result<Envelope, ApiError> {
        crate::front::protocol::data_only(&payload)?;
        Envelope::for_call(NewCall {
            intent: &skill.capability,
            intent_version: skill.version,
            task_id: message_id,
            tenant: &self.who.tenant,
            source_agent: &self.who.subject,
            hop_limit: crate::front::protocol::entry_hop_limit(self.cx.state.cfg.hop_limit),
            payload,
        })
    }

    /// The task behind an A2A task id, if it is this caller's: right
    /// token, tenant and subject, and made by A2A. Anything else is
    /// "task not found", whatever the reason.
    pub(crate) fn resolve(&self, a2a_id: &str) -> Result<(TaskId, TaskState), A2aError> {
        let not_found = || A2aError::task_not_found(a2a_id);
        let (tid, token) = handle::parse(a2a_id).ok_or_else(not_found)?;
        if self.tasks.borrow().get(&tid).is_none() {
            return Err(not_found());
        }
        let mut t = self.cx.state.tasks.borrow_mut();
        t.expire(Millis::now());
        let task = t
            .get(&tid, token, Some(&self.who.tenant))
            .map_err(|_| not_found())?;
        if *task.subject != *self.who.subject {
            return Err(not_found());
        }
        Ok((tid, task.state()))
    }

    /// A snapshot of the task as A2A shows it.
    pub(crate) fn view(&self, tid: &TaskId, a2a_id: &str) -> Result<TaskView, A2aError> {
        view_of(&self.cx.state, self.tasks, tid, a2a_id)
            .ok_or_else(|| A2aError::task_not_found(a2a_id))
    }

    /// Waits until the task has ended (a blocking `SendMessage`). The
    /// task's own deadline bounds this; a client that goes away drops the
    /// wait, never the task.
    async fn wait_terminal(&self, tid: &TaskId) {
        loop {
            let mut rx = {
                let t = self.cx.state.tasks.borrow_mut();
                match t.task(tid) {
                    Some(task) if !task.state().is_terminal() => task.subscribe(),
                    _ => return,
                }
            };
            if rx.changed().await.is_err() {
                return;
            }
        }
    }
}

/// A snapshot of task `tid` as A2A shows it, `None` once it is gone.
pub(crate) fn view_of(
    state: &Rc<crate::core::Core>,
    contexts: &Tasks,
    tid: &TaskId,
    a2a_id: &str,
) -> Option<TaskView> {
    let meta = contexts.borrow().get(tid).cloned()?;
    let t = state.tasks.borrow_mut();
    let task = t.task(tid)?;
    Some(TaskView {
        id: a2a_id.to_string(),
        context_id: meta.context_id.to_string(),
        state: task.state(),
        skill: meta.skill.to_string(),
        capability: task.capability.clone(),
        result: task.result().cloned(),
        failure: task.failure().cloned(),
    })
}
