//! The bounded task table (DESIGN §8): async invocations and resumable
//! streams, their state machine, results, event history and expiry.
//!
//! Sans-IO: every method that depends on time takes `now: Millis`, expiry
//! is a deadline-ordered set drained by [`TaskTable::expire`], and the only
//! async-adjacent pieces are `tokio::sync::watch` senders that wake
//! followers and cancel producers (no runtime needed to use the table).
//!
//! Admission is the only place a task can be refused: when the table holds
//! `capacity` tasks, [`TaskTable::try_insert`] fails *before* anything is
//! dispatched. Accepted tasks are never evicted to make room; a task leaves
//! the table only `ttl` after it reached a terminal state.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::IpAddr;

use agentd::route::RouteId;
use agentd::time::Millis;
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::api::error::{ApiError, ErrorCode};
use crate::budget::{Budget, BudgetConfig, Holder, Reservation, Scope};
use crate::sources::SourceKey;

use super::digest::StreamKey;
use super::history::{event_cost, CursorError, Event, History};
use super::id::{TaskId, TaskToken};
use super::TaskError;

mod followers;
mod release;
mod shares;
use release::Released;

/// Table and history bounds (from the `gateway` section).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskConfig {
    /// `task_capacity`: most tasks held at once.
    pub capacity: usize,
    /// `task_ttl`: how long a finished task stays readable, ms.
    pub ttl_ms: u64,
    /// `stream_history_events`.
    pub history_events: usize,
    /// `stream_history_bytes`.
    pub history_bytes: usize,
    /// `tenant_share_percent`: most of `capacity` one tenant may hold.
    pub tenant_share_percent: u64,
    /// `source_share_percent`: most of `capacity` one client address may hold.
    pub source_share_percent: u64,
    /// Bytes a running async task reserves for the answer it may come to
    /// hold (the largest result kept), so an accepted task never finds the
    /// budget full when its answer arrives.
    pub result_reserve: usize,
    /// Bytes a stream always holds for its history: one largest event, so
    /// a stream can always keep (and deliver) its newest event.
    pub stream_reserve: usize,
}

/// Accounting cost of a task itself (ids, names, its few status events).
pub const TASK_OVERHEAD: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskKind {
    /// `Prefer: respond-async` invoke: result fetched later.
    Async,
    /// `invoke-stream`: events delivered live and resumable by cursor.
    Stream,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    Pending,
    Running,
    Completed,
    Failed,
    Cancelled,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Pending => "pending",
            TaskState::Running => "running",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Cancelled => "cancelled",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Cancelled
        )
    }
}

/// The handler's answer to a completed async task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskResult {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

/// Why a task failed: the same typed error code a synchronous call would
/// have answered (`upstream_unknown`, `not_delivered`, `deadline_exceeded`,
/// `handler_rejected`, …) and a message for humans. Built from the
/// forwarder's [`ApiError`] by `From`, so the two layers cannot drift.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskFailure {
    pub code: ErrorCode,
    pub message: Box<str>,
}

impl TaskFailure {
    pub fn new(code: ErrorCode, message: impl Into<Box<str>>) -> TaskFailure {
        TaskFailure {
            code,
            message: message.into(),
        }
    }
}

impl From<ApiError> for TaskFailure {
    fn from(e: ApiError) -> TaskFailure {
        TaskFailure::new(e.code, e.message)
    }
}

/// What the caller knows about a task at admission.
#[derive(Debug, Clone)]
pub struct NewTask {
    pub kind: TaskKind,
    /// Verified tenant and source agent (or the body's, in lab mode).
    pub tenant: String,
    pub subject: String,
    pub capability: String,
    /// The route the task is pinned to; it never moves.
    pub route_id: Option<RouteId>,
    /// [`request_digest`](super::request_digest) of the original request.
    pub request_digest: [u8; 32],
    /// Set for resumable streams.
    pub stream_key: Option<StreamKey>,
    /// The client address the request came from (per-source shares).
    pub source: IpAddr,
    /// The caller's deadline: an async task is finished by then.
    pub deadline: Option<Millis>,
    /// Request body bytes held until the call is dispatched.
    pub body_bytes: usize,
}

