//! The async edges of the task table: producers that run an upstream
//! request for a task, and followers that turn a task's history into the
//! SSE bytes a caller receives.
//!
//! Cancellation is by dropping: a producer races its upstream future
//! against the task's [`CancelSignal`], and when the signal wins the
//! future — with the hyper request and its connection inside — is dropped,
//! which closes the connection the handler is serving. Followers hold no
//! producer handle at all, so a caller that disconnects from a resumable
//! stream leaves the producer running and the history filling, ready for
//! the reconnect.

use std::cell::{RefCell, RefMut};
use std::fmt::Display;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;

use agentd::time::Millis;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Body;
use serde_json::json;
use tokio::sync::watch;

use crate::api::error::ErrorCode;

use super::sse::{self, SseItem, SseParser};
use super::table::{CancelSignal, TaskFailure, TaskResult, TaskTable};
use super::{TaskError, TaskId};

/// The table as shared by connection tasks. The gateway runs on one
/// current-thread runtime inside a `LocalSet`, so a `RefCell` is enough:
/// borrows are short and never span an await (a second borrow while one
/// is held would be a bug and panics loudly instead of deadlocking).
#[derive(Debug, Clone)]
pub struct SharedTasks(Rc<RefCell<TaskTable>>);

impl SharedTasks {
    pub fn new(table: TaskTable) -> SharedTasks {
        SharedTasks(Rc::new(RefCell::new(table)))
    }

    /// The table, borrowed until the returned guard is dropped.
    pub fn borrow_mut(&self) -> RefMut<'_, TaskTable> {
        self.0.borrow_mut()
    }
}

/// Runs one async task: marks it running, awaits `work` unless the task is
/// cancelled first, and records the outcome.
pub async fn run_async<F, N>(
    tasks: SharedTasks,
    id: TaskId,
    mut cancel: CancelSignal,
    work: F,
    now: N,
) where
    F: Future<Output = Result<TaskResult, TaskFailure>>,
    N: Fn() -> Millis,
{
    tasks.borrow_mut().start(&id);
    let work = pin!(work);
    let cancelled = pin!(cancel.cancelled());
    match first(work, cancelled).await {
        // The cancel call already moved the task to Cancelled; dropping
        // `work` on return is what reaches the handler.
        Either::Right(()) => {}
        Either::Left(Ok(result)) => tasks.borrow_mut().complete(&id, Some(result), now()),
        Either::Left(Err(failure)) => tasks.borrow_mut().fail(&id, failure, now()),
    }
}

/// Bounds applied to an upstream event stream.
#[derive(Debug, Clone, Copy)]
pub struct SseLimits {
    pub max_line: usize,
    pub max_event: usize,
}

impl Default for SseLimits {
    fn default() -> Self {
        SseLimits {
            max_line: 64 * 1024,
            max_event: 256 * 1024,
        }
    }
}

/// Produces a stream task: awaits the upstream response `upstream`, parses
/// its SSE body and appends each event to the task's history under our own
/// numeric ids, until the body ends, fails or the task is cancelled.
pub async fn produce_stream<U, B, N>(
    tasks: SharedTasks,
    id: TaskId,
    mut cancel: CancelSignal,
    upstream: U,
    limits: SseLimits,
    now: N,
) where
    U: Future<Output = Result<B, TaskFailure>>,
    B: Body<Data = Bytes>,
    B::Error: Display,
    N: Fn() -> Millis,
{
    tasks.borrow_mut().start(&id);
    let pump = pin!(pump(&tasks, &id, upstream, limits));
    let cancelled = pin!(cancel.cancelled());
    match first(pump, cancelled).await {
        Either::Right(()) => {}
        Either::Left(Ok(())) => tasks.borrow_mut().complete(&id, None, now()),
        Either::Left(Err(failure)) => tasks.borrow_mut().fail(&id, failure, now()),
    }
}