/// Producer-side view of cancellation: resolves once the task is cancelled
/// (or removed). The producer reacts by dropping its upstream request,
/// which closes the connection to the handler.
#[derive(Debug)]
pub struct CancelSignal(watch::Receiver<bool>);

impl CancelSignal {
    pub async fn cancelled(&mut self) {
        // Err means the task is gone: as good as cancelled.
        let _ = self.0.wait_for(|c| *c).await;
    }

    pub fn is_cancelled(&self) -> bool {
        *self.0.borrow()
    }
}

/// A task accepted into the table.
#[derive(Debug)]
pub struct Admitted {
    pub id: TaskId,
    pub token: TaskToken,
    pub cancel: CancelSignal,
}

/// One task.
#[derive(Debug)]
pub struct Task {
    id: TaskId,
    token: TaskToken,
    pub kind: TaskKind,
    state: TaskState,
    pub tenant: String,
    pub subject: String,
    pub capability: String,
    pub route_id: Option<RouteId>,
    pub request_digest: [u8; 32],
    stream_key: Option<StreamKey>,
    created: Millis,
    finished: Option<Millis>,
    result: Option<TaskResult>,
    failure: Option<TaskFailure>,
    history: History,
    cancel: watch::Sender<bool>,
    /// Bumped on every change a follower may want to see.
    changed: watch::Sender<u64>,
    /// Attached followers and the last event id each has taken.
    followers: Vec<(u64, u64)>,
    next_follower: u64,
    /// Bumped when a follower advances or leaves: wakes a producer that
    /// waits for room (see [`TaskTable::room_for`]).
    drained: watch::Sender<u64>,
    /// When the last follower left, while the stream is still producing.
    detached_at: Option<Millis>,
    source: IpAddr,
    deadline: Option<Millis>,
    /// Body bytes still held (until dispatched).
    body_bytes: usize,
    /// Bytes this task always holds beyond its overhead (result or event
    /// reserve, see [`TaskConfig`]).
    floor: usize,
    /// This task's bytes in the gateway budget, released when it leaves
    /// the table.
    bytes: Reservation,
}

impl Task {
    pub fn id(&self) -> TaskId {
        self.id
    }

    pub fn state(&self) -> TaskState {
        self.state
    }

    pub fn result(&self) -> Option<&TaskResult> {
        self.result.as_ref()
    }

    pub fn failure(&self) -> Option<&TaskFailure> {
        self.failure.as_ref()
    }

    pub fn history(&self) -> &History {
        &self.history
    }

    pub fn source(&self) -> IpAddr {
        self.source
    }

    /// Bytes this task holds in the gateway budget.
    pub fn reserved_bytes(&self) -> usize {
        self.bytes.bytes()
    }

    /// What the task needs to hold in its current state (streams: before
    /// the next event).
    fn needed(&self) -> usize {
        let own = match (self.kind, &self.result) {
            (TaskKind::Async, Some(r)) => r.body.len(),
            (TaskKind::Async, None) if self.state.is_terminal() => 0,
            (TaskKind::Async, None) => self.floor,
            // A finished stream keeps its history for resumes, nothing more.
            (TaskKind::Stream, _) if self.state.is_terminal() => self.history.bytes(),
            (TaskKind::Stream, _) => self.floor.max(self.history.bytes()),
        };
        TASK_OVERHEAD + self.body_bytes + own
    }

    /// Brings the budget charge to what the task needs now (a shrink
    /// after dispatch or completion).
    fn settle(&mut self) {
        // Growth here is only ever a task's few small status events; if
        // even that finds no room the task keeps what it holds.
        let _ = self.bytes.resize(self.needed());
    }

    /// A receiver that wakes on every change of this task.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Receivers of its change signal alive now (followers, waiters): a
    /// test can tell that a caller is waiting for the next step.
    pub fn watchers(&self) -> usize {
        self.changed.receiver_count()
    }

    fn bump(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// The status document of `GET /agent/v1/tasks/{id}` (Nexus
    /// `public_status` shape plus our fields).
    pub fn status_json(&self, now: Millis) -> Value {
        let mut v = json!({
            "task_id": self.id.to_string(),
            "status": self.state.as_str(),
            "kind": match self.kind { TaskKind::Async => "async", TaskKind::Stream => "stream" },
            "capability": self.capability,
            "route_id": self.route_id.as_ref().map(|r| r.as_str()),
            "age_ms": now.saturating_sub(self.created),
            "last_seq": self.history.last_id(),
        });
        if let Some(r) = &self.result {
            v["result"] = serde_json::from_slice(&r.body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&r.body).into_owned()));
            v["result_status"] = json!(r.status);
        }
        if let Some(f) = &self.failure {
            v["error"] = json!({"code": f.code.as_str(), "message": &*f.message});
        }
        v
    }
}

/// Events after a cursor, and whether the task has finished producing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub events: Vec<Event>,
    /// `Some` once the task is terminal and `events` reaches its last event.
    pub finished: Option<TaskState>,
}

/// Counters for `agentctl stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableStats {
    pub refused_full: u64,
    pub refused_tenant_share: u64,
    pub refused_source_share: u64,
    /// Results released because they were fetched.
    pub released: u64,
    /// Stream events pushed with a bound tighter than configured, because
    /// the history could not grow within the budget.
    pub history_degraded: u64,
}

#[derive(Debug)]
pub struct TaskTable {
    cfg: TaskConfig,
    budget: Budget,
    per_tenant: HashMap<String, usize>,
    /// Tasks per source, counted as [`SourceKey`] (an IPv6 host cannot
    /// multiply its share by cycling addresses in its /64).
    per_source: HashMap<SourceKey, usize>,
    released: VecDeque<Released>,
    stats: TableStats,
    tasks: HashMap<TaskId, Task>,
    streams: HashMap<StreamKey, TaskId>,
    /// (deadline, id) of terminal tasks: the expiry timer.
    expiry: BTreeSet<(Millis, TaskId)>,
    /// (deadline, id) of running streams nobody follows: the idle timer.
    /// A producer left alone for `ttl` is cancelled, so abandoned streams
    /// cannot hold table slots (active tasks never expire otherwise).
    idle: BTreeSet<(Millis, TaskId)>,
    /// Recently expired ids and stream keys, so a late caller learns
    /// "expired" rather than "never existed". Bounded by `capacity`.
    tombstones: VecDeque<(TaskId, Option<StreamKey>)>,
}

impl TaskTable {
    /// A table with a budget of its own that never binds (tests, tools).
    pub fn new(cfg: TaskConfig) -> TaskTable {
        TaskTable::with_budget(
            cfg,
            Budget::new(BudgetConfig {
                limit: usize::MAX,
                tenant_share_percent: 100,
                source_share_percent: 100,
            }),
        )
    }

    /// A table whose tasks hold their bytes in `budget` (shared with the
    /// rest of the gateway).
    pub fn with_budget(cfg: TaskConfig, budget: Budget) -> TaskTable {
        TaskTable {
            cfg,
            budget,
            per_tenant: HashMap::new(),
            per_source: HashMap::new(),
            released: VecDeque::new(),
            stats: TableStats::default(),
            tasks: HashMap::new(),
            streams: HashMap::new(),
            expiry: BTreeSet::new(),
            idle: BTreeSet::new(),
            tombstones: VecDeque::new(),
        }
    }

    pub fn config(&self) -> TaskConfig {
        self.cfg
    }

    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    pub fn stats(&self) -> TableStats {
        self.stats
    }