async fn pump<U, B>(
    tasks: &SharedTasks,
    id: &TaskId,
    upstream: U,
    limits: SseLimits,
) -> Result<(), TaskFailure>
where
    U: Future<Output = Result<B, TaskFailure>>,
    B: Body<Data = Bytes>,
    B::Error: Display,
{
    let mut body = pin!(upstream.await?);
    let mut parser = SseParser::new(limits.max_line, limits.max_event);
    loop {
        let frame = match body.frame().await {
            None => return Ok(()),
            Some(Err(e)) => {
                return Err(TaskFailure::new(
                    ErrorCode::UpstreamUnknown,
                    format!("upstream stream broke: {e}"),
                ))
            }
            Some(Ok(frame)) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        parser.push(&data);
        loop {
            match parser.next_item() {
                Ok(None) => break,
                Ok(Some(SseItem::Complete)) => return Ok(()),
                Ok(Some(SseItem::Event { event, data, .. })) => {
                    // Backpressure: while an attached follower has not
                    // taken the event this push would evict, stop reading
                    // the handler (TCP flow control reaches it) and wait.
                    loop {
                        let mut drained = {
                            let t = tasks.borrow_mut();
                            match t.room_for(id, event.as_deref(), &data) {
                                None => return Ok(()),
                                Some(true) => break,
                                Some(false) => match t.drain_signal(id) {
                                    Some(rx) => rx,
                                    None => return Ok(()),
                                },
                            }
                        };
                        if drained.changed().await.is_err() {
                            return Ok(());
                        }
                    }
                    if tasks
                        .borrow_mut()
                        .push_event(id, event.as_deref(), &data)
                        .is_none()
                    {
                        // Cancelled or gone meanwhile: stop reading.
                        return Ok(());
                    }
                }
                Err(e) => return Err(TaskFailure::new(ErrorCode::UpstreamError, format!("{e}"))),
            }
        }
    }
}

enum Either<L, R> {
    Left(L),
    Right(R),
}

/// Polls both futures; returns whichever finishes first (left preferred).
async fn first<L: Future + Unpin, R: Future + Unpin>(
    mut l: L,
    mut r: R,
) -> Either<L::Output, R::Output> {
    std::future::poll_fn(|cx| {
        if let std::task::Poll::Ready(v) = std::pin::Pin::new(&mut l).poll(cx) {
            return std::task::Poll::Ready(Either::Left(v));
        }
        std::pin::Pin::new(&mut r).poll(cx).map(Either::Right)
    })
    .await
}

/// Most events encoded into one chunk.
const BATCH: usize = 16;

/// Reads a task's events after a cursor as SSE, waiting for new ones.
#[derive(Debug)]
pub struct Follower {
    tasks: SharedTasks,
    id: TaskId,
    cursor: u64,
    rx: watch::Receiver<u64>,
    done: bool,
    now: fn() -> Millis,
    /// Our handle in the task's follower list.
    handle: Option<u64>,
}

impl Drop for Follower {
    fn drop(&mut self) {
        let now = (self.now)();
        if let Some(f) = self.handle {
            self.tasks.borrow_mut().detach(&self.id, f, now);
        }
    }
}

impl Follower {
    /// Follows task `id` from `cursor` (0 = from the first event). While
    /// a follower exists the stream is not idle (see [`TaskTable::attach`]).
    pub fn new(tasks: &SharedTasks, id: TaskId, cursor: u64) -> Result<Follower, TaskError> {
        Follower::with_clock(tasks, id, cursor, Millis::now)
    }

    /// As [`new`](Follower::new), reading time (for the detach instant) from `now`.
    pub fn with_clock(
        tasks: &SharedTasks,
        id: TaskId,
        cursor: u64,
        now: fn() -> Millis,
    ) -> Result<Follower, TaskError> {
        let mut t = tasks.borrow_mut();
        let rx = t.task(&id).ok_or(TaskError::NotFound)?.subscribe();
        let handle = t.attach(&id, cursor);
        Ok(Follower {
            tasks: tasks.clone(),
            id,
            cursor,
            rx,
            done: false,
            now,
            handle,
        })
    }

    /// Id of the last event handed out.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The next chunk of SSE bytes; `None` once the stream has ended. A
    /// finished task ends with the completion comment, so Nexus clients
    /// do not reconnect; a follower that fell behind the retained history
    /// gets an `error` event (`history_lost`) and the stream ends.
    pub async fn next_chunk(&mut self) -> Option<Vec<u8>> {
        while !self.done {
            self.rx.borrow_and_update();
            let batch = {
                let mut t = self.tasks.borrow_mut();
                let b = t.batch(&self.id, self.cursor, BATCH);
                if let (Ok(b), Some(f)) = (&b, self.handle) {
                    if let Some(last) = b.events.last() {
                        // Taken: the producer may now evict up to here.
                        t.advance(&self.id, f, last.id);
                    }
                }
                b
            };
            let mut out = Vec::new();
            match batch {
                Ok(b) => {
                    for e in &b.events {
                        sse::encode_event(&mut out, e.id, e.event.as_deref(), &e.data);
                        self.cursor = e.id;
                    }
                    // Failed and cancelled tasks end with their own
                    // `error` / `cancelled` event already in the history.
                    if b.finished.is_some() {
                        self.done = true;
                        sse::encode_comment(&mut out, sse::COMPLETE_COMMENT);
                    }
                }
                Err(e) => {
                    self.done = true;
                    let doc = json!({"error": {"code": e.code(), "message": e.to_string()}});
                    out.extend_from_slice(format!("event: error\ndata: {doc}\n\n").as_bytes());
                }
            }
            if !out.is_empty() {
                return Some(out);
            }
            if self.rx.changed().await.is_err() {
                // The task was removed (expired) while we waited.
                self.done = true;
            }
        }
        None
    }
}

/// Fires the table's timers: expiry of finished tasks and the idle timer of
/// unfollowed streams, so an abandoned producer's handler connection closes
/// on time even when no request touches the table. Every new deadline is at
/// least `ttl_ms` away, so sleeping until the earliest known one (or
/// `ttl_ms`, at least 1 s, when there is none) is late by at most a second
/// for sub-second TTLs; requests apply due expiries themselves anyway.
pub async fn expiry_driver(tasks: SharedTasks) {
    loop {
        let (next, ttl) = {
            let t = tasks.borrow_mut();
            (t.next_expiry(), t.config().ttl_ms)
        };
        let now = Millis::now();
        let wait = next
            .map_or(ttl.max(1000), |at| at.saturating_sub(now))
            .max(1);
        tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
        tasks.borrow_mut().expire(Millis::now());
    }
}