    /// Admits a task, or refuses with [`TaskError::Full`] — the caller must
    /// not dispatch anything then. Due expiries are applied first so a full
    /// table never refuses work it could have made room for.
    pub fn try_insert(&mut self, new: NewTask, now: Millis) -> Result<Admitted, TaskError> {
        self.expire(now);
        if self.tasks.len() >= self.cfg.capacity {
            self.stats.refused_full += 1;
            return Err(TaskError::Full {
                capacity: self.cfg.capacity,
                retry_at: self.slot_frees_at(|_| true),
            });
        }
        let (held, limit) = (self.tenant_len(&new.tenant), self.tenant_slots());
        if held >= limit {
            self.stats.refused_tenant_share += 1;
            return Err(TaskError::Share {
                scope: Scope::Tenant,
                held,
                limit,
                retry_at: self.slot_frees_at(|t| t.tenant == new.tenant),
            });
        }
        let (held, limit) = (self.source_len(new.source), self.source_slots());
        if held >= limit {
            self.stats.refused_source_share += 1;
            return Err(TaskError::Share {
                scope: Scope::Source,
                held,
                limit,
                retry_at: self
                    .slot_frees_at(|t| SourceKey::of(t.source) == SourceKey::of(new.source)),
            });
        }
        if let Some(key) = &new.stream_key {
            if self.streams.contains_key(key) {
                return Err(TaskError::Duplicate);
            }
        }
        let floor = match new.kind {
            TaskKind::Async => self.cfg.result_reserve,
            TaskKind::Stream => self.cfg.stream_reserve,
        };
        let first_free = match new.kind {
            TaskKind::Async => new.deadline,
            TaskKind::Stream => Some(now),
        }
        .map(|at| at.saturating_add_ms(self.cfg.ttl_ms));
        let bytes = self
            .budget
            .reserve(
                Holder::new(&new.tenant, new.source),
                TASK_OVERHEAD + new.body_bytes + floor,
                first_free,
            )
            .map_err(TaskError::Budget)?;
        let id = loop {
            let id = TaskId::random().map_err(|_| TaskError::Random)?;
            if !self.tasks.contains_key(&id) {
                break id;
            }
        };
        let token = TaskToken::random().map_err(|_| TaskError::Random)?;
        let (cancel, cancel_rx) = watch::channel(false);
        let (changed, _) = watch::channel(0);
        if let Some(key) = new.stream_key {
            self.streams.insert(key, id);
        }
        *self.per_tenant.entry(new.tenant.clone()).or_default() += 1;
        *self
            .per_source
            .entry(SourceKey::of(new.source))
            .or_default() += 1;
        self.tasks.insert(
            id,
            Task {
                id,
                token: token.clone(),
                kind: new.kind,
                state: TaskState::Pending,
                tenant: new.tenant,
                subject: new.subject,
                capability: new.capability,
                route_id: new.route_id,
                request_digest: new.request_digest,
                stream_key: new.stream_key,
                created: now,
                finished: None,
                result: None,
                failure: None,
                history: History::new(self.cfg.history_events, self.cfg.history_bytes),
                cancel,
                changed,
                followers: Vec::new(),
                next_follower: 0,
                drained: watch::channel(0).0,
                detached_at: None,
                source: new.source,
                deadline: new.deadline,
                body_bytes: new.body_bytes,
                floor,
                bytes,
            },
        );
        if new.kind == TaskKind::Stream {
            // Until the first follower attaches, the stream counts as idle.
            self.idle
                .insert((now.saturating_add_ms(self.cfg.ttl_ms), id));
            if let Some(t) = self.tasks.get_mut(&id) {
                t.detached_at = Some(now);
            }
        }
        Ok(Admitted {
            id,
            token,
            cancel: CancelSignal(cancel_rx),
        })
    }

    fn gone(&self, id: &TaskId) -> TaskError {
        if self.released.iter().any(|r| r.id == *id) {
            TaskError::Released
        } else if self.tombstones.iter().any(|(t, _)| t == id) {
            TaskError::Expired
        } else {
            TaskError::NotFound
        }
    }

    /// A task for a caller holding its token. A wrong token or another
    /// tenant reads as "not found", so ids cannot be probed.
    pub fn get(&self, id: &TaskId, token: &[u8], tenant: Option<&str>) -> Result<&Task, TaskError> {
        let Some(task) = self.tasks.get(id) else {
            return Err(match self.gone(id) {
                // Only the task's own caller learns that it was released.
                TaskError::Released
                    if self
                        .released_status(id, token, tenant, Millis::ZERO)
                        .is_none() =>
                {
                    TaskError::NotFound
                }
                e => e,
            });
        };
        if !task.token.matches(token) || tenant.is_some_and(|t| t != task.tenant) {
            return Err(TaskError::NotFound);
        }
        Ok(task)
    }

    /// A task by id, without access checks (for the producer side).
    pub fn task(&self, id: &TaskId) -> Option<&Task> {
        self.tasks.get(id)
    }

    /// Finds the stream a reconnect names and checks it may resume from
    /// `cursor` with a request of digest `digest`.
    pub fn resume(
        &self,
        key: &StreamKey,
        digest: &[u8; 32],
        cursor: u64,
    ) -> Result<TaskId, TaskError> {
        let Some(id) = self.streams.get(key) else {
            return Err(
                if self.tombstones.iter().any(|(_, k)| k.as_ref() == Some(key)) {
                    TaskError::Expired
                } else {
                    TaskError::NotFound
                },
            );
        };
        let task = &self.tasks[id];
        if &task.request_digest != digest {
            return Err(TaskError::RequestMismatch);
        }
        task.history.after(cursor).map(|_| ())?;
        Ok(*id)
    }

    /// Records the route the task was dispatched to, as each attempt
    /// starts: it changes only when the gateway moves on from a candidate
    /// that provably never received the call.
    pub fn pin_route(&mut self, id: &TaskId, route: RouteId) {
        if let Some(t) = self.tasks.get_mut(id) {
            t.route_id = Some(route);
        }
    }

    /// The request was handed to a handler (or failed to be): its body is
    /// no longer held for a resend.
    pub fn dispatched(&mut self, id: &TaskId) {
        if let Some(t) = self.tasks.get_mut(id) {
            t.body_bytes = 0;
            t.settle();
        }
    }

    /// Takes a task out of every index and count; dropping it releases its
    /// budget bytes.
    fn take(&mut self, id: &TaskId) -> Option<Task> {
        let t = self.tasks.remove(id)?;
        if let Some(k) = &t.stream_key {
            self.streams.remove(k);
        }
        if let Some(at) = t.finished.map(|f| f.saturating_add_ms(self.cfg.ttl_ms)) {
            self.expiry.remove(&(at, *id));
        }
        if let Some(at) = t.detached_at.map(|d| d.saturating_add_ms(self.cfg.ttl_ms)) {
            self.idle.remove(&(at, *id));
        }
        if let Some(n) = self.per_tenant.get_mut(&t.tenant) {
            *n -= 1;
            if *n == 0 {
                self.per_tenant.remove(&t.tenant);
            }
        }
        if let Some(n) = self.per_source.get_mut(&SourceKey::of(t.source)) {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&SourceKey::of(t.source));
            }
        }
        Some(t)
    }

    /// Forgets a task that never started producing (its dispatch failed),
    /// so the caller may retry with the same stream `task_id`.
    pub fn remove(&mut self, id: &TaskId) {
        self.take(id);
    }

    fn finish(&mut self, id: &TaskId, state: TaskState, now: Millis) -> Option<&mut Task> {
        let t = self.tasks.get_mut(id)?;
        if t.state.is_terminal() {
            return None;
        }
        t.state = state;
        t.finished = Some(now);
        t.bytes
            .set_free_at(Some(now.saturating_add_ms(self.cfg.ttl_ms)));
        self.expiry
            .insert((now.saturating_add_ms(self.cfg.ttl_ms), *id));
        Some(t)
    }

    /// Records the handler's answer. Ignored if the task already ended
    /// (e.g. it was cancelled while the answer was in flight).
    pub fn complete(&mut self, id: &TaskId, result: Option<TaskResult>, now: Millis) {
        if let Some(t) = self.finish(id, TaskState::Completed, now) {
            if t.kind == TaskKind::Async {
                t.history.push(
                    Some("result"),
                    &json!({"task_id": id.to_string(), "status": "completed"}).to_string(),
                );
            }
            t.result = result;
            t.body_bytes = 0;
            t.settle();
            t.bump();
        }
    }

    pub fn fail(&mut self, id: &TaskId, failure: TaskFailure, now: Millis) {
        if let Some(t) = self.finish(id, TaskState::Failed, now) {
            let data = json!({"task_id": id.to_string(), "code": failure.code.as_str(), "message": &*failure.message});
            t.history.push(Some("error"), &data.to_string());
            t.failure = Some(failure);
            t.body_bytes = 0;
            t.settle();
            t.bump();
        }
    }

    /// Cancels a running task: marks it, signals the producer (which drops
    /// the upstream request) and wakes followers. Returns the state the
    /// task ends up in — a task that already finished keeps its outcome.
    pub fn cancel(&mut self, id: &TaskId, now: Millis) -> Option<TaskState> {
        if let Some(t) = self.finish(id, TaskState::Cancelled, now) {
            t.history.push(
                Some("cancelled"),
                &json!({"task_id": id.to_string(), "status": "cancelled"}).to_string(),
            );
            t.cancel.send_replace(true);
            t.body_bytes = 0;
            t.settle();
            t.bump();
        }
        self.tasks.get(id).map(|t| t.state)
    }

    /// Events after `cursor` (at most `max`).
    pub fn batch(&self, id: &TaskId, cursor: u64, max: usize) -> Result<Batch, TaskError> {
        let t = self.tasks.get(id).ok_or_else(|| self.gone(id))?;
        let events: Vec<Event> = t.history.after(cursor)?.take(max).cloned().collect();
        let reached = events.last().map_or(cursor, |e| e.id) == t.history.last_id();
        let finished = (t.state.is_terminal() && reached).then_some(t.state);
        Ok(Batch { events, finished })
    }

    /// Removes tasks whose expiry is due, and cancels and removes streams
    /// nobody has followed for `ttl`; returns how many left the table.
    pub fn expire(&mut self, now: Millis) -> usize {
        let mut n = 0;
        while let Some(&(at, id)) = self.idle.first() {
            if at > now {
                break;
            }
            self.idle.pop_first();
            let abandoned = self.tasks.get(&id).is_some_and(|t| {
                t.followers.is_empty() && !t.state.is_terminal() && t.detached_at.is_some()
            });
            if abandoned {
                self.cancel(&id, now);
                self.forget(&id);
                n += 1;
            }
        }
        while let Some(&(at, id)) = self.expiry.first() {
            if at > now {
                break;
            }
            self.expiry.pop_first();
            if self.forget(&id) {
                n += 1;
            }
        }
        n
    }

    /// Removes an ended task, leaving a tombstone so late callers learn
    /// "expired" rather than "never existed".
    fn forget(&mut self, id: &TaskId) -> bool {
        let Some(t) = self.take(id) else {
            return false;
        };
        if self.tombstones.len() == self.cfg.capacity.max(1) {
            self.tombstones.pop_front();
        }
        self.tombstones.push_back((*id, t.stream_key));
        true
    }

    /// When [`expire`](TaskTable::expire) next has work, for the driver's timer.
    pub fn next_expiry(&self) -> Option<Millis> {
        let a = self.expiry.first().map(|(at, _)| *at);
        let b = self.idle.first().map(|(at, _)| *at);
        a.into_iter().chain(b).min()
    }
}

impl From<CursorError> for TaskError {
    fn from(e: CursorError) -> Self {
        match e {
            CursorError::HistoryLost { cursor, oldest } => {
                TaskError::HistoryLost { cursor, oldest }
            }
            CursorError::Ahead { cursor, last } => TaskError::BadCursor { cursor, last },
        }
    }
}
